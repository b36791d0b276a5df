"""The reports' public face: a report's filters, every figure at once, one figure over days or weeks, and the
rows behind a number. docs/reports.md defines each figure; the selectors it names live in outcomes.py,
decisions.py, money.py and timing.py.

Counts are SQL (COUNT with filters over the scope's rows); percentiles are computed in Python over the times of
the range's rows (stats.percentile, interpolated as PostgreSQL's percentile_cont), on every database; a series
groups by day in SQL and adds the days of a week up in Python.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from typing import Callable
from zoneinfo import ZoneInfo

from django.db import models
from django.db.models import QuerySet
from django.db.models.functions import TruncDate

from support.ops.replica import on_replica

from . import copilot, decisions, formats, money, outcomes, parts, rollup, scope, timing
from .scope import Filters
from .stats import counted_p50_p90, ratio

__all__ = ["Filters", "COUNTS", "count_figures", "report", "series", "charts", "conversations_behind"]


@dataclass(frozen=True)
class Count:
    """A figure that counts rows: its label, its scope ("conversations" | "approvals" | "refunds"), and the
    selector that keeps the rows it counts (the drill-down lists them)."""

    label: str
    scope: str
    select: Callable[[QuerySet, Filters], QuerySet]
    group: str


def _counts(scope: str, group: str, reads_filters: bool, **named) -> dict[str, Count]:
    """Count figures of one scope and group: key=(label, selector). A selector that reads the filters (for the
    idle time: "now" less REPORTS_IDLE_HOURS) takes them; the others take the rows alone."""
    def wrap(select):
        return select if reads_filters else (lambda rows, filters: select(rows))

    return {key: Count(label, scope, wrap(select), group) for key, (label, select) in named.items()}


CONVERSATIONS, APPROVALS, REFUNDS = "conversations", "approvals", "refunds"
COUNTS: dict[str, Count] = {
    **_counts(CONVERSATIONS, "Conversations", True, new_conversations=("New conversations", outcomes.new_conversations),
              agent_involved=("Worked by the agent", outcomes.agent_involved),
              abandoned=("Abandoned by the customer", outcomes.abandoned)),
    **_counts(CONVERSATIONS, "Resolution", True,
              resolved_by_agent=("Resolved by the agent", outcomes.resolved_by_agent),
              resolved_confirmed=("Confirmed by the customer", outcomes.resolved_confirmed)),
    **_counts(CONVERSATIONS, "Hand-overs", True, handed_over=("Handed over to a person", outcomes.handed_over)),
    **_counts(APPROVALS, "Approvals", False, approvals_asked=("Approvals asked", decisions.approvals_asked),
              approved_as_asked=("Approved as asked", decisions.approved_as_asked),
              approved_changed=("Approved with a change", decisions.approved_changed),
              rejected=("Rejected", decisions.rejected), expired=("Expired", decisions.expired)),
    **_counts(REFUNDS, "Refunds", False, refunds_automatic=("Refunds made automatically", money.refunds_automatic),
              refunds_by_approval=("Refunds approved by people", money.refunds_by_approval),
              refunds_by_staff=("Refunds by staff themselves", money.refunds_by_staff)),
    **_counts(CONVERSATIONS, "Satisfaction", False, rated_agent_only=("Rated, agent alone", timing.rated_agent_only),
              rated_with_person=("Rated, with a person", timing.rated_with_person)),
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
    rolled_up = rollup.rolled_days(filters)
    return _counted(filters, rolled_up.per_day, rolled_up.live)


def _counted(filters: Filters, per_day: dict[date, dict], live: list[tuple[date, date]]) -> dict[str, int]:
    counts = {key: sum(day.get(key, 0) for day in per_day.values()) for key in COUNTS}
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
    conversations_behind lists (None for a derived figure); "provisional": the days read from provisional rows
    and as of when ({"days": [iso], "as_of": iso}), or None. The page, its CSV and the digest read this."""
    rolled_up = rollup.rolled_days(filters)
    per_day, live = rolled_up.per_day, rolled_up.live
    counts = _counted(filters, per_day, live)
    rolled_parts = rollup.rolled_parts(filters, rolled_up) if per_day else []
    made = parts.merged(rolled_parts + [parts.of(replace(filters, start=start, end=end)) for start, end in live])
    figures = {key: _row(c.group, c.label, counts[key], "count", key) for key, c in COUNTS.items()}
    figures["involvement_rate"] = _row("Conversations", "Agent involvement", ratio(
        counts["agent_involved"], counts["new_conversations"]), "rate")
    figures["resolution_rate"] = _row("Resolution", "Resolution rate (of worked)", ratio(
        counts["resolved_by_agent"], counts["agent_involved"]), "rate")
    figures["handover_rate"] = _row("Hand-overs", "Hand-over rate (of worked)", ratio(
        counts["handed_over"], counts["agent_involved"]), "rate")
    for reason, n in made["handover_reasons"]:
        figures[f"handover_reason:{reason}"] = _row("Hand-over reasons", formats.handover_reason(reason), n, "count")
    _times(figures, "Time to decision", decisions.decision_times(scope.approvals(filters)))
    for key in parts.REFUND_KINDS:
        figures[f"{key}_amount"] = _row("Refunds", f"{COUNTS[key].label}, amount", str(
            made["refund_amounts"][key].quantize(money.CENT)), "eur")
    _satisfaction(figures, made["ratings"])
    for name in parts.TIMES:
        _times(figures, name.replace("_", " ").capitalize(), {"by_who": [
            {"who": who, **counted_p50_p90(made[name][who])} for who in ("agent", "people")]})
    cost = made["model_cost"].quantize(money.MICRO)
    figures["model_cost"] = _row("Cost", "Model cost", str(cost), "usd")
    figures["cost_per_conversation"] = _row("Cost", "Per conversation worked", ratio(cost, counts["agent_involved"]),
                                            "usd")
    figures["cost_per_resolution"] = _row("Cost", "Per resolution", ratio(cost, counts["resolved_by_agent"]), "usd")
    figures.update(copilot.copilot_figures(filters, _row))  # the staff's copilot, costed apart
    return {"filters": _filters_data(filters), "figures": figures, "provisional": _provisional(rolled_up)}


