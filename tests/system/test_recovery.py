"""Workers that die mid-run: the sweeper finds the run, a fresh worker resumes it, nothing happens twice."""

import time
import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from support.desk import gate, services
from support.models import Approval, Conversation, Message, Refund, Run, SellerMessage, ToolCall

from .conftest import (
    ask,
    assert_history_sound,
    assert_trace_complete,
    customer_messages,
    final_answer,
    requeue_when_stale,
    snapshot,
    wait_for,
    wait_run,
)

pytestmark = pytest.mark.django_db(transaction=True)

MISSING_41310 = "My parcel SU-41310 never came."
# The refund runs without a person, so the kill can land inside it with nobody in the loop.
AUTO_REFUNDS = {"AUTO_APPROVE_REFUNDS_UP_TO": "100"}
PAUSE_IN_REFUND = {"FAULT_PAUSE_BEFORE_TOOL": "issue_refund:6"}


def refund_running(run):
    return lambda: ToolCall.objects.filter(run=run, name="issue_refund", status=ToolCall.RUNNING).exists()


def test_a_worker_killed_at_a_refund_call_is_resumed_and_refunds_once(demo, worker):
    doomed = worker(**AUTO_REFUNDS, **PAUSE_IN_REFUND)
    conversation, _, run = ask(demo.maya, MISSING_41310)
    wait_for(refund_running(run), message="the refund call to start", describe=lambda: snapshot(conversation))
    time.sleep(0.3)
    doomed.kill()
    assert not Refund.objects.filter(order__number="SU-41310").exists()

    worker(wait=False, **AUTO_REFUNDS)
    requeue_when_stale(run)
    run = wait_run(run, Run.STOPPED)
    assert (run.stop_reason, run.outcome, run.attempts) == ("answered", "resolved", 2)
    assert [r.amount for r in Refund.objects.filter(order__number="SU-41310")] == [Decimal("64.00")]
    assert_history_sound(conversation)
    assert customer_messages(conversation, MISSING_41310) == 1
    call = ToolCall.objects.get(run=run, name="issue_refund")
    assert (call.status, call.attempts) == (ToolCall.EXECUTED, 2)
    assert Refund.objects.get(order__number="SU-41310").tool_call_id == call.idempotency_key
    assert "64.00" in final_answer(conversation).content
    assert_trace_complete(run)


def test_a_worker_killed_after_the_refund_before_its_commit_leaves_no_refund_and_refunds_once(demo, worker):
    # The refund row is written, its result message not yet: both are in one open transaction.
    doomed = worker(**AUTO_REFUNDS, FAULT_PAUSE_AFTER_TOOL="issue_refund:6")
    conversation, _, run = ask(demo.maya, MISSING_41310)
    wait_for(refund_running(run), message="the refund call to start", describe=lambda: snapshot(conversation))
    time.sleep(1.0)  # well inside the pause that follows the refund's insert
    doomed.kill()
    assert not Refund.objects.filter(order__number="SU-41310").exists()  # rolled back with the transaction

    worker(wait=False, **AUTO_REFUNDS)
    requeue_when_stale(run)
    run = wait_run(run, Run.STOPPED)
    assert (run.stop_reason, run.attempts) == ("answered", 2)
    assert [r.amount for r in Refund.objects.filter(order__number="SU-41310")] == [Decimal("64.00")]
    assert_history_sound(conversation)
    assert_trace_complete(run)


def test_an_auto_approved_refund_leaves_its_decision_on_record(demo, worker):
    worker(**AUTO_REFUNDS)
    conversation, _, run = ask(demo.maya, MISSING_41310)
    run = wait_run(run, Run.STOPPED)
    assert run.stop_reason == "answered"
    call = ToolCall.objects.get(run=run, name="issue_refund")
    approval = Approval.objects.filter(tool_call=call).first()
    assert approval is not None, "the policy let the refund through without a person; the decision must be kept"
    assert approval.decision == Approval.APPROVED and approval.decided_by is None
    assert approval.executed_arguments["amount"] == "64.00"


def test_a_worker_killed_during_a_model_call_is_resumed_without_doubled_messages(demo, worker, model_server):
    text = f"Tracking says delivered on Thursday but nothing arrived. Order SU-41207. Case {uuid.uuid4().hex[:10]}"
    model_server.queue_faults(["delay:ms=8000"], match=text.rsplit(" ", 1)[1])
    doomed = worker()
    conversation, _, run = ask(demo.maya, text)
    wait_for(lambda: not model_server.state.pending(), timeout=10, message="the worker's first model request")
    time.sleep(0.2)
    doomed.kill()
    assert Message.objects.filter(conversation=conversation).count() == 2  # system prompt, customer

    worker(wait=False)
    requeue_when_stale(run)
    run = wait_run(run, Run.STOPPED)
    assert (run.stop_reason, run.outcome, run.attempts) == ("answered", "waiting", 2)  # on the seller, who was messaged
    assert_history_sound(conversation)
    assert customer_messages(conversation, text) == 1
    assert SellerMessage.objects.filter(order__number="SU-41207").count() == 1
    assert_trace_complete(run)


