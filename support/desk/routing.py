"""Routing: a conversation handed to a person, or an approval request, goes into one online team member's queue
(routed_to, routed_at): the one with the fewest open conversations assigned or routed to them, and among equals
the one routed to longest ago (round-robin). Routing is lighter than assigning: the agent is not silenced and
anyone allowed may still take or decide it. With nobody online it stays unrouted and the whole team sees it as
before; a person coming online takes in what waits unrouted (route_waiting).

Teams (models.Team): the members of the teams that take hand-overs (takes_handovers) or approvals
(takes_approvals); with no such team, every active staff member is one team (for approvals, those who may
decide them). Presence is the console's socket (support/live/presence.py).

Concurrency: two hand-overs at once must not both count the same loads and pick the same person. Each
routing takes one lock held until its transaction commits (an advisory lock on PostgreSQL; SQLite lets one
writer at a time anyway), always last, after the run's and the conversation's rows (services.py's order).
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models import Count, Exists, Max, OuterRef, Q
from django.utils import timezone

from support.desk import permissions
from support.live import presence
from support.models import Approval, Conversation, Run, Team

log = logging.getLogger(__name__)

HANDOVERS, APPROVALS = "handovers", "approvals"
ROUTING_LOCK = 0x524F555445  # the advisory lock's key ("ROUTE")
WAITING_ROUTED_AT_ONCE = 200  # what a person coming online takes in, at most


def _lock() -> None:
    """Serialise routing decisions until the transaction commits: the next one counts what this one wrote."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [ROUTING_LOCK])


def team_members(kind: str):
    """The staff who may receive `kind` of work: the members of the teams that take it, else every active
    staff member (for approvals: those who may decide them)."""
    users = get_user_model().objects.filter(is_active=True, is_staff=True)
    flag = {HANDOVERS: "takes_handovers", APPROVALS: "takes_approvals"}[kind]
    teams = Team.objects.filter(**{flag: True})
    if teams.exists():
        return users.filter(support_teams__in=teams).distinct()
    return users


def open_counts(user_ids) -> dict[int, int]:
    """Each person's open work: conversations they have (not closed), conversations routed to them that still
    need a person and nobody has, and approval requests routed to them still waiting."""
    counts = dict.fromkeys(user_ids, 0)
    open_ = Conversation.objects.filter(closed_at__isnull=True)
    for user_id, n in (open_.filter(assignee_id__in=user_ids).order_by().values("assignee_id")
                       .annotate(n=Count("pk")).values_list("assignee_id", "n")):
        counts[user_id] += n
    for user_id, n in (open_.filter(routed_to_id__in=user_ids, assignee__isnull=True,
                                    status=Conversation.NEEDS_ATTENTION).order_by().values("routed_to_id")
                       .annotate(n=Count("pk")).values_list("routed_to_id", "n")):
        counts[user_id] += n
    for user_id, n in (Approval.objects.filter(routed_to_id__in=user_ids, decided_at__isnull=True).order_by()
                       .values("routed_to_id").annotate(n=Count("pk")).values_list("routed_to_id", "n")):
        counts[user_id] += n
    return counts


def _last_routed(user_ids) -> dict[int, datetime]:
    """When each person was last given something: the round-robin's turn (never given: first)."""
    last: dict[int, datetime] = {}
    for model in (Conversation, Approval):
        for user_id, at in (model.objects.filter(routed_to_id__in=user_ids).order_by().values("routed_to_id")
                            .annotate(at=Max("routed_at")).values_list("routed_to_id", "at")):
            if at is not None and (user_id not in last or at > last[user_id]):
                last[user_id] = at
    return last


def pick(candidates: list) -> object | None:
    """The online candidate with the fewest open conversations; among equals, the one routed to longest ago
    (then the oldest account). None when nobody is online."""
    online = presence.online_user_ids()
    people = [u for u in candidates if u.pk in online]
    if not people:
        return None
    ids = [u.pk for u in people]
    counts, last = open_counts(ids), _last_routed(ids)
    never = datetime.min.replace(tzinfo=timezone.get_current_timezone())
    return min(people, key=lambda u: (counts[u.pk], last.get(u.pk, never), u.pk))


