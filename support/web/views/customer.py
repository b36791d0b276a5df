"""The customer's API, used by the widget: start a conversation, read it, post to it.

Authenticated by a bearer token naming one conversation, never by cookies, so CSRF does not apply.
A wrong, expired or other-conversation token and an unknown id all answer the same 404, so nothing
tells a caller which conversations exist.
"""

from __future__ import annotations

import logging
import re

from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt

from support.customers import identity, languages, notify, signin, words
from support.desk import feedback, selectors, services
from support.desk.serializers import conversation_json, message_json
from support.ops import limits

from . import links
from .common import ApiError, api, json_body, optional_string

security_log = logging.getLogger("support.security")

NO_SUCH_CONVERSATION = "No such conversation."
NOT_YOUR_ORDER = "We could not find that order for that e-mail address."
CODE_REQUIRED = ("For your security, an order number alone no longer opens a chat for that address. Ask us to "
                 "e-mail you a sign-in code, then enter it to continue.")
CODE_ON_ITS_WAY = "If that address is a customer's, a code is on its way. It works once, for a few minutes."
START_SHAPES = ('Send {"customer_token": ...}, {"email": ..., "order_number": ...}, '
                '{"email": ..., "code": ...} or {"email": ..., "send_code": true}.')
LIMITS_DOWN = "Sign-in is unavailable for a moment. Try again in a few seconds."
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


def _refusal(status: int, code: str, message: str) -> JsonResponse:
    """The API's error shape with a code of its own (ApiError's code follows the status)."""
    return JsonResponse({"error": message, "code": code, "retryable": False}, status=status)


def _refused(address: str, email: str, why: str) -> None:
    """A refused sign-in, for whoever watches for attacks: from where, for which e-mail (as a digest: the
    log carries no address book), why."""
    security_log.warning("customer sign-in refused from %s for e-mail %s: %s", address, signin.email_digest(email), why)


def _start_request(body: dict, address: str):
    """(customer, order scope) for the request, or a response that ends it (a code sent, a code asked for).

    The shop's token and a code sign in to every order; an order number to that order only."""
    if "customer_token" in body:
        token = body["customer_token"]
        if not isinstance(token, str) or not token:
            raise ApiError(400, "customer_token must be a non-empty string.")
        customer = identity.customer_from_token(token)
        if customer is None:
            security_log.warning("customer sign-in refused from %s: a forged or expired shop token", address)
            raise ApiError(403, "The customer token is invalid or has expired; reload the shop's page.")
        return customer, None
    if "email" not in body or not any(k in body for k in ("order_number", "code", "send_code")):
        raise ApiError(400, START_SHAPES)
    email = identity.canonical_email(body["email"])
    if email is None:
        raise ApiError(400, "That does not look like an e-mail address (name@example.com).")
    try:
        if "send_code" in body:
            if body["send_code"] is not True:
                raise ApiError(400, 'Ask for a code with {"email": ..., "send_code": true}.')
            # The same work and answer for every address: counted, handed to a worker, 202.
            signin.request_code(email=email, address=address)
            return JsonResponse({"code_sent": True, "detail": CODE_ON_ITS_WAY}, status=202)
        if "code" in body:
            return signin.by_code(email=email, code=body["code"], address=address), None
        number = identity.canonical_order_number(body["order_number"])
        if number is None:
            raise ApiError(400, "That does not look like an order number (e.g. SU-41207).")
        order = signin.by_order(email=email, order_number=number, address=address)
        # The conversation links to the desk's customer record and is scoped to the order proven.
        return identity.customer_by_email(email), order.number
    except signin.WrongOrder:
        _refused(address, email, "a wrong order number")
        raise ApiError(403, NOT_YOUR_ORDER) from None
    except signin.CodeRequired:
        _refused(address, email, "too many failed sign-ins; the e-mailed code is required")
        return _refusal(403, "code_required", CODE_REQUIRED)
    except signin.WrongCode:
        _refused(address, email, "a wrong sign-in code")
        return _refusal(403, "wrong_code", "That code is wrong, used or expired. Check the latest e-mail "
                                           "from us, or ask for a new code.")
    except signin.TooManyCodes as over:
        raise ApiError(429, f"Too many wrong codes; try again in {words.wait_words(over.retry_after)}.",
                       {"Retry-After": str(over.retry_after)}) from None
    except signin.TooManyCodeRequests as over:
        raise ApiError(429, f"Too many sign-in codes asked for from here; try again in "
                            f"{words.wait_words(over.retry_after)}.", {"Retry-After": str(over.retry_after)}) from None
    except limits.Unavailable:  # a guess we cannot count is a guess we do not take; the same for asking a code
        raise ApiError(503, LIMITS_DOWN, {"Retry-After": "5"}) from None


