"""Runs in a real worker process: a customer's message is answered, a run is claimed once, one run per conversation."""

import pytest

from support.desk import runner, services
from support.models import Message, Run, SellerMessage, Step, ToolCall
from support.tasks import run_agent

from .conftest import (
    ask,
    assert_history_sound,
    assert_trace_complete,
    customer_messages,
    final_answer,
    snapshot,
    wait_for,
    wait_run,
)

pytestmark = pytest.mark.django_db(transaction=True)

MISSING_41207 = "Tracking says delivered on Thursday but nothing arrived. Order SU-41207"


def test_it_answers_a_customer_message_from_a_worker_process(demo, worker):
    worker()
    conversation, message, run = ask(demo.maya, MISSING_41207)
    assert message.seq == 2  # after the system prompt

    run = wait_run(run, Run.STOPPED)
    assert (run.stop_reason, run.outcome, run.attempts, run.lease) == ("answered", "waiting", 1, "")  # on the seller, who was messaged
    assert run.finished_at is not None

    messages = assert_history_sound(conversation)
    assert [m.role for m in messages[:2]] == ["system", "user"]
    assert customer_messages(conversation, MISSING_41207) == 1
    answer = final_answer(conversation)
    assert answer.author == Message.AGENT and "48 hours" in answer.content
    called = [c["function"]["name"] for m in messages for c in m.tool_calls or []]
    assert called == ["get_order", "track_parcel", "search_policy", "message_seller", "record_outcome"]

    assert_trace_complete(run)
    assert Step.objects.filter(run=run, kind="tool").count() == len(called)
    assert set(ToolCall.objects.filter(run=run).values_list("status", flat=True)) == {ToolCall.EXECUTED}
    sent = SellerMessage.objects.filter(order__number="SU-41207")
    assert sent.count() == 1
    assert sent.get().tool_call_id == ToolCall.objects.get(run=run, name="message_seller").idempotency_key


def test_a_late_duplicate_task_for_a_finished_run_changes_nothing(demo, worker):
    w = worker()
    conversation, _, run = ask(demo.maya, "Where is my order SU-41210?")
    run = wait_run(run, Run.STOPPED)
    assert run.stop_reason == "answered"

    def state():
        fresh = Run.objects.get(pk=run.pk)
        return (conversation.messages.count(), Step.objects.filter(run=run).count(),
                ToolCall.objects.filter(run=run).count(), fresh.status, fresh.stop_reason, fresh.attempts,
                fresh.turns, fresh.heartbeat_at, fresh.finished_at, fresh.lease)

    before = state()
    # A redelivered or duplicated task reaches the worker: it finds nothing to claim.
    late = run_agent.delay(run.pk)
    line = w.wait_for_log(f"run_agent[{late.id}] succeeded")
    assert "'not claimed'" in line
    # The same in this process, the way any other worker would run it.
    assert runner.run_execute(run.pk) == "not claimed"
    assert state() == before


# What each run tells the model besides the saved messages: the customer's language, and (Maya is signed in by the
# shop's token) the orders the desk already knows (support/desk/known_orders.py).
CONTEXT_LINES = 2


def test_back_to_back_customer_messages_share_one_run_and_get_an_answer_after_the_last(demo, worker, model_server):
    worker()
    first, second = "Where is my order SU-41210?", "It's a birthday present, so I'd love to know when it arrives."
    conversation, _, run = ask(demo.maya, first)
    message, same_run, created = services.conversation_post_message(conversation=conversation, text=second)
    assert created and same_run.pk == run.pk  # the conversation's active run takes the second message too

    run = wait_run(run, Run.STOPPED)
    assert run.stop_reason == "answered"
    wait_for(lambda: not Run.objects.filter(conversation=conversation, status__in=Run.ACTIVE).exists(),
             message="no active run", describe=lambda: snapshot(conversation))
    assert Run.objects.filter(conversation=conversation).count() == 1
    assert_history_sound(conversation)
    assert customer_messages(conversation, first) == customer_messages(conversation, second) == 1
    assert final_answer(conversation).seq > message.seq
    # every saved message but the answer, and the lines telling the model the customer's language and orders
    assert model_server.requests()[-1]["n_messages"] == conversation.messages.count() - 1 + CONTEXT_LINES


def test_a_message_written_while_the_run_works_is_read_by_that_run(demo, worker, model_server):
    # The first model call is held for a moment so the second message certainly arrives mid-run.
    first = "Where is my order SU-41210? (chat ref mid-run-1)"
    model_server.queue_faults(["delay:ms=1500"], match="chat ref mid-run-1")
    worker()
    conversation, _, run = ask(demo.maya, first)
    wait_for(lambda: not model_server.state.pending(), timeout=10, message="the first model request to arrive")
    second = "It's a birthday present, so I'd love to know when it arrives."
    message, same_run, _ = services.conversation_post_message(conversation=conversation, text=second)
    assert same_run.pk == run.pk

    run = wait_run(run, Run.STOPPED)
    assert run.stop_reason == "answered" and run.attempts == 1
    assert Run.objects.filter(conversation=conversation).count() == 1
    messages = assert_history_sound(conversation)
    answer = final_answer(conversation)
    assert answer.seq > message.seq and answer.run_id == run.pk
    # The model's last request carried the whole conversation, the second message included.
    assert model_server.requests()[-1]["n_messages"] == len(messages) - 1 + CONTEXT_LINES
