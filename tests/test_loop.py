"""The agent loop against a scripted model: no database, no HTTP. Each test is one behaviour of the seeds."""

import json
import subprocess
import sys
from dataclasses import replace

import pytest

from support.agent.loop import OUTCOME_TOOL, run_loop
from support.agent.tools import Tool, ToolContext, ToolError
from support.agent.types import (
    AWAITING_APPROVAL,
    Decision,
    Limits,
    Observer,
    Step,
    Transcript,
)
from tests.fake_model import Forever, ScriptedModel, answer, call, failing, reply

LOOKUPS = []


def lookup(ctx, order_id):
    LOOKUPS.append((ctx.call_id, order_id))
    if order_id == "SU-0":
        raise ToolError("No order SU-0 was found for this customer.")
    if order_id == "SU-CRASH":
        raise RuntimeError("database exploded")
    return {"order_id": order_id, "status": "delivered"}


REFUNDS = []


def refund(ctx, order_id, amount):
    REFUNDS.append((ctx.call_id, order_id, amount))
    return {"refund_id": "R-1", "amount": amount}


ORDER_SCHEMA = {"type": "object", "properties": {"order_id": {"type": "string"}},
                "required": ["order_id"], "additionalProperties": False}
GET_ORDER = Tool("get_order", "Look up an order.", ORDER_SCHEMA, lookup, label="Looking up your order")
ISSUE_REFUND = Tool("issue_refund", "Refund.", {
    "type": "object", "properties": {"order_id": {"type": "string"}, "amount": {"type": "string"}},
    "required": ["order_id", "amount"], "additionalProperties": False}, refund, gated=True)
ESCALATE = Tool("escalate_to_human", "Hand over.", {"type": "object", "properties": {"reason": {"type": "string"}}},
                lambda ctx, **a: {"status": "escalated"}, gated=True, terminal=True)
BIG = Tool("dump", "Big output.", {"type": "object"}, lambda ctx: "x" * 10_000)
TOOLS = [GET_ORDER, ISSUE_REFUND, ESCALATE, BIG]


class Recorder(Observer):
    def __init__(self):
        self.messages, self.steps, self.tokens, self.events = [], [], [], []

    def message(self, m):
        self.messages.append(m)
        self.events.append(("message", m.get("role")))

    def step(self, s: Step):
        self.steps.append(s)

    def token(self, d):
        self.tokens.append(d)


def start(text="Where is SU-1?"):
    return Transcript([{"role": "system", "content": "You are Sundry's agent."}, {"role": "user", "content": text}])


def go(model, transcript=None, **kw):
    rec = kw.pop("observer", None) or Recorder()
    t = transcript or start()
    result = run_loop(t, model=model, tools=kw.pop("tools", TOOLS), ctx=ToolContext(customer_id=1, run_id="r1"),
                      observer=rec, **kw)
    return result, t, rec


@pytest.fixture(autouse=True)
def _clear():
    LOOKUPS.clear()
    REFUNDS.clear()


def test_it_appends_the_assistant_message_verbatim_with_its_tool_calls():
    c = call("get_order", {"order_id": "SU-1"})
    model = ScriptedModel(reply("Let me look.", [c]), *answer("It was delivered."))
    result, t, rec = go(model)
    assert result.stop_reason == "answered" and result.answer == "It was delivered."
    assert t[2] == {"role": "assistant", "content": "Let me look.", "tool_calls": [c]}
    assert t[3]["role"] == "tool" and t[3]["tool_call_id"] == c["id"]
    assert json.loads(t[3]["content"]) == {"order_id": "SU-1", "status": "delivered"}
    # the second request carried the call and its result, in that order
    assert [m["role"] for m in model.sent[1]] == ["system", "user", "assistant", "tool"]
    model.assert_complete()


def test_it_saves_each_message_before_acting_on_it():
    order = []

    class Spy(Recorder):
        def message(self, m):
            order.append(("saved", m["role"]))

    def spy_lookup(ctx, order_id):
        order.append(("tool ran", order_id))
        return {}

    tools = [Tool("get_order", "x", ORDER_SCHEMA, spy_lookup)]
    model = ScriptedModel(reply(calls=[call("get_order", {"order_id": "SU-1"})]), *answer("ok"))
    go(model, tools=tools, observer=Spy())
    assert order[:3] == [("saved", "assistant"), ("tool ran", "SU-1"), ("saved", "tool")]


