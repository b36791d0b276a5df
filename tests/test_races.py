"""Races between staff, the expiry sweep, a customer and a worker on one run, tried many times at once.

Each trial releases its competitors together with a barrier; each does its call in its own thread and so
its own database connection, and the outcome must be one that some serial order could give. On SQLite a
write transaction takes the whole database (BEGIN IMMEDIATE), so these calls run one after the other
there and no row-lock order is exercised: the file runs on PostgreSQL only.
"""

from __future__ import annotations

import json
import random
import threading
from collections import Counter
from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone

from support.agent import types as agent
from support.desk import gate, runner, services, takeover
from support.models import Approval, Conversation, Message, Refund, Run, ToolCall
from support.models.desk import InboxEvent
from tests.desk_factories import REFUND_ARGUMENTS, pending_refund_approval, start_conversation
from tests.standin_fixture import standin  # noqa: F401

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql",
                       reason="SQLite runs write transactions one at a time (BEGIN IMMEDIATE): no race to lose"),
]

TRIALS = 25


@pytest.fixture
def sam(db):
    return get_user_model().objects.create_user("sam", password="pw", is_staff=True)


def at_once(*calls):
    """Call each function in its own thread (its own connection), all released by one barrier. Returns
    what each returned or raised, in order."""
    barrier = threading.Barrier(len(calls))
    outcomes = [None] * len(calls)

    def go(i, call):
        try:
            barrier.wait(timeout=10)
            outcomes[i] = call()
        except Exception as error:  # noqa: BLE001 - the test judges every outcome
            outcomes[i] = error
        finally:
            connection.close()

    threads = [threading.Thread(target=go, args=(i, call)) for i, call in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads), "a competitor hangs"
    return outcomes


def paused_on_two_refunds(customer) -> tuple[Run, Approval, Approval]:
    """A run paused on two gated calls of one model reply, each with its pending approval."""
    first = pending_refund_approval(start_conversation(customer))
    run = first.run
    second_id = f"{first.tool_call.call_id}_b"
    message = Message.objects.get(run=run, role="assistant")
    message.tool_calls = message.tool_calls + [{**message.tool_calls[0], "id": second_id}]
    message.save(update_fields=["tool_calls"])
    call = ToolCall.objects.create(run=run, call_id=second_id, name="issue_refund", arguments=REFUND_ARGUMENTS,
                                   status=ToolCall.PENDING_APPROVAL, idempotency_key=f"{run.public_id}:{second_id}")
    second = Approval.objects.create(tool_call=call, run=run, requested_arguments=REFUND_ARGUMENTS)
    return run, *(Approval.objects.select_related("tool_call").get(pk=a.pk) for a in (first, second))


def make_expired(approval: Approval) -> None:
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))


def agent_refunds():
    return Refund.objects.filter(tool_call_id__isnull=False)  # the demo's own refunds have none


def approve(approval, user=None):
    return lambda: gate.approval_decide(approval=approval, user=user, approve=True)


def reject(approval, user=None):
    return lambda: gate.approval_decide(approval=approval, user=user, approve=False, reason="not this one")


# -- item: two gated calls of one run decided at the same instant --------------------------------------

@pytest.mark.parametrize("competitors", ["two staff", "a click and the expiry sweep"])
def test_two_decisions_at_once_requeue_the_run_exactly_once(demo, queued, competitors):
    for _ in range(TRIALS):
        run, first, second = paused_on_two_refunds(demo.maya)
        if competitors == "two staff":
            outcomes = at_once(approve(first), reject(second))
        else:
            make_expired(first)
            outcomes = at_once(gate.approvals_expire, approve(second))
        assert not any(isinstance(o, Exception) for o in outcomes), outcomes
        assert Counter(queued)[run.pk] == 1, f"requeued {Counter(queued)[run.pk]} times"
        assert Run.objects.get(pk=run.pk).status == Run.QUEUED
        assert not Approval.objects.filter(run=run, decided_at__isnull=True).exists()


