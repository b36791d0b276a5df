"""Conversations that outlive the tab: the page an e-mailed link opens, the unsubscribe page, and the customer
API that opens an earlier conversation (by that link, or by the shop's signed token) and lists a signed-in
customer's conversations.

The link's token (support.customers.notify.link_token) is not the widget's conversation token: it is exchanged for one
here, and stops working when the conversation's links are revoked. Every refusal looks the same, so nothing
tells a caller which conversations exist.
"""

from __future__ import annotations

import logging

from django.db.models import OuterRef, Subquery
from django.http import JsonResponse
from django.shortcuts import render
from django.utils import translation
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from support.customers import faces, identity, languages, notify
from support.desk.serializers import conversation_json
from support.models import Conversation, Message

from .common import ApiError, api, json_body
from .staff import staff_required

security_log = logging.getLogger("support.security")

LINK_REFUSED = "This link has expired or was replaced by a newer one."
NOT_YOURS = "No such conversation."
HISTORY_LIMIT = 20


# -- pages ------------------------------------------------------------------------------------------------
# In the customer's language: the conversation's, else their latest conversation's, else the browser's.

def _language(request, conversation=None, customer=None) -> str:
    if conversation is not None:
        return languages.of(conversation)
    if customer is not None:
        latest = (Conversation.objects.filter(customer=customer).exclude(language="").order_by("-pk")
                  .values_list("language", flat=True).first())
        if languages.language_code(latest):
            return languages.language_code(latest)
    browsers = languages.language_code(translation.get_language_from_request(request))
    return browsers if browsers in languages.offered() else languages.default()


def _page(request, template: str, context: dict | None = None, status: int = 200, **whose):
    language = _language(request, **whose)
    with translation.override(language):
        response = render(request, template, {**faces.page_context(), **(context or {})}, status=status)
    response["Content-Language"] = language
    return response


@require_http_methods(["GET", "HEAD"])
def conversation_page(request, token):
    """The conversation, full page, on any device: the widget opens it with the link's token."""
    conversation = notify.conversation_for_link(token)
    if conversation is None:
        return _page(request, "support/link_invalid.html", status=404)
    response = _page(request, "support/conversation_link.html", {"link_token": token}, conversation=conversation)
    response["Referrer-Policy"] = "no-referrer"  # the path is the key: never pass it on
    response["Cache-Control"] = "no-store"
    response["X-Robots-Tag"] = "noindex"
    return response


@csrf_exempt  # the signed token in the path is the authority; mail clients' one-click POST carries no cookie
@require_http_methods(["GET", "HEAD", "POST"])
def unsubscribe(request, token):
    """GET asks (a mail scanner that follows links unsubscribes no one); POST does it, or undoes it."""
    customer = notify.customer_for_unsubscribe(token)
    if customer is None:
        return _page(request, "support/link_invalid.html", status=404)
    state = "ask"
    if request.method == "POST":
        if request.POST.get("action") == "resume":
            notify.reply_emails_resume(customer)
            state = "resumed"
        else:  # the page's button, or RFC 8058's one-click "List-Unsubscribe=One-Click"
            notify.reply_emails_stop(customer)
            state = "stopped"
    elif hasattr(customer, "reply_email_opt_out"):
        state = "already"
    response = _page(request, "support/unsubscribe.html", {"state": state, "email": customer.email}, customer=customer)
    response["Referrer-Policy"] = "no-referrer"
    response["Cache-Control"] = "no-store"
    return response


# -- the customer API ---------------------------------------------------------------------------------------

def _customer(body: dict):
    token = body.get("customer_token")
    if not isinstance(token, str) or not token:
        raise ApiError(400, "customer_token must be a non-empty string.")
    customer = identity.customer_from_token(token)
    if customer is None:
        raise ApiError(403, "The customer token is invalid or has expired; reload the shop's page.")
    return customer


def requested_time_zone(body: dict) -> str | None:
    """The browser's IANA time zone, when sent, for the model and the e-mails. A zone this server does not
    know is ignored (the chat still opens, times are then in UTC); anything but a short string is refused."""
    name = body.get("time_zone")
    if name is None:
        return None
    if not isinstance(name, str) or len(name) > 64:
        raise ApiError(400, "time_zone must be a time zone name such as Europe/Berlin.")
    return notify.valid_time_zone(name)


