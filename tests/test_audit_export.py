"""The audit export: every decision on an approval and every staff action, as CSV and JSON, from the console
(support.export_audit, Support leads) and from `manage.py export_audit`; what the model asked, what a person
changed, what ran, who, when, why, the conversation and the tool; by date range and person; streamed; CSV
cells never formulas.

Who: Sam and Kim are support leads (they may export); Ana is a support agent (she may not); Eve is no staff.
"""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from decimal import Decimal

import pytest
from asgiref.sync import async_to_sync
from django.core.management import CommandError, call_command
from django.test import AsyncClient, Client

from support.desk import audit, bulk, gate, staff_actions
from support.models import Approval, StaffAction
from tests.desk_factories import (
    REFUND_ARGUMENTS,
    make_user,
    pending_refund_approval,
    queued,  # noqa: F401  (fixture)
    start_conversation,
)

FORMULA = "=HYPERLINK(\"http://evil.example\",\"click\")"
DAY = datetime(2026, 11, 20, 9, 30, tzinfo=dt_timezone.utc)


@pytest.fixture
def leads(db):
    return make_user("sam", staff=True, group="leads"), make_user("kim", staff=True, group="leads")


@pytest.fixture
def history(demo, leads, queued, settings):
    """A partial refund approved by Sam (the amount changed), a four-eyes refund (Sam first, Kim second), a
    rejection by Kim whose reason reads like a formula, an expiry, and Sam's own refund. Each moved to a day
    of its own so the range filters have something to tell apart."""
    sam, kim = leads
    settings.SECOND_APPROVAL_ABOVE = Decimal("50.00")
    edited = pending_refund_approval(start_conversation(demo.maya), {**REFUND_ARGUMENTS, "amount": "40.00"})
    gate.approval_decide(approval=edited, user=sam, approve=True, arguments={**REFUND_ARGUMENTS, "amount": "30.00"})
    two = pending_refund_approval(start_conversation(demo.maya))
    gate.approval_decide(approval=two, user=sam, approve=True)
    gate.approval_decide(approval=two, user=kim, approve=True)
    rejected = pending_refund_approval(start_conversation(demo.tom), {**REFUND_ARGUMENTS, "amount": "10.00"})
    gate.approval_decide(approval=rejected, user=kim, approve=False, reason=FORMULA)
    expired = pending_refund_approval(start_conversation(demo.tom), {**REFUND_ARGUMENTS, "amount": "5.00"})
    Approval.objects.filter(pk=expired.pk).update(expires_at=DAY)
    gate.approvals_expire()
    action = staff_actions.refund_issue(conversation=start_conversation(demo.maya), user=sam, order_id="SU-41207",
                                        amount="20.00", reason="+1 goodwill")
    for n, (model, pk, field) in enumerate([(Approval, edited.pk, "decided_at"), (Approval, two.pk, "first_approved_at"),
                                            (Approval, two.pk, "decided_at"), (Approval, rejected.pk, "decided_at"),
                                            (Approval, expired.pk, "decided_at"), (StaffAction, action.pk, "created_at")]):
        model.objects.filter(pk=pk).update(**{field: DAY + timedelta(days=n)})
    return {"edited": edited, "two": two, "rejected": rejected, "expired": expired, "action": action}


def command(*args) -> str:
    out = io.StringIO()
    call_command("export_audit", *args, stdout=out)
    return out.getvalue()


def json_rows(*args) -> list[dict]:
    return json.loads(command("--format", "json", *args))["rows"]


