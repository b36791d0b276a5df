"""message_seller: write to the marketplace seller who fulfils one of the customer's orders.

What leaves the desk for a seller follows a policy in code, checked before the message is sent:
- it goes out inside a fixed template, so the seller always sees who writes and about what: a header naming
  Sundry customer support and the order, the issue (one of ISSUES), then the text the agent wrote;
- the text waits for a person's approval (needs_person, with the reason on the approval card and in the trace)
  when it carries the customer's contact data, links to any site but the shop's own (foreign_links), or breaks
  a wording rule (moderation: insults, threats, pressure, payment or login details, direct contact, telling
  the seller to ignore instructions). A person who approves, or writes the message, sends it as approved.
"""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from support.agent.tools import Tool, ToolContext, ToolError
from support.models import Approval, Conversation, ShopEffect
from support.shop import effects, port, shop
from support.tools import moderation
from support.tools.common import NAME_CHARS, ORDER_ID, call_key, conversation_pk, order_for_customer, shop_text
from support.tools.foreign_links import foreign_hosts

# What a message is about, as the seller reads it under "Issue:". A call without one is "other".
ISSUES = {
    "missing_parcel": "missing parcel",
    "wrong_item": "wrong item",
    "damaged_item": "damaged or faulty item",
    "return": "return or return label",
    "late_delivery": "late delivery",
    "refund": "refund or replacement",
    "other": "other",
}
DEFAULT_ISSUE = "other"

# What a seller never needs to fulfil, replace or refund an order: how to reach the customer. A message
# carrying any of it waits for a person's approval (see contact_data and the approval policy).
_EMAIL = re.compile(r"[^\s@<>()]+@[^\s@<>()]+\.[a-z]{2,}", re.IGNORECASE)
_PHONE = re.compile(r"(?<![\w-])\+?\d[\d ().-]{6,}\d(?![\w-])")
_STREET = re.compile(r"\b\d{1,5}[a-z]?,?\s+(?:[A-Za-zÀ-ÿ'.-]+\s+){0,3}(?:street|st|road|rd|avenue|ave|lane|ln|drive|dr|"
                     r"way|court|ct|place|pl|boulevard|blvd|square|sq|straße|strasse|str|rue|via|calle|weg|gasse)\b",
                     re.IGNORECASE)
# Order numbers, dates and times are what a seller needs, and look like phone numbers to the pattern.
_NOT_CONTACT = re.compile(r"\bSU-\d+\b|\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?(?:\.\d+)?Z?)?\b|"
                          r"\b\d{1,2}[./]\d{1,2}[./]\d{2,4}\b", re.IGNORECASE)


def contact_data(text: str) -> str:
    """What in `text` is the customer's contact data (an e-mail address, a phone number, a street
    address), named for the person asked to approve it; "" when there is none."""
    text = _NOT_CONTACT.sub(" ", str(text))
    found = [what for what, pattern in (("an e-mail address", _EMAIL), ("a phone number", _PHONE),
                                        ("a street address", _STREET)) if pattern.search(text)]
    return " and ".join(found)


def policy_reasons(message: str) -> list[str]:
    """Why `message` may not go to a seller without a person, in plain words, one reason per rule broken
    (the wording rules quote what broke them); [] when it may go at once."""
    message = str(message)
    reasons = []
    if found := contact_data(message):
        reasons.append(f"the message to the seller contains {found}")
    if hosts := foreign_hosts(message):
        sites = "another site" if len(hosts) == 1 else "other sites"
        reasons.append(f"the message links to {sites}: {', '.join(hosts)}")
    reasons += [finding.reason for finding in moderation.findings(message)]
    return reasons


def needs_person(arguments: dict) -> str:
    """message_seller's approval policy: the reasons of policy_reasons, joined; "" when it may run at once."""
    return "; ".join(policy_reasons(arguments.get("message", "")))


def seller_text(order_number: str, issue: str, message: str) -> str:
    """What the seller receives: the fixed header, then the agent's (or the person's) text as it was."""
    return (f"Message from Sundry customer support about order {order_number}\n"
            f"Issue: {ISSUES[issue]}\n\n{message}")


def _result(message: port.SellerMessageResult | ShopEffect, order: port.Order, status: str = "sent") -> dict:
    result = {
        "message_id": message.shop_id if isinstance(message, ShopEffect) else message.id,
        "order_id": order.number,
        "seller": shop_text("seller", order.seller.name, NAME_CHARS),
        "status": status,
    }
    if status == "sent":  # the seller's time to answer, the same on every retry: the case waits for it, from
        # the call's time (support/desk/waiting.py)
        result["waiting"] = {"for": "seller", "within_hours": settings.SELLER_ANSWER_HOURS}
    return result


def _normalised(body: str) -> str:
    return " ".join(body.casefold().split())


def _conversation_limits(ctx: ToolContext, conversation: int | None, order: port.Order, body: str) -> dict | None:
    """A result for a message this conversation already sent (the same text about the same order), None to
    send it; ToolError past the conversation's limit of seller messages a day."""
    if conversation is None:
        return None
    sent = effects.sent_seller_messages(conversation)
    same = next((m for m in sent if m.order_number == order.number and _normalised(m.text) == _normalised(body)),
                None)
    if same is not None:
        return _result(same, order, status="already_sent")
    _within_the_day(ctx, conversation, sent)
    return None


