"""A gated call is checked in full before a person is asked: calls the tool would refuse never reach the
approval queue, and one reply (or one conversation) opens at most one hand-over."""

import pytest

from support.desk import assistant, gate, runner, services
from support.models import Approval, Run, ToolCall
from tests.fake_model import ScriptedModel, answer, call, reply

pytestmark = pytest.mark.django_db(transaction=True)


def ask(customer, text, queued, *replies, monkeypatch):
    model = ScriptedModel(*replies)
    monkeypatch.setattr(assistant, "shared_model", lambda: model)
    conversation = services.conversation_start(customer=customer)
    services.conversation_post_message(conversation=conversation, text=text)
    return conversation, runner.run_execute(queued.pop()), model


def refund(order, amount):
    return call("issue_refund", {"order_id": order, "amount": amount, "reason": "parcel lost"})


def tool_result(conversation, call_id):
    return conversation.messages.get(role="tool", tool_call_id=call_id).content


@pytest.mark.parametrize("order, amount, why", [
    ("SU-41310", "5000.00", "exceeds the 150.00 limit"),  # over the ceiling
    ("SU-41444", "10.00", "No order SU-41444 was found"),  # Tom's order, asked for by Maya
    ("SU-41290", "100.00", "has 80.00 left to refund"),  # over the refundable balance
])
def test_a_refund_the_tool_would_refuse_is_refused_at_once_without_a_card(desk, queued, monkeypatch, order,
                                                                         amount, why):
    r = refund(order, amount)
    conversation, outcome, model = ask(desk.maya, "Refund me", queued, reply(calls=[r]),
                                       *answer("I can't do that.", "not_resolved"), monkeypatch=monkeypatch)
    model.assert_complete()
    assert outcome == "answered" and not Approval.objects.exists()
    text = tool_result(conversation, r["id"])
    assert text.startswith("ERROR: not run:") and why in text
    assert ToolCall.objects.get(call_id=r["id"]).status == "failed"


def test_a_refund_within_the_rules_still_waits_for_a_person(desk, queued, monkeypatch):
    r = refund("SU-41310", "64.00")
    _, outcome, _ = ask(desk.maya, "Refund me", queued, reply(calls=[r]), monkeypatch=monkeypatch)
    assert outcome == "awaiting_approval" and Approval.objects.get().tool_call.call_id == r["id"]


def escalate(n):
    return call("escalate_to_human", {"reason": f"needs a person {n}", "summary": "refund over the ceiling"})


def test_one_reply_opens_at_most_one_hand_over(desk, queued, monkeypatch, settings):
    settings.ESCALATION_NEEDS_APPROVAL = True  # the shop has a person confirm hand-overs
    calls = [escalate(n) for n in range(20)]
    conversation, outcome, _ = ask(desk.maya, "I want a person", queued, reply(calls=calls), monkeypatch=monkeypatch)
    assert outcome == "awaiting_approval" and Approval.objects.count() == 1
    assert all(tool_result(conversation, c["id"]).startswith("ERROR: not run") for c in calls[1:])


def test_a_second_hand_over_while_one_waits_is_refused(desk, queued, monkeypatch, settings):
    settings.ESCALATION_NEEDS_APPROVAL = True  # the shop has a person confirm hand-overs
    conversation, outcome, _ = ask(desk.maya, "Where is SU-41210?", queued, *answer("Delivered."),
                                   monkeypatch=monkeypatch)
    run = Run.objects.get(conversation=conversation)
    Approval.objects.create(run=run, tool_call=ToolCall.objects.create(
        run=run, call_id="other", name="escalate_to_human", arguments={}, status="pending_approval",
        idempotency_key="k-other"), requested_arguments={})  # a hand-over still waiting in this conversation
    second = escalate(2)
    model = ScriptedModel(reply(calls=[second]), *answer("A person will follow up.", "handed_to_person"))
    monkeypatch.setattr(assistant, "shared_model", lambda: model)
    services.conversation_post_message(conversation=conversation, text="I want a person now")
    runner.run_execute(queued.pop())
    assert tool_result(conversation, second["id"]).startswith("ERROR: not run: A hand-over to a person is already")
    assert Approval.objects.filter(decided_at__isnull=True).count() == 1


def test_an_edited_amount_the_tool_would_refuse_is_refused_when_staff_approve(desk, queued, monkeypatch):
    r = refund("SU-41310", "64.00")
    _, outcome, _ = ask(desk.maya, "Refund me", queued, reply(calls=[r]), monkeypatch=monkeypatch)
    approval = Approval.objects.get()
    too_much = {"order_id": "SU-41310", "amount": "70.00", "reason": "parcel lost"}  # the order's total is 64.00
    with pytest.raises(services.InvalidArguments, match="left to refund"):
        gate.approval_decide(approval=approval, user=None, approve=True, arguments=too_much)
    approval.refresh_from_db()
    assert approval.pending  # nothing decided: the person can correct the amount
    gate.approval_decide(approval=approval, user=None, approve=True,
                             arguments={"order_id": "SU-41310", "amount": "40.00", "reason": "parcel lost"})
    assert Approval.objects.get().decision == "approved"
