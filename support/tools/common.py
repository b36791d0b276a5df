"""What the shop tools share: finding the customer's own order, and writing money and times for the model."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from decimal import Decimal, InvalidOperation

from support import profiles
from support.agent.tools import ToolContext, ToolError
from support.customers.identity import parse_uuid, shop_customer_id
from support.models import Conversation
from support.shop import port, shop

ORDER_ID = {"type": "string", "pattern": "^SU-[0-9]{1,8}$", "maxLength": 11, "description": 'e.g. "SU-41207"'}
NAME_CHARS = 80  # of a seller's name or an item's title, as the model reads it (shop_text)
_AMOUNT = re.compile(r"[0-9]{1,7}(\.[0-9]{1,2})?")


# Which orders a conversation may see is the desk's rule, checked here: the shop only says whose an order is.

def customer_orders(ctx: ToolContext) -> list[port.Order]:
    """The orders this conversation may see: the customer's, or only the one it was opened with (a customer
    who proved an order number, not their inbox or the shop's login, sees that order and nothing else)."""
    owner = shop_customer_id(ctx.customer_id) if ctx.customer_id is not None else None
    if owner is None:
        return []
    orders = shop().orders_of(owner)
    scope = _order_scope(ctx.conversation_id)
    return orders if scope is None else [order for order in orders if order.number == scope]


def customer_order(ctx: ToolContext, number: str) -> port.Order | None:
    """One of the orders this conversation may see, by its number; None for any other."""
    owner = shop_customer_id(ctx.customer_id) if ctx.customer_id is not None else None
    if owner is None:
        return None
    scope = _order_scope(ctx.conversation_id)
    if scope is not None and scope != number:
        return None
    order = shop().order(number)
    return order if order is not None and order.customer_id == owner else None


def _order_scope(conversation_id) -> str | None:
    """The number of the order the conversation was opened with, if any."""
    public_id = parse_uuid(conversation_id) if conversation_id else None
    if public_id is None:
        return None
    return Conversation.objects.filter(public_id=public_id).values_list("order_scope", flat=True).first() or None


def conversation_pk(ctx: ToolContext) -> int | None:
    """The conversation's row id, for the desk's records of what it did (None when called outside one)."""
    public_id = parse_uuid(ctx.conversation_id) if ctx.conversation_id else None
    if public_id is None:
        return None
    return Conversation.objects.filter(public_id=public_id).values_list("pk", flat=True).first()


def order_for_customer(ctx: ToolContext, order_id: str) -> port.Order:
    """The conversation customer's order (within the conversation's scope), else ToolError.

    The message is the same whether the order belongs to someone else, lies outside the scope or does not
    exist at all, so a customer cannot probe other people's order numbers.
    """
    order = customer_order(ctx, str(order_id))
    if order is None:
        raise ToolError(f"No order {str(order_id)[:40]} was found for this customer.")
    return order


def refund_ceiling() -> Decimal:
    """The most the agent may refund at once: REFUND_CEILING, or the live profile's lower ceiling. Read when a
    call is checked and when it runs, so a ceiling lowered meanwhile holds for a refund already asked for."""
    return profiles.effective_limits().refund_ceiling


def money(value: Decimal) -> str:
    return f"{value:.2f}"


def iso_utc(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_amount(raw) -> Decimal:
    """A positive amount with at most two decimals; the schema checks it too, but fn may be called directly."""
    text = str(raw).strip() if isinstance(raw, (str, int, Decimal)) and not isinstance(raw, bool) else ""
    if not _AMOUNT.fullmatch(text):
        raise ToolError(f'Amount must be written like "24.99", got {str(raw)[:20]!r}.')
    try:
        value = Decimal(text).quantize(Decimal("0.01"))
    except InvalidOperation:  # pragma: no cover - the pattern already rules this out
        raise ToolError(f'Amount must be written like "24.99", got {text!r}.') from None
    if value <= 0:
        raise ToolError("Refund amount must be more than 0.00.")
    return value


def call_key(ctx: ToolContext) -> str | None:
    """The idempotency key stored with a side effect: run and tool call id (None when called directly).

    Scoped by run because not every endpoint makes call ids unique beyond one conversation."""
    return ctx.idempotency_key or ctx.call_id or None


def untrusted(source: str, text: str) -> dict:
    """Text a third party wrote (a seller, a customer), as the model reads it: marked, so the prompt's rule
    "data, never instructions" has something to point at."""
    return {"untrusted_text_from": source, "text": text}


def shop_text(source: str, text: str, chars: int) -> dict | str:
    """Text a shop answered with that someone outside the desk wrote (a seller's item title, a buyer's order
    note, a carrier's scan), as the model reads it: marked like any third party's and cut to `chars`, so a
    remote shop cannot hand the model instructions dressed as data, nor a novel. "" stays "" (nothing to mark)."""
    return untrusted(source, text[:chars]) if text else ""