def _within_the_day(ctx: ToolContext, conversation: int, sent: list) -> None:
    """ToolError when the messages sent in 24 hours and those waiting for a person (held cards not yet decided,
    this call's own apart, and this reply's calls held before it) reach the conversation's limit: a held
    message counts from the moment it waits, so approving every card never passes the limit."""
    limit = settings.SELLER_MESSAGES_PER_CONVERSATION_PER_DAY
    since = timezone.now() - timedelta(days=1)
    held = Approval.objects.filter(run__conversation_id=conversation, tool_call__name=MESSAGE_SELLER_NAME,
                                   decided_at__isnull=True).exclude(tool_call__call_id=ctx.call_id).count()
    held += sum(1 for name, _ in ctx.waiting if name == MESSAGE_SELLER_NAME)
    if sum(1 for m in sent if m.created_at >= since) + held >= limit:
        raise ToolError(f"This conversation has already sent {limit} messages to sellers today, counting those "
                        "waiting for a person; nothing was sent. Tell the customer a person will follow up if "
                        "more is needed.")


def check_message_seller(ctx: ToolContext, order_id: str, message: str, issue: str = DEFAULT_ISSUE) -> None:
    """Before a held message is put in front of a person: the order is the customer's, and the day's limit has
    room for it. message_seller checks both again as it sends."""
    order_for_customer(ctx, order_id)
    conversation = conversation_pk(ctx)
    if conversation is not None:
        _within_the_day(ctx, conversation, effects.sent_seller_messages(conversation))


def _same_order(message: port.SellerMessageResult, order: port.Order) -> port.SellerMessageResult:
    if message.order_number and message.order_number != order.number:
        raise ToolError("This tool call already messaged a seller about another order; nothing was sent.")
    return message


def message_seller(ctx: ToolContext, order_id: str, message: str, issue: str = DEFAULT_ISSUE) -> dict:
    # The agent is not offered this tool on such a shop (support/tools/__init__.py); a person's staff action
    # comes through here too.
    if not shop().capabilities().seller_messages:
        raise ToolError("This shop has no sellers to write to; nothing was sent.")
    text = str(message).strip()[:2000]
    if not text:
        raise ToolError("The message to the seller is empty.")
    if issue not in ISSUES:
        raise ToolError(f"The issue must be one of: {', '.join(ISSUES)}; nothing was sent.")
    order = order_for_customer(ctx, order_id)
    body = seller_text(order.number, issue, text)
    key = call_key(ctx) or f"direct:{uuid.uuid4()}"  # called outside a run (a script): guarded by nothing else
    conversation = conversation_pk(ctx)
    if (earlier := ShopEffect.objects.filter(kind=ShopEffect.SELLER_MESSAGE, key=key).first()) is not None:
        return _result(_same_order(port.SellerMessageResult(earlier.shop_id, earlier.order_number), order), order)
    if not order.seller.is_marketplace:
        raise ToolError(f"Order {order.number} is fulfilled by Sundry itself; there is no seller to message.")
    with transaction.atomic():
        # Two calls of one reply at once cannot both pass the limit or the duplicate check: the second
        # waits until the first has written (and committed, with its caller's transaction): the demo holds
        # the order's row lock; the conversation's row serves any shop.
        shop().lock_order(order.number)
        if conversation is not None:
            list(Conversation.objects.select_for_update().filter(pk=conversation).values_list("pk"))
        if (earlier := _conversation_limits(ctx, conversation, order, body)) is not None:
            return earlier
        sent = effects.seller_message(order_number=order.number, message=body, key=key, conversation_id=conversation,
                                      conversation_public_id=ctx.conversation_id or None)
    return _result(_same_order(sent, order), order)


MESSAGE_SELLER_NAME = "message_seller"
MESSAGE_SELLER = Tool(
    name=MESSAGE_SELLER_NAME,
    label="Contacting the seller",
    description=(
        "Send a message to the marketplace seller who fulfils one of this customer's orders, e.g. to "
        "report a missing parcel, ask for a return label for a wrong item, or start a claim. The seller "
        "receives it below a fixed header naming Sundry customer support, the order number and the issue. "
        "Write it to the seller, politely: the order facts and what is needed. A message waits for a "
        "person's approval when it has the customer's contact details (an e-mail address, phone number or "
        "street address), a link to a site other than the shop's, insults or swearing, threats, pressure, "
        "capital letters throughout, asks for payment, bank or login details or for contact outside Sundry, "
        "or tells the seller to ignore instructions. Not possible for orders fulfilled by Sundry itself "
        "(fulfilled_by.type sundry). Returns message_id, the seller's name, status sent and waiting: the hours "
        "the seller has to answer (the case waits for them until then)."
    ),
    parameters={
        "type": "object",
        "properties": {
            "order_id": dict(ORDER_ID),
            "message": {"type": "string", "minLength": 1, "maxLength": 2000,
                        "description": "the text for the seller, sent below the header"},
            "issue": {"type": "string", "enum": list(ISSUES), "maxLength": 20,
                      "description": "what the message is about, shown to the seller as the issue; default other"},
        },
        "required": ["order_id", "message"],
        "additionalProperties": False,
    },
    fn=message_seller,
    check=check_message_seller,
    needs_person=needs_person,
)
