"""Independent read-only calls of one reply run at the same time; their results are appended in the order of
the calls, so the history is the one a sequential run writes. Writes and gated calls stay in order."""

import threading

import pytest

from support.agent.loop import run_loop
from support.agent.tools import Tool, ToolContext
from support.agent.types import Observer, Transcript
from support.desk import assistant, runner, services
from support.models import Message, Step
from tests.fake_model import ScriptedModel, answer, call, reply

SCHEMA = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}


def start():
    return Transcript([{"role": "system", "content": "agent"}, {"role": "user", "content": "Where are my orders?"}])


def test_four_reads_of_one_reply_run_at_the_same_time_and_answer_in_call_order():
    met = threading.Barrier(4, timeout=5)  # passes only if all four reads are under way at once

    def read(ctx, order_id):
        met.wait()
        return {"order_id": order_id, "call": ctx.call_id}

    tools = [Tool("get_order", "x", SCHEMA, read, read_only=True)]
    calls = [call("get_order", {"order_id": f"SU-{n}"}) for n in range(4)]
    t = start()
    result = run_loop(t, model=ScriptedModel(reply(calls=calls), *answer("All four found.")), tools=tools,
                      ctx=ToolContext(customer_id=1, run_id="r"))
    assert result.stop_reason == "answered"
    results = [m for m in t.messages if m["role"] == "tool"][:4]
    assert [m["tool_call_id"] for m in results] == [c["id"] for c in calls]
    assert all(f'"SU-{n}"' in m["content"] and "ERROR" not in m["content"] for n, m in enumerate(results))


def test_writes_are_not_made_ahead_and_keep_their_place():
    order = []

    def read(ctx, order_id):
        order.append(("read", order_id))
        return {}

    def write(ctx, order_id):
        order.append(("write", order_id))
        return {}

    tools = [Tool("get_order", "x", SCHEMA, read, read_only=True), Tool("message_seller", "x", SCHEMA, write)]
    calls = [call("get_order", {"order_id": "A"}), call("message_seller", {"order_id": "B"}),
             call("get_order", {"order_id": "C"})]
    t = start()
    run_loop(t, model=ScriptedModel(reply(calls=calls), *answer("ok")), tools=tools,
             ctx=ToolContext(customer_id=1, run_id="r"))
    assert ("write", "B") in order and [m["tool_call_id"] for m in t.messages if m["role"] == "tool"][:3] == \
        [c["id"] for c in calls]


def test_a_read_that_fails_fails_in_its_own_place():
    def read(ctx, order_id):
        if order_id == "bad":
            raise RuntimeError("boom")
        return {"order_id": order_id}

    tools = [Tool("get_order", "x", SCHEMA, read, read_only=True)]
    calls = [call("get_order", {"order_id": "ok"}), call("get_order", {"order_id": "bad"})]
    t = start()
    run_loop(t, model=ScriptedModel(reply(calls=calls), *answer("ok")), tools=tools,
             ctx=ToolContext(customer_id=1, run_id="r"))
    results = [m["content"] for m in t.messages if m["role"] == "tool"]
    assert "ok" in results[0] and results[1].startswith("ERROR: get_order failed unexpectedly")


@pytest.mark.django_db(transaction=True)
def test_the_shops_reads_run_together_through_the_runner_each_with_its_own_connection(desk, queued, monkeypatch):
    calls = [call("get_order", {"order_id": "SU-41207"}), call("get_order", {"order_id": "SU-41310"}),
             call("track_parcel", {"tracking": "HL40120771"}), call("search_policy", {"query": "missing parcel"})]
    model = ScriptedModel(reply(calls=calls), *answer("Found them."))
    monkeypatch.setattr(assistant, "shared_model", lambda: model)
    conversation = services.conversation_start(customer=desk.maya)
    services.conversation_post_message(conversation=conversation, text="Where are SU-41207 and SU-41310?")
    assert runner.run_execute(queued.pop()) == "answered"
    results = list(Message.objects.filter(conversation=conversation, role="tool").order_by("seq"))[:4]
    assert [m.tool_call_id for m in results] == [c["id"] for c in calls]
    assert '"SU-41207"' in results[0].content and '"SU-41310"' in results[1].content
    assert "HL40120771" in results[2].content and "ERROR" not in "".join(m.content for m in results)
    assert Step.objects.filter(run__conversation=conversation, kind="tool").count() >= 4
