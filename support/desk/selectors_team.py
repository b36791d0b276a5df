"""Reads for a lead's view of the team's queue (/console/team/, GET /api/staff/team-queue): per person, online or
not, their open conversations, the approval requests routed to them, and how long the oldest has waited; and
what waits unrouted (nobody was online when it came)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db.models import Count, Min
from django.utils import timezone

from support.desk import routing
from support.desk.selectors_inbox import person_json
from support.live import presence
from support.models import Approval, Conversation, Team


def _ts(value) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def _by_user(queryset, field: str, **aggregates) -> dict[int, dict]:
    return {row[field]: row for row in queryset.order_by().values(field).annotate(**aggregates)}


def team_queue() -> dict:
    """The team's queue by person, online first, then by name; in a fixed number of queries."""
    members = {*routing.team_members(routing.HANDOVERS).values_list("pk", flat=True),
               *routing.team_members(routing.APPROVALS).values_list("pk", flat=True)}
    people = list(get_user_model().objects.filter(pk__in=members).order_by("first_name", "username"))
    ids = [p.pk for p in people]
    online = presence.online_user_ids()
    open_ = Conversation.objects.filter(closed_at__isnull=True)
    assigned = _by_user(open_.filter(assignee_id__in=ids), "assignee_id", n=Count("pk"))
    waiting = open_.filter(status=Conversation.NEEDS_ATTENTION, assignee__isnull=True)
    routed = _by_user(waiting.filter(routed_to_id__in=ids), "routed_to_id", n=Count("pk"), oldest=Min("routed_at"))
    approvals = _by_user(Approval.objects.filter(decided_at__isnull=True, routed_to_id__in=ids), "routed_to_id",
                         n=Count("pk"), oldest=Min("routed_at"))
    teams: dict[int, list[str]] = {}
    for name, user_id in Team.objects.filter(members__in=ids).values_list("name", "members").order_by("name"):
        teams.setdefault(user_id, []).append(name)
    rows = []
    for person in people:
        pk = person.pk
        oldest = [r["oldest"] for r in (routed.get(pk), approvals.get(pk)) if r and r["oldest"]]
        rows.append({
            "person": person_json(person),
            "online": pk in online,
            "teams": teams.get(pk, []),
            "assigned": assigned.get(pk, {}).get("n", 0),  # conversations they have (the agent is silent)
            "routed_conversations": routed.get(pk, {}).get("n", 0),  # needing a person, in their queue
            "open_conversations": assigned.get(pk, {}).get("n", 0) + routed.get(pk, {}).get("n", 0),
            "pending_approvals": approvals.get(pk, {}).get("n", 0),
            "oldest_waiting_since": _ts(min(oldest)) if oldest else None,
        })
    rows.sort(key=lambda r: not r["online"])  # stable: by name within each
    unrouted_approvals = Approval.objects.filter(decided_at__isnull=True, routed_to__isnull=True,
                                                 expires_at__gt=timezone.now())
    return {
        "people": rows,
        "online": sum(r["online"] for r in rows),
        "unrouted": {"conversations": waiting.filter(routed_to__isnull=True).count(),
                     "pending_approvals": unrouted_approvals.count()},
        "teams_configured": Team.objects.exists(),
    }
