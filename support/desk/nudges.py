"""Approvals that do not wait silently: the sweep (support.tasks.nudge_approvals, on the beat every
APPROVAL_NUDGE_SWEEP_SECONDS) reminds people of a pending approval once past APPROVAL_REMIND_AT of its time,
and tells the support leads once past APPROVAL_ESCALATE_AT (deadlines.py has the arithmetic). The expiry
itself stays gate.approvals_expire's.

Who is reminded: the conversation's assignee when it has one, else the team (the staff who may decide
approvals). Who is told at the escalation: the leads (permissions.leads). The colleague who asked for a refund
of their own is never among them: they may not approve it. Each is told in every open console (the live event
approval.nudged; the consoles of the people named raise an alert) and, when they opted in to approval e-mails,
by e-mail.

Each nudge happens once, whoever sweeps: it is claimed with a conditional UPDATE (reminded_at, escalated_at
still empty, the approval still pending and in time) before anyone is told. A sweep that dies between the
claim and the e-mail loses that e-mail: told at most once, never twice.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.db.models import Q
from django.template.loader import render_to_string
from django.utils import timezone

from support.customers.notify import desk_url
from support.desk import deadlines, permissions, selectors_approvals, serializers
from support.desk.elsewhere import moment
from support.models import Approval, ApprovalEmailOptIn

log = logging.getLogger(__name__)

REMINDER, ESCALATION = "reminder", "escalation"
FIELDS = {REMINDER: "reminded_at", ESCALATION: "escalated_at"}
SUBJECT_CHARS = 120


def approvals_nudge(*, now=None) -> dict[str, list[str]]:
    """Remind and escalate the pending approvals whose time has come; the public ids of each, for the log."""
    now = now or timezone.now()
    done: dict[str, list[str]] = {REMINDER: [], ESCALATION: []}
    waiting = (Approval.objects.filter(decided_at__isnull=True, expires_at__gt=now)
               .filter(Q(reminded_at__isnull=True) | Q(escalated_at__isnull=True))
               .select_related("tool_call", "run__conversation__assignee", "staff_action__conversation__assignee",
                               "requested_by"))
    for approval in waiting:
        d = deadlines.deadline(approval)
        if d.expires_at <= now:
            continue  # its time is up: the expiry sweep rejects it; nobody is asked any more
        for nudge, due in ((REMINDER, d.remind_at), (ESCALATION, d.escalate_at)):
            if getattr(approval, FIELDS[nudge]) is None and now >= due and _claim(approval, nudge, now):
                _tell(approval, nudge)
                done[nudge].append(str(approval.public_id))
    return done


def _claim(approval: Approval, nudge: str, now) -> bool:
    """Ours to send, once: of two sweeps at once, one writes the time; a decision or expiry first, neither."""
    field = FIELDS[nudge]
    claimed = Approval.objects.filter(pk=approval.pk, decided_at__isnull=True, expires_at__gt=now,
                                      **{f"{field}__isnull": True}).update(**{field: now})
    if claimed:
        setattr(approval, field, now)
    return bool(claimed)


def recipients(approval: Approval, nudge: str) -> list:
    """Reminder: the assignee, else the team; escalation: the leads. Never the colleague who asked."""
    asker = approval.requested_by_id
    if nudge == ESCALATION:
        return [u for u in permissions.leads() if u.pk != asker]
    assignee = conversation_of(approval).assignee
    if assignee is not None and assignee.is_active and assignee.is_staff and assignee.pk != asker:
        return [assignee]
    return [u for u in permissions.deciders() if u.pk != asker]


def conversation_of(approval: Approval):
    return approval.staff_action.conversation if approval.staff_action_id else approval.run.conversation


def _tell(approval: Approval, nudge: str) -> None:
    """Every console (the people named are alerted), then the e-mails. Never raises: the nudge is on record,
    and a layer or mail server that is down loses only this telling of it."""
    to = recipients(approval, nudge)
    try:
        serializers.publish_approval_nudged(approval, nudge=nudge, to=to)
    except Exception:
        log.warning("approval %s: %s not published", approval.public_id, nudge, exc_info=True)
    if not settings.APPROVAL_EMAILS:
        return
    opted = set(ApprovalEmailOptIn.objects.filter(user__in=to).values_list("user_id", flat=True))
    for user in to:
        if user.pk not in opted or not user.email:
            continue
        try:
            nudge_email(approval, nudge, user).send()
        except Exception:
            log.exception("approval %s: %s e-mail not sent to user id %s", approval.public_id, nudge, user.pk)
    log.info("approval %s: %s to %d staff", approval.public_id, nudge, len(to))


def nudge_email(approval: Approval, nudge: str, user) -> EmailMultiAlternatives:
    context = (selectors_approvals.staff_refund_context(approval) if approval.staff_action_id
               else selectors_approvals.approval_context(approval))
    summary = " ".join(str(context["summary"]).split())
    if len(summary) > SUBJECT_CHARS:
        summary = summary[:SUBJECT_CHARS - 1] + "…"
    conversation = conversation_of(approval)
    customer = conversation.customer
    values = {
        "name": user.get_short_name() or user.get_username(), "summary": summary, "escalation": nudge == ESCALATION,
        "assigned": nudge == REMINDER and conversation.assignee_id == user.pk,
        "customer": f"{customer.name} <{customer.email}>" if customer.name else customer.email,
        "left": time_left(deadlines.deadline(approval).expires_at), "until": moment(deadlines.deadline(approval).expires_at),
        "requested": moment(approval.requested_at),
        "console_url": desk_url(f"/console/conversations/{conversation.public_id}/"),
    }
    subject = f"{'Escalated' if nudge == ESCALATION else 'Reminder'}: approval waiting, {values['left']} left: {summary}"
    message = EmailMultiAlternatives(
        subject=subject, body=render_to_string("support/email/approval_nudge.txt", values), to=[user.email],
        headers={"Auto-Submitted": "auto-generated"})
    message.attach_alternative(render_to_string("support/email/approval_nudge.html", values), "text/html")
    return message


def time_left(expires_at, now=None) -> str:
    """"3 h", "1 h 20 min", "12 min", "less than a minute": what a person reads, as the console says it."""
    seconds = (expires_at - (now or timezone.now())).total_seconds()
    minutes = int(seconds // 60)
    if minutes < 1:
        return "less than a minute"
    if minutes < 60:
        return f"{minutes} min"
    if minutes < 120:
        return f"1 h {minutes - 60} min" if minutes > 60 else "1 h"
    return f"{minutes // 60} h"
