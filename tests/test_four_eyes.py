"""Four eyes: a refund above SECOND_APPROVAL_ABOVE needs two different people.

The agent's refund: the first approval is recorded and the card waits "1 of 2" (the run stays paused,
nothing runs); a second person, not the first, completes it and the call runs once. A staff member's own
refund: saved with an approval that another person gives; the one who asked may not. Rejection by either
ends it. Both names on the card and in the trace; exact codes in the API (needs_second_approver, same_person,
differs_from_first_approval). Races: tests/test_four_eyes_races.py.

Who: Sam and Kim are support leads (they may approve any refund); Ana is a support agent (no large refunds).
The setting is 50.00 unless a test says otherwise, so the agent's 64.00 refund needs two people.
"""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal

import pytest
from django.test import Client
from django.utils import timezone

from support.desk import assistant, gate, runner, serializers, services
from support.models import Approval, Message, Refund, Run, Step, StaffAction, ToolCall
from tests.desk_factories import (
    REFUND_ARGUMENTS,
    make_user,
    pending_refund_approval,
    queued,  # noqa: F401  (fixture)
    start_conversation,
)
from tests.fake_model import ScriptedModel, answer, call, reply
from tests.mcp_fixture import mcp_server  # noqa: F401  (fixture)


@pytest.fixture(autouse=True)
def four_eyes_above_50(settings):
    settings.SECOND_APPROVAL_ABOVE = Decimal("50.00")


@pytest.fixture
def people(db, queued, django_capture_on_commit_callbacks):
    """{"sam": client, "kim": client, "ana": client}, each with .decide(approval, verb, body), .refund(...)."""
    clients = {}
    for username, group in (("sam", "leads"), ("kim", "leads"), ("ana", "agents")):
        client = Client()
        client.user = make_user(username, staff=True, group=group)
        client.force_login(client.user)

        def post(path, body, client=client):
            with django_capture_on_commit_callbacks(execute=True):
                return client.post(path, json.dumps(body), content_type="application/json")

        client.decide = lambda approval, verb, body=None, post=post: post(
            f"/api/staff/approvals/{approval.public_id}/{verb}", body or {})
        client.refund = lambda conversation, body, post=post: post(
            f"/api/staff/conversations/{conversation.public_id}/refunds", body)
        clients[username] = client
    return clients


@pytest.fixture
def approval(demo):
    return pending_refund_approval(start_conversation(demo.maya))  # 64.00 on SU-41310


def fresh(approval) -> Approval:
    return Approval.objects.select_related("tool_call", "run").get(pk=approval.pk)


def trace(approval) -> list[tuple[str, str]]:
    return list(Step.objects.filter(run_id=approval.run_id, kind="approval").values_list("label", "result"))


# -- the agent's refund -----------------------------------------------------------------------------------

def test_a_first_approval_leaves_the_card_waiting_for_a_second_person_and_nothing_runs(people, approval, queued):
    response = people["sam"].decide(approval, "approve")
    assert response.status_code == 202
    body = response.json()
    assert body["code"] == "needs_second_approver"
    card = body["approval"]
    assert (card["status"], card["approvals_needed"]) == ("pending", 2)
    assert [(p["by"], p["username"], p["role"]) for p in card["approvals"]] == [("sam", "sam", "first")]
    assert card["first_arguments"] == REFUND_ARGUMENTS
    a = fresh(approval)
    assert (a.decided_at, a.first_approved_by, a.first_arguments) == (None, people["sam"].user, REFUND_ARGUMENTS)
    assert a.tool_call.status == ToolCall.PENDING_APPROVAL and a.run.status == Run.AWAITING_APPROVAL
    assert queued == []  # the run stays paused
    assert trace(approval) == [("First approval", "approved by sam; a second person must approve before it runs")]


def test_a_card_above_the_setting_says_it_needs_two_before_anyone_approves(approval):
    card = serializers.approval_json(approval)
    assert (card["approvals_needed"], card["approvals"]) == (2, [])


def test_the_first_approver_may_not_give_the_second_approval(people, approval, queued):
    first = people["sam"].decide(approval, "approve")
    again = people["sam"].decide(approval, "approve")  # a double click: the same answer, byte for byte
    assert (again.status_code, again.content) == (202, first.content)
    other = people["sam"].decide(approval, "approve", {"arguments": {**REFUND_ARGUMENTS, "amount": "60.00"}})
    assert other.status_code == 409 and other.json()["code"] == "same_person"
    assert "a second person must give the other" in other.json()["error"]
    a = fresh(approval)
    assert a.decided_at is None and a.first_arguments == REFUND_ARGUMENTS and queued == []


