"""The runner at the edges of a turn: unexpected failures, strings too long for their columns, an empty
reply saved by an older version, a saved answer after a crash, ids a server reuses, an unpriced model."""

import pytest
from django.db import OperationalError

from support.desk import assistant, runner, services
from support.models import Approval, Conversation, Message, Run, Step, ToolCall
from tests.fake_model import ScriptedModel, answer, call, reply
from tests.standin_fixture import standin  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def ask(customer, text, queued):
    conversation = services.conversation_start(customer=customer)
    services.conversation_post_message(conversation=conversation, text=text)
    return conversation, queued.pop()


def use(monkeypatch, model):
    monkeypatch.setattr(assistant, "shared_model", lambda: model)
    return model


class Broken:
    def __init__(self, error):
        self.error = error

    def complete(self, transcript, tools, sink):
        raise self.error

    def cost(self, reply):
        return 0.0


def test_an_unexpected_error_stops_the_run_at_once_and_hands_it_over(desk, queued, monkeypatch):
    use(monkeypatch, Broken(AttributeError("'list' object has no attribute 'get'")))
    conversation, run_id = ask(desk.maya, "Where is SU-41210?", queued)
    assert runner.run_execute(run_id) == "internal_error"
    run = Run.objects.get(pk=run_id)
    assert (run.status, run.stop_reason, run.lease) == ("stopped", "internal_error", "")
    assert "AttributeError" in run.detail and run.summary
    conversation.refresh_from_db()
    assert conversation.status == Conversation.NEEDS_ATTENTION
    assert conversation.messages.last().author == Message.SYSTEM  # the customer is told


def test_an_unexpected_error_after_a_tool_call_closes_the_open_calls(desk, queued, monkeypatch):
    first = call("get_order", {"order_id": "SU-41210"})
    model = ScriptedModel(reply(calls=[first, call("track_parcel", {"tracking": "1Z999AA10123456784"})]))
    use(monkeypatch, model)
    real = runner.DbObserver.step_started

    def fail_on_tracking(self, step):
        if step.tool == "track_parcel":
            raise KeyError("boom")
        return real(self, step)

    monkeypatch.setattr(runner.DbObserver, "step_started", fail_on_tracking)
    conversation, run_id = ask(desk.maya, "Where is SU-41210?", queued)
    assert runner.run_execute(run_id) == "internal_error"
    history, _ = runner.history_for_model(list(conversation.messages.order_by("seq")))
    asked = [c["id"] for m in history if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    assert sorted(asked) == sorted(m["tool_call_id"] for m in history if m["role"] == "tool")
    results = [m for m in history if m["role"] == "tool"]
    assert len(results) == 2 and results[1]["content"].startswith("ERROR: not run")


def test_a_database_blip_requeues_the_run_at_once(desk, queued, monkeypatch):
    use(monkeypatch, Broken(OperationalError("server closed the connection unexpectedly")))
    conversation, run_id = ask(desk.maya, "Where is SU-41210?", queued)
    assert runner.run_execute(run_id) == "requeued"
    assert Run.objects.get(pk=run_id).status == "queued" and queued == [run_id]


def test_model_controlled_strings_longer_than_their_columns_are_clipped(desk, queued, monkeypatch):
    long_name = "lookup_" + "x" * 300
    model = use(monkeypatch, ScriptedModel(reply(calls=[call(long_name, {"a": 1}, call_id="c" * 300)]),
                                           reply("Sorry, I could not find that.", finish="stop" + "p" * 40)))
    conversation, run_id = ask(desk.maya, "Where is SU-41210?", queued)
    result = runner.run_execute(run_id)
    model.assert_complete()
    assert result in ("answered", "model_error")  # a finish reason we do not know is not an answer
    row = ToolCall.objects.get(run_id=run_id)
    assert len(row.name) <= 64 and len(row.call_id) <= 128
    assert all(len(s.finish_reason) <= 20 for s in Step.objects.filter(run_id=run_id))
    assert Run.objects.get(pk=run_id).status == "stopped"


def test_an_empty_reply_saved_by_an_older_version_is_left_out_of_the_request(desk, queued, standin):
    conversation, run_id = ask(desk.maya, "Where is SU-41210?", queued)
    assert runner.run_execute(run_id) == "answered"
    services.message_append(conversation=conversation, wire={"role": "assistant", "content": None},
                            author=Message.AGENT)  # as an older version saved an empty reply
    services.conversation_post_message(conversation=conversation, text="And where is SU-41207?")
    assert runner.run_execute(queued.pop()) == "answered"  # the stand-in would answer 400 to the null content


def test_a_run_resumed_after_its_answer_was_saved_does_not_answer_twice(desk, queued, standin):
    conversation, run_id = ask(desk.maya, "Where is SU-41210?", queued)
    assert runner.run_execute(run_id) == "answered"
    requests, count = len(standin.requests()), conversation.messages.count()
    # as if the worker died after saving the answer and before marking the run stopped
    Run.objects.filter(pk=run_id).update(status=Run.QUEUED, stop_reason="", lease="")
    assert runner.run_execute(run_id) == "answered"
    assert len(standin.requests()) == requests and conversation.messages.count() == count


def test_a_gated_call_whose_id_the_server_reused_gets_its_own_approval(desk, queued, monkeypatch):
    use(monkeypatch, ScriptedModel(
        reply(calls=[call("get_order", {"order_id": "SU-41310"}, call_id="call_0")]),
        reply(calls=[call("issue_refund", {"order_id": "SU-41310", "amount": "64.00", "reason": "lost"},
                          call_id="call_0")])))
    conversation, run_id = ask(desk.maya, "My parcel SU-41310 never came.", queued)
    assert runner.run_execute(run_id) == "awaiting_approval"
    rows = {r.name: r for r in ToolCall.objects.filter(run_id=run_id)}
    assert rows["get_order"].status == "executed" and rows["issue_refund"].status == "pending_approval"
    assert rows["get_order"].call_id == "call_0" and rows["issue_refund"].call_id != "call_0"
    assert Approval.objects.get(run_id=run_id).tool_call == rows["issue_refund"]


def test_a_run_on_an_unpriced_model_is_refused_before_any_model_call(desk, queued, standin, settings):
    settings.MODEL_NAME = "someones-model"
    conversation, run_id = ask(desk.maya, "Where is SU-41210?", queued)
    assert runner.run_execute(run_id) == "model_error"
    run = Run.objects.get(pk=run_id)
    assert "has no price" in run.detail and run.turns == 0 and standin.requests() == []
    settings.AGENT_MAX_COST_USD = 0  # an explicit "no cost cap"
    assert assistant.model_price_problem() == ""
    settings.AGENT_MAX_COST_USD, settings.MODEL_DEFAULT_PRICE = 0.5, (1.0, 2.0)
    assert assistant.model_price_problem() == ""


def test_the_default_price_prices_a_model_missing_from_the_table(desk, queued, standin, settings):
    settings.MODEL_NAME, settings.MODEL_DEFAULT_PRICE = "someones-model", (1000.0, 1000.0)
    conversation, run_id = ask(desk.maya, "Where is SU-41210?", queued)
    runner.run_execute(run_id)
    run = Run.objects.get(pk=run_id)
    assert run.turns >= 1 and run.cost_usd > 0
