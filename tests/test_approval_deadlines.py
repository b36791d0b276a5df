"""Approvals that do not wait silently: each pending approval's deadline is its expiry; past APPROVAL_REMIND_AT
of its time the conversation's assignee (else the team) is reminded once, past APPROVAL_ESCALATE_AT the support
leads are told once; a decided or expired approval is never nudged. The inbox sorts by the time left.

Who is who: Sam and Kim are Support agents (they may decide approvals), Lee is a Support lead, Ola is staff
who may only read. Sam, Lee and Ola opted in to approval e-mails; Kim did not.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from email.header import decode_header, make_header
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import Client
from django.utils import timezone

from support import tasks
from support.desk import deadlines, gate, nudges, services
from support.models import Approval, ApprovalEmailOptIn, Conversation, Message
from tests.desk_factories import (
    make_user,
    pending_refund_approval,
    queued,  # noqa: F401  (fixture)
    record_events,
    start_conversation,
)
from tests.smtp_fixture import smtp_inbox  # noqa: F401  (fixture)
from tests.test_deploy import settings_with

pytestmark = pytest.mark.django_db(transaction=True)

DESK = "https://desk.example"
DAY = timedelta(hours=24)


@pytest.fixture
def staff(db, settings):
    settings.DESK_PUBLIC_URL = DESK
    settings.APPROVAL_TIMEOUT_SECONDS = DAY.total_seconds()
    people = {"sam": make_user("sam", staff=True, first_name="Sam"), "kim": make_user("kim", staff=True),
              "lee": make_user("lee", staff=True, group="leads", first_name="Lee"),
              "ola": make_user("ola", staff=True, group=None)}
    for name, user in people.items():
        user.email = f"{name}@sundry.example"
        user.save()
    for name in ("sam", "lee", "ola"):
        ApprovalEmailOptIn.objects.create(user=people[name])
    return people


@pytest.fixture
def events(monkeypatch, queued):
    return record_events(monkeypatch)  # after `queued`, which records events of its own


@pytest.fixture
def approval(demo, staff):
    return pending_refund_approval(start_conversation(demo.maya))


def aged(approval: Approval, fraction: float) -> Approval:
    """As if asked `fraction` of its 24 hours ago."""
    requested = timezone.now() - DAY * fraction
    Approval.objects.filter(pk=approval.pk).update(requested_at=requested, expires_at=requested + DAY)
    return Approval.objects.get(pk=approval.pk)


def nudged(events) -> list[dict]:
    return [event for _, event in events if event["type"] == "approval.nudged"]


def subject_of(message) -> str:
    return str(make_header(decode_header(message["Subject"])))


def usernames(event) -> list[str]:
    return sorted(p["username"] for p in event["to"])


# -- the settings ------------------------------------------------------------------------------------------------

def test_the_settings_default_to_half_and_four_fifths_of_the_time_swept_every_minute(monkeypatch, tmp_path):
    values = settings_with(monkeypatch, tmp_path)
    assert (values["APPROVAL_REMIND_AT"], values["APPROVAL_ESCALATE_AT"]) == (0.5, 0.8)
    assert values["APPROVAL_NUDGE_SWEEP_SECONDS"] == 60.0
    assert values["CELERY_BEAT_SCHEDULE"]["approval-nudges"] == {"task": "support.tasks.nudge_approvals",
                                                                 "schedule": 60.0}


def test_the_settings_are_read_from_the_environment(monkeypatch, tmp_path):
    values = settings_with(monkeypatch, tmp_path, APPROVAL_REMIND_AT="0.25", APPROVAL_ESCALATE_AT="0.9",
                           APPROVAL_NUDGE_SWEEP_SECONDS="30")
    assert (values["APPROVAL_REMIND_AT"], values["APPROVAL_ESCALATE_AT"]) == (0.25, 0.9)
    assert values["CELERY_BEAT_SCHEDULE"]["approval-nudges"]["schedule"] == 30.0


@pytest.mark.parametrize("env", [{"APPROVAL_REMIND_AT": "0.9", "APPROVAL_ESCALATE_AT": "0.5"},
                                 {"APPROVAL_ESCALATE_AT": "1.5"}, {"APPROVAL_REMIND_AT": "0"},
                                 {"APPROVAL_REMIND_AT": "half"}, {"APPROVAL_NUDGE_SWEEP_SECONDS": "0"}])
def test_a_setting_out_of_bounds_stops_start_up_naming_it(monkeypatch, tmp_path, env):
    with pytest.raises(ImproperlyConfigured, match="|".join(env)):
        settings_with(monkeypatch, tmp_path, **env)


# -- the deadline ------------------------------------------------------------------------------------------------

def test_the_deadline_is_the_expiry_with_the_reminder_and_escalation_at_their_fractions(approval, settings):
    settings.APPROVAL_REMIND_AT, settings.APPROVAL_ESCALATE_AT = 0.25, 0.75
    approval = aged(approval, 0.1)
    d = deadlines.deadline(approval)
    assert d.expires_at == approval.expires_at
    assert d.remind_at == approval.requested_at + DAY / 4
    assert d.escalate_at == approval.requested_at + DAY * 3 / 4


def test_a_shortened_timeout_brings_the_whole_deadline_forward(approval, settings):
    settings.APPROVAL_TIMEOUT_SECONDS = 3600.0
    approval = aged(approval, 0.01)
    d = deadlines.deadline(approval)
    assert d.expires_at == approval.requested_at + timedelta(hours=1)
    assert d.remind_at == approval.requested_at + timedelta(minutes=30)


# -- the sweep ---------------------------------------------------------------------------------------------------

def test_nothing_is_sent_before_the_reminder_is_due(approval, events):
    aged(approval, 0.4)
    assert nudges.approvals_nudge() == {"reminder": [], "escalation": []}
    assert nudged(events) == []
    assert Approval.objects.get(pk=approval.pk).reminded_at is None


def test_past_the_reminder_the_team_is_reminded_once(approval, events, staff):
    aged(approval, 0.55)
    assert nudges.approvals_nudge() == {"reminder": [str(approval.public_id)], "escalation": []}
    assert nudges.approvals_nudge() == {"reminder": [], "escalation": []}  # once
    [event] = nudged(events)
    assert event["nudge"] == "reminder"
    assert usernames(event) == ["kim", "lee", "sam"]  # everyone who may decide; Ola may only read
    assert event["approval"]["id"] == str(approval.public_id)
    assert event["approval"]["deadline"]["reminded_at"] is not None
    assert event["approval"]["deadline"]["escalated_at"] is None
    fresh = Approval.objects.get(pk=approval.pk)
    assert fresh.reminded_at is not None and fresh.escalated_at is None


def test_the_reminder_goes_to_the_assignee_when_the_conversation_has_one(approval, events, staff):
    Conversation.objects.filter(pk=approval.run.conversation_id).update(assignee=staff["kim"])
    aged(approval, 0.55)
    nudges.approvals_nudge()
    [event] = nudged(events)
    assert usernames(event) == ["kim"]


def test_past_the_escalation_the_leads_are_told_once(approval, events):
    aged(approval, 0.55)
    nudges.approvals_nudge()
    aged(approval, 0.85)
    assert nudges.approvals_nudge() == {"reminder": [], "escalation": [str(approval.public_id)]}
    assert nudges.approvals_nudge() == {"reminder": [], "escalation": []}  # once
    reminder, escalation = nudged(events)
    assert (reminder["nudge"], escalation["nudge"]) == ("reminder", "escalation")
    assert usernames(escalation) == ["lee"]  # the leads only
    assert escalation["approval"]["deadline"]["escalated_at"] is not None


def test_the_event_goes_to_every_console_and_the_conversations_watchers_never_the_customer(approval, events):
    aged(approval, 0.55)
    nudges.approvals_nudge()
    [groups] = [g for g, event in events if event["type"] == "approval.nudged"]
    conversation = str(approval.run.conversation.public_id)
    assert sorted(groups) == sorted(["staff", f"staff.conversation.{conversation}"])


def test_a_decided_approval_is_never_nudged(approval, events, staff, queued):
    gate.approval_decide(approval=Approval.objects.get(pk=approval.pk), user=staff["sam"], approve=False,
                         reason="not this time")
    aged(approval, 0.9)
    assert nudges.approvals_nudge() == {"reminder": [], "escalation": []}
    assert nudged(events) == []


def test_an_expired_approval_is_never_nudged_even_before_the_expiry_sweep(approval, events):
    aged(approval, 1.01)
    assert nudges.approvals_nudge() == {"reminder": [], "escalation": []}
    assert nudged(events) == []
    fresh = Approval.objects.get(pk=approval.pk)
    assert (fresh.reminded_at, fresh.escalated_at, fresh.decided_at) == (None, None, None)


def test_a_nudge_claimed_by_someone_else_is_not_sent_again(approval, events):
    aged(approval, 0.55)
    stale = list(Approval.objects.filter(pk=approval.pk))  # read before the other sweep wrote
    Approval.objects.filter(pk=approval.pk).update(reminded_at=timezone.now())
    assert nudges._claim(stale[0], nudges.REMINDER, timezone.now()) is False
    assert nudged(events) == []


def test_the_beat_task_runs_the_sweep(approval, events):
    aged(approval, 0.85)
    assert tasks.nudge_approvals() == {"reminder": [str(approval.public_id)],
                                       "escalation": [str(approval.public_id)]}


# -- the e-mail --------------------------------------------------------------------------------------------------

def test_the_reminder_is_emailed_to_those_reminded_who_opted_in(approval, events, smtp_inbox):
    aged(approval, 0.55)
    nudges.approvals_nudge()
    sent = sorted(rcpt[0] for rcpt, _ in smtp_inbox.messages)
    assert sent == ["lee@sundry.example", "sam@sundry.example"]  # Kim did not opt in; Ola may not decide
    message = next(m for rcpt, m in smtp_inbox.messages if rcpt == ["sam@sundry.example"])
    assert subject_of(message).startswith("Reminder: approval waiting, 10 h left: Refund 64.00 EUR on SU-41310")
    text = next(p for p in message.walk() if p.get_content_type() == "text/plain").get_payload(decode=True).decode()
    assert "An approval is still waiting for a decision" in text
    assert "Time left: 10 h" in text
    assert f"{DESK}/console/conversations/{approval.run.conversation.public_id}/" in text


def test_the_escalation_is_emailed_to_the_leads_who_opted_in(approval, events, smtp_inbox):
    aged(approval, 0.55)
    nudges.approvals_nudge()
    smtp_inbox.messages.clear()
    aged(approval, 0.85)
    nudges.approvals_nudge()
    [(rcpt, message)] = smtp_inbox.messages
    assert rcpt == ["lee@sundry.example"]
    assert subject_of(message).startswith("Escalated: approval waiting, 3 h left:")
    html = next(p for p in message.walk() if p.get_content_type() == "text/html").get_payload(decode=True).decode()
    assert "the support leads are told" in html


def test_no_email_with_approval_emails_off_but_the_consoles_are_still_told(approval, events, smtp_inbox, settings):
    settings.APPROVAL_EMAILS = False
    aged(approval, 0.55)
    nudges.approvals_nudge()
    assert smtp_inbox.messages == []
    assert len(nudged(events)) == 1


def test_time_left_reads_as_the_console_says_it():
    now = timezone.now()
    assert [nudges.time_left(now + delta, now) for delta in (
        timedelta(seconds=30), timedelta(minutes=12), timedelta(minutes=60), timedelta(minutes=80),
        timedelta(hours=3, minutes=59))] == ["less than a minute", "12 min", "1 h", "1 h 20 min", "3 h"]


# -- the card and the inbox --------------------------------------------------------------------------------------

def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_card_says_when_the_reminder_and_the_escalation_went_out(approval, events, staff):
    aged(approval, 0.85)
    nudges.approvals_nudge()
    [card] = signed_in(staff["ola"]).get("/api/staff/approvals").json()["approvals"]
    deadline = card["deadline"]
    fresh = Approval.objects.get(pk=approval.pk)
    assert deadline["expires_at"] == card["context"]["expires_at"]
    assert deadline["reminded_at"] == deadline["escalated_at"] == fresh.reminded_at.isoformat().replace("+00:00", "Z")
    assert deadline["remind_at"] < deadline["escalate_at"] < deadline["expires_at"]


def test_the_inbox_sorts_by_the_nearest_expiry_of_pending_approvals(demo, staff):
    later = pending_refund_approval(start_conversation(demo.maya))
    sooner = pending_refund_approval(start_conversation(demo.tom))
    nothing_waits = start_conversation(demo.ines)  # the newest: first by latest activity
    services.message_append(conversation=nothing_waits, author=Message.CUSTOMER,  # listed: someone wrote
                            wire={"role": "user", "content": "Where is SU-41620?"})
    aged(later, 0.2)
    aged(sooner, 0.7)
    client = signed_in(staff["ola"])
    response = client.get("/api/staff/inbox", {"sort": "expiring"})
    assert response.status_code == 200, response.content
    rows = response.json()["conversations"]
    assert [r["id"] for r in rows] == [str(sooner.run.conversation.public_id),
                                       str(later.run.conversation.public_id), str(nothing_waits.public_id)]
    assert rows[0]["nearest_expiry"] < rows[1]["nearest_expiry"]
    assert rows[2]["nearest_expiry"] is None
    by_activity = [r["id"] for r in client.get("/api/staff/inbox").json()["conversations"]]
    assert by_activity[0] == str(nothing_waits.public_id)


def test_an_unknown_sort_is_refused_naming_the_sorts(staff):
    response = signed_in(staff["ola"]).get("/api/staff/inbox", {"sort": "soonest"})
    assert response.status_code == 400
    assert "expiring" in response.json()["error"]


def test_the_console_offers_the_sort_and_knows_it():
    root = Path(__file__).resolve().parent.parent
    page = (root / "templates/console/index.html").read_text()
    assert re.search(r'<option value="expiring">Least time left first</option>', page)
    script = (root / "support/static/support/console-list.js").read_text()
    assert json.loads(re.search(r"const SORTS = (\[.*?\]);", script).group(1)) == ["updated", "waiting", "expiring"]


def test_a_colleagues_own_refund_is_never_nudged_to_the_one_who_asked(demo, staff, events, queued, settings,
                                                                        django_capture_on_commit_callbacks):
    settings.SECOND_APPROVAL_ABOVE = "50.00"  # four eyes: Sam's own refund of 80.00 waits for a colleague
    conversation = start_conversation(demo.maya)
    Conversation.objects.filter(pk=conversation.pk).update(assignee=staff["sam"])  # Sam has the conversation
    with django_capture_on_commit_callbacks(execute=True):
        response = signed_in(staff["sam"]).post(
            f"/api/staff/conversations/{conversation.public_id}/refunds",
            json.dumps({"order_id": "SU-41533", "amount": "80.00", "reason": "Screen cracked on arrival."}),
            content_type="application/json")
    assert response.status_code == 202, response.content
    asked = Approval.objects.get(staff_action__conversation=conversation)
    aged(asked, 0.85)
    nudges.approvals_nudge()
    reminder, escalation = nudged(events)
    assert usernames(reminder) == ["kim", "lee"]  # the team but Sam, although Sam has the conversation
    assert usernames(escalation) == ["lee"]
    assert reminder["approval"]["tool"] == "staff_refund"
    assert reminder["conversation"] == str(conversation.public_id)
