"""The team's queue by person, for leads (`support.view_team_queue`): a console page (/console/team/) and its
JSON (GET /api/staff/team-queue). Refusals are logged like every staff 403."""

from __future__ import annotations

from django.http import JsonResponse
from django.utils.dateparse import parse_datetime

from support.desk import permissions, selectors_team

from .common import ApiError, api
from .console import console_page, staff_member_required
from .staff import staff_required

REFUSAL = ("Your account may not see the team's queue: that needs the permission “see the team's queue” "
           f"({permissions.VIEW_TEAM_QUEUE}), which the {permissions.LEADS} group has.")


@staff_member_required
def page(request):
    if not request.user.has_perm(permissions.VIEW_TEAM_QUEUE):
        permissions.log_refusal(request.user, permissions.request_address(request),
                                f"{request.method} {request.path}: the team page needs {permissions.VIEW_TEAM_QUEUE}")
        return console_page(request, "team.html", "team", status=403, refused=REFUSAL)
    queue = selectors_team.team_queue()
    for row in queue["people"]:  # the template shows the time; the JSON keeps the text
        row["oldest_waiting_at"] = parse_datetime(row["oldest_waiting_since"]) if row["oldest_waiting_since"] else None
    return console_page(request, "team.html", "team", queue=queue)


@api("GET")
@staff_required
def team_queue(request):
    if not request.user.has_perm(permissions.VIEW_TEAM_QUEUE):
        raise ApiError(403, REFUSAL)
    return JsonResponse(selectors_team.team_queue())
