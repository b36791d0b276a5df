"""What a run reads before its first model call, in one statement: the run, its conversation, customer,
follow-up row (the time zone) and profile version, what the conversation's other runs of the day spent, and
whether the conversation has any approval at all (without one there are no decisions to read)."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import DecimalField, Exists, IntegerField, OuterRef, Subquery, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from support.agent import types as agent
from support.models import Approval, Run

DAY_TOTALS = {"day_turns": "turns", "day_prompt_tokens": "prompt_tokens",
              "day_completion_tokens": "completion_tokens", "day_cost_usd": "cost_usd"}


def run_read(run_id: int) -> Run:
    """The run with everything its start needs, read once (after its claim, so the totals are the claim's)."""
    since = timezone.now() - timedelta(days=1)
    others = Run.objects.filter(conversation=OuterRef("conversation"), created_at__gte=since).exclude(
        pk=OuterRef("pk")).order_by().values("conversation")

    def day_total(column: str):
        output = DecimalField(max_digits=12, decimal_places=6) if column == "cost_usd" else IntegerField()
        return Coalesce(Subquery(others.annotate(total=Sum(column)).values("total")[:1], output_field=output), 0,
                        output_field=output)

    return (Run.objects.select_related("conversation__customer", "conversation__follow_up", "profile_version")
            .annotate(has_approvals=Exists(Approval.objects.filter(run__conversation=OuterRef("conversation"))),
                      **{name: day_total(column) for name, column in DAY_TOTALS.items()})
            .get(pk=run_id))


def spent_today(run: Run) -> agent.Spent:
    """What the conversation's other runs of the last 24 hours spent, for its daily budget (read by run_read)."""
    return agent.Spent(turns=run.day_turns, prompt_tokens=run.day_prompt_tokens,
                       completion_tokens=run.day_completion_tokens, cost_usd=float(run.day_cost_usd))
