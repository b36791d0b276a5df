"""The staff console's pages: server-rendered shells; live data comes from the staff API and the staff socket.

Each page only names what the script needs (the page, the conversation id, who is looking) in data
attributes: the site's CSP allows no inline script, and nothing read from the database is rendered here.
"""

from django.contrib.admin.views.decorators import staff_member_required as _staff_member_required
from django.shortcuts import render

# Our login page (settings.LOGIN_URL), not the admin's, which staff_member_required uses by default.
staff_member_required = _staff_member_required(login_url="login")


def _page(request, template: str, page: str, **context):
    user = request.user
    return render(request, f"console/{template}", {
        "page": page,
        "staff_username": user.get_username(),
        "staff_name": user.get_short_name() or user.get_username(),
        **context,
    })


@staff_member_required
def index(request):
    """The conversation list, with the pending approvals beside it."""
    return _page(request, "index.html", "index")


@staff_member_required
def conversation(request, public_id):
    """One conversation: transcript, trace, run, approvals, take over / hand back."""
    return _page(request, "conversation.html", "conversation", conversation_id=str(public_id))


@staff_member_required
def approvals(request):
    """The approval queue on its own: pending, decided or all."""
    return _page(request, "approvals.html", "approvals")
