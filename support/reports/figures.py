"""The reports' public face: a report's filters, every figure at once, one figure over days or weeks, and the
rows behind a number. docs/reports.md defines each figure; the selectors it names live in outcomes.py,
decisions.py, money.py and timing.py.

Counts are SQL (COUNT with filters over the scope's rows); percentiles are computed in Python over the times of
the range's rows (stats.percentile, interpolated as PostgreSQL's percentile_cont), on every database.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from typing import Callable
from zoneinfo import ZoneInfo

from django.db.models import QuerySet

from support.ops.replica import on_replica

from . import decisions, money, outcomes, rollup, scope, timing
from .scope import Filters
from .stats import ratio

__all__ = ["Filters", "COUNTS", "count_figures", "report", "series", "conversations_behind"]


@dataclass(frozen=True)
class Count:
    """A figure that counts rows: its label, its scope ("conversations" | "approvals" | "refunds"), and the
    selector that keeps the rows it counts (the drill-down lists them)."""

    label: str
    scope: str
    select: Callable[[QuerySet, Filters], QuerySet]
    group: str


def _c(selector):
    return lambda qs, filters: selector(qs, filters)


def _a(selector):
    return lambda qs, filters: selector(qs)


CONVERSATIONS, APPROVALS, REFUNDS = "conversations", "approvals", "refunds"
COUNTS: dict[str, Count] = {
    "new_conversations": Count("New conversations", CONVERSATIONS, _c(outcomes.new_conversations), "Conversations"),
    "agent_involved": Count("Worked by the agent", CONVERSATIONS, _c(outcomes.agent_involved), "Conversations"),
    "resolved_by_agent": Count("Resolved by the agent", CONVERSATIONS, _c(outcomes.resolved_by_agent),
                               "Resolution"),
    "resolved_confirmed": Count("Confirmed by the customer", CONVERSATIONS, _c(outcomes.resolved_confirmed),
                                "Resolution"),
    "handed_over": Count("Handed over to a person", CONVERSATIONS, _c(outcomes.handed_over), "Hand-overs"),
    "abandoned": Count("Abandoned by the customer", CONVERSATIONS, _c(outcomes.abandoned), "Conversations"),
    "approvals_asked": Count("Approvals asked", APPROVALS, _a(decisions.approvals_asked), "Approvals"),
    "approved_as_asked": Count("Approved as asked", APPROVALS, _a(decisions.approved_as_asked), "Approvals"),
    "approved_changed": Count("Approved with a change", APPROVALS, _a(decisions.approved_changed), "Approvals"),
    "rejected": Count("Rejected", APPROVALS, _a(decisions.rejected), "Approvals"),
    "expired": Count("Expired", APPROVALS, _a(decisions.expired), "Approvals"),
    "refunds_automatic": Count("Refunds made automatically", REFUNDS, _a(money.refunds_automatic), "Refunds"),
    "refunds_by_approval": Count("Refunds approved by people", REFUNDS, _a(money.refunds_by_approval), "Refunds"),
    "refunds_by_staff": Count("Refunds by staff themselves", REFUNDS, _a(money.refunds_by_staff), "Refunds"),
    "rated_agent_only": Count("Rated, agent alone", CONVERSATIONS, _a(timing.rated_agent_only), "Satisfaction"),
    "rated_with_person": Count("Rated, with a person", CONVERSATIONS, _a(timing.rated_with_person), "Satisfaction"),
}
_SCOPES = {CONVERSATIONS: scope.conversations, APPROVALS: scope.approvals, REFUNDS: scope.refunds}
_DATED = {CONVERSATIONS: "created_at", APPROVALS: "requested_at", REFUNDS: "created_at"}


def conversations_behind(filters: Filters, figure: str) -> QuerySet:
    """The rows a count figure counts, exactly: conversations, approvals (each with its run's conversation or
    its staff action's) or refunds (ShopEffect rows, with their conversation). KeyError for an unknown figure."""
    count = COUNTS[figure]
    return count.select(_SCOPES[count.scope](filters), filters)


def count_figures(filters: Filters) -> dict[str, int]:
    """Every count figure of COUNTS: the closed days from the daily roll-up, the other days counted live
    (rollup.py says which days are closed and which filters it serves); the same numbers either way."""
    sums, live = rollup.rolled(filters)
    counts = {key: sums.get(key, 0) for key in COUNTS}
    for start, end in live:
        part = replace(filters, start=start, end=end)
        for key in COUNTS:
            counts[key] += conversations_behind(part, key).count()
    return counts


def _row(group: str, label: str, value, unit: str, drill: str | None = None) -> dict:
    return {"group": group, "label": label, "value": value, "unit": unit, "drill": drill}


@on_replica
def report(filters: Filters) -> dict:
    """Every figure, JSON-ready: {"filters": ..., "figures": {key: {group, label, value, unit, drill}}} in the
    page's order. unit: count, rate (0..1), seconds, usd, eur, score; drill: the figure whose rows
    conversations_behind lists (None for a derived figure). The page, its CSV and the digest read this."""
    conversations = scope.conversations(filters)
    refunds = scope.refunds(filters)
    approvals = scope.approvals(filters)
    counts = count_figures(filters)
    figures = {key: _row(c.group, c.label, counts[key], "count", key) for key, c in COUNTS.items()}
    figures["involvement_rate"] = _row("Conversations", "Agent involvement", ratio(
        counts["agent_involved"], counts["new_conversations"]), "rate")
    figures["resolution_rate"] = _row("Resolution", "Resolution rate (of worked)", ratio(
        counts["resolved_by_agent"], counts["agent_involved"]), "rate")
    figures["handover_rate"] = _row("Hand-overs", "Hand-over rate (of worked)", ratio(
        counts["handed_over"], counts["agent_involved"]), "rate")
    for reason, n in outcomes.handover_reasons(outcomes.handed_over(conversations, filters)):
        figures[f"handover_reason:{reason}"] = _row("Hand-over reasons", reason.replace("_", " "), n, "count")
    _times(figures, "Time to decision", decisions.decision_times(approvals))
    for key in ("refunds_automatic", "refunds_by_approval", "refunds_by_staff"):
        figures[f"{key}_amount"] = _row("Refunds", f"{COUNTS[key].label}, amount", str(
            money.amount(COUNTS[key].select(refunds, filters))), "eur")
    _satisfaction(figures, conversations)
    for name, split in (("first_response", timing.first_response(conversations)),
                        ("time_to_resolution", timing.time_to_resolution(conversations, filters))):
        _times(figures, name.replace("_", " ").capitalize(), {"by_who": [
            {"who": who, **split[who]} for who in ("agent", "people")]})
    cost = money.model_cost(conversations)
    figures["model_cost"] = _row("Cost", "Model cost", str(cost), "usd")
    figures["cost_per_conversation"] = _row("Cost", "Per conversation worked", ratio(cost, counts["agent_involved"]),
                                            "usd")
    figures["cost_per_resolution"] = _row("Cost", "Per resolution", ratio(cost, counts["resolved_by_agent"]), "usd")
    return {"filters": _filters_data(filters), "figures": figures}


def _times(figures: dict, group: str, times: dict) -> None:
    """p50 and p90 rows for each split of a time figure (by decider, channel, or who answered)."""
    slug = group.lower().replace(" ", "_")
    for split, rows in times.items():
        for row in ([{"who": "all", **rows}] if split == "all" else rows):
            name = row.get("decider") or row.get("channel") or row["who"]
            for p in ("p50", "p90"):
                figures[f"{slug}:{split}:{name}:{p}"] = _row(group, f"{name} ({split.replace('_', ' ')}) {p}",
                                                             row[p], "seconds")


def _satisfaction(figures: dict, conversations: QuerySet) -> None:
    for key, rated in (("agent_only", timing.rated_agent_only(conversations)),
                       ("with_person", timing.rated_with_person(conversations))):
        result = timing.csat(rated)
        who = key.replace("_", " ")
        figures[f"csat_{key}"] = _row("Satisfaction", f"CSAT, {who}", result["csat"], "rate")
        figures[f"csat_{key}_average"] = _row("Satisfaction", f"Average score, {who}", result["average"], "score")


def _filters_data(filters: Filters) -> dict:
    return {"start": filters.start.isoformat(), "end": filters.end.isoformat(), "channel": filters.channel,
            "language": filters.language, "profile_version": filters.profile_version,
            "staff_user_id": filters.staff_user_id, "time_zone": filters.time_zone}


@on_replica
def series(filters: Filters, figure: str, by: str = "day") -> list[tuple[date, int]]:
    """A count figure over days or weeks (weeks start on Monday), every bucket of the range listed, empty ones
    as 0. Each bucket counts the rows conversations_behind lists, by the day (in the time zone) they started or
    were asked or made."""
    if by not in ("day", "week"):
        raise ValueError("by is day or week")
    tz = ZoneInfo(filters.time_zone)
    dated = _DATED[COUNTS[figure].scope]
    buckets: dict[date, int] = {}
    day = _bucket(filters.start, by)
    while day <= filters.end:
        buckets[day] = 0
        day += timedelta(days=1 if by == "day" else 7)
    for at in conversations_behind(filters, figure).values_list(dated, flat=True).iterator():
        buckets[_bucket(at.astimezone(tz).date(), by)] += 1
    return list(buckets.items())


def _bucket(day: date | datetime, by: str) -> date:
    return day if by == "day" else day - timedelta(days=day.weekday())
