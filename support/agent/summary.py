"""The hand-over summary a person reads when a run stops without an answer: what the customer wants, what the
agent found and what is left, built from the history alone (no model call), in plain words. The run keeps
the exact stop reason and detail for the trace and the API; this is for the person picking the ticket up.
"""

from __future__ import annotations

import json

# Why a person is needed, as a sentence for staff (the code stays in stop_reason).
REASON_TEXT = {
    "turn_limit": "the agent reached its turn limit (the most steps it may take on one message)",
    "over_budget": "the agent used up its budget for this message",
    "conversation_budget": "the agent used up this conversation's budget for the day",
    "escalated": "the agent handed it to a person",
    "spinning": "the agent kept repeating the same check",
    "model_error": "the language model could not be reached or gave an unusable reply",
    "taken_over": "a staff member took it over",
    "empty_reply": "the language model twice replied with nothing",
    "quota_exceeded": "the language model provider's quota for this account is used up",
    "internal_error": "the desk failed unexpectedly while working on it",
    "stalled": "the agent's worker kept stopping",
    "rejected_again": "the agent kept asking for something staff had already rejected",
    "tool_unavailable": "the shop's systems could not be reached (or gave an answer the desk could not read)",
}


def _clip(text, n: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _json(text):
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return None


def _calls_with_results(messages: list[dict]):
    """(name, arguments, result text, result as JSON or None) for every call of the history, in order."""
    results = {m.get("tool_call_id"): str(m.get("content") or "") for m in messages if m.get("role") == "tool"}
    for m in messages:
        for call in m.get("tool_calls") or []:
            fn = call.get("function") or {}
            args = _json(fn.get("arguments") or "{}")
            result = results.get(call.get("id"))
            yield fn.get("name") or "", args if isinstance(args, dict) else {}, result, _json(result)


def _customer_wants(messages: list[dict]) -> str:
    """The customer's words since the agent last answered them (their latest message when nothing is new)."""
    texts: list[str] = []
    for m in reversed(messages):
        if m.get("role") == "user":
            texts.insert(0, str(m.get("content") or ""))
        elif m.get("role") == "assistant" and (m.get("content") or "").strip() and not m.get("tool_calls") and texts:
            break
    return " / ".join(_clip(t, 200) for t in texts[-3:] if t.strip())


def _order_fact(data: dict) -> str:
    fact = f"order {data.get('order_id')} is {str(data.get('status', '?')).replace('_', ' ')}"
    seller = data.get("fulfilled_by")
    if isinstance(seller, dict):
        fact += ", fulfilled by " + ("Sundry" if seller.get("type") == "sundry"
                                     else seller.get("name") or "a marketplace seller")
    if data.get("total") is not None:
        fact += (f": total {data.get('total')} EUR, refunded {data.get('refunded')}, "
                 f"refundable {data.get('refundable')}")
    return fact


def _parcel_fact(data: dict) -> str:
    fact = f"parcel {data.get('tracking')} ({data.get('carrier')}) is {str(data.get('status', '?')).replace('_', ' ')}"
    last = data.get("last_scan") or {}
    if last:
        where = ", ".join(x for x in (last.get("detail"), last.get("location")) if x)
        fact += f", last scan {where or last.get('event')}"
        hours = data.get("hours_since_last_scan")
        if isinstance(hours, int):
            fact += f" {hours // 24} days ago" if hours >= 48 else f" {hours} hours ago"
    return fact


def _facts(messages: list[dict]) -> tuple[list[str], dict]:
    """What the agent found, newest fact per thing, and what it asked for (refunds, hand-over)."""
    facts: dict[str, str] = {}  # key -> fact, in the order first seen; a later result replaces an earlier one
    asked: dict = {"escalation": None, "refunds": []}
    policies: dict[str, str] = {}
    for name, args, result, data in _calls_with_results(messages):
        failed = result is None or result.startswith("ERROR")
        if name == "get_order" and isinstance(data, dict) and not failed:
            facts[f"order:{data.get('order_id')}"] = _order_fact(data)
        elif name == "get_order" and failed and result:
            facts[f"order:{args.get('order_id')}"] = _clip(result.removeprefix("ERROR: "), 120)
        elif name == "track_parcel" and isinstance(data, dict) and not failed:
            facts[f"parcel:{data.get('tracking')}"] = _parcel_fact(data)
        elif name == "search_policy" and isinstance(data, dict):
            for doc in (data.get("results") or [])[:2]:
                if isinstance(doc, dict) and doc.get("doc_id"):
                    policies.setdefault(str(doc["doc_id"]), str(doc.get("title") or ""))
        elif name == "issue_refund":
            amount, order = args.get("amount"), args.get("order_id")
            if result is None:
                state = "waiting for a decision"
            elif not failed:
                state = "issued"
            elif "rejected by" in result:
                state = "rejected: " + _clip(result.split("rejected by", 1)[1].split(":", 1)[-1], 120)
            else:
                state = "not issued: " + _clip(result.removeprefix("ERROR: "), 120)
            asked["refunds"].append(f"a refund of {amount} EUR on {order} ({state})")
        elif name == "message_seller" and not failed and isinstance(data, dict):
            facts[f"seller:{args.get('order_id')}"] = f"the seller of {args.get('order_id')} was sent a message"
        elif name == "escalate_to_human":
            asked["escalation"] = args
    found = list(facts.values())
    if policies:
        found.append("policies that applied: " + "; ".join(f"{k} {v}".strip() for k, v in policies.items()))
    return found, asked


def handoff_reason(messages: list[dict], reason: str, detail: str) -> str:
    """One sentence for the conversation's "why it needs a person" line."""
    _, asked = _facts(messages)
    escalation = asked["escalation"]
    if reason == "escalated" and escalation and escalation.get("reason"):
        return _clip(f"The agent handed this over: {escalation['reason']}", 290)
    return _clip(f"The agent stopped: {REASON_TEXT.get(reason, reason.replace('_', ' '))}.", 290)


def handoff_summary(messages: list[dict], reason: str, detail: str) -> str:
    """What the customer wants, what the agent found, and what is left for the person, one line each."""
    found, asked = _facts(messages)
    lines = []
    wants = _customer_wants(messages)
    if wants:
        lines.append(f"The customer wants: “{wants}”")
    if found:
        lines.append("Found: " + "; ".join(found) + ".")
    if asked["refunds"]:
        lines.append("Asked for: " + "; ".join(asked["refunds"][-3:]) + ".")
    escalation = asked["escalation"]
    if reason == "escalated" and escalation:
        if escalation.get("summary"):
            lines.append(f"The agent's note: {_clip(escalation['summary'], 400)}")
        left = escalation.get("reason") or "decide what the agent could not"
        lines.append(f"Left for you: {_clip(left, 300).rstrip(' .')}. Reply to the customer here.")  # never ".."
    else:
        why = REASON_TEXT.get(reason, reason.replace("_", " "))
        lines.append(f"Left for you: answer the customer; the agent stopped because {why}.")
    return "\n".join(lines)
