"""How a turn ends: empty and cut-off replies, the answer and its outcome in one reply, a crash after the
answer, repeats the loop must notice, ids a server reuses, and what failed model calls still cost."""

import json

import pytest

from support.agent.loop import SPIN_WARNING_PREFIX, run_loop
from support.agent.tools import Tool, ToolContext
from support.agent.types import (
    AWAITING_APPROVAL,
    Decision,
    Limits,
    ModelError,
    Observer,
    Transcript,
)
from tests.fake_model import Forever, ScriptedModel, answer, call, reply

RAN = []
ORDER_SCHEMA = {"type": "object", "properties": {"order_id": {"type": "string"}},
                "required": ["order_id"], "additionalProperties": False}


def lookup(ctx, order_id):
    RAN.append(("get_order", ctx.call_id, order_id))
    return {"order_id": order_id, "status": "delivered"}


def message_seller(ctx, order_id):
    RAN.append(("message_seller", ctx.call_id, order_id))
    return {"sent": True}


TOOLS = [
    Tool("get_order", "Look up an order.", ORDER_SCHEMA, lookup),
    Tool("message_seller", "Write to the seller.", ORDER_SCHEMA, message_seller),
    Tool("issue_refund", "Refund.", ORDER_SCHEMA, lambda ctx, order_id: {"ok": True}, gated=True),
]


class Recorder(Observer):
    def __init__(self):
        self.messages, self.steps = [], []

    def message(self, m):
        self.messages.append(m)

    def step(self, s):
        self.steps.append(s)


@pytest.fixture(autouse=True)
def _clear():
    RAN.clear()


def start(*extra):
    return Transcript([{"role": "system", "content": "You are Sundry's agent."},
                       {"role": "user", "content": "Where is SU-1?"}, *extra])


def go(model, transcript=None, **kw):
    rec = Recorder()
    t = transcript or start()
    result = run_loop(t, model=model, tools=kw.pop("tools", TOOLS), ctx=ToolContext(customer_id=1, run_id="r1"),
                      observer=rec, **kw)
    return result, t, rec


class Priced(ScriptedModel):
    """Prices by tokens, so failed attempts' usage shows in the cost."""

    def cost(self, r):
        return (r.prompt_tokens + r.completion_tokens) / 1000


# -- A1: an empty reply is not an answer ------------------------------------------------------------

def test_an_empty_reply_stops_as_empty_reply_and_saves_nothing():
    result, t, rec = go(ScriptedModel(reply(None, finish="stop")))
    assert result.stop_reason == "empty_reply" and result.outcome == "handed_to_person"
    assert [m["role"] for m in t.messages] == ["system", "user"]  # no assistant message without content
    assert rec.messages == []
    assert rec.steps[0].kind == "model" and rec.steps[0].error == "empty reply"


def test_a_whitespace_only_reply_is_empty_too():
    result, t, _ = go(ScriptedModel(reply("  \n ", finish="stop")))
    assert result.stop_reason == "empty_reply" and len(t) == 2


def test_an_empty_reply_error_from_the_model_call_stops_as_empty_reply():
    err = ModelError("the model replied with neither text nor tool calls twice", attempts=2, code="empty_reply")
    result, _, rec = go(ScriptedModel(err))
    assert result.stop_reason == "empty_reply" and rec.steps[0].attempts == 2


# -- A2: the answer and its outcome in one reply ------------------------------------------------------

def test_an_answer_with_only_record_outcome_ends_the_turn_without_another_model_call():
    outcome = call("record_outcome", {"outcome": "resolved", "summary": "told the customer"})
    model = ScriptedModel(reply("Your parcel was delivered on Tuesday.", [outcome], finish="tool_calls"))
    result, t, _ = go(model)
    model.assert_complete()  # one call: no second, full-context request
    assert result.stop_reason == "answered" and result.outcome == "resolved"
    assert result.answer == "Your parcel was delivered on Tuesday."
    assert t[-1] == {"role": "tool", "tool_call_id": outcome["id"], "content": json.dumps({"recorded": "resolved"})}


def test_a_text_with_a_real_tool_call_is_not_an_answer():
    model = ScriptedModel(reply("Let me check.", [call("get_order", {"order_id": "SU-1"})]), *answer("Delivered."))
    result, _, _ = go(model)
    model.assert_complete()
    assert result.answer == "Delivered." and RAN and RAN[0][0] == "get_order"


