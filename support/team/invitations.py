"""Invitations to the staff: one e-mailed, signed, expiring, single-use link per invitation to set a name and a
password, sent through the desk's mail like the approval e-mails (Django's mail, EMAIL_BACKEND).

A link is the invitation's random public_id signed (TimestampSigner, SECRET_KEY) with a salt naming the row and
how many times it was sent, so a resend makes every earlier link useless; it expires STAFF_INVITATION_MAX_AGE
after it was sent. Accepting marks the row with one conditional UPDATE first, so of two uses one creates the
account and the other is told the link was used. Invitations are counted per inviter in Redis
(STAFF_INVITATIONS_PER_HOUR); with Redis away none is sent (mail costs, and a flood would be loud)."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core import signing
from django.core.exceptions import ValidationError
from django.core.mail import EmailMultiAlternatives
from django.core.validators import validate_email
from django.db import transaction
from django.template.loader import render_to_string
from django.utils import timezone

from support import profiles
from support.customers import cleaning
from support.customers.identity import parse_uuid
from support.customers.notify import desk_url
from support.customers.words import staff_name
from support.models import StaffInvitation, Team, TeamChange
from support.ops import limits

from .people import ADMIN, ROLES, Refused, apply_role, record, require_manager

SALT = "support.staff-invitation"
INVALID, EXPIRED, USED, CANCELLED = "invalid", "expired", "used", "cancelled"
PROBLEMS = {
    INVALID: "This invitation link is not valid. Ask the person who invited you to send it again.",
    EXPIRED: "This invitation link has expired. Ask the person who invited you to send it again.",
    USED: "This invitation was used already: the account exists. Sign in with the password you chose.",
    CANCELLED: "This invitation was cancelled. Ask the person who invited you if you should still join.",
}


def _signer(invitation: StaffInvitation) -> signing.TimestampSigner:
    return signing.TimestampSigner(salt=f"{SALT}:{invitation.pk}:{invitation.sends}")


def invitation_url(invitation: StaffInvitation) -> str:
    return desk_url(f"/console/join/{_signer(invitation).sign(str(invitation.public_id))}/")


def canonical_email(text) -> str:
    email = str(text or "").strip().lower()
    try:
        validate_email(email)
    except ValidationError:
        raise Refused(f"“{str(text or '')[:254]}” is not an e-mail address.", 400) from None
    return email


def _account_exists(email: str) -> bool:
    return get_user_model().objects.filter(email__iexact=email).exists() or \
        get_user_model().objects.filter(username__iexact=email).exists()


def _count_against(by) -> None:
    limit = limits.Limit(f"staff-invitations:by:{by.pk}", settings.STAFF_INVITATIONS_PER_HOUR, 3600)
    try:
        limits.hit(limit)
    except limits.Limited as over:
        raise Refused(f"You have sent {limit.count} invitations in the last hour, the most allowed: try again in "
                      f"{max(1, over.retry_after // 60)} minutes.", 429) from None
    except limits.Unavailable:
        raise Refused("Invitations cannot be counted just now, so none is sent: try again in a minute.", 503) \
            from None


def invitation_send(*, by, email, role: str, team: Team | None) -> StaffInvitation:
    """A new invitation, e-mailed now. Refused: no permission, a role an inviter may not give, an address that
    has an account or an open invitation, over the hourly count."""
    require_manager(by)
    email = canonical_email(email)
    if role not in ROLES:
        raise Refused("Choose a role: agent, lead or admin.", 400)
    if role == ADMIN and not by.is_superuser:
        raise Refused("Only an admin may invite an admin.", 403)
    if _account_exists(email):
        raise Refused(f"{email} already has an account: change that person's role or reactivate them below.")
    if StaffInvitation.objects.filter(email=email, accepted_at=None, cancelled_at=None).exists():
        raise Refused(f"{email} is invited already: resend or cancel that invitation below.")
    _count_against(by)
    with transaction.atomic():
        invitation = StaffInvitation.objects.create(email=email, role=role, team=team, invited_by=by,
                                                    sent_at=timezone.now())
        record(by=by, event=TeamChange.INVITED, invitation=invitation,
               after={"email": email, "role": role, "team": team.name if team else ""})
    _email(invitation)
    return invitation


def invitation_resend(*, by, invitation: StaffInvitation) -> None:
    """A new link (every earlier one stops working) and a new e-mail."""
    require_manager(by)
    if not invitation.open:
        raise Refused("That invitation was used or cancelled already.")
    _count_against(by)
    with transaction.atomic():
        StaffInvitation.objects.filter(pk=invitation.pk).update(sends=invitation.sends + 1, sent_at=timezone.now())
        invitation.refresh_from_db()
        record(by=by, event=TeamChange.RESENT, invitation=invitation, after={"email": invitation.email})
    _email(invitation)


def invitation_cancel(*, by, invitation: StaffInvitation) -> None:
    require_manager(by)
    if not StaffInvitation.objects.filter(pk=invitation.pk, accepted_at=None, cancelled_at=None).update(
            cancelled_at=timezone.now()):
        raise Refused("That invitation was used or cancelled already.")
    record(by=by, event=TeamChange.CANCELLED, invitation=invitation, before={"email": invitation.email})


def invitation_by_id(public_id) -> StaffInvitation:
    uuid = parse_uuid(str(public_id))
    invitation = StaffInvitation.objects.filter(public_id=uuid).first() if uuid else None
    if invitation is None:
        raise Refused("There is no such invitation.", 404)
    return invitation


def open_invitations() -> list[StaffInvitation]:
    return list(StaffInvitation.objects.filter(accepted_at=None, cancelled_at=None).select_related("team",
                                                                                                   "invited_by"))


@dataclass(frozen=True)
class Opened:
    invitation: StaffInvitation | None
    problem: str = ""  # INVALID, EXPIRED, USED, CANCELLED, or "" for a link that may be used

    @property
    def message(self) -> str:
        return PROBLEMS.get(self.problem, "")


def invitation_open(token) -> Opened:
    """The invitation a link's token stands for, checked: its row, its signature (this row, this sending) and
    its age; then whether it was used or cancelled. Every other failure reads the same: INVALID."""
    if not isinstance(token, str) or not 1 <= len(token) <= 200 or token.count(":") != 2:
        return Opened(None, INVALID)
    uuid = parse_uuid(token.split(":", 1)[0])
    invitation = StaffInvitation.objects.select_related("team").filter(public_id=uuid).first() if uuid else None
    if invitation is None:
        return Opened(None, INVALID)
    try:
        _signer(invitation).unsign(token, max_age=settings.STAFF_INVITATION_MAX_AGE)
    except signing.SignatureExpired:
        return Opened(invitation, EXPIRED)
    except signing.BadSignature:
        return Opened(None, INVALID)
    if invitation.accepted_at is not None:
        return Opened(invitation, USED)
    if invitation.cancelled_at is not None:
        return Opened(invitation, CANCELLED)
    return Opened(invitation)


def clean_name(text) -> str:
    name = cleaning.without_bidi_controls(str(text or "")).strip()
    if cleaning.is_blank(name) or len(name) > 150 or cleaning.first_forbidden(name):
        raise Refused("Write your name (up to 150 characters).", 400)
    return name


def invitation_accept(*, invitation: StaffInvitation, name, password: str, password_again: str):
    """The account, made from an open invitation: its e-mail as the login, the name and password chosen, the
    role and team the inviter gave. The row is marked used first (one conditional UPDATE)."""
    name = clean_name(name)
    if password != password_again:
        raise Refused("The two passwords differ: write the same password twice.", 400)
    user_model = get_user_model()
    try:
        validate_password(password, user_model(username=invitation.email, email=invitation.email, first_name=name))
    except ValidationError as error:
        raise Refused(" ".join(error.messages), 400) from None
    with transaction.atomic():
        if not StaffInvitation.objects.filter(pk=invitation.pk, accepted_at=None, cancelled_at=None).update(
                accepted_at=timezone.now()):
            raise Refused(PROBLEMS[USED])
        if _account_exists(invitation.email):
            raise Refused(PROBLEMS[USED])
        user = user_model(username=invitation.email, email=invitation.email, first_name=name, is_staff=True)
        user.set_password(password)
        user.save()
        apply_role(user, invitation.role)
        if invitation.team is not None:
            user.support_teams.add(invitation.team)
        StaffInvitation.objects.filter(pk=invitation.pk).update(accepted_user=user)
        record(by=user, event=TeamChange.JOINED, person=user, invitation=invitation,
               after={"role": invitation.role, "team": invitation.team.name if invitation.team else ""})
    return user


def _email(invitation: StaffInvitation) -> None:
    """The invitation's e-mail, with its current link; a failure is told to the inviter (Resend tries again)."""
    inviter = " ".join((staff_name(invitation.invited_by) if invitation.invited_by else "A colleague").split())
    context = {"inviter": inviter, "role": invitation.role, "team": invitation.team.name if invitation.team else "",
               "link": invitation_url(invitation), "days": max(1, settings.STAFF_INVITATION_MAX_AGE // 86400),
               "login": invitation.email, "shop": profiles.live().shop_name}
    message = EmailMultiAlternatives(
        subject=f"{inviter} invites you to the {context['shop']} support desk",
        body=render_to_string("support/email/staff_invitation.txt", context), to=[invitation.email],
        headers={"Auto-Submitted": "auto-generated"})
    message.attach_alternative(render_to_string("support/email/staff_invitation.html", context), "text/html")
    try:
        message.send()
    except Exception:
        raise Refused(f"The invitation to {invitation.email} is saved but the e-mail could not be sent: "
                      "try Resend in a minute.", 502) from None