@csrf_exempt
@api("POST")
def open_conversation(request):
    """An existing conversation for this device: {"link": ...} (the e-mailed link) or {"customer_token": ...,
    "conversation": id} (one of the signed-in customer's own). Returns it with a fresh conversation token."""
    body = json_body(request)
    zone = requested_time_zone(body)
    link_version = None
    if "link" in body:
        access = notify.link_access(body["link"])
        if access is None:
            security_log.warning("conversation link refused: invalid, expired or revoked")
            raise ApiError(404, LINK_REFUSED)
        conversation, link_version = access
    elif "customer_token" in body and "conversation" in body:
        customer = _customer(body)
        wanted = identity.parse_uuid(body["conversation"])
        conversation = Conversation.objects.filter(public_id=wanted, customer=customer).first() if wanted else None
        if conversation is None:
            raise ApiError(404, NOT_YOURS)
    else:
        raise ApiError(400, 'Send {"link": ...} or {"customer_token": ..., "conversation": ...}.')
    if zone:
        notify.set_time_zone(conversation, zone)
    return JsonResponse({"conversation": conversation_json(conversation, staff=False),
                         "token": identity.conversation_token(conversation, link_version=link_version)})


@csrf_exempt
@api("POST")
def history(request):
    """The signed-in customer's conversations, newest first, each with its last message the customer can see.
    POST, so the shop's token never lands in an access log's query string."""
    customer = _customer(json_body(request))
    visible = (Message.objects.filter(conversation=OuterRef("pk"), role__in=("user", "assistant"))
               .exclude(content__isnull=True).exclude(content="").order_by("-seq").values("seq")[:1])
    customer_said = (Message.objects.filter(conversation=OuterRef("pk"), author=Message.CUSTOMER)
                     .order_by("-seq").values("created_at")[:1])
    conversations = list(Conversation.objects.filter(customer=customer)
                         .annotate(last_visible=Subquery(visible), last_customer_at=Subquery(customer_said))
                         .filter(last_visible__isnull=False)  # never written in: nothing to go back to
                         .order_by("-updated_at", "-pk")[:HISTORY_LIMIT])
    last = {(m.conversation_id, m.seq): m for m in Message.objects.filter(
        conversation__in=conversations, seq__in={c.last_visible for c in conversations})}  # two queries in all
    rows = []
    for conversation in conversations:
        message = last[(conversation.pk, conversation.last_visible)]
        rows.append({"id": str(conversation.public_id), "status": _status(conversation),
                     "created_at": _ts(conversation.created_at), "updated_at": _ts(message.created_at),
                     "last_message": {"author": message.author, "text": message.content[:140],
                                      "created_at": _ts(message.created_at)}})
    return JsonResponse({"conversations": rows})


def _status(conversation) -> str:
    """"closed" while closed by our team and the customer has not written since (which reopens it), else the
    conversation's status: the widget's list says "Closed", never "With our team", of a closed one."""
    closed = conversation.closed_at is not None and not (
        conversation.last_customer_at and conversation.last_customer_at > conversation.closed_at)
    return "closed" if closed else conversation.status


def _ts(value):
    return value.isoformat().replace("+00:00", "Z") if value else None


# -- staff ---------------------------------------------------------------------------------------------------

@api("POST")
@staff_required
def revoke_links(request, public_id):
    """Every link e-mailed for this conversation stops working (e.g. the customer forwarded one by mistake),
    with the conversation tokens and the customer sockets opened through one."""
    conversation = Conversation.objects.filter(public_id=identity.parse_uuid(public_id)).first() \
        if identity.parse_uuid(public_id) else None
    if conversation is None:
        raise ApiError(404, NOT_YOURS)
    version = notify.links_revoke(conversation)
    security_log.info("conversation %s: links revoked by staff user id %s (now version %d)",
                      conversation.public_id, request.user.pk, version)
    return JsonResponse({"revoked": True})
