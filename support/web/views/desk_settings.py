"""The console's Settings page (/console/settings/): the desk's switches, read only, for
`support.view_desk_settings` (support/team/desk_settings.py)."""

from __future__ import annotations

from support.desk import permissions
from support.team.desk_settings import desk_settings

from .console import console_page, staff_member_required

REFUSAL = ("Your account may not see the desk's settings: that needs the permission “see the desk's settings” "
           f"({permissions.VIEW_DESK_SETTINGS}), which the {permissions.LEADS} group has.")


@staff_member_required
def page(request):
    if not request.user.has_perm(permissions.VIEW_DESK_SETTINGS):
        permissions.log_refusal(request.user, permissions.request_address(request),
                                f"{request.method} {request.path}: the settings page needs "
                                f"{permissions.VIEW_DESK_SETTINGS}")
        return console_page(request, "settings.html", "settings", status=403, refused=REFUSAL)
    return console_page(request, "settings.html", "settings", groups=desk_settings())
