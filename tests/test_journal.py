"""support/desk/journal.py: a step's message, trace row, tool-call record and spending written at once, behind
the run's lease; one statement on PostgreSQL, one transaction of statements elsewhere (both run here: the
suite runs on SQLite and on PostgreSQL, and the multi-row unit takes the statements path on both)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from support.desk import journal, services
from support.models import Conversation, Message, Run, Step, ToolCall
from tests.desk_factories import start_conversation

pytestmark = pytest.mark.django_db


@pytest.fixture
def working(demo):
    """A conversation with one customer message and a run that holds the lease "L"."""
    conversation = start_conversation(demo.maya)
    run = Run.objects.create(conversation=conversation, status=Run.RUNNING, lease="L")
    conversation.refresh_from_db()
    return conversation, run


def reply_unit(run, conversation, **spent) -> journal.Unit:
    unit = journal.Unit(**spent)
    unit.messages.append(Message(conversation=conversation, role="assistant", author=Message.AGENT, run=run,
                                 content=None, tool_calls=[{"id": "c1", "type": "function",
                                                            "function": {"name": "search_policy", "arguments": "{}"}}]))
    unit.steps.append(Step(run=run, kind="model", turn=1, label="Thinking", prompt_tokens=120, completion_tokens=8,
                           cost_usd=0.0012, duration_ms=3.5))
    return unit


def result_unit(run, conversation, status=ToolCall.EXECUTED, result="{\"results\": []}") -> journal.Unit:
    unit = journal.Unit()
    unit.messages.append(Message(conversation=conversation, role="tool", author=Message.TOOL, run=run,
                                 content=result, tool_call_id="c1"))
    unit.steps.append(Step(run=run, kind="tool", turn=1, tool="search_policy", call_id="c1", result=result[:500]))
    unit.tool_calls.append(ToolCall(run=run, call_id="c1", name="search_policy", status=status, result=result,
                                    arguments={"query": "lost parcel"}, attempts=1, idempotency_key=f"{run.public_id}:c1"))
    return unit


def test_a_reply_and_its_trace_row_are_saved_with_the_next_seq_and_the_run_pays_for_the_call(working):
    conversation, run = working
    before = conversation.last_seq
    unit = reply_unit(run, conversation, turns=1, prompt_tokens=120, completion_tokens=8, cost_usd=Decimal("0.0012"))
    journal.write(unit, run=run, lease="L", conversation=conversation)

    message, step = unit.messages[0], unit.steps[0]
    assert message.pk and step.pk
    assert message.seq == before + 1 == conversation.last_seq
    saved = Message.objects.get(pk=message.pk)
    assert (saved.seq, saved.role, saved.run_id, saved.tool_calls[0]["id"]) == (before + 1, "assistant", run.pk, "c1")
    assert saved.created_at is not None
    assert Conversation.objects.get(pk=conversation.pk).last_seq == before + 1
    row = Step.objects.get(pk=step.pk)
    assert (row.kind, row.prompt_tokens, row.cost_usd) == ("model", 120, Decimal("0.001200"))
    run.refresh_from_db()
    assert (run.turns, run.prompt_tokens, run.completion_tokens, run.cost_usd) == (1, 120, 8, Decimal("0.001200"))
    assert run.heartbeat_at is not None


def test_a_tool_result_inserts_the_calls_record_or_updates_the_one_made_when_it_started(working):
    conversation, run = working
    journal.write(reply_unit(run, conversation), run=run, lease="L", conversation=conversation)
    journal.write(result_unit(run, conversation), run=run, lease="L", conversation=conversation)
    call = ToolCall.objects.get(run=run, call_id="c1")
    assert (call.status, call.attempts, call.arguments) == (ToolCall.EXECUTED, 1, {"query": "lost parcel"})

    # A call whose row exists already (an effect counted before it ran, attempts 2 after a crash): status
    # and result change; attempts and arguments stay as they were.
    ToolCall.objects.filter(pk=call.pk).update(status=ToolCall.RUNNING, attempts=2, arguments={"query": "first"})
    journal.write(result_unit(run, conversation, status=ToolCall.FAILED, result="ERROR: down"), run=run, lease="L",
                  conversation=conversation)
    call.refresh_from_db()
    assert (call.status, call.result, call.attempts, call.arguments) == (ToolCall.FAILED, "ERROR: down", 2,
                                                                         {"query": "first"})
    assert ToolCall.objects.filter(run=run).count() == 1


def test_without_the_lease_nothing_of_the_unit_is_written(working):
    conversation, run = working
    before = (conversation.last_seq, Message.objects.count(), Step.objects.count(), ToolCall.objects.count())
    for unit, beat in ((reply_unit(run, conversation, turns=1, prompt_tokens=5), True),
                       (result_unit(run, conversation), True), (result_unit(run, conversation), False)):
        with pytest.raises(services.LeaseLost), transaction.atomic():  # the test's own transaction goes on
            journal.write(unit, run=run, lease="another worker's", conversation=conversation, beat=beat)
    assert (Conversation.objects.get(pk=conversation.pk).last_seq, Message.objects.count(), Step.objects.count(),
            ToolCall.objects.count()) == before
    run.refresh_from_db()
    assert (run.turns, run.prompt_tokens) == (0, 0)


def test_a_message_someone_else_saved_in_between_shows_as_a_skipped_seq_and_the_state_comes_back(working):
    conversation, run = working
    journal.write(reply_unit(run, conversation), run=run, lease="L", conversation=conversation)
    ours = conversation.last_seq
    other = Conversation.objects.get(pk=conversation.pk)  # a customer's socket, with its own object
    services.message_append(conversation=other, wire={"role": "user", "content": "Any news?"}, author=Message.CUSTOMER)
    Conversation.objects.filter(pk=conversation.pk).update(status=Conversation.TAKEN_OVER)

    unit = result_unit(run, conversation)
    journal.write(unit, run=run, lease="L", conversation=conversation)
    assert unit.messages[0].seq == ours + 2  # the customer's message has ours + 1
    assert (conversation.last_seq, conversation.status) == (ours + 2, Conversation.TAKEN_OVER)


def test_a_unit_of_several_messages_keeps_their_order_and_seqs(working):
    conversation, run = working
    unit = journal.Unit()
    for i in range(3):
        unit.messages.append(Message(conversation=conversation, role="tool", author=Message.TOOL, run=run,
                                     content=f"result {i}", tool_call_id=f"c{i}"))
        unit.steps.append(Step(run=run, kind="tool", turn=1, tool="search_policy", call_id=f"c{i}"))
    before = conversation.last_seq
    journal.write(unit, run=run, lease="L", conversation=conversation)
    saved = list(Message.objects.filter(conversation=conversation, seq__gt=before).order_by("seq"))
    assert [(m.seq, m.content) for m in saved] == [(before + i + 1, f"result {i}") for i in range(3)]
    assert [s.call_id for s in Step.objects.filter(run=run).order_by("id")] == ["c0", "c1", "c2"]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the one-statement path is PostgreSQL's")
def test_on_postgresql_a_read_only_tools_whole_step_is_one_statement(working):
    conversation, run = working
    journal.write(reply_unit(run, conversation), run=run, lease="L", conversation=conversation)
    with CaptureQueriesContext(connection) as queries:
        journal.write(result_unit(run, conversation), run=run, lease="L", conversation=conversation)
    assert len(queries) == 1, [q["sql"] for q in queries]


def test_the_run_is_marked_alive_only_when_the_caller_says_a_beat_is_due(working):
    conversation, run = working
    journal.write(reply_unit(run, conversation, turns=1), run=run, lease="L", conversation=conversation, beat=False)
    run.refresh_from_db()
    assert (run.heartbeat_at, run.turns) == (None, 1)  # spending still counted
    journal.write(result_unit(run, conversation), run=run, lease="L", conversation=conversation, beat=True)
    run.refresh_from_db()
    assert run.heartbeat_at is not None


# -- the runner's observer on top of it --------------------------------------------------------------------

def test_after_its_own_append_the_run_asks_the_database_for_new_messages_only_when_someone_else_wrote(working):
    from support.agent import types as agent
    from support.desk import runner

    conversation, run = working
    observer = runner.DbObserver(run, conversation, "L", [], conversation.last_seq)
    with observer.atomic():
        observer.step(agent.Step(kind="model", turn=1, model="m", prompt_tokens=10))
        observer.message({"role": "assistant", "content": "Let me look.", "tool_calls": None})
    with CaptureQueriesContext(connection) as queries:
        assert observer.incoming() == []
    assert len(queries) == 0  # our append just returned the conversation's state: nobody else wrote

    other = Conversation.objects.get(pk=conversation.pk)
    services.message_append(conversation=other, wire={"role": "user", "content": "It's order SU-41310."},
                            author=Message.CUSTOMER)
    observer.message({"role": "assistant", "content": "Thanks, checking."})  # its seq skips the customer's
    with CaptureQueriesContext(connection) as queries:
        fresh = observer.incoming()
    assert fresh == [{"role": "user", "content": "It's order SU-41310."}]
    assert any('FROM "support_message"' in q["sql"] for q in queries)  # (and its attachments, if any)

    # Later (the model took a while): the state our append read is old, so the run asks, and a take-over
    # made meanwhile stops it before another model call.
    observer.message({"role": "assistant", "content": "One moment."})
    observer._state_at -= runner.DbObserver.STATE_FRESH_SECONDS
    Conversation.objects.filter(pk=conversation.pk).update(status=Conversation.TAKEN_OVER)
    Run.objects.filter(pk=run.pk).update(lease="")
    with pytest.raises(runner.TakenOver):
        observer.incoming()
