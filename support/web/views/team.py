"""The console's Team page (/console/team/): the team's queue by person for `support.view_team_queue` (and its
JSON, GET /api/staff/team-queue), and the people themselves for `support.manage_team`: invitations, roles,
teams, deactivation (support/team/). Each POST calls one service and renders the page with its outcome.
Refusals are logged like every staff 403."""

from __future__ import annotations

from django.http import JsonResponse
from django.utils.dateparse import parse_datetime
from django.views.decorators.http import require_POST

from support.customers.words import staff_name
from support.desk import permissions, selectors_team
from support.models import Team
from support.team import invitations, people

from .common import ApiError, api
from .console import console_page, staff_member_required
from .staff import staff_required

REFUSAL = ("Your account may not see the team's queue: that needs the permission “see the team's queue” "
           f"({permissions.VIEW_TEAM_QUEUE}), which the {permissions.LEADS} group has.")


def _refuse(request, reason: str) -> None:
    permissions.log_refusal(request.user, permissions.request_address(request), f"{request.method} {request.path}: "
                            + reason)


def _page(request, status: int = 200, **outcome):
    user, context = request.user, {}
    if user.has_perm(permissions.VIEW_TEAM_QUEUE):
        queue = selectors_team.team_queue()
        for row in queue["people"]:  # the template shows the time; the JSON keeps the text
            row["oldest_waiting_at"] = parse_datetime(row["oldest_waiting_since"]) if row["oldest_waiting_since"] else None
        context["queue"] = queue
    if user.has_perm(permissions.MANAGE_TEAM):
        context.update(people=people.people(user), invitations=invitations.open_invitations(),
                       teams=list(Team.objects.all()),
                       roles=people.ROLES if user.is_superuser else people.ROLES[:2])
    return console_page(request, "team.html", "team", status=status, **context, **outcome)


@staff_member_required
def page(request):
    if not (request.user.has_perm(permissions.VIEW_TEAM_QUEUE) or request.user.has_perm(permissions.MANAGE_TEAM)):
        _refuse(request, f"the team page needs {permissions.VIEW_TEAM_QUEUE} or {permissions.MANAGE_TEAM}")
        return console_page(request, "team.html", "team", status=403, refused=REFUSAL)
    return _page(request)


def _team(request):
    name = request.POST.get("team") or ""
    return Team.objects.filter(name=name).first() if name else None


def _invite(request):
    invitation = invitations.invitation_send(by=request.user, email=request.POST.get("email"),
                                             role=request.POST.get("role", ""), team=_team(request))
    return f"Invitation sent to {invitation.email}."


def _invitation_change(action):
    def change(request):
        invitation = invitations.invitation_by_id(request.POST.get("invitation"))
        action(by=request.user, invitation=invitation)
        return f"{'Sent again' if action is invitations.invitation_resend else 'Cancelled'}: {invitation.email}."
    return change


def _person_change(action, done: str):
    def change(request):
        person = people.person_by_username(request.POST.get("username"))
        if action is people.person_role_set:
            action(by=request.user, person=person, role=request.POST.get("role", ""))
        elif action is people.person_team_set:
            action(by=request.user, person=person, team=_team(request))
        else:
            action(by=request.user, person=person)
        return done.format(name=staff_name(person))
    return change


ACTIONS = {
    "invite": _invite,
    "resend": _invitation_change(invitations.invitation_resend),
    "cancel": _invitation_change(invitations.invitation_cancel),
    "role": _person_change(people.person_role_set, "{name}'s role is saved."),
    "team": _person_change(people.person_team_set, "{name}'s team is saved."),
    "deactivate": _person_change(people.person_deactivate, "{name} is deactivated: signed out everywhere."),
    "reactivate": _person_change(people.person_reactivate, "{name} may sign in again."),
}


@require_POST
@staff_member_required
def change(request, action: str):
    """One change to the team (ACTIONS), as the signed-in person; the page again with what came of it."""
    if action not in ACTIONS:
        return _page(request, status=404, problem="There is no such change.")
    try:
        done = ACTIONS[action](request)
    except people.Refused as refusal:
        if refusal.status == 403:
            _refuse(request, refusal.message)
        return _page(request, status=refusal.status, problem=refusal.message)
    return _page(request, notice=done)


@api("GET")
@staff_required
def team_queue(request):
    if not request.user.has_perm(permissions.VIEW_TEAM_QUEUE):
        raise ApiError(403, REFUSAL)
    return JsonResponse(selectors_team.team_queue())
