"""The stand-in plays the desk's copilot: it recognises the copilot's prompt (and only it), reads the order and the
policy one call per reply with the tools offered, never asks for a tool that acts even when one is offered, and
writes each kind's answer citing the policy's title and version."""

import json
from types import SimpleNamespace

import pytest

from standin import copilot as scripted
from standin.scenarios import decide
from support import profiles
from support.copilot import prompts
from support.models import CopilotRun
from tests.standin_fixture import TOOLS, _tool

pytestmark = pytest.mark.django_db

ORDER = {"order_id": "SU-41533", "status": "delivered", "total": "480.00", "refunded": "0.00", "refundable": "480.00",
         "fulfilled_by": {"type": "marketplace_seller", "seller_id": "S-BE", "name": "Brightside Electronics"}}
POLICY = {"results": [{"doc_id": "POL-REFUND", "title": "Refunds", "version": 4, "excerpt": "The agent refund limit "
                       "is 150.00 EUR."}]}
HANDED_OVER = [
    {"role": "user", "content": "I want a full refund for order SU-41533."},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "e1", "type": "function", "function": {
        "name": "escalate_to_human", "arguments": json.dumps({
            "reason": "Refund of 480.00 EUR on SU-41533 is above the 150.00 limit an agent may refund"})}}]},
    {"role": "tool", "tool_call_id": "e1", "content": '{"handed_over": true}'},
]
SUGGEST = _tool("suggest_action", action={"type": "string"}, order_id={"type": "string"})


def copilot_messages(demo, kind, question=""):
    run = CopilotRun(kind=kind, question=question)
    conversation = SimpleNamespace(language="en")
    history = [{"role": "system", "content": "the agent's prompt"}, *HANDED_OVER]
    return prompts.transcript_messages(run, conversation, profiles.live(), history, "Sam")


def answered(messages, *results):
    """The copilot's request followed by its calls and their results."""
    out = list(messages)
    for n, (name, args, result) in enumerate(results, start=len(out)):
        out += [{"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": json.dumps(result)}]
    return out


def test_it_recognises_the_desks_copilot_prompt_and_not_the_agents(demo):
    assert scripted.task(copilot_messages(demo, "draft")) == "draft"
    assert scripted.task([{"role": "system", "content": "You are Sundry's support agent."}]) is None


def test_it_reads_the_order_then_the_policy_and_never_asks_for_a_tool_that_acts(demo):
    messages = copilot_messages(demo, "draft")
    first = decide(messages, TOOLS)  # every tool offered, the acting ones included
    assert [(c.name, json.loads(c.arguments)) for c in first.calls] == [("get_order", {"order_id": "SU-41533"})]
    second = decide(answered(messages, ("get_order", {"order_id": "SU-41533"}, ORDER)), TOOLS)
    assert [c.name for c in second.calls] == ["search_policy"]
    assert json.loads(second.calls[0].arguments)["seller_id"] == "S-BE"
    done = decide(answered(messages, ("get_order", {}, ORDER), ("search_policy", {}, POLICY)), TOOLS)
    assert not done.calls and "Refunds (version 4)" in done.content and "480.00 EUR" in done.content


def test_a_suggestion_is_recorded_with_suggest_action_then_explained(demo):
    messages = answered(copilot_messages(demo, "suggest"), ("get_order", {}, ORDER), ("search_policy", {}, POLICY))
    asked = decide(messages, [*TOOLS, SUGGEST])
    call = json.loads(asked.calls[0].arguments)
    assert asked.calls[0].name == "suggest_action" and call["amount"] == "480.00" and call["action"] == "refund"
    recorded = {"recorded": {"action": "refund", "order_id": "SU-41533", "amount": "480.00", "reason": call["reason"]}}
    told = decide(answered(messages, ("suggest_action", call, recorded)), [*TOOLS, SUGGEST])
    assert told.content.startswith("Suggested: a refund of 480.00 EUR on SU-41533.")


@pytest.mark.parametrize("kind, opening", [("summary", "Wants: I want a full refund for order SU-41533."),
                                           ("ask", "According to Refunds (version 4): The agent refund limit")])
def test_a_summary_and_an_answer(demo, kind, opening):
    messages = answered(copilot_messages(demo, kind, "What is the refund limit?"), ("get_order", {}, ORDER),
                        ("search_policy", {}, POLICY))
    assert decide(messages, TOOLS).content.startswith(opening)


def test_the_desks_note_after_the_request_is_not_taken_for_it(demo):
    # Servers whose templates refuse a late system message get the desk's note as a user message (DIALECTS).
    note = {"role": "user", "content": "The desk's note for this turn (not the customer's words): it is now Friday."}
    messages = answered([*copilot_messages(demo, "ask", "What is the refund limit?"), note],
                        ("get_order", {"order_id": "SU-41533"}, ORDER))
    searched = decide(messages, TOOLS).calls[0]
    assert searched.name == "search_policy" and json.loads(searched.arguments)["query"] == "What is the refund limit?"
