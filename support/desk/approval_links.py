"""Approval requests e-mailed to staff, and the links they carry: one per verdict and person, each opening a
page to confirm on (support/web/views/decide.py), never deciding by being opened (mail scanners open links).

A link is a DecisionLink row and a token: the row's random public_id, signed (TimestampSigner, SECRET_KEY)
with a salt naming the approval, the staff member and the verdict, so a token moved to another row, person
or verdict fails, and it expires after APPROVAL_LINK_MAX_AGE. Nothing else is in the URL. The request that
decides marks the row used with a conditional UPDATE first: a replayed link finds it used and decides
nothing. When nothing was decided (a reason missing, a second look needed), the mark is taken back.

Who is e-mailed: active staff who opted in (ApprovalEmailOptIn, set in /admin/), have an e-mail address and
may decide approvals; one who may not approve this one (a large refund, as it would run) gets the reject link
only. The e-mail, like the page a link opens, says who approved first and as what (four eyes) and carries the
card's warning when text a third party wrote gives the agent instructions.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.core import signing
from django.core.mail import EmailMultiAlternatives
from django.db import IntegrityError, transaction
from django.template.loader import render_to_string
from django.utils import timezone

from support.customers.identity import parse_uuid
from support.customers.notify import desk_url
from support.desk import elsewhere, permissions
from support.models import Approval, ApprovalEmailOptIn, DecisionLink

log = logging.getLogger(__name__)

SALT = "support.approval-decision-link"
INVALID, EXPIRED = "invalid", "expired"
USED = "used"  # an Outcome.code besides elsewhere's: the link had decided already
SUBJECT_CHARS = 120


def link_max_age() -> timedelta:
    return timedelta(seconds=settings.APPROVAL_LINK_MAX_AGE)


def _signer(link: DecisionLink) -> signing.TimestampSigner:
    return signing.TimestampSigner(salt=f"{SALT}:{link.approval_id}:{link.user_id}:{link.kind}")


def link_token(link: DecisionLink) -> str:
    return _signer(link).sign(str(link.public_id))


def link_url(link: DecisionLink) -> str:
    return desk_url(f"/console/decide/{link_token(link)}/")


@dataclass(frozen=True)
class Opened:
    link: DecisionLink | None  # None when the token is not one of ours
    problem: str = ""  # INVALID, EXPIRED, or "" for a link that may be used (unless used_at says it was)


def link_open(token) -> Opened:
    """The link a token stands for, checked: its row, its signature (salted with the row's approval, person
    and verdict) and its age. Every other failure reads the same: INVALID."""
    if not isinstance(token, str) or not 1 <= len(token) <= 200 or token.count(":") != 2:
        return Opened(None, INVALID)
    public_id = parse_uuid(token.split(":", 1)[0])
    link = DecisionLink.objects.select_related("approval__tool_call", "approval__run__conversation__customer",
                                               "approval__decided_by", "user").filter(public_id=public_id).first() \
        if public_id else None
    if link is None:
        return Opened(None, INVALID)
    try:
        _signer(link).unsign(token, max_age=settings.APPROVAL_LINK_MAX_AGE)
    except signing.SignatureExpired:
        return Opened(link, EXPIRED)
    except signing.BadSignature:
        return Opened(None, INVALID)
    return Opened(link)


def link_decide(*, link: DecisionLink, user, reason: str = "", confirm_seen: bool = False,
                confirm_over_rejection: bool = False, address: str = "") -> elsewhere.Outcome:
    """The link's verdict, as `user` (the caller checked it is the link's person). The link is marked used
    first, so of two requests with it one decides; the other is told it was used."""
    now = timezone.now()
    if not DecisionLink.objects.filter(pk=link.pk, used_at__isnull=True).update(used_at=now):
        return elsewhere.Outcome(False, USED, "This link was used already.")
    outcome = elsewhere.approval_decide_from(
        approval=link.approval, user=user, approve=link.kind == DecisionLink.APPROVE, channel=Approval.EMAIL,
        reason=reason, confirm_seen=confirm_seen, confirm_over_rejection=confirm_over_rejection, address=address)
    if outcome.code in (elsewhere.SECOND_LOOK, elsewhere.OVER_REJECTION, elsewhere.INVALID, elsewhere.FORBIDDEN):
        # Nothing was decided and the page asks again: the link may be used for the next try.
        DecisionLink.objects.filter(pk=link.pk, used_at=now).update(used_at=None)
    return outcome


# -- the e-mail ------------------------------------------------------------------------------------------

def recipients() -> list:
    """Active staff with an e-mail address who opted in and may decide approvals."""
    opted = ApprovalEmailOptIn.objects.filter(user__is_active=True, user__is_staff=True).exclude(user__email="")
    return [o.user for o in opted.select_related("user").order_by("user_id")
            if o.user.has_perm(permissions.DECIDE_APPROVAL)]


def approval_request_emails_send(approval_id: int) -> list[str]:
    """One e-mail per recipient for a pending approval, each with that person's links; the addresses sent to.
    A person e-mailed for it already is not e-mailed again (their links exist), so a task run twice sends once."""
    approval = Approval.objects.select_related("tool_call", "run__conversation__customer").filter(
        pk=approval_id).first()
    if approval is None or not approval.pending or not settings.APPROVAL_EMAILS:
        return []
    essentials = elsewhere.approval_essentials(approval)
    sent = []
    for user in recipients():
        links = _claim_links(approval, user)
        if links is None:
            continue
        try:
            _email(user, links, essentials).send()
        except Exception:  # one address failing never stops the others; its links go, so a retry sends them
            DecisionLink.objects.filter(pk__in=[link.pk for link in links.values()]).delete()
            log.exception("approval request e-mail for approval %s not sent to user id %s", approval.public_id, user.pk)
            continue
        sent.append(user.email)
    log.info("approval %s e-mailed to %d staff", approval.public_id, len(sent))
    return sent


def _claim_links(approval: Approval, user) -> dict[str, DecisionLink] | None:
    """The person's links, made now; None when they exist already (this person was e-mailed for it)."""
    may_approve = permissions.decision_refusal(user, tool=approval.tool_call.name, approve=True,
                                               arguments=approval.arguments_to_run()) is None
    kinds = [DecisionLink.APPROVE, DecisionLink.REJECT] if may_approve else [DecisionLink.REJECT]
    try:
        with transaction.atomic():
            return {kind: DecisionLink.objects.create(approval=approval, user=user, kind=kind) for kind in kinds}
    except IntegrityError:
        return None


def _email(user, links: dict[str, DecisionLink], essentials: elsewhere.Essentials) -> EmailMultiAlternatives:
    summary = " ".join(essentials.summary.split())  # one line: it goes into the subject
    if len(summary) > SUBJECT_CHARS:
        summary = summary[:SUBJECT_CHARS - 1] + "…"
    context = {
        "name": user.get_short_name() or user.get_username(), "username": user.get_username(), "e": essentials,
        "approve": link_url(links[DecisionLink.APPROVE]) if DecisionLink.APPROVE in links else "",
        "reject": link_url(links[DecisionLink.REJECT]),
        "cannot_approve": f"Only a support lead may approve a refund above {permissions.large_refund_threshold()} EUR: "
                          "you may reject it, or lower the amount in the console.",
        "until": elsewhere.moment(min(essentials.expires_at, timezone.now() + link_max_age())),
    }
    message = EmailMultiAlternatives(
        subject=f"Approval needed: {summary}", body=render_to_string("support/email/approval_request.txt", context),
        to=[user.email], headers={"Auto-Submitted": "auto-generated"})
    message.attach_alternative(render_to_string("support/email/approval_request.html", context), "text/html")
    return message
