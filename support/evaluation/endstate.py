"""The end state of a scenario, read from where it lives: the refunds and seller messages the shop holds (the
demo's tables, or the reference shop over HTTP), the approvals, hand-overs and status the desk holds, and what
the customer was shown. The shop's own writes from before the scenario (its catalogue's refunds) are left out.
"""

from __future__ import annotations

from dataclasses import dataclass

from support.models import Approval, Conversation, Order, Refund, SellerMessage, ToolCall

from .criteria import EndSeen


@dataclass(frozen=True)
class Baseline:
    """The shop's writes when the scenario started, by id."""

    refunds: frozenset
    seller_messages: frozenset


def baseline(remote) -> Baseline:
    """`remote`: the reference shop the evaluation started (driver.on_remote_shop), or None for the demo's."""
    refunds, messages = _shop(remote)
    return Baseline(frozenset(i for i, *_ in refunds), frozenset(i for i, *_ in messages))


def observe(conversation: Conversation | None, since: Baseline, remote) -> EndSeen:
    refunds, messages = _shop(remote)
    seen = EndSeen(refunds=[(o, a) for i, o, a in refunds if i not in since.refunds],
                   seller_messages=[(o, s, t) for i, o, s, t in messages if i not in since.seller_messages])
    if conversation is None:
        return seen
    conversation.refresh_from_db(fields=["status"])
    seen.conversation_status = conversation.status
    for a in Approval.objects.filter(run__conversation=conversation).select_related("tool_call").order_by("pk"):
        seen.approvals.append((a.tool_call.name, _decision(a)))
    for call in ToolCall.objects.filter(run__conversation=conversation, name="escalate_to_human",
                                        status=ToolCall.EXECUTED).order_by("pk"):
        args = call.arguments if isinstance(call.arguments, dict) else {}
        seen.escalations.append(f"{args.get('reason', '')} {args.get('summary', '')}".strip())
    seen.told = "\n".join(m.content.strip() for m in conversation.messages.filter(role="assistant").order_by("seq")
                          if (m.content or "").strip())
    return seen


def _decision(a: Approval) -> str:
    if not a.decision:
        return "pending"
    if a.decision == Approval.APPROVED and a.executed_arguments not in (None, a.requested_arguments):
        return "edited"
    return a.decision


def _shop(remote) -> tuple[list, list]:
    """(id, order, amount) of each refund and (id, order, seller, text) of each seller message the shop holds."""
    if remote is None:
        refunds = [(r.pk, r.order.number, f"{r.amount:.2f}") for r in Refund.objects.select_related("order")]
        messages = [(m.pk, m.order.number, m.seller.code, m.body)
                    for m in SellerMessage.objects.select_related("order", "seller")]
        return refunds, messages
    sellers = dict(Order.objects.values_list("number", "seller__code"))  # the same catalogue as the demo's
    refunds = [(r["id"], r["order_number"], r["amount"]) for r in remote.refunds()]
    messages = [(m["id"], m["order_number"], sellers.get(m["order_number"], ""), m["body"])
                for m in remote.seller_messages()]
    return refunds, messages
