"""Nudges under races: two sweeps at once, and a sweep against a staff decision, tried many times.

Each nudge (support/desk/nudges.py) is claimed with a conditional UPDATE before anyone is told: of two sweeps
one reminds and one escalates, each once; a decision that commits first leaves nothing to nudge. On SQLite a
write transaction takes the whole database, so there is no race to lose: the file runs on PostgreSQL only.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from support.desk import gate, nudges
from support.models import Approval
from tests.desk_factories import make_user, pending_refund_approval, start_conversation
from tests.test_races import at_once

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql",
                       reason="SQLite runs write transactions one at a time (BEGIN IMMEDIATE): no race to lose"),
]

TRIALS = 15
DAY = timedelta(hours=24)


@pytest.fixture
def people(db, settings):
    settings.APPROVAL_TIMEOUT_SECONDS = DAY.total_seconds()
    settings.APPROVAL_EMAILS = False
    return {"sam": make_user("sam", staff=True), "lee": make_user("lee", staff=True, group="leads")}


@pytest.fixture
def told(monkeypatch):
    """(approval public id, nudge) for every approval.nudged published, from any thread."""
    sent, lock = [], threading.Lock()

    def record(approval, *, nudge, to):
        with lock:
            sent.append((str(approval.public_id), nudge))

    monkeypatch.setattr(nudges.serializers, "publish_approval_nudged", record)
    return sent


def waiting_since(customer, fraction: float) -> Approval:
    approval = pending_refund_approval(start_conversation(customer))
    requested = timezone.now() - DAY * fraction
    Approval.objects.filter(pk=approval.pk).update(requested_at=requested, expires_at=requested + DAY)
    return Approval.objects.select_related("tool_call", "run").get(pk=approval.pk)


def test_two_sweeps_at_once_remind_and_escalate_each_approval_once(demo, people, told):
    for _ in range(TRIALS):
        told.clear()
        approvals = [waiting_since(c, 0.9) for c in (demo.maya, demo.tom, demo.ines)]
        outcomes = at_once(nudges.approvals_nudge, nudges.approvals_nudge)
        assert not any(isinstance(o, Exception) for o in outcomes), outcomes
        expected = sorted((str(a.public_id), n) for a in approvals for n in (nudges.REMINDER, nudges.ESCALATION))
        assert sorted(told) == expected  # each told once, whichever sweep did it
        for nudge in (nudges.REMINDER, nudges.ESCALATION):  # and each claimed by exactly one of the two
            assert sorted(i for o in outcomes for i in o[nudge]) == sorted(str(a.public_id) for a in approvals)
        for approval in Approval.objects.filter(pk__in=[a.pk for a in approvals]):
            assert approval.reminded_at is not None and approval.escalated_at is not None
        Approval.objects.filter(pk__in=[a.pk for a in approvals]).update(decided_at=timezone.now(),
                                                                          decision=Approval.EXPIRED)


def test_a_sweep_and_a_decision_at_once_never_nudge_a_decided_approval(demo, people, told, queued):
    for _ in range(TRIALS):
        told.clear()
        approval = waiting_since(demo.maya, 0.6)
        outcomes = at_once(nudges.approvals_nudge,
                           lambda: gate.approval_decide(approval=approval, user=people["sam"], approve=False,
                                                        reason="not this time"))
        assert not any(isinstance(o, Exception) for o in outcomes), outcomes
        fresh = Approval.objects.get(pk=approval.pk)
        assert fresh.decision == Approval.REJECTED
        # Told exactly when the reminder was claimed, and claimed only while it still waited.
        assert (told == [(str(approval.public_id), nudges.REMINDER)]) == (fresh.reminded_at is not None)
    assert nudges.approvals_nudge() == {"reminder": [], "escalation": []}  # nothing decided is nudged later