@csrf_exempt
@api("POST")
def conversations(request):
    """A new conversation; with {"message": {"text", "client_id"}} its first message too, in one request, so
    a chat that was opened and never written to leaves nothing behind (docs/api.md)."""
    services.setup_check()  # before any sign-in is tried: nothing is opened while the desk is being set up
    address = limits.request_address(request)
    body = json_body(request)
    zone = links.requested_time_zone(body)  # checked before anything is created
    first = _first_message(body)  # and the message, before a sign-in code is spent on it
    language = _language(body)
    started = _start_request(body, address)
    if isinstance(started, JsonResponse):
        return started
    customer, order_number = started
    if first is not None:
        return _open_with_message(request, services.Opening(customer=customer, order_number=order_number,
                                                            language=language, time_zone=zone), first)
    _conversation_rate_check(customer.pk, address)
    conversation = services.conversation_open(customer=customer, order_number=order_number)
    if zone:
        notify.set_time_zone(conversation, zone)
    if language:
        feedback.language_set(conversation=conversation, language=language)
    return JsonResponse({"conversation": conversation_json(conversation, staff=False),
                         "token": identity.conversation_token(conversation)}, status=201)


def _conversation_rate_check(customer_id: int, address: str) -> None:
    try:
        services.conversation_rate_check(customer_id=customer_id, client_address=address)
    except limits.Limited as over:
        raise _too_many_conversations(over) from None


def _too_many_conversations(over: limits.Limited) -> ApiError:
    return ApiError(429, f"Too many new conversations; try again in {words.wait_words(over.retry_after)}, or carry "
                         "on in the one you have.", {"Retry-After": str(over.retry_after)})


def _first_message(body: dict) -> dict | None:
    """{"text", "client_id"} of the optional first message, its words checked as a message's are."""
    first = body.get("message")
    if first is None:
        return None
    if not isinstance(first, dict) or "text" not in first:
        raise ApiError(400, 'Send the first message as "message": {"text": "...", "client_id": "..."}.')
    client_id = optional_string(first, "client_id", max_length=64)
    try:
        services.message_clean(first["text"])
    except services.InvalidMessage as error:
        raise ApiError(400, str(error)) from None
    return {"text": first["text"], "client_id": client_id}


def _language(body: dict) -> str | None:
    if body.get("language") is None:
        return None
    code = languages.language_code(body["language"])
    if code is None:
        raise ApiError(400, f"language must be one of: {', '.join(languages.supported())}.")
    return code


def _open_with_message(request, opening, first: dict) -> JsonResponse:
    try:
        conversation, message, run, created = services.conversation_open_with_message(
            opening=opening, text=first["text"], client_id=first["client_id"],
            client_address=limits.request_address(request))
    except services.InvalidMessage as error:
        raise ApiError(400, str(error)) from None
    except services.RateLimited as error:
        raise ApiError(429, str(error), {"Retry-After": str(error.retry_after)}) from None
    except limits.Limited as over:
        raise _too_many_conversations(over) from None
    return JsonResponse({"conversation": conversation_json(conversation, staff=False),
                         "token": identity.conversation_token(conversation),
                         "message": message_json(message, staff=False),
                         "run": {"id": str(run.public_id), "status": run.status} if run else None,
                         "created": created}, status=201 if created else 200)


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
            conversation=conversation, text=body["text"], client_id=client_id,
            client_address=limits.request_address(request))
    except services.InvalidMessage as error:
        raise ApiError(400, str(error)) from None
    except services.RateLimited as error:
        raise ApiError(429, str(error), {"Retry-After": str(error.retry_after)}) from None
    return JsonResponse({"message": message_json(message, staff=False),
                         "run": {"id": str(run.public_id), "status": run.status} if run else None,
                         "created": created}, status=202)
