"""The staff console's pages: server-rendered shells; live data comes from the staff API and the staff socket.

Each page only names what the script needs (the page, the conversation id, who is looking) in data
attributes: the site's CSP allows no inline script, and nothing read from the database is rendered here.
"""

import functools

from django.contrib.admin.views.decorators import staff_member_required as _staff_member_required
from django.shortcuts import redirect, render

from support.desk import permissions, selectors
from support.profiles import setup

# Our login page (settings.LOGIN_URL), not the admin's, which staff_member_required uses by default.
_to_login = _staff_member_required(login_url="login")


def staff_member_required(view):
    """Staff only; anyone else goes to the login page. A signed-in account that is not staff (or no longer
    active) is worth a line on support.security: an anonymous visitor is merely not logged in yet."""
    guarded = _to_login(view)

    @functools.wraps(view)
    def wrapper(request, *args, **kwargs):
        user = request.user
        if user.is_authenticated and not (user.is_active and user.is_staff):
            permissions.log_refusal(user, permissions.request_address(request),
                                    f"{request.method} {request.path}: the console needs an active staff account")
        return guarded(request, *args, **kwargs)

    return wrapper


def console_page(request, template: str, page: str, status: int = 200, **context):
    """A console page (templates/console/<template>) with who is looking; `page` names it for the nav."""
    user = request.user
    return render(request, f"console/{template}", {
        "page": page,
        "staff_username": user.get_username(),
        "staff_name": user.get_short_name() or user.get_username(),
        **context,
    }, status=status)


@staff_member_required
def index(request):
    """The conversation list, with the pending approvals beside it; on a remote shop before its first
    published profile, the setup checklist instead (docs/connect-a-shop.md)."""
    if setup.needed():
        return redirect("console:setup")
    return console_page(request, "index.html", "index")


@staff_member_required
def conversation(request, public_id):
    """One conversation: transcript, trace, run, approvals, take over / hand back. An unknown id is a 404
    page in the console's own look, with the way back to the inbox."""
    if selectors.conversation_by_public_id(public_id) is None:
        return console_page(request, "not_found.html", "not_found", status=404)
    return console_page(request, "conversation.html", "conversation", conversation_id=str(public_id))


@staff_member_required
def approvals(request):
    """The approval queue on its own: pending, decided or all."""
    return console_page(request, "approvals.html", "approvals")