def test_it_answers_every_tool_call_in_order_errors_included():
    calls = [call("get_order", {"order_id": "SU-1"}), call("get_order", {"order_id": "SU-0"}),
             call("get_order", {"order_id": "SU-CRASH"})]
    model = ScriptedModel(reply(calls=calls), *answer("done"))
    result, t, _ = go(model)
    results = [m for m in t.messages if m["role"] == "tool"][:3]
    assert [m["tool_call_id"] for m in results] == [c["id"] for c in calls]
    assert results[1]["content"] == "ERROR: No order SU-0 was found for this customer."
    assert results[2]["content"].startswith("ERROR: get_order failed unexpectedly (RuntimeError)")
    assert "exploded" not in results[2]["content"]  # internals stay in the trace, not in the prompt
    assert result.stop_reason == "answered"


def test_it_parses_arguments_inside_the_try_and_lets_the_model_recover():
    bad = call("get_order", raw='{"order_id": "SU-1"')
    model = ScriptedModel(reply(calls=[bad]), reply(calls=[call("get_order", {"order_id": "SU-1"})]), *answer("ok"))
    result, t, rec = go(model)
    assert t[3]["content"].startswith("ERROR: arguments are not valid JSON")
    assert result.stop_reason == "answered" and LOOKUPS == [(LOOKUPS[0][0], "SU-1")]
    assert any(s.kind == "tool" and s.error == "malformed arguments" for s in rec.steps)


def test_it_tells_the_model_an_unknown_tool_does_not_exist():
    model = ScriptedModel(reply(calls=[call("cancel_everything", {})]), *answer("sorry"))
    result, t, _ = go(model)
    assert t[3]["content"].startswith('ERROR: tool "cancel_everything" does not exist. Available tools:')
    assert "get_order" in t[3]["content"] and result.stop_reason == "answered"


def test_it_returns_schema_violations_to_the_model():
    model = ScriptedModel(reply(calls=[call("get_order", {"order": "SU-1"})]), *answer("ok"))
    _, t, _ = go(model)
    assert t[3]["content"].startswith("ERROR: invalid arguments for get_order")
    assert LOOKUPS == []


def test_it_truncates_long_tool_output_and_says_so():
    model = ScriptedModel(reply(calls=[call("dump", {})]), *answer("ok"))
    _, t, _ = go(model, limits=Limits(tool_output_max_chars=500))
    assert t[3]["content"].startswith("x" * 500)
    assert t[3]["content"].endswith("[truncated: showing 500 of 10000 characters]")


def test_it_branches_on_the_finish_reason_not_on_the_presence_of_text():
    # A model that narrates while it works: text AND calls, finish reason tool_calls. Not an answer.
    model = ScriptedModel(reply("Checking your order now…", [call("get_order", {"order_id": "SU-1"})]),
                          *answer("Delivered."))
    result, _, _ = go(model)
    assert result.answer == "Delivered." and LOOKUPS


def test_a_cut_off_reply_is_not_an_answer():
    model = ScriptedModel(reply("Your order is on its way and will", finish="length"))
    result, _, _ = go(model)
    assert result.stop_reason == "model_error" and "length" in result.detail
    assert result.outcome == "handed_to_person" and result.summary


def test_a_text_reply_without_a_stated_outcome_is_not_counted_as_resolved():
    result, _, _ = go(ScriptedModel(reply("I was unable to find that order.")))
    assert result.stop_reason == "answered" and result.outcome == "unstated"


def test_the_outcome_the_model_states_is_recorded():
    result, _, _ = go(ScriptedModel(*answer("Please send the order number.", "waiting_on_customer")))
    assert result.outcome == "waiting_on_customer" and result.outcome_summary.startswith("Please send")


def test_an_invalid_outcome_goes_back_to_the_model():
    model = ScriptedModel(reply(calls=[call("record_outcome", {"outcome": "great", "summary": "x"})]),
                          *answer("ok", "resolved"))
    result, t, _ = go(model)
    assert t[3]["content"].startswith("ERROR: invalid arguments for record_outcome")
    assert result.outcome == "resolved"


def test_it_stops_at_the_turn_limit_with_a_summary_for_a_person():
    n = iter(range(100))
    model = Forever(lambda: reply(calls=[call("get_order", {"order_id": f"SU-{next(n) + 1}"})]))
    result, t, _ = go(model, limits=Limits(max_steps=4))
    assert result.stop_reason == "turn_limit" and model.calls == 4
    assert result.outcome == "handed_to_person"
    assert "turn limit" in result.summary and "Where is SU-1?" in result.summary
    assert "SU-4 (a marketplace seller): delivered" in result.summary  # what was found, not a log of calls
    assert t[-1]["role"] == "tool"  # every call answered: the history is valid for the person's next turn