# -- A3: cut-off replies close their calls ----------------------------------------------------------

@pytest.mark.parametrize("finish", ["length", "content_filter"])
def test_a_cut_off_reply_answers_its_calls_as_not_run(finish):
    c1, c2 = call("get_order", {"order_id": "SU-1"}), call("message_seller", {"order_id": "SU-1"})
    result, t, _ = go(ScriptedModel(reply("I'll", [c1, c2], finish=finish)))
    assert result.stop_reason == "model_error" and RAN == []
    results = {m["tool_call_id"]: m["content"] for m in t.messages if m["role"] == "tool"}
    assert set(results) == {c1["id"], c2["id"]}
    assert all(r.startswith("ERROR: not run: the reply was cut off") for r in results.values())
    # a later run (after a hand-back) finds nothing open to execute
    result, _, _ = go(ScriptedModel(*answer("ok")), transcript=t)
    assert RAN == []


# -- A4: a crash between the final answer and the end of the run --------------------------------------

def test_a_history_ending_in_an_answer_finishes_without_a_model_call():
    t = start({"role": "assistant", "content": "It was delivered."})
    model = ScriptedModel()  # any call fails the test
    result, _, _ = go(model, transcript=t)
    assert result.stop_reason == "answered" and result.answer == "It was delivered." and len(t) == 3


def test_an_answer_whose_outcome_was_recorded_before_the_crash_keeps_that_outcome():
    outcome = call("record_outcome", {"outcome": "waiting_on_customer", "summary": "asked for a photo"})
    t = start({"role": "assistant", "content": None, "tool_calls": [outcome]},
              {"role": "tool", "tool_call_id": outcome["id"], "content": '{"recorded": "waiting_on_customer"}'},
              {"role": "assistant", "content": "Could you send a photo?"})
    result, _, _ = go(ScriptedModel(), transcript=t)
    assert result.stop_reason == "answered" and result.outcome == "waiting_on_customer"


def test_an_answer_with_its_outcome_call_still_open_records_it_and_finishes():
    outcome = call("record_outcome", {"outcome": "resolved", "summary": "done"})
    t = start({"role": "assistant", "content": "All sorted.", "tool_calls": [outcome]})
    result, _, _ = go(ScriptedModel(), transcript=t)
    assert result.stop_reason == "answered" and result.outcome == "resolved" and t[-1]["role"] == "tool"


def test_a_customer_message_after_the_answer_is_answered():
    t = start({"role": "assistant", "content": "It was delivered."}, {"role": "user", "content": "Not here."})
    model = ScriptedModel(*answer("I'll open a claim."))
    result, _, _ = go(model, transcript=t)
    model.assert_complete()
    assert result.answer == "I'll open a claim."


# -- A6: spin detection ----------------------------------------------------------------------------

def test_the_same_unknown_tool_every_turn_is_a_spin():
    model = Forever(lambda: reply(calls=[call("teleport_parcel", {"order_id": "SU-1"})]))
    result, t, _ = go(model, limits=Limits(max_steps=12, spin_max_repeats=2))
    assert result.stop_reason == "spinning" and model.calls == 4


def test_the_same_malformed_arguments_every_turn_are_a_spin():
    model = Forever(lambda: reply(calls=[call("get_order", raw='{"order_id": "SU-1"')]))
    result, _, _ = go(model, limits=Limits(max_steps=12, spin_max_repeats=2))
    assert result.stop_reason == "spinning" and model.calls == 4


def test_the_warning_says_same_result_only_when_it_was():
    same = Forever(lambda: reply(calls=[call("get_order", {"order_id": "SU-1"})]))
    _, t, _ = go(same, limits=Limits(spin_max_repeats=2))
    warning = next(m["content"] for m in t.messages if m["role"] == "tool" and m["content"].startswith(SPIN_WARNING_PREFIX))
    assert "same arguments 2 times and it gave the same result" in warning

    counter = iter(range(100))

    def changing(ctx, order_id):
        return {"n": next(counter)}

    tools = [Tool("get_order", "x", ORDER_SCHEMA, changing)]
    _, t, _ = go(Forever(lambda: reply(calls=[call("get_order", {"order_id": "SU-1"})])), tools=tools,
                 limits=Limits(spin_max_repeats=2))
    warning = next(m["content"] for m in t.messages if m["role"] == "tool" and m["content"].startswith(SPIN_WARNING_PREFIX))
    assert "same result" not in warning and "same arguments 2 times" in warning


