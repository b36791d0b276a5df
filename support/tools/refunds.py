"""issue_refund: refund part or all of an order, within the agent's ceiling and the refundable balance."""

from __future__ import annotations

import uuid


from support.agent.tools import Tool, ToolContext, ToolError
from support.shop import effects, port, shop
from support.tools.common import (
    ORDER_ID,
    call_key,
    conversation_pk,
    money,
    order_for_customer,
    parse_amount,
    refund_ceiling,
)


def _result(refund: port.RefundResult, order: port.Order) -> dict:
    after = shop().order(order.number)  # the balance as the refund left it
    return {
        "refund_id": refund.reference,  # short, for the customer: "RF-7K2M9"
        "order_id": order.number,
        "amount": money(refund.amount),
        "status": "issued",
        "refundable_remaining": money(after.refundable),
    }


def _same_order(refund: port.RefundResult, order: port.Order) -> port.RefundResult:
    """The refund this very call issued before (a retry or a resumed run), when it was on this order."""
    if refund.order_number and refund.order_number != order.number:
        raise ToolError("This tool call already issued a refund for another order; nothing was refunded.")
    return refund


def check_refund(ctx: ToolContext, order_id: str, amount: str, reason: str) -> None:
    """Before a person is asked: the order is this customer's, and the amount within the ceiling and the
    order's refundable balance. The same rules hold again when the refund is issued, the balance checked by
    the shop as it writes."""
    value = parse_amount(amount)
    order = order_for_customer(ctx, order_id)
    _within_limits(order, value, order.refundable)


def _within_limits(order: port.Order, value, left) -> None:
    _within_ceiling(value)
    if value > left:
        raise _too_much(order, value, left)


def _within_ceiling(value) -> None:
    ceiling = refund_ceiling()
    if value > ceiling:
        raise ToolError(
            f"Refund of {money(value)} exceeds the {money(ceiling)} limit an agent may issue; "
            "escalate to a person instead."
        )


def _too_much(order: port.Order, value, left) -> ToolError:
    return ToolError(f"Order {order.number} has {money(left)} left to refund; {money(value)} was asked.")


def issue_refund(ctx: ToolContext, order_id: str, amount: str, reason: str) -> dict:
    value = parse_amount(amount)
    reason = str(reason).strip()[:500]
    if not reason:
        raise ToolError("A refund needs a reason.")
    order = order_for_customer(ctx, order_id)
    key = call_key(ctx) or f"direct:{uuid.uuid4()}"  # called outside a run (a script): guarded by nothing else
    _within_ceiling(value)
    try:
        # A retried or resumed run of this same call gets its refund back, although the balance has shrunk
        # since: the desk's record or the shop, asked by the key, answer before anything is sent.
        refund = effects.refund(order_number=order.number, amount=value, reason=reason, key=key,
                                conversation_id=conversation_pk(ctx))
    except port.ExceedsRefundable as over:
        raise _too_much(order, value, over.refundable) from None
    return _result(_same_order(refund, order), order)


ISSUE_REFUND = Tool(
    name="issue_refund",
    label="Preparing a refund",
    gated=True,
    description=(
        "Refund money on one of this customer's orders to the original payment method. Gated: a staff "
        "member approves each refund before it is issued, so tell the customer it is being reviewed. Use it "
        "only when a policy entitles the customer (check search_policy first). amount is a string in EUR "
        'like "24.99"; it may not exceed the order\'s refundable balance (see get_order) nor the limit per '
        "refund your instructions state; above that, escalate to a person. "
        "Returns refund_id (a short reference like RF-7K2M9: give it to the customer as it is), the amount, "
        "status issued and refundable_remaining."
    ),
    parameters={
        "type": "object",
        "properties": {
            "order_id": dict(ORDER_ID),
            "amount": {"type": "string", "pattern": "^[0-9]{1,7}(\\.[0-9]{1,2})?$", "description": 'e.g. "24.99"'},
            "reason": {"type": "string", "minLength": 1, "maxLength": 500, "description": "why, for the record"},
        },
        "required": ["order_id", "amount", "reason"],
        "additionalProperties": False,
    },
    fn=issue_refund,
    check=check_refund,
    fingerprint=lambda arguments: str(arguments.get("order_id", "")).upper(),  # a refund on that order
)