def test_a_click_and_the_sweep_on_one_expired_approval_expire_it_once_and_the_click_is_told(demo, queued, sam):
    for _ in range(TRIALS):
        approval = pending_refund_approval(start_conversation(demo.maya))
        approval = Approval.objects.select_related("tool_call").get(pk=approval.pk)
        make_expired(approval)
        swept, clicked = at_once(gate.approvals_expire, approve(approval, sam))
        assert isinstance(clicked, gate.ApprovalExpired), clicked
        assert swept in (0, 1)  # 0: the click expired it first
        approval.refresh_from_db()
        assert (approval.decision, approval.decided_by) == (Approval.EXPIRED, None)
        assert Counter(queued)[approval.run_id] == 1
        assert ToolCall.objects.get(pk=approval.tool_call_id).status == ToolCall.REJECTED


# -- item: take-over against a decision, and against a customer's message ------------------------------

def test_a_take_over_and_a_decision_at_once_neither_deadlock_nor_disagree(demo, queued, sam):
    for _ in range(TRIALS):
        approval = pending_refund_approval(start_conversation(demo.maya))
        approval = Approval.objects.select_related("tool_call", "run__conversation").get(pk=approval.pk)
        conversation = approval.run.conversation
        decided, taken = at_once(approve(approval, sam),
                                 lambda: takeover.conversation_take_over(conversation=conversation, user=sam))
        assert not isinstance(taken, Exception), taken  # a deadlock would be an OperationalError here
        assert decided is approval or isinstance(decided, services.AlreadyDecided), decided
        approval.refresh_from_db()
        run = Run.objects.get(pk=approval.run_id)
        assert (run.status, run.stop_reason) == (Run.STOPPED, "taken_over")
        results = list(conversation.messages.filter(role="tool", tool_call_id=approval.tool_call.call_id))
        assert [m.content for m in results] == [takeover.TAKEN_OVER_RESULT]
        assert ToolCall.objects.get(pk=approval.tool_call_id).status == ToolCall.REJECTED
        if decided is approval:  # the decision came first: it stands, and the record says the call never ran
            assert (approval.decision, approval.not_run_reason) == (Approval.APPROVED, takeover.TAKEN_OVER)
        else:
            assert approval.decision == Approval.EXPIRED and approval.reason == takeover.TAKEN_OVER
        while queued:  # a resume queued before the take-over finds nothing to claim
            assert runner.run_execute(queued.pop()) == "not claimed"
    assert not agent_refunds().exists()


def test_a_take_over_and_a_customer_message_at_once_leave_no_run_going(demo, queued, sam):
    for _ in range(TRIALS):
        conversation = start_conversation(demo.maya)
        _, outcome = at_once(lambda: services.conversation_post_message(conversation=conversation, text="Hello?"),
                             lambda: takeover.conversation_take_over(conversation=conversation, user=sam))
        assert not isinstance(outcome, Exception), outcome
        assert Conversation.objects.get(pk=conversation.pk).status == Conversation.TAKEN_OVER
        assert not Run.objects.filter(conversation=conversation, status__in=Run.ACTIVE).exists()


def test_two_people_assigning_themselves_at_once_one_gets_it_and_one_is_told(demo, queued, sam):
    from support.desk import inbox

    alex = get_user_model().objects.create_user("alex", password="pw", is_staff=True, first_name="Alex")
    for _ in range(TRIALS):
        conversation = start_conversation(demo.maya)
        services.conversation_flag(conversation_id=conversation.pk, reason="the customer asked for a person")
        outcomes = at_once(lambda: inbox.conversation_take(conversation=conversation, user=sam),
                           lambda: inbox.conversation_take(conversation=conversation, user=alex))
        refused = [o for o in outcomes if isinstance(o, Exception)]
        assert len(refused) == 1 and isinstance(refused[0], inbox.InboxConflict), outcomes
        fresh = Conversation.objects.get(pk=conversation.pk)
        winner = sam if fresh.assignee == sam else alex
        assert (fresh.status, fresh.assignee) == (Conversation.TAKEN_OVER, winner)
        joined = conversation.messages.filter(author=Message.SYSTEM, content__contains="has joined")
        assert joined.count() == 1  # the customer is told once, of the one who has it
        assert list(InboxEvent.objects.filter(conversation=conversation).values_list("kind", "assignee")) == [
            ("assigned", winner.pk)]


