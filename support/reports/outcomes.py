"""The conversation figures: started, worked by the agent, resolved by it, handed over, abandoned.

Each selector takes the scope's conversations (scope.conversations) and returns the ones it counts, so the
number is `.count()` and the drill-down list is the queryset itself. The docstrings are the definitions that
docs/reports.md repeats.
"""

from __future__ import annotations

from django.db.models import Count, Exists, OuterRef, Q, QuerySet, Subquery

from support.agent import types as agent
from support.models import Approval, Conversation, Message, Rating, Run

from .scope import Filters, person_involved

RESOLVED, WAITING_ON_CUSTOMER = "resolved", "waiting_on_customer"
# A run that stopped for one of these gave the conversation to a person (docs/events.md: stop reasons).
HANDOVER_STOPS = Run.HANDOVER_STOPS
APPROVAL_EXPIRED = "approval_expired"  # the reason an expired approval hands a conversation over by


def last_run(field: str) -> Subquery:
    return Subquery(Run.objects.filter(conversation=OuterRef("pk")).order_by("-created_at", "-pk").values(field)[:1])


def _last_message_at() -> Subquery:
    return Subquery(Message.objects.filter(conversation=OuterRef("pk")).order_by("-seq").values("created_at")[:1])


def closed() -> Q:
    """Closed by a staff member, and the customer has not written since (a reopened one is not closed)."""
    reopened = Exists(Message.objects.filter(conversation=OuterRef("pk"), author=Message.CUSTOMER,
                                             created_at__gt=OuterRef("closed_at")))
    return Q(closed_at__isnull=False) & ~reopened


def _done(filters: Filters) -> Q:
    """Closed (and not reopened since), or idle: no message for REPORTS_IDLE_HOURS."""
    return closed() | Q(last_message_at__lt=filters.idle_before())


def new_conversations(conversations: QuerySet, filters: Filters) -> QuerySet:
    """New conversations: started in the range (the customer's first message), whatever became of them."""
    return conversations


def agent_involved(conversations: QuerySet, filters: Filters) -> QuerySet:
    """Agent involvement: the new conversations the agent worked on (at least one run)."""
    return conversations.filter(Exists(Run.objects.filter(conversation=OuterRef("pk"))))


def resolved_by_agent(conversations: QuerySet, filters: Filters) -> QuerySet:
    """Resolved by the agent: closed (not reopened since) or idle past REPORTS_IDLE_HOURS, no person involved
    (no staff message, staff action, assignment or take-over), still with the agent (status open), and the
    agent's last run answered with the outcome `resolved`. A hand-over a person handed back without taking
    part, which the agent then resolved, counts; a reopened conversation counts only once done again."""
    return conversations.annotate(
        last_message_at=_last_message_at(), last_stop=last_run("stop_reason"), last_outcome=last_run("outcome"),
    ).filter(_done(filters), ~person_involved(), status=Conversation.OPEN, last_stop=agent.ANSWERED,
             last_outcome=RESOLVED)


def resolved_confirmed(conversations: QuerySet, filters: Filters) -> QuerySet:
    """Customer-confirmed resolutions (counted apart, also inside resolved by the agent): resolved by the agent,
    and the customer rated it 4 or 5 when the widget offered the rating after the agent's resolution."""
    # EXISTS looks up each resolved conversation's rating by its key; a join let the planner scan every rating
    # once per resolved conversation.
    return resolved_by_agent(conversations, filters).filter(Exists(Rating.objects.filter(
        conversation=OuterRef("pk"), occasion="resolved", score__gte=4)))


def _handover_runs() -> QuerySet:
    return Run.objects.filter(Run.HANDED_OVER)


def _expired_approval() -> Exists:
    """The run has an approval nobody decided in time (the partial index approval_run_expired answers it)."""
    return Exists(Approval.objects.filter(run=OuterRef("pk"), decision=Approval.EXPIRED))


def handed_over(conversations: QuerySet, filters: Filters) -> QuerySet:
    """Handed over: the new conversations the agent gave to a person at least once: a run stopped for a reason
    other than an answer or a take-over (escalated, a limit, an error), or said it handed over, or an approval
    on it expired. Counted once however many times; a later hand-back does not undo it."""
    # One EXISTS over the conversation's runs: two, OR-ed, made the planner hash every expired approval's run
    # (a scan of all runs) however few conversations the range has.
    return conversations.filter(Exists(Run.objects.filter(Run.HANDED_OVER | _expired_approval(),
                                                          conversation=OuterRef("pk"))))


def handover_reasons(conversations: QuerySet) -> list[tuple[str, int]]:
    """The hand-over reasons ranked: for each reason (a run's stop reason, `handed_to_person` when the run
    answered saying so, `approval_expired`) the number of conversations it handed over, most first; a
    conversation handed over twice for two reasons counts under both."""
    runs = (_handover_runs().filter(conversation__in=conversations.values("pk"))
            .values("stop_reason").annotate(n=Count("conversation", distinct=True)))
    counts: dict[str, int] = {}
    for row in runs:
        reason = row["stop_reason"] if row["stop_reason"] in HANDOVER_STOPS else agent.HANDED_TO_PERSON
        counts[reason] = counts.get(reason, 0) + row["n"]
    expired = conversations.filter(Exists(Run.objects.filter(_expired_approval(), conversation=OuterRef("pk"))))
    if n := expired.count():
        counts[APPROVAL_EXPIRED] = n
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def abandoned(conversations: QuerySet, filters: Filters) -> QuerySet:
    """Abandoned: the agent's last run asked the customer something (outcome `waiting_on_customer`), the
    customer never wrote again, and nothing happened for REPORTS_IDLE_HOURS; not closed, not with a person."""
    answered_later = Exists(Message.objects.filter(conversation=OuterRef("pk"), author=Message.CUSTOMER,
                                                   created_at__gt=OuterRef("last_finished")))
    return conversations.annotate(
        last_message_at=_last_message_at(), last_outcome=last_run("outcome"), last_finished=last_run("finished_at"),
    ).filter(~answered_later, status=Conversation.OPEN, closed_at__isnull=True, last_outcome=WAITING_ON_CUSTOMER,
             last_message_at__lt=filters.idle_before())