def _provisional(rolled_up: rollup.Rolled) -> dict | None:
    """The days read from provisional rows and the moment the oldest of them was counted at, or None."""
    if not rolled_up.provisional:
        return None
    return {"days": sorted(day.isoformat() for day in rolled_up.provisional),
            "as_of": min(rolled_up.provisional.values()).isoformat()}


SPLITS = {"all": "All decisions", "agent": "The agent", "people": "People", "console": "In the console",
          "slack": "In Slack", "email": "From an e-mail", "unknown": "Way not recorded"}


def _times(figures: dict, group: str, times: dict) -> None:
    """p50 and p90 rows for each split of a time figure (all, by decider, by channel, or by who answered)."""
    slug = group.lower().replace(" ", "_")
    for split, rows in times.items():
        for row in ([{"who": "all", **rows}] if split == "all" else rows):
            name = row.get("decider") or row.get("channel") or row["who"]
            said = f"Decided by {name}" if split == "by_decider" else SPLITS.get(name, name)
            for p, words in (("p50", "median"), ("p90", "9 in 10 within")):
                figures[f"{slug}:{split}:{name}:{p}"] = _row(group, f"{said}, {words}", row[p], "seconds")


def _satisfaction(figures: dict, ratings: dict) -> None:
    for key in parts.RATED:
        result = timing.csat_of(ratings[key])
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
    return charts(filters, (figure,), by)[figure]


@on_replica
def charts(filters: Filters, charted: tuple[str, ...], by: str = "day") -> dict[str, list[tuple[date, int]]]:
    """series() of several count figures at once: the closed days of all of them from one read of the roll-up,
    the other days grouped in SQL per figure."""
    if by not in ("day", "week"):
        raise ValueError("by is day or week")
    per_day, live, _ = rollup.rolled_days(filters)  # closed and provisional days rolled up, the others counted
    return {figure: _series(filters, figure, by, per_day, live) for figure in charted}


def _series(filters: Filters, figure: str, by: str, per_day: dict[date, dict], live: list) -> list[tuple[date, int]]:
    tz = ZoneInfo(filters.time_zone)
    dated = _DATED[COUNTS[figure].scope]
    buckets: dict[date, int] = {}
    day = _bucket(filters.start, by)
    while day <= filters.end:
        buckets[day] = 0
        day += timedelta(days=1 if by == "day" else 7)
    counted = [{"day": day, "n": counts.get(figure, 0)} for day, counts in per_day.items()]
    for start, end in live:
        part = replace(filters, start=start, end=end)
        rows, (first, after) = conversations_behind(part, figure), part.bounds()
        # Grouped in SQL, over the drill-down's rows taken by key (its annotations stay out of the GROUP BY);
        # the range again on the outer rows (they are in it) lets it read them by index, not scan the table.
        counted += (rows.model.objects.filter(pk__in=rows.values("pk"), **{f"{dated}__gte": first,
                                                                           f"{dated}__lt": after})
                    .annotate(day=TruncDate(dated, tzinfo=tz)).values("day").annotate(n=models.Count("pk")).order_by())
    for row in counted:
        buckets[_bucket(row["day"], by)] += row["n"]
    return list(buckets.items())


def _bucket(day: date | datetime, by: str) -> date:
    return day if by == "day" else day - timedelta(days=day.weekday())
