"""The end state of a scenario, read from where it lives: the refunds and seller messages the shop holds (the
demo's tables, or the reference shop over HTTP), the approvals, hand-overs and status the desk holds, and what
the customer was shown. The shop's own writes from before the scenario (its catalogue's refunds) are left out.
Also the evidence the reports show of an attempt: its transcript, its trace and what it cost.
"""

from __future__ import annotations

from dataclasses import dataclass

from support.models import Approval, Conversation, Order, Refund, Run, SellerMessage, Step, ToolCall

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


def evidence(record, conversation: Conversation) -> None:
    ordered = list(Run.objects.filter(conversation=conversation).order_by("pk"))
    runs = {r.pk: i for i, r in enumerate(ordered, 1)}
    record.runs = [{"run": i, "status": r.status, "stop_reason": r.stop_reason, "outcome": r.outcome}
                   for i, r in enumerate(ordered, 1)]  # how each ended, waiting ones too (the real-model smoke)
    record.transcript = [{
        "seq": m.seq, "role": m.role, "author": m.author, "content": m.content or "",
        "tool_calls": [{"name": (c.get("function") or {}).get("name", ""),
                        "arguments": (c.get("function") or {}).get("arguments", "")} for c in m.tool_calls or []],
        "run": runs.get(m.run_id),
    } for m in conversation.messages.order_by("seq")]
    steps = Step.objects.filter(run__conversation=conversation).order_by("pk")
    record.trace = [{
        "run": runs.get(s.run_id), "turn": s.turn, "kind": s.kind, "label": s.label, "tool": s.tool,
        "arguments": s.arguments[:300], "result": s.result[:300], "error": s.error[:300],
        "finish_reason": s.finish_reason, "prompt_tokens": s.prompt_tokens,
        "completion_tokens": s.completion_tokens, "cost_usd": float(s.cost_usd), "ms": round(s.duration_ms),
    } for s in steps]
    record.stop_reasons = [r.stop_reason for r in Run.objects.filter(conversation=conversation).order_by("pk")
                           if r.stop_reason]
    models = [s for s in steps if s.kind == "model"]
    record.model_calls = len(models)
    record.prompt_tokens = sum(s.prompt_tokens for s in models)
    record.completion_tokens = sum(s.completion_tokens for s in models)
    record.cost_usd = float(sum(s.cost_usd for s in models))
