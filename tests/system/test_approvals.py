"""Gated calls in a real worker: the run pauses without holding a worker, and staff decisions resume it."""

import threading
from datetime import timedelta
from decimal import Decimal

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from support.desk import gate, services
from support.models import Approval, Conversation, Message, Refund, Run, ToolCall

from .conftest import ask, assert_history_sound, assert_trace_complete, customer_messages, final_answer, wait_run

pytestmark = pytest.mark.django_db(transaction=True)

MISSING_41310 = "My parcel SU-41310 never came."


def paused_for_refund(customer):
    """A conversation whose run waits for approval of issue_refund 64.00 on SU-41310."""
    conversation, message, run = ask(customer, MISSING_41310)
    run = wait_run(run, Run.AWAITING_APPROVAL)
    return conversation, run, Approval.objects.select_related("tool_call").get(run=run)


def refunds_41310():
    return Refund.objects.filter(order__number="SU-41310")


def test_a_gated_refund_pauses_without_holding_a_worker_and_approval_resumes_it(demo, worker, staff):
    worker(concurrency=1)  # one worker thread: a paused run that held it would block everything else
    conversation, run, approval = paused_for_refund(demo.maya)
    assert run.lease == "" and run.stop_reason == "" and run.finished_at is None
    assert approval.pending and approval.decision == ""
    assert approval.requested_arguments["amount"] == "64.00"
    assert approval.requested_arguments["order_id"] == "SU-41310"
    assert approval.tool_call.name == "issue_refund" and approval.tool_call.status == ToolCall.PENDING_APPROVAL
    assert not refunds_41310().exists()
    calls = Message.objects.filter(conversation=conversation, role="assistant").last().tool_calls
    assert [c["function"]["name"] for c in calls] == ["issue_refund"]

    # Meanwhile the single worker thread is free: another customer's conversation is answered.
    other, _, other_run = ask(demo.maya, "Where is my order SU-41210?")
    assert wait_run(other_run, Run.STOPPED).stop_reason == "answered"
    assert Run.objects.get(pk=run.pk).status == Run.AWAITING_APPROVAL

    gate.approval_decide(approval=approval, user=staff, approve=True)
    run = wait_run(run, Run.STOPPED)
    # attempts counts the claims since the last clean pause: the resume is the first.
    assert (run.stop_reason, run.outcome, run.attempts) == ("answered", "resolved", 1)
    assert [r.amount for r in refunds_41310()] == [Decimal("64.00")]
    approval.refresh_from_db()
    assert (approval.decision, approval.decided_by, approval.executed_arguments) == (
        Approval.APPROVED, staff, approval.requested_arguments)
    assert ToolCall.objects.get(pk=approval.tool_call_id).status == ToolCall.EXECUTED
    assert "64.00" in final_answer(conversation).content
    assert_history_sound(conversation)
    assert customer_messages(conversation, MISSING_41310) == 1


def test_a_rejection_is_explained_to_the_customer_with_the_staff_reason(demo, worker, staff):
    worker()
    conversation, run, approval = paused_for_refund(demo.maya)
    reason = "the courier has opened an investigation that must finish first"
    gate.approval_decide(approval=approval, user=staff, approve=False, reason=reason)

    run = wait_run(run, Run.STOPPED)
    assert (run.stop_reason, run.outcome) == ("answered", "not_resolved")
    assert reason in final_answer(conversation).content
    assert not refunds_41310().exists()
    approval.refresh_from_db()
    assert (approval.decision, approval.reason, approval.executed_arguments) == (Approval.REJECTED, reason, None)
    assert ToolCall.objects.get(pk=approval.tool_call_id).status == ToolCall.REJECTED
    result = Message.objects.get(conversation=conversation, role="tool", tool_call_id=approval.tool_call.call_id)
    assert result.content == f"ERROR: rejected by staff: {reason}"
    assert_history_sound(conversation)


def test_an_approval_with_edited_arguments_executes_the_edit(demo, worker, staff):
    worker()
    conversation, run, approval = paused_for_refund(demo.maya)
    edited = {**approval.requested_arguments, "amount": "30.00"}
    gate.approval_decide(approval=approval, user=staff, approve=True, arguments=edited)

    run = wait_run(run, Run.STOPPED)
    assert (run.stop_reason, run.outcome) == ("answered", "resolved")
    approval.refresh_from_db()
    assert approval.requested_arguments["amount"] == "64.00"
    assert approval.executed_arguments["amount"] == "30.00"
    assert [r.amount for r in refunds_41310()] == [Decimal("30.00")]
    assert "30.00" in final_answer(conversation).content
    assert_history_sound(conversation)