def test_a_second_person_completes_it_and_the_run_resumes_once(people, approval, queued):
    people["sam"].decide(approval, "approve")
    response = people["kim"].decide(approval, "approve")
    assert response.status_code == 200 and "code" not in response.json()
    card = response.json()["approval"]
    assert (card["status"], card["decided_by"], card["executed_arguments"]) == ("approved", "kim", REFUND_ARGUMENTS)
    assert [(p["by"], p["role"]) for p in card["approvals"]] == [("sam", "first"), ("kim", "second")]
    a = fresh(approval)
    assert (a.decision, a.decided_by, a.first_approved_by) == ("approved", people["kim"].user, people["sam"].user)
    assert a.tool_call.status == ToolCall.APPROVED and queued == [approval.run_id]
    assert trace(approval)[-1] == ("Second approval", "approved by kim, after the first approval by sam")
    # Kim's retry gets the same bytes and queues nothing again; Sam's retry of the first approval gets his.
    assert people["kim"].decide(approval, "approve").content == response.content
    assert people["sam"].decide(approval, "approve").status_code == 202
    assert queued == [approval.run_id]


def test_the_second_person_approves_what_the_first_approved(people, approval, queued):
    lowered = {**REFUND_ARGUMENTS, "amount": "60.00"}
    assert people["sam"].decide(approval, "approve", {"arguments": lowered}).status_code == 202
    differs = people["kim"].decide(approval, "approve", {"arguments": {**REFUND_ARGUMENTS, "amount": "55.00"}})
    assert differs.status_code == 409 and differs.json()["code"] == "differs_from_first_approval"
    assert differs.json()["error"].startswith("sam approved it as 60.00")
    assert fresh(approval).decided_at is None
    response = people["kim"].decide(approval, "approve")  # no arguments: what Sam approved
    assert response.status_code == 200 and fresh(approval).executed_arguments == lowered


@pytest.mark.parametrize("who", ["sam", "kim"])
def test_a_rejection_by_either_ends_it(people, approval, queued, who):
    people["sam"].decide(approval, "approve")
    response = people[who].decide(approval, "reject", {"reason": "The parcel was found."})
    assert response.status_code == 200 and response.json()["approval"]["status"] == "rejected"
    a = fresh(approval)
    assert (a.decision, a.decided_by, a.executed_arguments) == ("rejected", people[who].user, None)
    assert a.tool_call.status == ToolCall.REJECTED and queued == [approval.run_id]
    label, result = trace(approval)[-1]
    assert label == "Rejected after a first approval" and f"rejected by {who} (first approval by sam)" in result


def test_a_refund_up_to_the_setting_needs_one_person(people, demo, queued):
    small = pending_refund_approval(start_conversation(demo.maya), {**REFUND_ARGUMENTS, "amount": "50.00"})
    response = people["sam"].decide(small, "approve")
    assert response.status_code == 200 and fresh(small).decision == "approved"
    assert response.json()["approval"]["approvals_needed"] == 1


def test_a_first_approver_who_lowers_the_amount_to_the_setting_decides_alone(people, approval, queued):
    response = people["sam"].decide(approval, "approve", {"arguments": {**REFUND_ARGUMENTS, "amount": "50.00"}})
    assert response.status_code == 200 and fresh(approval).decision == "approved"


@pytest.mark.parametrize("value", [Decimal("0"), ""])
def test_the_rule_is_off_at_zero_or_empty(people, approval, queued, settings, value):
    settings.SECOND_APPROVAL_ABOVE = value
    assert people["sam"].decide(approval, "approve").status_code == 200


def test_a_card_waiting_for_its_second_approval_still_expires(people, approval, queued):
    people["sam"].decide(approval, "approve")
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = people["kim"].decide(approval, "approve")
    assert response.status_code == 409 and "expired" in response.json()["error"]
    assert fresh(approval).decision == Approval.EXPIRED and fresh(approval).tool_call.status == ToolCall.REJECTED


def test_each_approver_needs_the_large_refund_permission(people, demo, queued, settings):
    settings.LARGE_REFUND_THRESHOLD = "60.00"
    approval = pending_refund_approval(start_conversation(demo.maya))  # 64.00: large, and four eyes
    people["sam"].decide(approval, "approve")
    response = people["ana"].decide(approval, "approve")
    assert response.status_code == 403 and fresh(approval).decided_at is None


def test_the_second_look_is_asked_of_each_approver(people, approval, queued):
    services.conversation_post_message(conversation=approval.run.conversation, text="cancel it please")
    refused = people["sam"].decide(approval, "approve")
    assert refused.status_code == 409 and refused.json()["code"] == "needs_second_look"
    assert people["sam"].decide(approval, "approve", {"confirm_seen": True}).status_code == 202
    assert people["kim"].decide(approval, "approve").json()["code"] == "needs_second_look"
    assert people["kim"].decide(approval, "approve", {"confirm_seen": True}).status_code == 200


