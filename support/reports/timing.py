"""First response, time to resolution and CSAT, the agent against people."""

from __future__ import annotations

from django.db.models import Count, OuterRef, Q, QuerySet, Subquery, Sum

from support.models import Message, Rating

from . import outcomes
from .scope import Filters, person_involved
from .stats import p50_p90, ratio


def first_response(conversations: QuerySet) -> dict:
    """First response time in seconds, p50 and p90: from the customer's first message to the first answer
    after it, split by who answered first (the agent, or a person). Conversations nobody answered yet are
    left out."""
    return {who: p50_p90(seconds) for who, seconds in first_response_seconds(conversations).items()}


def first_response_seconds(conversations: QuerySet) -> dict[str, list[float]]:
    """The seconds first_response is a percentile of, by who answered first."""
    rows = conversations.annotate(
        asked=_first(Q(author=Message.CUSTOMER)), agent_at=_first(Q(author=Message.AGENT, content__gt="")),
        staff_at=_first(Q(author=Message.STAFF)),
    ).values_list("asked", "agent_at", "staff_at")
    agent, people = [], []
    for asked, agent_at, staff_at in rows:
        answers = [(t, who) for t, who in ((agent_at, agent), (staff_at, people)) if t and asked and t >= asked]
        if answers:
            at, who = min(answers, key=lambda a: a[0])
            who.append((at - asked).total_seconds())
    return {"agent": agent, "people": people}


def _first(which: Q) -> Subquery:
    """The time of the conversation's first message of this kind: one probe of message_conv_author_at each,
    where MIN over a join of all its messages read every message of every conversation."""
    return Subquery(Message.objects.filter(which, conversation=OuterRef("pk")).order_by("created_at")
                    .values("created_at")[:1])


def time_to_resolution(conversations: QuerySet, filters: Filters) -> dict:
    """Time to resolution in seconds, p50 and p90: for the agent, from the start to the end of the run that
    resolved it (the conversations resolved by the agent); for people, from the start to the close, over the
    closed conversations (not reopened) a person took part in."""
    return {who: p50_p90(seconds) for who, seconds in resolution_seconds(conversations, filters).items()}


def resolution_seconds(conversations: QuerySet, filters: Filters) -> dict[str, list[float]]:
    """The seconds time_to_resolution is a percentile of, agent and people."""
    resolved = outcomes.resolved_by_agent(conversations, filters).annotate(
        resolved_at=outcomes.last_run("finished_at")).values_list("created_at", "resolved_at")
    closed = conversations.filter(person_involved(), outcomes.closed())
    people = [(c - s).total_seconds() for s, c in closed.values_list("created_at", "closed_at")]
    agent = [(r - s).total_seconds() for s, r in resolved if r]
    return {"agent": agent, "people": people}


def rated_agent_only(conversations: QuerySet) -> QuerySet:
    """Rated, agent alone: the new conversations the customer rated in which no person took part."""
    return conversations.filter(rating__isnull=False).exclude(person_involved())


def rated_with_person(conversations: QuerySet) -> QuerySet:
    """Rated, with a person: the new conversations the customer rated in which a person took part."""
    return conversations.filter(rating__isnull=False).filter(person_involved())


def csat(rated: QuerySet) -> dict:
    """CSAT: the share of ratings that are 4 or 5 (and the average score, 1 to 5), over rated conversations."""
    return csat_of(rating_sums(rated))


def rating_sums(rated: QuerySet) -> dict[str, int]:
    """What CSAT is made of: the number of ratings, the good ones (4 or 5) and the sum of their scores."""
    scores = Rating.objects.filter(conversation__in=rated.values("pk")).aggregate(
        n=Count("pk"), good=Count("pk", filter=Q(score__gte=4)), sum=Sum("score"))
    return {"n": scores["n"], "good": scores["good"], "sum": scores["sum"] or 0}


def csat_of(sums: dict[str, int]) -> dict:
    """CSAT and the average score from rating_sums (of one range, or of several days added up)."""
    n = sums["n"]
    return {"count": n, "csat": ratio(sums["good"], n), "average": round(sums["sum"] / n, 2) if n else None}

