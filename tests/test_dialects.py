"""Any OpenAI-compatible server: the model call and whole tickets against the stand-in speaking each dialect.

A dialect is how a server family differs from OpenAI (standin/dialects.py): ids, chunk shapes, finish
reasons, usage, reasoning deltas and the shapes its validator refuses. Every ticket here runs the real loop
over HTTP, so every history the loop builds is also one that dialect's validator accepts.
"""

import json

import pytest
from django.core.management import call_command

from standin.dialects import DIALECTS, THINKING
from support.agent.types import Decision, Transcript
from support.desk import gate, runner, services
from support.models import Approval, Refund
from tests.desk_factories import work_ticket
from tests.standin_fixture import standin  # noqa: F401
from tests.test_model_call import TOOLS, Sink, make, ticket

NAMES = list(DIALECTS)


@pytest.fixture(params=NAMES)
def speaking(request, standin):
    """The stand-in, speaking one dialect."""
    standin.configure(dialect=request.param)
    return standin


# -- the model call --------------------------------------------------------------------------------

def test_a_tool_call_reply_is_read_whole_with_its_arguments_as_a_json_string(speaking):
    model, _ = make(speaking)
    reply = model.complete(ticket(), TOOLS, Sink())
    [call] = reply.tool_calls
    assert call.name == "get_order" and json.loads(call.arguments) == {"order_id": "SU-41210"}
    assert reply.message["content"] == ""  # not null: Ollama and older llama.cpp refuse null content
    assert reply.prompt_tokens > 0 and reply.completion_tokens > 0


def test_several_calls_in_one_reply_stay_separate_calls(speaking):
    model, _ = make(speaking)
    reply = model.complete(ticket("Where is my order SU-41210? #fault:parallel"), TOOLS, Sink())
    assert [c.name for c in reply.tool_calls] == ["get_order", "search_policy"]
    assert [json.loads(c.arguments) for c in reply.tool_calls] == [{"order_id": "SU-41210"}, {"query": "refunds"}]


def test_thinking_never_reaches_the_customer_nor_the_history(speaking):
    model, _ = make(speaking)
    sink = Sink()
    reply = model.complete(ticket("Hello, can you help me?"), TOOLS, sink)
    assert reply.content and "".join(sink.tokens) == reply.content
    assert "look it up" not in json.dumps(reply.message) and "look it up" in THINKING
    assert set(reply.message) <= {"role", "content", "tool_calls"}


# -- whole tickets through the loop ----------------------------------------------------------------

@pytest.fixture
def shop(db):
    call_command("seed_demo", verbosity=0)


def work(server, text, decide=None):
    return work_ticket(server, text, decide=decide, run_id=f"dialect-{text[:8]}", max_retry_wait=0.05)


def well_formed(transcript: Transcript) -> bool:
    """Every assistant message has text or calls, content is never null, arguments are JSON strings."""
    for m in transcript:
        if m["role"] != "assistant":
            continue
        calls = m.get("tool_calls") or []
        if m.get("content") is None or not (calls or m["content"].strip()):
            return False
        if any(not isinstance(c["function"]["arguments"], str) for c in calls):
            return False
    return True


@pytest.mark.django_db
def test_a_refund_waits_for_approval_then_is_made_once(speaking, shop):
    result, t, tools, paused = work(speaking, "My parcel SU-41310 never came.", decide=Decision(approved=True))
    assert paused == ["issue_refund"] and result.stop_reason == "answered", result.detail
    assert [str(r.amount) for r in Refund.objects.filter(order__number="SU-41310")] == ["64.00"]
    assert well_formed(t)


@pytest.mark.django_db
def test_a_missing_parcel_is_tracked_and_the_seller_asked(speaking, shop):
    result, t, tools, _ = work(speaking, "Tracking says delivered on Thursday but there is nothing here. "
                                         "Order SU-41207.")
    assert tools[:4] == ["get_order", "track_parcel", "search_policy", "message_seller"]
    assert result.stop_reason == "answered" and "48 hours" in result.answer and well_formed(t)


@pytest.mark.django_db
def test_a_reply_of_several_calls_has_each_call_answered(speaking, shop):
    result, t, tools, _ = work(speaking, "Where is SU-41210? #fault:parallel")
    assert tools[:2] == ["get_order", "search_policy"] and result.stop_reason == "answered"
    first = next(m for m in t if m.get("tool_calls"))
    answers = t.messages[t.messages.index(first) + 1:][:2]
    assert len(first["tool_calls"]) == 2 and [m["role"] for m in answers] == ["tool", "tool"]
    assert "SU-41210" in answers[0]["content"] and "results" in answers[1]["content"]
    assert well_formed(t)


# -- whole tickets through the runner (database, approvals, ids stored per run) --------------------

@pytest.mark.django_db(transaction=True)
def test_the_desk_works_a_refund_with_approval_under_each_dialect(desk, queued, speaking):
    conversation = services.conversation_start(customer=desk.maya)
    services.conversation_post_message(conversation=conversation, text="My parcel SU-41310 never came.")
    run_id = queued.pop()
    assert runner.run_execute(run_id) == "awaiting_approval"
    gate.approval_decide(approval=Approval.objects.get(run_id=run_id), user=None, approve=True)
    assert runner.run_execute(queued.pop()) == "answered"
    assert Refund.objects.filter(order__number="SU-41310").count() == 1


# -- whole tickets that end on the endpoint's failures ---------------------------------------------

@pytest.mark.django_db
@pytest.mark.parametrize("fault,stop_reason", [("emptyx2", "empty_reply"), ("quota", "quota_exceeded")])
def test_a_ticket_stops_with_the_reason_the_endpoint_gave(standin, shop, fault, stop_reason):
    result, _, tools, _ = work(standin, f"Where is SU-41210? #fault:{fault}")
    assert result.stop_reason == stop_reason and result.summary and tools == []
    assert result.spent.prompt_tokens > 0 or stop_reason == "quota_exceeded"  # empty replies cost tokens too