@pytest.mark.django_db(transaction=True)
def test_a_gated_mcp_tool_with_an_amount_needs_two_people(desk, queued, monkeypatch, settings,
                                                          mcp_server):  # noqa: F811
    settings.SECOND_APPROVAL_ABOVE = Decimal("10.00")
    credit = call("issue_store_credit", {"order_number": "SU-41310", "amount": "15.00", "note": "broken kettle"})
    model = ScriptedModel(reply(calls=[credit]), *answer("Store credit issued."))
    monkeypatch.setattr(assistant, "shared_model", lambda: model)
    conversation = services.conversation_start(customer=desk.maya)
    services.conversation_post_message(conversation=conversation, text="About my warranty")
    assert runner.run_execute(queued.pop()) == "awaiting_approval"
    sam, kim = make_user("sam", staff=True, group="leads"), make_user("kim", staff=True, group="leads")
    approval = Approval.objects.get()
    assert gate.approval_decide(approval=approval, user=sam, approve=True).pending
    assert queued == [] and mcp_server.credits == []
    assert not gate.approval_decide(approval=approval, user=kim, approve=True).pending
    assert runner.run_execute(queued.pop()) == "answered"
    assert len(mcp_server.credits) == 1


@pytest.mark.parametrize("asked, first, ana_may", [
    ("50.00", "64.00", False),  # raised past the large-refund threshold by the first approver
    ("64.00", "50.00", True),  # lowered below it
    ("50.00", None, True),  # approved first as asked
])
def test_after_a_first_approval_the_card_shows_and_checks_what_will_run(people, demo, queued, settings,
                                                                         asked, first, ana_may):
    """Two people above 40.00, a lead above 60.00: Sam approves first, then Ana (a Support agent) approves the
    card. Its large-refund mark and her permission are those of the amount that would run."""
    settings.SECOND_APPROVAL_ABOVE, settings.LARGE_REFUND_THRESHOLD = Decimal("40.00"), "60.00"
    approval = pending_refund_approval(start_conversation(demo.maya), {**REFUND_ARGUMENTS, "amount": asked})
    body = {"arguments": {**REFUND_ARGUMENTS, "amount": first}} if first else None
    assert people["sam"].decide(approval, "approve", body).status_code == 202
    runs = first or asked
    [card] = people["ana"].get("/api/staff/approvals").json()["approvals"]
    assert (card["large_refund"], card["first_arguments"]["amount"]) == (not ana_may, runs)
    assert [(p["by"], p["role"]) for p in card["approvals"]] == [("sam", "first")]
    response = people["ana"].decide(approval, "approve")
    a = fresh(approval)
    if ana_may:
        assert response.status_code == 200
        assert (a.decided_by, a.decided_via, a.executed_arguments["amount"]) == (people["ana"].user, "console", runs)
    else:
        assert response.status_code == 403 and "need a support lead" in response.json()["error"]
        assert a.pending and queued == []
    assert a.first_approved_via == "console"


# -- a staff member's own refund ---------------------------------------------------------------------------

BIG = {"order_id": "SU-41533", "amount": "300.00", "reason": "Screen cracked on arrival."}


@pytest.fixture
def conversation(demo):
    return start_conversation(demo.maya)


def refunds(number="SU-41533"):
    return list(Refund.objects.filter(order__number=number).values_list("amount", flat=True))


def staff_request(conversation) -> Approval:
    return Approval.objects.select_related("staff_action").get(staff_action__conversation=conversation)


def test_a_staff_refund_above_the_setting_waits_for_another_persons_approval(people, conversation):
    response = people["sam"].refund(conversation, {**BIG, "key": "k1"})
    assert response.status_code == 202
    body = response.json()
    assert body["code"] == "needs_second_approver" and body["action"]["status"] == "awaiting_approval"
    card = body["approval"]
    assert (card["tool"], card["status"], card["run"], card["approvals_needed"]) == ("staff_refund", "pending", None, 2)
    assert card["context"]["summary"] == "Refund 300.00 EUR on SU-41533 — asked by sam"
    assert card["context"]["order"]["refundable"] == "480.00" and card["context"]["editable"] is False
    assert [(p["by"], p["role"]) for p in card["approvals"]] == [("sam", "asked")]
    assert refunds() == []  # nothing reached the shop
    queue = people["kim"].get("/api/staff/approvals").json()["approvals"]
    assert [a["id"] for a in queue] == [card["id"]]
    # The same request again (the same key) is that request: one action, one approval.
    again = people["sam"].refund(conversation, {**BIG, "key": "k1"})
    assert again.status_code == 202 and again.json()["approval"]["id"] == card["id"]
    assert StaffAction.objects.count() == 1 and Approval.objects.count() == 1


