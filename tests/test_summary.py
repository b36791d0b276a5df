"""The hand-over summary: what the customer wants, what was found and what is left, from the history alone."""

import json

from support.agent.summary import handoff_reason, handoff_summary


def call(call_id, name, **args):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


HISTORY = [
    {"role": "system", "content": "You are Sundry's agent."},
    {"role": "user", "content": "My monitor SU-41533 arrived cracked. I want a full refund."},
    {"role": "assistant", "content": "", "tool_calls": [call("c1", "get_order", order_id="SU-41533")]},
    {"role": "tool", "tool_call_id": "c1", "content": json.dumps({
        "order_id": "SU-41533", "status": "delivered", "total": "480.00", "refunded": "0.00",
        "refundable": "480.00", "fulfilled_by": {"type": "marketplace_seller", "name": "Brightside Electronics"},
        "parcels": [{"tracking": "DP55141533"}]})},
    {"role": "assistant", "content": "", "tool_calls": [call("c2", "track_parcel", tracking="DP55141533")]},
    {"role": "tool", "tool_call_id": "c2", "content": json.dumps({
        "tracking": "DP55141533", "carrier": "DPD", "status": "delivered", "hours_since_last_scan": 144,
        "last_scan": {"event": "delivered", "detail": "Delivered: handed to customer", "location": "Leeds"}})},
    {"role": "assistant", "content": "", "tool_calls": [call("c3", "search_policy", query="damaged item")]},
    {"role": "tool", "tool_call_id": "c3", "content": json.dumps({"results": [
        {"doc_id": "POL-DAMAGE", "title": "Damaged items"}, {"doc_id": "POL-REFUND", "title": "Refunds"},
        {"doc_id": "POL-DELAY", "title": "Weather and carrier delays"}]})},
    {"role": "assistant", "content": "", "tool_calls": [call(
        "c4", "escalate_to_human", reason="Refund of 480.00 EUR on SU-41533 is above the 150.00 limit",
        summary="Cracked monitor, full refund asked.")]},
    {"role": "tool", "tool_call_id": "c4", "content": json.dumps({"status": "escalated"})},
]


def test_it_says_what_the_customer_wants_what_was_found_and_what_is_left():
    summary = handoff_summary(HISTORY, "escalated", "escalate_to_human ended the run")
    wants, found, note, left = summary.splitlines()
    assert wants == "The customer wants: “My monitor SU-41533 arrived cracked. I want a full refund.”"
    assert "order SU-41533 is delivered, fulfilled by Brightside Electronics: total 480.00 EUR" in found
    assert "parcel DP55141533 (DPD) is delivered, last scan Delivered: handed to customer, Leeds 6 days ago" in found
    assert "policies that applied: POL-DAMAGE Damaged items; POL-REFUND Refunds" in found
    assert note == "The agent's note: Cracked monitor, full refund asked."
    assert left.startswith("Left for you: Refund of 480.00 EUR on SU-41533 is above the 150.00 limit")


def test_it_is_not_a_log_of_tool_calls():
    summary = handoff_summary(HISTORY, "escalated", "escalate_to_human ended the run")
    assert "get_order(" not in summary and "escalate_to_human" not in summary and " ok" not in summary


def test_a_limit_says_why_the_agent_stopped_in_plain_words():
    summary = handoff_summary(HISTORY[:4], "turn_limit", "turn limit of 12 model calls reached")
    assert summary.splitlines()[-1] == ("Left for you: answer the customer; the agent stopped because the agent "
                                        "reached its turn limit (the most steps it may take on one message).")
    assert handoff_reason(HISTORY[:4], "spinning", "x") == "The agent stopped: the agent kept repeating the same check."


def test_a_refund_waiting_or_rejected_is_listed_as_asked_for():
    history = HISTORY[:4] + [
        {"role": "assistant", "content": "", "tool_calls": [call("r1", "issue_refund", order_id="SU-41533",
                                                                  amount="100.00", reason="cracked")]},
        {"role": "tool", "tool_call_id": "r1", "content": "ERROR: rejected by staff: send photos first"}]
    summary = handoff_summary(history, "model_error", "x")
    assert "Asked for: a refund of 100.00 EUR on SU-41533 (rejected: send photos first)." in summary