def csv_rows(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


# -- what is in it --------------------------------------------------------------------------------------

def test_every_decision_and_staff_action_is_a_row_in_time_order(history):
    rows = json_rows()
    assert [(r["event"], r["person"], r["other_person"]) for r in rows] == [
        ("approved", "sam", ""), ("first_approval", "sam", ""), ("approved", "kim", "sam"),
        ("rejected", "kim", ""), ("expired", "", ""), ("refund", "sam", "")]
    assert [r["at"] for r in rows] == [(DAY + timedelta(days=n)).isoformat().replace("+00:00", "Z") for n in range(6)]
    assert set(rows[0]) == set(audit.FIELDS)


def test_a_row_says_what_was_asked_what_a_person_changed_what_ran_who_and_why(history):
    edited = json_rows()[0]
    assert edited["record"] == "approval" and edited["id"] == str(history["edited"].public_id)
    assert edited["conversation"] == str(history["edited"].run.conversation.public_id)
    assert edited["tool"] == "issue_refund" and edited["person_name"] == "sam"
    assert edited["requested_arguments"] == {**REFUND_ARGUMENTS, "amount": "40.00"}  # what the model asked
    assert edited["executed_arguments"] == {**REFUND_ARGUMENTS, "amount": "30.00"}  # what the person let run
    assert edited["changed"] == "amount" and edited["status"] == "approved"
    rejected = json_rows()[3]
    assert (rejected["reason"], rejected["executed_arguments"]) == (FORMULA, None)
    expired = json_rows()[4]
    assert expired["person_name"] == "the system" and expired["reason"].startswith("no one decided within")
    refund = json_rows()[5]
    assert refund["record"] == "staff_action" and refund["tool"] == "refund" and refund["status"] == "done"
    assert refund["result"]["amount"] == "20.00" and refund["reason"] == "+1 goodwill"


def test_a_row_says_how_its_decision_was_made_and_how_the_first_approval_was(demo, leads, settings):
    """Four eyes: Sam approves first in Slack, Kim second in bulk; a refund of one person's, from an e-mailed
    link; a staff action was no decision on an approval."""
    sam, kim = leads
    settings.SECOND_APPROVAL_ABOVE = Decimal("50.00")
    two = pending_refund_approval(start_conversation(demo.maya))
    gate.approval_decide(approval=two, user=sam, approve=True, channel=Approval.SLACK)
    bulk.approvals_decide_bulk(user=kim, ids=[str(two.public_id)], approve=True)
    one = pending_refund_approval(start_conversation(demo.tom), {**REFUND_ARGUMENTS, "amount": "10.00"})
    gate.approval_decide(approval=one, user=kim, approve=True, channel=Approval.EMAIL)
    staff_actions.refund_issue(conversation=start_conversation(demo.maya), user=sam, order_id="SU-41207",
                               amount="20.00", reason="goodwill")
    rows = json_rows()
    assert [(r["event"], r["person"], r["via"], r["first_approval_via"]) for r in rows] == [
        ("first_approval", "sam", "slack", "slack"), ("approved", "kim", "bulk", "slack"),
        ("approved", "kim", "email", ""), ("refund", "sam", "", "")]
    header = next(csv.reader(io.StringIO(command("--format", "csv"))))
    # after the columns before them; the finance columns come last (tests/test_audit_finance.py)
    assert header[15:17] == ["via", "first_approval_via"]
    assert [(r["via"], r["first_approval_via"]) for r in csv_rows(command("--format", "csv"))][:2] == [
        ("slack", "slack"), ("bulk", "slack")]


def test_a_colleagues_refund_approved_by_another_names_both(demo, leads, settings):
    sam, kim = leads
    settings.SECOND_APPROVAL_ABOVE = Decimal("100.00")
    action = staff_actions.refund_issue(conversation=start_conversation(demo.maya), user=sam, order_id="SU-41533",
                                        amount="300.00", reason="cracked")
    gate.approval_decide(approval=Approval.objects.get(staff_action=action), user=kim, approve=True)
    by_event = {r["event"]: r for r in json_rows()}
    assert (by_event["refund"]["person"], by_event["refund"]["other_person"]) == ("sam", "kim")
    assert (by_event["approved"]["person"], by_event["approved"]["other_person"]) == ("kim", "sam")
    assert by_event["approved"]["tool"] == "staff_refund" and by_event["approved"]["result"]["amount"] == "300.00"


# -- filters ----------------------------------------------------------------------------------------------

def test_it_filters_by_days_both_included(history):
    rows = json_rows("--since", "2026-11-21", "--until", "2026-11-23")
    assert [r["event"] for r in rows] == ["first_approval", "approved", "rejected"]
    assert json_rows("--since", "2026-11-21T09:30:01Z", "--until", "2026-11-22")[0]["event"] == "approved"


def test_it_filters_by_person(history):
    assert [r["event"] for r in json_rows("--person", "kim")] == ["approved", "rejected"]
    assert [r["event"] for r in json_rows("--person", "sam")] == ["approved", "first_approval", "refund"]


@pytest.mark.parametrize("args, words", [
    (["--since", "yesterday"], "is not a date like 2026-11-30"),
    (["--since", "2026-11-25", "--until", "2026-11-20"], "--since must come before --until"),
    (["--person", "nobody"], "There is no staff account “nobody”"),
])
def test_the_command_refuses_a_bad_filter_in_words(db, args, words):
    with pytest.raises(CommandError, match=words):
        command(*args)


# -- formats ----------------------------------------------------------------------------------------------

def test_csv_cells_never_run_as_formulas(history):
    rows = csv_rows(command())
    assert rows[3]["reason"] == "'" + FORMULA
    assert rows[5]["reason"] == "'+1 goodwill"
    assert json.loads(rows[0]["requested_arguments"])["amount"] == "40.00"  # objects as JSON, not prefixed
    for value in ("-2", "@SUM(A1)", "\tx", "=1+1"):
        assert audit.csv_safe(value) == "'" + value
    assert audit.csv_safe("plain words") == "plain words" and audit.csv_safe(None) == ""


def test_the_json_keeps_customer_and_staff_text_as_data(history):
    data = json.loads(command("--format", "json"))
    assert data["filter"] == {"since": None, "until": None, "person": None}
    assert data["rows"][3]["reason"] == FORMULA  # as written: JSON is read by programs, not spreadsheets


def test_the_command_writes_a_file(history, tmp_path):
    target = tmp_path / "audit.csv"
    assert command("--output", str(target)) == ""
    assert [r["event"] for r in csv_rows(target.read_text(encoding="utf-8"))][-1] == "refund"


def test_the_rows_are_read_in_chunks_not_all_at_once(demo, leads, monkeypatch):
    many_actions(demo.maya, leads[0])
    read = count_rows_read(monkeypatch)
    lines = audit.csv_lines(audit.audit_rows(audit.AuditFilter()))
    next(lines), next(lines)  # the header and the first row
    assert 0 < read["n"] <= audit.CHUNK
    assert sum(1 for _ in lines) == 3 * audit.CHUNK - 1 and read["n"] == 3 * audit.CHUNK


def many_actions(customer, user) -> None:
    """Three chunks' worth of staff actions on one conversation."""
    conversation = start_conversation(customer)
    StaffAction.objects.bulk_create([StaffAction(conversation=conversation, user=user, kind=StaffAction.REFUND,
                                                 arguments={"reason": f"n{n}"}, status=StaffAction.REFUSED)
                                     for n in range(3 * audit.CHUNK)])


def count_rows_read(monkeypatch) -> dict:
    read = {"n": 0}
    original = StaffAction.from_db.__func__

    def counted(cls, *args):
        read["n"] += 1
        return original(cls, *args)

    monkeypatch.setattr(StaffAction, "from_db", classmethod(counted))
    return read


# -- the console ------------------------------------------------------------------------------------------

def console(user=None) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def test_a_lead_downloads_the_csv_streamed(history, leads):
    response = console(leads[0]).get("/console/audit/export.csv?since=2026-11-21&until=2026-11-22&person=kim")
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="sundry-audit-2026-11-21-to-2026-11-22.csv"'
    rows = csv_rows(b"".join(response.streaming_content).decode())
    assert [(r["event"], r["person"], r["other_person"]) for r in rows] == [("approved", "kim", "sam")]


def test_a_lead_downloads_the_json(history, leads):
    response = console(leads[0]).get("/console/audit/export.json?person=sam")
    assert response["Content-Type"] == "application/json"
    data = json.loads(b"".join(response.streaming_content))
    assert data["filter"]["person"] == "sam" and [r["event"] for r in data["rows"]] == [
        "approved", "first_approval", "refund"]


def test_under_asgi_the_download_is_sent_as_it_is_read(demo, leads, monkeypatch):
    many_actions(demo.maya, leads[0])
    read = count_rows_read(monkeypatch)

    async def first_chunk():
        client = AsyncClient()
        await client.aforce_login(leads[0])
        response = await client.get("/console/audit/export.csv")
        assert response.is_async  # an async iterator: a sync one would be read whole before sending
        chunks = response.streaming_content
        first = await anext(chunks)
        seen = read["n"]
        rest = [chunk async for chunk in chunks]
        return first, seen, rest

    first, seen, rest = async_to_sync(first_chunk)()
    assert first.startswith(b"at,record,id,event") and seen <= audit.CHUNK
    assert len(b"".join([first, *rest]).decode().splitlines()) == 3 * audit.CHUNK + 1


def test_the_audit_page_shows_the_filters_downloads_and_latest_rows(history, leads):
    response = console(leads[0]).get("/console/audit/?person=kim")
    assert response.status_code == 200
    page = response.content.decode()
    assert 'data-testid="audit-download-csv"' in page and 'data-testid="audit-download-json"' in page
    assert page.count('data-testid="audit-row"') == 2
    assert "=HYPERLINK(&quot;http://evil.example&quot;" in page  # staff text escaped, never markup


def test_a_bad_filter_is_said_on_the_page(leads):
    response = console(leads[0]).get("/console/audit/export.csv?since=2026-11-25&until=2026-11-20")
    assert response.status_code == 400 and "“From” must come before “to”." in response.content.decode()
    response = console(leads[0]).get("/console/audit/?person=nobody")
    assert response.status_code == 400 and "There is no staff account “nobody”." in response.content.decode()


# -- you may not ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/console/audit/", "/console/audit/export.csv", "/console/audit/export.json"])
def test_a_support_agent_may_not_export(db, path):
    response = console(make_user("ana", staff=True)).get(path)
    assert response.status_code == 403 and "export the audit" in response.content.decode()
    assert not getattr(response, "streaming", False)


@pytest.mark.parametrize("path", ["/console/audit/", "/console/audit/export.csv"])
def test_anyone_not_staff_is_sent_to_log_in(db, path, django_user_model):
    assert console().get(path).status_code == 302
    eve = django_user_model.objects.create_user("eve", password="pw")
    assert console(eve).get(path)["Location"].startswith("/accounts/login/")


def test_an_export_is_a_get_of_csv_or_json_only(leads):
    assert console(leads[0]).post("/console/audit/export.csv").status_code == 405
    assert console(leads[0]).get("/console/audit/export.xlsx").status_code == 404
