"""What the figures that are not counts are made of, for one range: parts that add up across days, so a closed
day keeps them in the roll-up (ReportDay.parts, written by daily.py) and report() merges them with the parts of
the days still counted live, then finishes them into figures with the same arithmetic as a live report.

- first response and time to resolution: per who answered, each distinct duration in seconds (exact, as the
  database returns it) with how many times it occurs, so merged days give the exact p50 and p90;
- CSAT: per split, the number of ratings, the good ones (4 or 5) and the sum of scores;
- hand-over reasons: conversations per reason (a conversation belongs to the day it started, so days add up);
- refund amounts and the model cost: sums, as decimal text.
"""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

from . import money, outcomes, scope, timing
from .scope import Filters

REFUND_KINDS = {"refunds_automatic": money.refunds_automatic, "refunds_by_approval": money.refunds_by_approval,
                "refunds_by_staff": money.refunds_by_staff}
RATED = {"agent_only": timing.rated_agent_only, "with_person": timing.rated_with_person}
TIMES = ("first_response", "time_to_resolution")


def of(filters: Filters) -> dict:
    """The parts of one range and its filters, counted live (a closed day's are what the roll-up keeps)."""
    conversations, refunds = scope.conversations(filters), scope.refunds(filters)
    seconds = {"first_response": timing.first_response_seconds(conversations),
               "time_to_resolution": timing.resolution_seconds(conversations, filters)}
    return {
        **{name: {who: _distribution(values) for who, values in split.items()} for name, split in seconds.items()},
        "ratings": {key: timing.rating_sums(rated(conversations)) for key, rated in RATED.items()},
        # Only handed-over conversations have a reason: no need to narrow to outcomes.handed_over first.
        "handover_reasons": dict(outcomes.handover_reasons(conversations)),
        "refund_amounts": {key: str(money.amount(select(refunds))) for key, select in REFUND_KINDS.items()},
        "model_cost": str(money.model_cost(conversations)),
    }


def _distribution(values: list[float]) -> list[list]:
    """[[seconds, how many], ...] in ascending order."""
    return [[value, n] for value, n in sorted(Counter(values).items())]


def merged(days: list[dict]) -> dict:
    """Several ranges' parts as one range's (an empty dict, a slice with nothing that day, adds nothing)."""
    times = {name: {"agent": Counter(), "people": Counter()} for name in TIMES}
    ratings = {key: Counter(n=0, good=0, sum=0) for key in RATED}
    reasons: Counter = Counter()
    amounts = {key: Decimal(0) for key in REFUND_KINDS}
    cost = Decimal(0)
    for day in filter(None, days):
        for name in TIMES:
            for who, pairs in day[name].items():
                times[name][who].update({value: n for value, n in pairs})
        for key in RATED:
            ratings[key].update(day["ratings"][key])
        reasons.update(day["handover_reasons"])
        for key in REFUND_KINDS:
            amounts[key] += Decimal(day["refund_amounts"][key])
        cost += Decimal(day["model_cost"])
    return {**{name: {who: sorted(c.items()) for who, c in split.items()} for name, split in times.items()},
            "ratings": {key: dict(c) for key, c in ratings.items()},
            "handover_reasons": sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])),
            "refund_amounts": amounts, "model_cost": cost}