def test_a_worker_killed_while_resuming_an_approved_refund_refunds_once(demo, worker, staff):
    doomed = worker(**PAUSE_IN_REFUND)  # the pause only bites once the approved call executes
    conversation, _, run = ask(demo.maya, MISSING_41310)
    run = wait_run(run, Run.AWAITING_APPROVAL)
    approval = Approval.objects.get(run=run)
    gate.approval_decide(approval=approval, user=staff, approve=True)
    wait_for(refund_running(run), message="the approved refund to start", describe=lambda: snapshot(conversation))
    time.sleep(0.3)
    doomed.kill()

    worker(wait=False)
    requeue_when_stale(run)
    run = wait_run(run, Run.STOPPED)
    # Claims since the pause: the resume that died, and the one after recovery.
    assert (run.stop_reason, run.outcome, run.attempts) == ("answered", "resolved", 2)
    assert [r.amount for r in Refund.objects.filter(order__number="SU-41310")] == [Decimal("64.00")]
    assert_history_sound(conversation)
    assert customer_messages(conversation, MISSING_41310) == 1
    assert ToolCall.objects.get(run=run, name="issue_refund").status == ToolCall.EXECUTED
    assert Approval.objects.get(pk=approval.pk).decision == Approval.APPROVED  # decided once, kept


def test_recovery_gives_up_on_a_run_that_used_its_attempts_and_hands_it_to_a_person(demo, settings):
    settings.RUN_MAX_ATTEMPTS = 3
    conversation, _, run = ask(demo.maya, "Where is my order SU-41210?")  # no worker takes it here
    # Its worker died on every attempt: claimed RUN_MAX_ATTEMPTS times, no heartbeat since.
    Run.objects.filter(pk=run.pk).update(status=Run.RUNNING, attempts=3, lease="lost-worker",
                                         heartbeat_at=timezone.now() - timedelta(seconds=60))
    assert services.runs_recover() == []
    run.refresh_from_db()
    assert (run.status, run.stop_reason, run.lease) == (Run.STOPPED, Run.STALLED, "")
    assert run.finished_at is not None and run.summary
    conversation.refresh_from_db()
    assert conversation.status == Conversation.NEEDS_ATTENTION and "stalled" in conversation.attention_reason
    # It stays with a person: the customer's next message is saved but starts no run.
    message, active, created = services.conversation_post_message(conversation=conversation, text="Hello?")
    assert created and active is None
    assert not Run.objects.filter(conversation=conversation, status__in=Run.ACTIVE).exists()


def test_a_worker_presumed_dead_that_wakes_up_inside_a_refund_writes_nothing(demo, worker):
    # One thread, stuck in the refund call without heartbeats: the sweeper presumes it dead and a
    # second worker resumes the run. The first then wakes up and must neither refund nor write.
    slow = worker(concurrency=1, FAULT_PAUSE_BEFORE_TOOL="issue_refund:4", **AUTO_REFUNDS)
    conversation, _, run = ask(demo.maya, MISSING_41310)
    wait_for(refund_running(run), message="the refund call to start", describe=lambda: snapshot(conversation))
    worker(wait=False, **AUTO_REFUNDS)  # the slow worker's only thread is busy: the requeued task comes here
    requeue_when_stale(run)  # about 2 s into the 4 s pause
    run = wait_run(run, Run.STOPPED)
    assert (run.stop_reason, run.attempts) == ("answered", 2)
    slow.wait_for_log("lease lost", timeout=10)  # it woke up, found its claim gone and stopped

    assert [r.amount for r in Refund.objects.filter(order__number="SU-41310")] == [Decimal("64.00")]
    assert_history_sound(conversation)
    assert customer_messages(conversation, MISSING_41310) == 1
    assert final_answer(conversation).seq == Message.objects.filter(conversation=conversation).count()
    assert Run.objects.get(pk=run.pk).status == Run.STOPPED


def test_resumes_after_approval_do_not_use_up_the_recovery_attempts(demo, worker, staff, settings):
    settings.RUN_MAX_ATTEMPTS = 2  # the sweeper may restart a run after one lost worker
    doomed = worker(**PAUSE_IN_REFUND)
    conversation, _, run = ask(demo.maya, MISSING_41310)
    run = wait_run(run, Run.AWAITING_APPROVAL)
    gate.approval_decide(approval=Approval.objects.get(run=run), user=staff, approve=True)
    wait_for(refund_running(run), message="the approved refund to start", describe=lambda: snapshot(conversation))
    doomed.kill()  # the first worker lost on this run

    worker(wait=False)
    requeue_when_stale(run)  # the first claim and the resume would make 2: the pause started the count again
    run = wait_run(run, Run.STOPPED)
    assert (run.stop_reason, run.attempts) == ("answered", 2)
    assert Refund.objects.filter(order__number="SU-41310").count() == 1


def test_a_worker_presumed_dead_during_a_model_call_adds_nothing_to_the_trace(demo, worker, model_server):
    text = f"Tracking says delivered on Thursday but nothing arrived. Order SU-41207. Case {uuid.uuid4().hex[:10]}"
    # The first model call answers after 4 s, and a model call sends no heartbeat until tokens stream:
    # the sweeper presumes the worker dead and the run is resumed elsewhere while that call is still open.
    model_server.queue_faults(["delay:ms=4000"], match=text.rsplit(" ", 1)[1])
    slow = worker(concurrency=1)
    conversation, _, run = ask(demo.maya, text)
    wait_for(lambda: not model_server.state.pending(), timeout=10, message="the worker's first model request")
    worker(wait=False)
    requeue_when_stale(run)
    run = wait_run(run, Run.STOPPED)
    assert (run.stop_reason, run.attempts) == ("answered", 2)
    slow.wait_for_log("lease lost", timeout=10)  # its reply came back, its claim was gone
    assert_history_sound(conversation)
    assert SellerMessage.objects.filter(order__number="SU-41207").count() == 1
    assert_trace_complete(Run.objects.get(pk=run.pk))
