"""The copilot's figures (docs/reports.md, "The copilot"): runs by kind, drafts sent, the share sent unchanged, and
what the copilot cost, apart from the agent's model cost. Runs count by when they were asked, in the range; the
staff filter keeps the runs that person asked for, the channel and language filters those of conversations with
that channel or language; a profile version keeps none apart (the copilot runs on the live profile)."""

from __future__ import annotations

from decimal import Decimal

from django.db.models import Count, Q, QuerySet, Sum

from support.models import Conversation, CopilotRun

from .scope import Filters, first_channel
from .stats import ratio

MICRO = Decimal("0.000001")


def copilot_runs(filters: Filters) -> QuerySet:
    start, end = filters.bounds()
    runs = CopilotRun.objects.filter(created_at__gte=start, created_at__lt=end)
    if filters.staff_user_id is not None:
        runs = runs.filter(requested_by_id=filters.staff_user_id)
    if filters.channel is not None:  # how the customer came: their first message's channel
        runs = runs.filter(conversation__in=Conversation.objects.annotate(came_by=first_channel()).filter(
            came_by=filters.channel).values("pk"))
    if filters.language is not None:
        runs = runs.filter(conversation__language=filters.language)
    return runs


def copilot_figures(filters: Filters, row) -> dict:
    """The figures as report() rows (`row(group, label, value, unit)`), in the page's order."""
    runs = copilot_runs(filters)
    kinds = {kind: Count("pk", filter=Q(kind=kind)) for kind, _ in CopilotRun.KINDS}
    counts = runs.aggregate(
        **kinds, drafts_sent=Count("pk", filter=Q(kind=CopilotRun.DRAFT, sent_message__isnull=False)),
        sent_unchanged=Count("pk", filter=Q(kind=CopilotRun.DRAFT, sent_unchanged=True)), cost=Sum("cost_usd"))
    figures = {f"copilot_runs:{kind}": row("Copilot", f"{label.capitalize()} runs asked", counts[kind], "count")
               for kind, label in CopilotRun.KINDS}
    figures["copilot_drafts_sent"] = row("Copilot", "Drafts sent", counts["drafts_sent"], "count")
    figures["copilot_sent_unchanged"] = row("Copilot", "Drafts sent unchanged (of sent)", ratio(
        counts["sent_unchanged"], counts["drafts_sent"]), "rate")
    figures["copilot_cost"] = row("Copilot", "Copilot cost (apart from the agent's)",
                                  str((counts["cost"] or Decimal(0)).quantize(MICRO)), "usd")
    return figures
