"""The customer's API, used by the widget: start a conversation, read it, post to it.

Authenticated by a bearer token naming one conversation, never by cookies, so CSRF does not apply.
A wrong, expired or other-conversation token and an unknown id all answer the same 404, so nothing
tells a caller which conversations exist.
"""

from __future__ import annotations

import re

from django.core.cache import cache
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt

from support import identity, selectors, services
from support.serializers import conversation_json, message_json

from .common import ApiError, api, json_body, optional_string

NO_SUCH_CONVERSATION = "No such conversation."
ORDER_AUTH_FAILURES, ORDER_AUTH_WINDOW = 10, 600  # failed e-mail + order look-ups allowed per 10 minutes
_SEQ = re.compile(r"[0-9]{1,18}")


def _conversation(request, public_id):
    """The conversation the request's bearer token names, if it is the one in the path; else 404."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    conversation = None
    if scheme.lower() == "bearer" and token.strip():
        conversation = identity.conversation_for_token(token.strip(), public_id)
    if conversation is None:
        raise ApiError(404, NO_SUCH_CONVERSATION)
    return conversation


def _customer(body: dict, client_ip: str):
    """Who is starting the conversation: the shop's signed token, or an order number with its e-mail."""
    if "customer_token" in body:
        token = body["customer_token"]
        if not isinstance(token, str) or not token:
            raise ApiError(400, "customer_token must be a non-empty string.")
        customer = identity.customer_from_token(token)
        if customer is None:
            raise ApiError(403, "The customer token is invalid or has expired; reload the shop's page.")
        return customer
    email, order_number = body.get("email"), body.get("order_number")
    if email is None or order_number is None:
        raise ApiError(400, 'Send {"customer_token": ...} or {"email": ..., "order_number": ...}.')
    if not isinstance(email, str) or not isinstance(order_number, str) or not email.strip() \
            or not order_number.strip():
        raise ApiError(400, "email and order_number must be non-empty strings.")
    # Order numbers are guessable: failed look-ups are counted per e-mail and per client address.
    keys = [f"order-auth:email:{email.strip().lower()}", f"order-auth:ip:{client_ip}"]
    if any(cache.get(k, 0) >= ORDER_AUTH_FAILURES for k in keys):
        raise ApiError(429, "Too many attempts; try again in a few minutes.",
                       {"Retry-After": str(ORDER_AUTH_WINDOW)})
    customer = identity.customer_from_order(email, order_number)
    if customer is None:
        for k in keys:
            cache.add(k, 0, ORDER_AUTH_WINDOW)
            cache.incr(k)
        raise ApiError(403, "We could not find that order for that e-mail address.")
    return customer




@csrf_exempt
@api("POST")
def conversations(request):
    customer = _customer(json_body(request), request.META.get("REMOTE_ADDR", ""))
    conversation = services.conversation_start(customer=customer)
    return JsonResponse({"conversation": conversation_json(conversation, staff=False),
                         "token": identity.conversation_token(conversation)}, status=201)


@csrf_exempt
@api("GET")
def conversation(request, public_id):
    conversation = _conversation(request, public_id)
    run = selectors.latest_run(conversation)
    return JsonResponse({
        "conversation": conversation_json(conversation, staff=False),
        "run": selectors.run_summary(run),
        "awaiting_approval": run is not None and run.status == run.AWAITING_APPROVAL,
    })


@csrf_exempt
@api("GET", "POST")
def messages(request, public_id):
    conversation = _conversation(request, public_id)
    if request.method == "POST":
        return _post_message(request, conversation)
    after = request.GET.get("after", "0")
    if not _SEQ.fullmatch(after):
        raise ApiError(400, "after must be a non-negative whole number (a message seq).")
    found = selectors.messages_after(conversation, int(after), staff=False)
    # A message appended after the conversation was read may be in the list: never report less than it.
    last_seq = max([conversation.last_seq, *(m.seq for m in found)])
    return JsonResponse({"messages": [message_json(m, staff=False) for m in found], "last_seq": last_seq})


def _post_message(request, conversation):
    body = json_body(request)
    client_id = optional_string(body, "client_id", max_length=64)
    if "text" not in body:
        raise ApiError(400, 'Send the message as {"text": "..."}.')
    try:
        message, run, created = services.conversation_post_message(
            conversation=conversation, text=body["text"], client_id=client_id)
    except services.InvalidMessage as error:
        raise ApiError(400, str(error)) from None
    except services.RateLimited as error:
        raise ApiError(429, str(error), {"Retry-After": str(error.retry_after)}) from None
    return JsonResponse({"message": message_json(message, staff=False),
                         "run": {"id": str(run.public_id), "status": run.status} if run else None,
                         "created": created}, status=202)