def test_the_one_who_asked_may_not_approve_their_own_refund(people, conversation):
    people["sam"].refund(conversation, BIG)
    response = people["sam"].decide(staff_request(conversation), "approve")
    assert response.status_code == 409 and response.json()["code"] == "same_person"
    assert "another person must approve it" in response.json()["error"]
    assert staff_request(conversation).pending and refunds() == []


def test_another_person_approves_it_and_the_refund_is_made_once(people, conversation):
    people["sam"].refund(conversation, BIG)
    approval = staff_request(conversation)
    response = people["kim"].decide(approval, "approve")
    assert response.status_code == 200
    card = response.json()["approval"]
    assert (card["status"], card["decided_by"], card["staff_action"]["status"]) == ("approved", "kim", "done")
    assert [(p["by"], p["role"]) for p in card["approvals"]] == [("sam", "asked"), ("kim", "second")]
    assert refunds() == [Decimal("300.00")]
    action = StaffAction.objects.get()
    assert action.status == StaffAction.DONE and action.result["amount"] == "300.00" and action.user.username == "sam"
    notice = Message.objects.filter(conversation=conversation, author=Message.SYSTEM).last()
    assert "We've refunded 300.00 EUR on order SU-41533" in notice.content
    # Kim's retry: the same bytes, no second refund. The trace's row of the action names both.
    assert people["kim"].decide(approval, "approve").content == response.content
    assert refunds() == [Decimal("300.00")]
    row = serializers.staff_action_json(action)
    assert (row["by"], row["approval"]["decided_by"], row["approval"]["status"]) == ("sam", "kim", "approved")


def test_it_is_approved_as_asked_or_not_at_all(people, conversation):
    people["sam"].refund(conversation, BIG)
    response = people["kim"].decide(staff_request(conversation), "approve",
                                     {"arguments": {**BIG, "amount": "200.00"}})
    assert response.status_code == 400 and "approved as they asked, or rejected" in response.json()["error"]
    assert staff_request(conversation).pending


def test_a_rejected_staff_refund_is_refused_on_record_and_may_be_asked_again(people, conversation):
    people["sam"].refund(conversation, {**BIG, "key": "k1"})
    response = people["kim"].decide(staff_request(conversation), "reject", {"reason": "Wait for the return."})
    assert response.status_code == 200 and response.json()["approval"]["staff_action"]["status"] == "refused"
    action = StaffAction.objects.get()
    assert action.result["error"] == "kim rejected it: Wait for the return." and refunds() == []
    again = people["sam"].refund(conversation, {**BIG, "key": "k1"})  # the key was let go
    assert again.status_code == 202 and StaffAction.objects.count() == 2


def test_the_one_who_asked_may_withdraw_it(people, conversation):
    people["sam"].refund(conversation, BIG)
    response = people["sam"].decide(staff_request(conversation), "reject", {"reason": "Wrong order."})
    assert response.status_code == 200 and StaffAction.objects.get().status == StaffAction.REFUSED


def test_a_staff_refund_up_to_the_setting_is_made_at_once(people, conversation):
    response = people["sam"].refund(conversation, {**BIG, "amount": "50.00"})
    assert response.status_code == 201 and refunds() == [Decimal("50.00")] and not Approval.objects.exists()


def test_a_staff_refund_nobody_approves_expires_refused(people, conversation):
    people["sam"].refund(conversation, BIG)
    Approval.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert gate.approvals_expire() == 1
    action = StaffAction.objects.get()
    assert action.status == StaffAction.REFUSED and "no second person approved it within" in action.result["error"]
    assert refunds() == []


def test_approving_a_large_staff_refund_needs_the_large_refund_permission(people, conversation):
    people["sam"].refund(conversation, BIG)
    response = people["ana"].decide(staff_request(conversation), "approve")
    assert response.status_code == 403 and refunds() == []


def test_a_balance_gone_meanwhile_is_said_on_the_card_and_nothing_is_made(people, conversation):
    people["sam"].refund(conversation, BIG)
    people["kim"].refund(conversation, {**BIG, "amount": "50.00"})
    people["kim"].refund(conversation, {**BIG, "amount": "50.00", "reason": "again"})
    people["kim"].refund(conversation, {**BIG, "amount": "50.00", "reason": "and again"})
    people["kim"].refund(conversation, {**BIG, "amount": "50.00", "reason": "once more"})  # 280.00 left
    response = people["kim"].decide(staff_request(conversation), "approve")
    assert response.status_code == 200
    action = response.json()["approval"]["staff_action"]
    assert action["status"] == "refused" and "has 280.00 EUR left to refund" in action["result"]["error"]
    assert sorted(refunds()) == [Decimal("50.00")] * 4