def _approval_candidates(approval: Approval) -> list:
    """Who may decide this approval: approving a large refund needs a lead; the one who asked for a staff
    refund, or already gave its first approval, is not the second person."""
    tool = approval.tool_name
    arguments = approval.arguments_to_run()
    excluded = {approval.requested_by_id, approval.first_approved_by_id} - {None}
    return [u for u in team_members(APPROVALS).exclude(pk__in=excluded)
            if permissions.decision_refusal(u, tool=tool, approve=True, arguments=arguments) is None]


def conversation_route(*, conversation_id: int, keep: bool = False):
    """Route a conversation that needs a person and that nobody has; the person, or None (nobody online,
    or it does not need routing). keep: a conversation already routed stays with whom it is."""
    with transaction.atomic():
        _lock()
        row = Conversation.objects.filter(pk=conversation_id).values("status", "assignee_id", "routed_to_id").first()
        if row is None or row["status"] != Conversation.NEEDS_ATTENTION or row["assignee_id"]:
            return None
        if keep and row["routed_to_id"]:
            return None
        person = pick(list(team_members(HANDOVERS)))
        Conversation.objects.filter(pk=conversation_id).update(
            routed_to=person, routed_at=timezone.now() if person else None)
        if person is not None:
            log.info("conversation %s routed to user id %s", conversation_id, person.pk)
        return person


def approval_route(*, approval: Approval):
    """Route a pending approval request; the person, or None. The instance is updated too (its card is
    published after the commit)."""
    with transaction.atomic():
        _lock()
        person = pick(_approval_candidates(approval))
        if person is None:
            return None
        now = timezone.now()
        if Approval.objects.filter(pk=approval.pk, decided_at__isnull=True).update(routed_to=person, routed_at=now):
            approval.routed_to, approval.routed_at = person, now
            log.info("approval %s routed to user id %s", approval.public_id, person.pk)
        return person


def route_waiting() -> int:
    """Someone came online: what waits unrouted (no one was online when it came) is routed now, each in its
    own short transaction. How many were routed."""
    routed = 0
    waiting = (Conversation.objects.filter(status=Conversation.NEEDS_ATTENTION, assignee__isnull=True,
                                           routed_to__isnull=True, closed_at__isnull=True)
               .order_by("updated_at").values_list("pk", flat=True)[:WAITING_ROUTED_AT_ONCE])
    for pk in waiting:
        with transaction.atomic():
            # The conversation's row first, then the routing lock (the order every routing follows).
            if Conversation.objects.select_for_update().filter(pk=pk, routed_to__isnull=True).exists():
                routed += conversation_route(conversation_id=pk) is not None
    now = timezone.now()
    pending = (Approval.objects.filter(decided_at__isnull=True, routed_to__isnull=True, expires_at__gt=now)
               .order_by("requested_at")[:WAITING_ROUTED_AT_ONCE])
    for approval in pending:
        with transaction.atomic():
            if approval.run_id:  # the run's row first, as deciders take it (gate.py)
                list(Run.objects.select_for_update().filter(pk=approval.run_id).values_list("pk", flat=True))
            current = Approval.objects.select_for_update().filter(pk=approval.pk, decided_at__isnull=True,
                                                                  routed_to__isnull=True).first()
            if current is not None:  # read again under the lock: a first approval since changes who may approve
                routed += approval_route(approval=current) is not None
    return routed


def routed_filter(user) -> Q:
    """Conversations in `user`'s queue by routing: needing a person, nobody has it, routed to them; or with an
    approval request routed to them still waiting."""
    approvals = Approval.objects.filter(run__conversation=OuterRef("pk"), routed_to=user, decided_at__isnull=True)
    return Q(status=Conversation.NEEDS_ATTENTION, assignee__isnull=True, routed_to=user) | Q(Exists(approvals))