def test_it_stops_over_the_token_budget():
    n = iter(range(100))
    model = Forever(lambda: reply(calls=[call("get_order", {"order_id": f"SU-{next(n)}"})], tokens=(600, 100)))
    result, t, _ = go(model, limits=Limits(max_tokens=1500))
    assert result.stop_reason == "over_budget" and "token budget" in result.detail
    assert result.spent.tokens >= 1500 and model.calls == 3
    open_ids = {c["id"] for m in t.messages for c in m.get("tool_calls") or []}
    assert open_ids == {m["tool_call_id"] for m in t.messages if m["role"] == "tool"}


def test_it_stops_over_the_cost_budget():
    n = iter(range(100))
    model = Forever(lambda: reply(calls=[call("get_order", {"order_id": f"SU-{next(n)}"})]))
    result, _, _ = go(model, limits=Limits(max_cost_usd=0.0025))
    assert result.stop_reason == "over_budget" and "cost budget" in result.detail
    assert result.spent.cost_usd == pytest.approx(0.003)


def test_an_approved_escalation_is_terminal_and_closes_the_other_calls():
    esc, after = call("escalate_to_human", {"reason": "angry"}), call("get_order", {"order_id": "SU-1"})
    model = ScriptedModel(reply(calls=[esc, after]))
    result, t, _ = go(model)
    assert result.status == AWAITING_APPROVAL and [p.call.id for p in result.pending] == [esc["id"]]
    assert LOOKUPS == [(after["id"], "SU-1")]  # the ungated sibling was answered while it waits
    result, t, _ = go(ScriptedModel(), transcript=t, decisions={esc["id"]: Decision(approved=True)})
    assert result.stop_reason == "escalated" and result.outcome == "handed_to_person"
    assert json.loads(t[-1]["content"]) == {"status": "escalated"}


def test_it_warns_once_on_a_repeated_call_then_stops_spinning():
    model = Forever(lambda: reply(calls=[call("get_order", {"order_id": "SU-1"})]))
    result, t, rec = go(model, limits=Limits(spin_max_repeats=2))
    tool_texts = [m["content"] for m in t.messages if m["role"] == "tool"]
    assert len(LOOKUPS) == 2  # ran twice; the third was not run but explained to the model
    assert tool_texts[2].startswith("ERROR: not run. You already called get_order with the same arguments 2 times")
    assert result.stop_reason == "spinning" and model.calls == 4
    assert result.outcome == "handed_to_person" and "repeating" in result.summary


def test_a_model_that_listens_to_the_spin_warning_goes_on():
    same = lambda: call("get_order", {"order_id": "SU-1"})  # noqa: E731
    model = ScriptedModel(reply(calls=[same()]), reply(calls=[same()]), reply(calls=[same()]), *answer("ok"))
    result, _, _ = go(model, limits=Limits(spin_max_repeats=2))
    assert result.stop_reason == "answered"


def test_a_model_error_ends_the_run_with_a_reason_not_an_exception():
    result, _, rec = go(ScriptedModel(failing("gave up after 4 attempts; last error 503")))
    assert result.stop_reason == "model_error" and "503" in result.detail
    assert rec.steps[0].kind == "model" and rec.steps[0].attempts == 4 and "503" in rec.steps[0].error


def test_a_gated_call_pauses_the_run_with_the_pending_call():
    r = call("issue_refund", {"order_id": "SU-1", "amount": "10.00"})
    result, t, _ = go(ScriptedModel(reply(calls=[r])))
    assert result.status == AWAITING_APPROVAL and result.stop_reason is None
    assert result.pending[0].call.id == r["id"] and result.pending[0].arguments["amount"] == "10.00"
    assert REFUNDS == [] and t[-1]["role"] == "assistant"