def test_two_simultaneous_decisions_on_one_approval_write_exactly_one(demo, worker, staff):
    worker()
    conversation, run, approval = paused_for_refund(demo.maya)
    barrier = threading.Barrier(2)
    outcomes = {}

    def decide(amount: str) -> None:
        try:
            mine = Approval.objects.get(pk=approval.pk)  # each thread: its own connection, its own copy
            barrier.wait(timeout=10)
            gate.approval_decide(approval=mine, user=staff, approve=True,
                                     arguments={**mine.requested_arguments, "amount": amount})
            outcomes[amount] = "decided"
        except services.AlreadyDecided:
            outcomes[amount] = "already decided"
        except Exception as e:  # noqa: BLE001 - reported by the assertion below
            outcomes[amount] = repr(e)
        finally:
            connection.close()

    threads = [threading.Thread(target=decide, args=(amount,)) for amount in ("64.00", "30.00")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(outcomes.values()) == ["already decided", "decided"], outcomes
    winner = next(amount for amount, outcome in outcomes.items() if outcome == "decided")

    run = wait_run(run, Run.STOPPED)
    assert (run.stop_reason, run.attempts) == ("answered", 1)  # one claim since the pause
    approval.refresh_from_db()
    assert approval.executed_arguments["amount"] == winner
    assert [r.amount for r in refunds_41310()] == [Decimal(winner)]
    assert_history_sound(conversation)


def test_an_expired_approval_is_rejected_by_the_system_and_goes_to_a_person(demo, worker):
    worker()
    conversation, run, approval = paused_for_refund(demo.maya)
    # Nobody decided in time: make the request older than APPROVAL_TIMEOUT_SECONDS (both processes' value).
    too_old = timezone.now() - timedelta(seconds=settings.APPROVAL_TIMEOUT_SECONDS + 60)
    Approval.objects.filter(pk=approval.pk).update(requested_at=too_old)
    assert gate.approvals_expire() == 1
    assert gate.approvals_expire() == 0  # written once

    run = wait_run(run, Run.STOPPED)
    assert run.stop_reason == "answered" and run.outcome == "handed_to_person"  # a person follows up
    approval.refresh_from_db()
    assert (approval.decision, approval.decided_by, approval.executed_arguments) == (Approval.EXPIRED, None, None)
    assert final_answer(conversation).author == Message.SYSTEM  # a person follows up: the hand-over notice
    answer = conversation.messages.filter(author=Message.AGENT).exclude(content="").order_by("-seq").first().content
    assert "couldn't be reviewed in time" in answer and "I've refunded" not in answer
    assert not refunds_41310().exists()
    conversation.refresh_from_db()
    assert conversation.status == Conversation.NEEDS_ATTENTION
    assert "not reviewed in time" in conversation.attention_reason
    assert ToolCall.objects.get(pk=approval.tool_call_id).status == ToolCall.REJECTED
    assert_history_sound(conversation)


def test_a_message_written_while_awaiting_approval_is_read_after_the_calls_result(demo, worker, staff, model_server):
    worker()
    conversation, run, approval = paused_for_refund(demo.maya)
    call_message = Message.objects.filter(conversation=conversation, role="assistant").last()
    later = "Any news on SU-41310? I'm still waiting."
    message, active, created = services.conversation_post_message(conversation=conversation, text=later)
    assert created and active.pk == run.pk  # the paused run takes it; no second run
    assert message.seq == call_message.seq + 1
    assert Run.objects.get(pk=run.pk).status == Run.AWAITING_APPROVAL

    gate.approval_decide(approval=approval, user=staff, approve=True)
    run = wait_run(run, Run.STOPPED)
    # The stand-in answers 400 to a history where the customer's message splits a call from its result,
    # which would stop the run with model_error.
    assert (run.stop_reason, run.outcome) == ("answered", "resolved"), run.detail
    assert all(r["status"] == 200 for r in model_server.requests())
    assert [r.amount for r in refunds_41310()] == [Decimal("64.00")]
    messages = assert_history_sound(conversation)
    result = next(m for m in messages if m.role == "tool" and m.tool_call_id == approval.tool_call.call_id)
    assert result.seq > message.seq  # saved after the customer's message, sent to the model before it
    assert final_answer(conversation).seq > message.seq
    assert customer_messages(conversation, later) == 1
    assert Run.objects.filter(conversation=conversation).count() == 1
    assert_trace_complete(run)
