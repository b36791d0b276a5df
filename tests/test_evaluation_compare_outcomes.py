"""Comparing two evaluation reports flags a scenario that passed on both sides but ended another way: other tools
called, a refund issued on one side only or for another amount, store credit offered or issued on one side only,
another stop reason; each difference in words (`manage.py evaluate --compare`, the draft test's page)."""

import json

from support.evaluation import compare


def trial(*, tools=("get_order",), refund=None, says="Done.", stop="answered", credit_tool=False) -> dict:
    calls = [*tools, *(["issue_refund"] if refund else []), *(["warranty__issue_store_credit"] if credit_tool else [])]
    trace = [{"kind": "model", "tool": "", "result": "", "error": ""}]
    for name in calls:
        result = json.dumps({"refund_id": "RF-1", "amount": refund, "status": "issued"}) if name == "issue_refund" \
            else "{}"
        trace.append({"kind": "tool", "tool": name, "arguments": "{}", "result": result, "error": ""})
    return {"passed": True, "prompt_tokens": 10, "completion_tokens": 5, "cost_usd": 0.0, "model_calls": 2,
            "transcript": [{"role": "user", "author": "customer", "content": "Where is my money?", "tool_calls": []},
                           {"role": "assistant", "author": "agent", "content": "",
                            "tool_calls": [{"name": n, "arguments": "{}"} for n in calls]},
                           {"role": "assistant", "author": "agent", "content": says, "tool_calls": []}],
            "trace": trace, "stop_reasons": [stop], "runs": [{"run": 1, "status": "stopped", "stop_reason": stop}]}


def report(**trials) -> dict:
    return {"trials": 1, "model": {"name": "m"}, "prompt": {}, "scenarios": [
        {"name": name, "title": name, "attempts": 1, "passes": 1, "runs": [run]} for name, run in trials.items()]}


def test_a_scenario_passed_on_both_sides_that_acted_otherwise_is_flagged_with_each_difference_in_words():
    live = report(refund=trial(refund="12.00"), credit=trial(), stop=trial(), tools=trial(), same=trial())
    draft = report(refund=trial(refund="8.00"),
                   credit=trial(says="Before a refund, we can offer you store credit of 12.00 EUR."),
                   stop=trial(stop="escalated", tools=("get_order", "escalate_to_human")),
                   tools=trial(tools=("get_order", "search_policy")), same=trial())
    rows = {r["name"]: r for r in compare.compare(live, draft)["scenarios"]}
    assert {name: r["change"] for name, r in rows.items()} == {
        "refund": "different", "credit": "different", "stop": "different", "tools": "different", "same": "same"}
    assert rows["refund"]["differences"] == ["Refund: issued 12.00 → issued 8.00"]
    assert rows["credit"]["differences"] == ["Store credit: not offered → offered"]
    assert rows["stop"]["differences"] == ["Tools called: get_order → get_order, escalate_to_human",
                                           "Ended as: answered → escalated"]
    assert rows["tools"]["differences"] == ["Tools called: get_order → get_order, search_policy"]
    assert rows["same"]["differences"] == []


def test_a_refund_on_one_side_only_and_store_credit_issued_read_plainly():
    rows = compare.compare(report(x=trial(refund="20.00")), report(x=trial(credit_tool=True)))["scenarios"]
    assert rows[0]["differences"] == [
        "Tools called: get_order, issue_refund → get_order, warranty__issue_store_credit",
        "Refund: issued 20.00 → none", "Store credit: not offered → issued"]


def test_the_text_comparison_lists_what_changed_under_the_table():
    text = compare.table(compare.compare(report(x=trial()), report(x=trial(stop="escalated"))))
    assert "different" in text and "x: Ended as: answered → escalated" in text


def test_a_report_without_the_trials_evidence_shows_no_difference():
    bare = {"trials": 1, "model": {}, "prompt": {}, "scenarios": [{"name": "x", "attempts": 1, "passes": 1,
                                                                   "runs": [{"prompt_tokens": 1}]}]}
    assert compare.compare(bare, report(x=trial()))["scenarios"][0]["change"] == "same"
