"""An approval's deadline: its expiry (selectors_approvals.effective_expiry), and the two moments before it when
people are told it still waits: the reminder (APPROVAL_REMIND_AT of the time from request to expiry) and the
escalation to the support leads (APPROVAL_ESCALATE_AT). Only the arithmetic and what a card says of it live
here; the sweep that tells people is nudges.py."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings

from support.desk.selectors_approvals import effective_expiry
from support.models import Approval


@dataclass(frozen=True)
class Deadline:
    expires_at: datetime  # no decision is accepted after it (the expiry sweep then rejects it for the system)
    remind_at: datetime  # the assignee, else the team, is reminded once after it
    escalate_at: datetime  # the leads are told once after it


def deadline(approval: Approval) -> Deadline:
    """The approval's deadline as the settings read now: a timeout shortened since the request moves all three."""
    start, end = approval.requested_at, effective_expiry(approval)
    span = max(end - start, timedelta(0))  # an expiry before the request (a clock moved back) is no time at all
    return Deadline(expires_at=end, remind_at=start + span * settings.APPROVAL_REMIND_AT,
                    escalate_at=start + span * settings.APPROVAL_ESCALATE_AT)


def deadline_json(approval: Approval) -> dict:
    """What a card says of the time: when it expires, when people are (or were) told, and whether they were."""
    d = deadline(approval)
    return {"expires_at": _ts(d.expires_at), "remind_at": _ts(d.remind_at), "escalate_at": _ts(d.escalate_at),
            "reminded_at": _ts(approval.reminded_at), "escalated_at": _ts(approval.escalated_at)}


def _ts(value) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None
