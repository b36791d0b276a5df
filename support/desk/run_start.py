"""What a run reads before its first model call, in one statement: the run, its conversation, customer,
follow-up row (the time zone) and profile version, what the conversation's other runs of the day spent, and
whether the conversation has any approval at all (without one there are no decisions to read); and the
approvals a run starts from."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import DecimalField, Exists, IntegerField, OuterRef, Q, Subquery, Sum
from django.db.models.functions import Coalesce, Now

from support.agent import types as agent
from support.models import Approval, Conversation, Customer, FollowUp, ProfileVersion, Run
from support.ops.prepared import Prepared, columns, instance
from support.tools import tool_by_name

DAY_TOTALS = {"day_turns": "turns", "day_prompt_tokens": "prompt_tokens",
              "day_completion_tokens": "completion_tokens", "day_cost_usd": "cost_usd"}


def run_read(run_id: int) -> Run:
    """The run with everything its start needs, read once (after its claim, so the totals are the claim's): the
    statement is compiled once per process (support/ops/prepared.py), its row made into the run with its
    conversation, customer, follow-up row and profile version cached on it, as select_related leaves them."""
    found = _RUN_START.rows(pk=run_id)
    if not found:
        raise Run.DoesNotExist(f"run {run_id} is gone")
    row = found[0]
    run = instance(Run, row)
    conversation = instance(Conversation, row, "conversation__")
    run.conversation = conversation
    conversation.customer = instance(Customer, row, "conversation__customer__")
    Conversation.follow_up.related.set_cached_value(conversation, None)
    follow_up = instance(FollowUp, row, "conversation__follow_up__")
    if follow_up is not None:
        conversation.follow_up = follow_up
    run.profile_version = instance(ProfileVersion, row, "profile_version__")
    for name in ("has_approvals", *DAY_TOTALS):
        setattr(run, name, row[name])
    return run


_RELATED = {Run: "", Conversation: "conversation__", Customer: "conversation__customer__",
            FollowUp: "conversation__follow_up__", ProfileVersion: "profile_version__"}


def _run_start_values(pk):
    """run_read's statement: the run's row joined to the rows it starts from, what the conversation's other runs
    spent in the last 24 hours (the database's clock) and whether the conversation has any approval."""
    others = Run.objects.filter(conversation=OuterRef("conversation"),
                                created_at__gte=Now() - timedelta(days=1)).exclude(
        pk=OuterRef("pk")).order_by().values("conversation")

    def day_total(column: str):
        output = DecimalField(max_digits=12, decimal_places=6) if column == "cost_usd" else IntegerField()
        return Coalesce(Subquery(others.annotate(total=Sum(column)).values("total")[:1], output_field=output), 0,
                        output_field=output)

    return (Run.objects.filter(pk=pk)
            .annotate(has_approvals=Exists(Approval.objects.filter(run__conversation=OuterRef("conversation"))),
                      **{name: day_total(column) for name, column in DAY_TOTALS.items()})
            .values(*(name for model, prefix in _RELATED.items() for name in columns(model, prefix)),
                    "has_approvals", *DAY_TOTALS))


_RUN_START = Prepared(Run, _run_start_values, "pk")


def spent_today(run: Run) -> agent.Spent:
    """What the conversation's other runs of the last 24 hours spent, for its daily budget (read by run_read)."""
    return agent.Spent(turns=run.day_turns, prompt_tokens=run.day_prompt_tokens,
                       completion_tokens=run.day_completion_tokens, cost_usd=float(run.day_cost_usd))


def decisions_and_rejections(run: Run, conversation: Conversation) -> tuple[dict[str, agent.Decision], dict[str, str],
                                                                           list[str]]:
    """One read of the approvals a run starts from: the decisions on this run's calls (by call id), what
    staff rejected anywhere in the conversation, by what the call does (see Tool.fingerprint): it stays
    rejected for the conversation, however the model words it again; and the call ids of the conversation's
    other runs' requests still waiting for a person."""
    if not getattr(run, "has_approvals", True):  # run_read says whether the conversation has any at all
        return {}, {}, []
    decided = Q(run=run, decided_at__isnull=False)
    rejected_here = Q(run__conversation=conversation, decision=Approval.REJECTED)
    waiting_here = Q(run__conversation=conversation, decided_at__isnull=True)
    decisions, rejected, waiting = {}, {}, []
    for a in Approval.objects.filter(decided | rejected_here | waiting_here).select_related("tool_call").order_by("id"):
        if a.decided_at is None and a.run_id != run.pk:
            waiting.append(a.tool_call.call_id)
        if a.run_id == run.pk and a.decided_at is not None:
            if a.decision == Approval.APPROVED:
                decisions[a.tool_call.call_id] = agent.Decision(approved=True, arguments=a.executed_arguments,
                                                                reason=a.reason)
            else:
                decisions[a.tool_call.call_id] = agent.Decision(
                    approved=False, reason=a.reason, by="the system" if a.decision == Approval.EXPIRED else "staff")
        if a.decision == Approval.REJECTED:
            _add_rejection(rejected, a)
    return decisions, rejected, waiting


def approvals_waiting(waiting: list[str], history: list[dict]) -> int:
    """Of the other runs' requests still waiting for a person (their call ids), those the run does not pause on
    again itself: the open calls of the history's last reply (a hand-back) are counted by the loop as it does."""
    last = next((m for m in reversed(history) if m.get("role") == "assistant"), {})
    answered = {m.get("tool_call_id") for m in history if m.get("role") == "tool"}
    open_ids = {c.get("id") for c in last.get("tool_calls") or [] if c.get("id") not in answered}
    return sum(1 for call_id in waiting if call_id not in open_ids)


def _add_rejection(out: dict[str, str], approval: Approval) -> None:
    tool = tool_by_name(approval.tool_call.name)
    if tool is not None:
        out[tool.action(approval.requested_arguments)] = approval.reason
