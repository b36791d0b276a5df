"""message_seller: write to the marketplace seller who fulfils one of the customer's orders."""

from __future__ import annotations

from django.db import IntegrityError, transaction

from support.agent.tools import Tool, ToolContext, ToolError
from support.models import Order, SellerMessage
from support.tools.common import ORDER_ID, call_key, order_for_customer


def _result(message: SellerMessage, order: Order) -> dict:
    return {
        "message_id": str(message.public_id),
        "order_id": order.number,
        "seller": order.seller.name,
        "status": "sent",
    }


def _already_sent(key: str | None, order: Order) -> SellerMessage | None:
    if key is None:
        return None
    message = SellerMessage.objects.filter(tool_call_id=key).first()
    if message is not None and message.order_id != order.pk:
        raise ToolError("This tool call already messaged a seller about another order; nothing was sent.")
    return message


def message_seller(ctx: ToolContext, order_id: str, message: str) -> dict:
    body = str(message).strip()[:2000]
    if not body:
        raise ToolError("The message to the seller is empty.")
    order = order_for_customer(ctx, order_id, queryset=Order.objects.select_related("seller"))
    key = call_key(ctx)
    if existing := _already_sent(key, order):
        return _result(existing, order)
    if order.seller.is_sundry:
        raise ToolError(f"Order {order.number} is fulfilled by Sundry itself; there is no seller to message.")
    try:
        with transaction.atomic():
            sent = SellerMessage.objects.create(order=order, seller=order.seller, body=body, tool_call_id=key)
    except IntegrityError:
        # The same call ran concurrently and committed first.
        existing = _already_sent(key, order)
        if existing is None:
            raise
        return _result(existing, order)
    return _result(sent, order)


MESSAGE_SELLER = Tool(
    name="message_seller",
    label="Contacting the seller",
    description=(
        "Send a message to the marketplace seller who fulfils one of this customer's orders, e.g. to "
        "report a missing parcel, ask for a return label for a wrong item, or start a claim. Write it to "
        "the seller: the order facts and what is needed, without the customer's contact details. Not "
        "possible for orders fulfilled by Sundry itself (fulfilled_by.type sundry). Returns message_id, the "
        "seller's name and status sent."
    ),
    parameters={
        "type": "object",
        "properties": {
            "order_id": dict(ORDER_ID),
            "message": {"type": "string", "minLength": 1, "maxLength": 2000, "description": "the text for the seller"},
        },
        "required": ["order_id", "message"],
        "additionalProperties": False,
    },
    fn=message_seller,
)