def test_calls_past_the_waiting_limit_are_refused_as_data_and_a_person_is_asked_once():
    asked = []

    class Flagging(Recorder):
        def needs_person(self, reason):
            asked.append(reason)

    refunds = [call("issue_refund", {"order_id": f"SU-{n}", "amount": "10.00"}) for n in range(10)]
    seen = []
    checked = replace(ISSUE_REFUND, check=lambda ctx, **a: seen.append([name for name, _ in ctx.waiting]))
    result, t, _ = go(ScriptedModel(reply(calls=refunds)), tools=[checked], observer=Flagging(),
                      limits=Limits(max_waiting=3), waiting=1)  # one request already waits
    assert result.status == AWAITING_APPROVAL and [p.call.id for p in result.pending] == [r["id"] for r in refunds[:2]]
    refused = [m["content"] for m in t if m["role"] == "tool"]
    assert len(refused) == 8 and all(r.startswith("ERROR: not run: 3 requests already wait") for r in refused)
    assert len(asked) == 1
    assert seen[:3] == [[], ["issue_refund"], ["issue_refund", "issue_refund"]]  # the tool counts this reply's


def test_resume_runs_an_approved_call_with_the_edited_arguments():
    r = call("issue_refund", {"order_id": "SU-1", "amount": "10.00"})
    _, t, _ = go(ScriptedModel(reply(calls=[r])))
    model = ScriptedModel(*answer("Refunded 8.00."))
    result, t, _ = go(model, transcript=t, decisions={
        r["id"]: Decision(approved=True, arguments={"order_id": "SU-1", "amount": "8.00"})})
    assert REFUNDS == [(r["id"], "SU-1", "8.00")]
    assert json.loads(t[3]["content"])["amount"] == "8.00"
    assert result.stop_reason == "answered"


def test_resume_returns_a_rejection_and_its_reason_to_the_model():
    r = call("issue_refund", {"order_id": "SU-1", "amount": "10.00"})
    _, t, _ = go(ScriptedModel(reply(calls=[r])))
    model = ScriptedModel(*answer("Sorry, the refund was declined."))
    result, t, _ = go(model, transcript=t, decisions={r["id"]: Decision(approved=False, reason="already refunded")})
    assert REFUNDS == [] and t[3]["content"] == "ERROR: rejected by staff: already refunded"
    assert model.sent[0][-1]["content"] == "ERROR: rejected by staff: already refunded"


def test_resume_without_a_decision_stays_paused():
    r = call("issue_refund", {"order_id": "SU-1", "amount": "10.00"})
    _, t, _ = go(ScriptedModel(reply(calls=[r])))
    result, t2, _ = go(ScriptedModel(), transcript=t)
    assert result.status == AWAITING_APPROVAL and len(t2) == 3


def test_resume_skips_calls_that_already_have_results():
    a, b = call("get_order", {"order_id": "SU-1"}), call("get_order", {"order_id": "SU-2"})
    t = start()
    t.append({"role": "assistant", "content": None, "tool_calls": [a, b]})
    t.append({"role": "tool", "tool_call_id": a["id"], "content": "{}"})  # the worker died after this
    model = ScriptedModel(*answer("ok"))
    go(model, transcript=t)
    assert LOOKUPS == [(b["id"], "SU-2")]
    assert [m.get("tool_call_id") for m in model.sent[0][3:]] == [a["id"], b["id"]]


def test_tokens_stream_to_the_observer_as_they_arrive():
    _, _, rec = go(ScriptedModel(*answer("Your parcel is at the depot.")))
    assert "".join(rec.tokens).split() == "Your parcel is at the depot.".split()


def test_the_trace_has_a_row_per_model_call_and_per_tool_call():
    model = ScriptedModel(reply(calls=[call("get_order", {"order_id": "SU-1"})], tokens=(120, 15)),
                          *answer("ok"))
    _, _, rec = go(model)
    kinds = [(s.kind, s.tool) for s in rec.steps]
    assert kinds == [("model", ""), ("tool", "get_order"), ("model", ""), ("tool", "record_outcome"), ("model", "")]
    m, tool = rec.steps[0], rec.steps[1]
    assert (m.prompt_tokens, m.completion_tokens, m.finish_reason, m.cost_usd) == (120, 15, "tool_calls", 0.001)
    assert tool.arguments == '{"order_id": "SU-1"}' and '"delivered"' in tool.result
    assert tool.duration_ms >= 0 and tool.error == "" and tool.label == "Looking up your order"


def test_the_outcome_tool_is_offered_to_the_model():
    assert OUTCOME_TOOL.spec()["function"]["name"] == "record_outcome"


def test_the_loop_imports_no_django():
    code = ("import sys, support.agent.loop, support.agent.llm, support.agent.types, support.agent.summary;"
            "bad = [m for m in sys.modules if m == 'django' or m.startswith('django.')];"
            "print(bad); sys.exit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
