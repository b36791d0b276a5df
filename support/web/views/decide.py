"""The page an e-mailed approval link opens (support/desk/approval_links.py): what the request is about, and a
button to confirm. Opening it decides nothing (mail scanners open links); the form's POST, with the CSRF
token, does, through the desk's decision service.

Who may use a link: the staff member it was sent to, signed in; anyone else is sent to log in (and comes back
here) or, signed in as someone else, told whose link it is. A link that is not ours, expired, used, or whose
approval is decided meanwhile shows a plain page saying so.
"""

from __future__ import annotations

from django.contrib.auth.views import redirect_to_login
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from support.desk import approval_links, elsewhere, permissions
from support.models import DecisionLink

from .console import console_page

NOTICES = {
    "invalid": ("This link does not work",
                "It may have been cut short when it was copied. Approvals waiting for a decision are on the "
                "console's Approvals page."),
    "expired": ("This link has expired",
                "The links in an approval e-mail work for a limited time. If the request still waits, decide it "
                "from the console's Approvals page."),
    "not_yours": ("This link is for someone else", ""),
    "used": ("This link was used already", ""),
    "decided": ("This request is decided already", ""),
    "forbidden": ("You may not decide this request", ""),
}


def _headers(response):
    # The path is the key: never passed to another site. Not "no-referrer": the browser would then post the
    # form with "Origin: null", which the CSRF check rightly refuses.
    response["Referrer-Policy"] = "same-origin"
    response["Cache-Control"] = "no-store"
    response["X-Robots-Tag"] = "noindex"
    return response


def _notice(request, key: str, status: int, text: str = "", conversation=None, summary: str = ""):
    heading, default = NOTICES[key]
    context = {"heading": heading, "text": text or default, "key": key, "summary": summary,
               "conversation": str(conversation.public_id) if conversation is not None else ""}
    user = request.user
    if user.is_authenticated and user.is_active and user.is_staff:
        return _headers(console_page(request, "decide_message.html", "decide", status=status, **context))
    return _headers(render(request, "console/decide_plain.html", context, status=status))


@require_http_methods(["GET", "HEAD", "POST"])
def decide(request, token):
    opened = approval_links.link_open(token)
    if opened.link is None:
        return _notice(request, "invalid", 404)
    if opened.problem == approval_links.EXPIRED:
        return _notice(request, "expired", 410)
    user = request.user
    if not (user.is_authenticated and user.is_active and user.is_staff):
        return redirect_to_login(request.get_full_path())
    link = opened.link
    approval = link.approval
    conversation = approval.run.conversation
    if user.pk != link.user_id:
        permissions.log_refusal(user, permissions.request_address(request),
                                f"{request.method} an approval link sent to user id {link.user_id}")
        owner = link.user.get_username()
        return _notice(request, "not_yours", 403, conversation=conversation, text=(
            f"It was sent to {owner}, and you are signed in as {user.get_username()}. Each person's links are their "
            f"own: sign in as {owner} to use it, or decide from the console."))
    if link.used_at is not None:
        return _notice(request, "used", 410, elsewhere.decided_words(approval), conversation, _summary(approval))
    if not approval.pending:
        return _notice(request, "decided", 409, elsewhere.decided_words(approval), conversation, _summary(approval))
    if request.method != "POST":
        return _confirm(request, link)
    return _submitted(request, link)


def _submitted(request, link: DecisionLink):
    reason = request.POST.get("reason", "")
    outcome = approval_links.link_decide(
        link=link, user=request.user, reason=reason, confirm_seen=request.POST.get("confirm_seen") == "yes",
        confirm_over_rejection=request.POST.get("confirm_over_rejection") == "yes",
        address=permissions.request_address(request))
    approval = link.approval
    conversation = approval.run.conversation
    if outcome.decided:
        return _headers(console_page(request, "decide_message.html", "decide", heading=outcome.code.capitalize(),
                                     text=outcome.text, key="done", conversation=str(conversation.public_id),
                                     summary=_summary(approval)))
    if outcome.code in (elsewhere.SECOND_LOOK, elsewhere.OVER_REJECTION, elsewhere.INVALID):  # the page again, saying what is missing
        return _confirm(request, link, error=outcome.text, reason=reason, status=400)
    summary = _summary(approval)
    if outcome.code == elsewhere.FORBIDDEN:
        return _notice(request, "forbidden", 403, outcome.text, conversation, summary)
    if outcome.code == approval_links.USED:  # a second request with the link, a moment after the first
        approval.refresh_from_db()
        return _notice(request, "used", 410, elsewhere.decided_words(approval), conversation, summary)
    return _notice(request, "decided", 409, outcome.text, conversation, summary)


def _summary(approval) -> str:
    return elsewhere.approval_essentials(approval).summary


def _confirm(request, link: DecisionLink, *, error: str = "", reason: str = "", status: int = 200):
    approval = link.approval
    essentials = elsewhere.approval_essentials(approval)
    until = min(essentials.expires_at, link.created_at + approval_links.link_max_age())
    return _headers(console_page(
        request, "decide.html", "decide", status=status, e=essentials, approve=link.kind == DecisionLink.APPROVE,
        error=error, reason=reason, until=elsewhere.moment(until), conversation=str(approval.run.conversation.public_id)))