def test_a_crash_after_the_third_identical_call_still_warns_before_stopping():
    c = lambda: call("get_order", {"order_id": "SU-1"})  # noqa: E731
    first, second, third = c(), c(), c()
    t = start({"role": "assistant", "content": None, "tool_calls": [first]},
              {"role": "tool", "tool_call_id": first["id"], "content": "{}"},
              {"role": "assistant", "content": None, "tool_calls": [second]},
              {"role": "tool", "tool_call_id": second["id"], "content": "{}"},
              {"role": "assistant", "content": None, "tool_calls": [third]})  # crashed before its result
    model = ScriptedModel(*answer("Delivered."))
    result, t, _ = go(model, transcript=t, limits=Limits(spin_max_repeats=2))
    assert t[7]["tool_call_id"] == third["id"] and t[7]["content"].startswith(SPIN_WARNING_PREFIX)
    assert result.stop_reason == "answered"  # warned, and the model listened


# -- A7: ids the server reuses ---------------------------------------------------------------------

def test_ids_a_server_numbers_per_reply_are_made_unique_in_the_conversation():
    model = ScriptedModel(reply(calls=[call("get_order", {"order_id": "SU-1"}, call_id="call_0")]),
                          reply(calls=[call("get_order", {"order_id": "SU-2"}, call_id="call_0"),
                                       call("get_order", {"order_id": "SU-3"}, call_id="call_0")]),
                          *answer("Both delivered."))
    result, t, _ = go(model)
    ids = [c["id"] for m in t.messages for c in m.get("tool_calls") or []]
    assert len(ids) == 4 and len(set(ids)) == 4 and ids[0] == "call_0"
    # each result answers its own call, and the model was sent the ids it must match
    results = [m["tool_call_id"] for m in t.messages if m["role"] == "tool"]
    assert results == ids
    assert [c["id"] for c in model.sent[2][4]["tool_calls"]] == ids[1:3]
    assert [r[2] for r in RAN] == ["SU-1", "SU-2", "SU-3"] and len({r[1] for r in RAN}) == 3


def test_a_reused_id_on_a_gated_call_gets_its_own_pending_call():
    model = ScriptedModel(reply(calls=[call("get_order", {"order_id": "SU-1"}, call_id="call_0")]),
                          reply(calls=[call("issue_refund", {"order_id": "SU-1"}, call_id="call_0")]))
    result, t, _ = go(model)
    assert result.status == AWAITING_APPROVAL and result.pending[0].call.id != "call_0"
    result, _, _ = go(ScriptedModel(*answer("Refunded.")), transcript=t,
                      decisions={result.pending[0].call.id: Decision(approved=True)})
    assert result.stop_reason == "answered"


def test_a_missing_id_gets_one_and_a_nine_character_id_keeps_its_form():
    c = call("get_order", {"order_id": "SU-1"}, call_id="a1B2c3D4e")
    model = ScriptedModel(reply(calls=[c]), reply(calls=[dict(call("get_order", {"order_id": "SU-2"}), id="")]),
                          reply(calls=[dict(call("get_order", {"order_id": "SU-3"}), id="a1B2c3D4e")]),
                          *answer("ok"))
    _, t, _ = go(model)
    ids = [c["id"] for m in t.messages for c in m.get("tool_calls") or []][:3]
    assert ids[0] == "a1B2c3D4e" and ids[1].startswith("call_") and len(ids[1]) > 5
    assert ids[2] != "a1B2c3D4e" and len(ids[2]) == 9 and ids[2].isalnum()


# -- A8: what failed model calls cost --------------------------------------------------------------

def test_tokens_reported_by_failed_attempts_count_against_the_budget():
    err = ModelError("gave up after 4 attempts", attempts=4, prompt_tokens=900, completion_tokens=100)
    result, _, rec = go(Priced(err))
    assert result.stop_reason == "model_error"
    assert result.spent.prompt_tokens == 900 and result.spent.completion_tokens == 100
    assert result.spent.cost_usd == pytest.approx(1.0)
    assert rec.steps[0].prompt_tokens == 900 and rec.steps[0].cost_usd == pytest.approx(1.0)


def test_a_quota_error_stops_with_its_own_reason():
    err = ModelError("429: You exceeded your current quota", status=429, code="quota_exceeded")
    result, _, _ = go(ScriptedModel(err))
    assert result.stop_reason == "quota_exceeded" and result.outcome == "handed_to_person"
