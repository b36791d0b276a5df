"""The approval figures: asked, and how each ended (approved as asked, changed, rejected, expired), with the
time people took to decide by decider and by channel.

An approval the policy let through (a refund under AUTO_APPROVE_REFUNDS_UP_TO: approved, decided by nobody) was
never asked of a person, so none of these count it; its refund counts as automatic (money.py).
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db.models import DurationField, ExpressionWrapper, F, Q, QuerySet

from support.models import Approval

from .stats import p50_p90

# The console's two ways (one card, several at once) are one channel here.
CHANNEL_OF = {Approval.CONSOLE: "console", Approval.BULK: "console", Approval.EMAIL: "email",
              Approval.SLACK: "slack"}
AUTOMATIC = Q(decision=Approval.APPROVED, decided_by__isnull=True)
BY_A_PERSON = Q(decided_by__isnull=False)


def approvals_asked(approvals: QuerySet) -> QuerySet:
    """Approvals asked: requests for a person's decision made in the range (the agent's gated calls and staff
    refunds that need a second person), whatever became of them, pending included."""
    return approvals.exclude(AUTOMATIC)


def approved_as_asked(approvals: QuerySet) -> QuerySet:
    """Approved as asked: a person approved, and what ran is what was asked."""
    return approvals.filter(pk__in=_approved(approvals, changed=False))


def approved_changed(approvals: QuerySet) -> QuerySet:
    """Changed: a person approved an edit (what ran differs from what was asked: another amount, say)."""
    return approvals.filter(pk__in=_approved(approvals, changed=True))


def rejected(approvals: QuerySet) -> QuerySet:
    """Rejected by a person."""
    return approvals.filter(decision=Approval.REJECTED)


def expired(approvals: QuerySet) -> QuerySet:
    """Expired: nobody decided before APPROVAL_TIMEOUT_SECONDS (the conversation went to a person)."""
    return approvals.filter(decision=Approval.EXPIRED)


def _approved(approvals: QuerySet, *, changed: bool) -> list[int]:
    """JSON is compared as values in Python (key order and number spelling differ between databases)."""
    rows = approvals.filter(BY_A_PERSON, decision=Approval.APPROVED).values_list(
        "pk", "requested_arguments", "executed_arguments")
    return [pk for pk, asked, ran in rows if (ran is not None and ran != asked) == changed]


def decision_times(approvals: QuerySet) -> dict:
    """Time to decision in seconds (asked to decided; a four-eyes request to its second decision), p50 and
    p90, over the approvals a person decided, by decider (their name) and by channel (console, slack, email;
    an older decision that named no channel is `unknown`). Expired ones are left out: nobody decided."""
    # The database subtracts: one duration a row reads faster than two datetimes converted to the time zone.
    rows = approvals.filter(BY_A_PERSON, decided_at__isnull=False).annotate(
        took=ExpressionWrapper(F("decided_at") - F("requested_at"), output_field=DurationField()),
    ).values_list("took", "decided_by_id", "decided_via")
    by_decider: dict[int, list[float]] = {}
    by_channel: dict[str, list[float]] = {}
    every = []
    for took, who, via in rows:
        seconds = max(took.total_seconds(), 0.0)
        every.append(seconds)
        by_decider.setdefault(who, []).append(seconds)
        by_channel.setdefault(CHANNEL_OF.get(via, "unknown"), []).append(seconds)
    names = {u.pk: u.get_username() for u in get_user_model().objects.filter(pk__in=by_decider)}
    return {"all": p50_p90(every),
            "by_decider": sorted(({"decider": names.get(k, "?"), **p50_p90(v)} for k, v in by_decider.items()),
                                 key=lambda r: r["decider"]),
            "by_channel": [{"channel": c, **p50_p90(by_channel[c])}
                           for c in ("console", "slack", "email", "unknown") if c in by_channel]}