def worker_about_to_pause(customer) -> tuple[Run, runner.DbObserver, agent.RunResult]:
    """A running run whose model asked for a refund: what _finish gets to record the pause."""
    approval = pending_refund_approval(start_conversation(customer))
    call_id, run = approval.tool_call.call_id, approval.run
    Approval.objects.filter(pk=approval.pk).delete()  # not asked yet: _finish is about to ask
    ToolCall.objects.filter(run=run).delete()
    Run.objects.filter(pk=run.pk).update(status=Run.RUNNING, lease="the-worker")
    run.refresh_from_db()
    conversation = run.conversation
    observer = runner.DbObserver(run, conversation, "the-worker", [], conversation.last_seq)
    call = agent.ToolCall(id=call_id, name="issue_refund", arguments=json.dumps(REFUND_ARGUMENTS))
    result = agent.RunResult(status=agent.AWAITING_APPROVAL,
                             pending=[agent.PendingCall(call=call, arguments=REFUND_ARGUMENTS)])
    return run, observer, result


def test_a_worker_pausing_and_a_take_over_at_once_neither_deadlock_nor_leave_a_call_open(demo, queued, sam):
    for _ in range(TRIALS):
        run, observer, result = worker_about_to_pause(demo.maya)
        conversation = run.conversation
        paused, taken = at_once(lambda: runner._finish(run, conversation, "the-worker", observer, result),
                                lambda: takeover.conversation_take_over(conversation=conversation, user=sam))
        assert paused is True or isinstance(paused, runner.TakenOver), paused  # not a deadlock's error
        assert not isinstance(taken, Exception), taken
        run.refresh_from_db()
        assert (run.status, run.stop_reason) == (Run.STOPPED, "taken_over")
        assert [m.content for m in conversation.messages.filter(role="tool")] == [takeover.TAKEN_OVER_RESULT]
        assert not Approval.objects.filter(run=run, decided_at__isnull=True).exists()


# -- item: take-over while the worker is in the middle of a run ---------------------------------------

def test_a_take_over_while_the_worker_runs_leaves_nothing_half_done_and_nothing_after_it(desk, queued, sam,
                                                                                          settings):
    # Small refunds run without a person, so the run's tools include one with an effect (a Refund row).
    settings.AUTO_APPROVE_REFUNDS_UP_TO = 100
    settings.FAULT_PAUSE_AFTER_TOOL = "issue_refund:0.05"  # the effect waits uncommitted for a moment
    settings.CUSTOMER_MESSAGES_PER_MINUTE = 10 * TRIALS  # one customer writes once per trial
    random.seed(11)
    for trial in range(TRIALS):
        conversation = start_conversation(desk.maya)
        services.conversation_post_message(conversation=conversation, text="My parcel SU-41310 never came.")
        run_id = queued.pop()
        agent_refunds().delete()
        # A run here takes about a quarter of a second: spread the take-overs across all of it.
        delay = 0.25 * (trial + random.random()) / TRIALS

        def take_over():
            threading.Event().wait(delay)
            return takeover.conversation_take_over(conversation=conversation, user=sam)

        worked, taken = at_once(lambda: runner.run_execute(run_id), take_over)
        assert not isinstance(worked, Exception) and not isinstance(taken, Exception), (worked, taken)
        run = Run.objects.get(pk=run_id)
        assert run.stop_reason in ("taken_over", "answered"), (trial, run.stop_reason, run.detail)
        # Nothing of the worker's after the take-over committed: its last message is the take-over's own.
        assert conversation.messages.filter(seq__gt=taken.last_seq).count() == 0, trial
        messages = list(conversation.messages.order_by("seq"))
        calls = [c["id"] for m in messages for c in m.tool_calls or []]
        results = Counter(m.tool_call_id for m in messages if m.role == "tool")
        assert results == Counter(calls), (trial, calls, results)  # each call answered exactly once
        refund_calls = [c["id"] for m in messages for c in m.tool_calls or [] if c["function"]["name"] == "issue_refund"]
        for call_id in refund_calls:  # an effect and its result commit together, or neither does
            result = next(m.content for m in messages if m.role == "tool" and m.tool_call_id == call_id)
            assert agent_refunds().exists() == (result != takeover.TAKEN_OVER_RESULT), (trial, result)
        if not refund_calls:
            assert not agent_refunds().exists()
