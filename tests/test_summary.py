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
    wants, found, left = summary.splitlines()
    assert wants == "The customer wants: “My monitor SU-41533 arrived cracked. I want a full refund.”"
    assert found == ("Found: SU-41533 (480.00 EUR, Brightside Electronics): delivered (DPD, Leeds); nothing refunded "
                     "yet. Policies: Damaged items.")
    assert left.startswith("Left for you: Refund of 480.00 EUR on SU-41533 is above the 150.00 limit")


def test_policies_are_named_by_title_and_only_those_the_agent_goes_by():
    history = HISTORY[:6] + [
        {"role": "assistant", "content": "", "tool_calls": [call("c5", "search_policy", query="damaged",
                                                                  seller_id="S-BE")]},
        {"role": "tool", "tool_call_id": "c5", "content": json.dumps({"results": [
            {"doc_id": "POL-DAMAGE", "title": "Damaged items", "scope": "sundry"},
            {"doc_id": "POL-BE-DAMAGE", "title": "Brightside Electronics: damaged goods", "scope": "seller"},
            {"doc_id": "POL-REFUND", "title": "Refunds", "scope": "sundry"}]})}]
    summary = handoff_summary(history, "turn_limit", "x")
    assert "Policies: Damaged items; Brightside Electronics: damaged goods." in summary
    assert "POL-" not in summary and "Refunds" not in summary


def test_the_date_and_place_of_the_last_scan_are_said_not_hours():
    history = [*HISTORY[:5], {"role": "tool", "tool_call_id": "c2", "content": json.dumps({
        "tracking": "DP55141533", "carrier": "DPD", "status": "in_transit", "hours_since_last_scan": 30,
        "last_scan": {"at": "2026-11-26T14:55:00Z", "event": "in_transit", "location": "Wakefield"}})}]
    assert "SU-41533 (480.00 EUR, Brightside Electronics): in transit (DPD, last scan 26 Nov, Wakefield)" in \
        handoff_summary(history, "turn_limit", "x")


def test_an_earlier_matter_the_agent_resolved_is_left_out():
    earlier = [
        {"role": "user", "content": "Where is SU-41210?"},
        {"role": "assistant", "content": "", "tool_calls": [call("e1", "get_order", order_id="SU-41210")]},
        {"role": "tool", "tool_call_id": "e1", "content": json.dumps({"order_id": "SU-41210", "status": "delivered",
                                                                      "total": "42.99"})},
        {"role": "assistant", "content": "", "tool_calls": [call("e2", "record_outcome", outcome="resolved",
                                                                  summary="Gave the status")]},
        {"role": "tool", "tool_call_id": "e2", "content": json.dumps({"recorded": "resolved"})},
        {"role": "assistant", "content": "SU-41210 was delivered."}]
    summary = handoff_summary([HISTORY[0], *earlier, *HISTORY[1:]], "escalated", "x")
    assert "SU-41210" not in summary and "42.99" not in summary
    assert summary.startswith("The customer wants: “My monitor SU-41533 arrived cracked.")


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
