"""The page a staff invitation's link opens (/console/join/<token>/): GET shows the form (or, plainly, why the
link no longer works), POST makes the account (support/team/invitations.py). No sign-in: the link is the key."""

from __future__ import annotations

from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from support.team import invitations, people


@never_cache
@require_http_methods(["GET", "POST"])
def join(request, token: str):
    opened = invitations.invitation_open(token)
    if opened.problem:
        return render(request, "console/join.html", {"problem": opened.message, "code": opened.problem},
                      status=410 if opened.problem in (invitations.USED, invitations.EXPIRED) else 404)
    invitation = opened.invitation
    context = {"invitation": invitation, "name": ""}
    if request.method == "POST":
        context["name"] = request.POST.get("name", "")[:150]
        try:
            user = invitations.invitation_accept(invitation=invitation, name=request.POST.get("name"),
                                                 password=request.POST.get("password", ""),
                                                 password_again=request.POST.get("password_again", ""))
        except people.Refused as refusal:
            return render(request, "console/join.html", {**context, "error": refusal.message}, status=refusal.status)
        return render(request, "console/join.html", {"joined": user.get_username()})
    return render(request, "console/join.html", context)
