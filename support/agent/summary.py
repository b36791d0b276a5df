"""The hand-over summary a person reads when a run stops without an answer: what the customer wants, what the
agent found and what is left, built from the history alone (no model call), in plain words: policies by
their titles, each thing said once, and only the matter at hand (an earlier question the agent resolved is
not dragged in). The run keeps the exact stop reason and detail for the trace and the API.

The desk builds the same summary live for the conversation page (support/desk/selectors_handover.py), from
these facts and the shop's current balances, so it follows what people do after the hand-over.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal, InvalidOperation

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


@dataclass
class Facts:
    """What the agent found and asked for in one matter, newest fact per thing."""

    orders: dict[str, dict] = field(default_factory=dict)  # order number -> get_order's result
    missing: dict[str, str] = field(default_factory=dict)  # order number -> why it could not be read
    parcels: dict[str, dict] = field(default_factory=dict)  # tracking -> track_parcel's result
    policies: list[str] = field(default_factory=list)  # titles of the policies it relied on, in order read
    refunds: list[str] = field(default_factory=list)  # "a refund of 100.00 EUR on SU-41533 (rejected: …)"
    sellers: list[str] = field(default_factory=list)  # orders whose seller it messaged
    escalation: dict | None = None  # escalate_to_human's arguments


def clip(text, n: int) -> str:
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


def current_matter(messages: list[dict]) -> list[dict]:
    """The messages of the matter at hand: from the customer's first message after the agent last recorded a
    question as resolved (an earlier, finished matter is not this one's business)."""
    start = 0
    for i, m in enumerate(messages):
        for call in m.get("tool_calls") or []:
            fn = call.get("function") or {}
            args = _json(fn.get("arguments") or "{}")
            if fn.get("name") == "record_outcome" and isinstance(args, dict) and args.get("outcome") == "resolved":
                after = next((j for j in range(i + 1, len(messages)) if messages[j].get("role") == "user"), None)
                if after is not None:
                    start = after
    system = [m for m in messages[:start] if m.get("role") == "system"]
    return system + messages[start:]


def customer_wants(messages: list[dict]) -> str:
    """The customer's words since the agent last answered them (their latest message when nothing is new),
    quoted, at most three messages."""
    texts: list[str] = []
    for m in reversed(messages):
        if m.get("role") == "user":
            texts.insert(0, str(m.get("content") or ""))
        elif m.get("role") == "assistant" and (m.get("content") or "").strip() and not m.get("tool_calls") and texts:
            break
    return " / ".join(f"“{clip(t, 200)}”" for t in texts[-3:] if t.strip())


def _relied_on(results: list) -> list[str]:
    """The policies a search gave that the agent goes by: the best of the shop's own and the best of the
    seller's supplement, not every hit."""
    chosen: dict[str, str] = {}
    for doc in results:
        if isinstance(doc, dict) and doc.get("title"):
            chosen.setdefault(str(doc.get("scope") or "sundry"), str(doc["title"]))
    return list(chosen.values())


def _refund_state(result: str | None) -> str:
    if result is None:
        return "waiting for a person's decision"
    if not result.startswith("ERROR"):
        return "issued"
    if "rejected by" in result:
        return "rejected: " + clip(result.split("rejected by", 1)[1].split(":", 1)[-1], 120)
    return "not issued: " + clip(result.removeprefix("ERROR: "), 120)


def matter_facts(messages: list[dict]) -> Facts:
    facts = Facts()
    for name, args, result, data in _calls_with_results(messages):
        failed = result is None or result.startswith("ERROR")
        if name == "get_order" and isinstance(data, dict) and not failed:
            facts.orders[str(data.get("order_id"))] = data
            facts.missing.pop(str(data.get("order_id")), None)
        elif name == "get_order" and failed and result:
            facts.missing[str(args.get("order_id"))] = clip(result.removeprefix("ERROR: "), 120)
        elif name == "track_parcel" and isinstance(data, dict) and not failed:
            facts.parcels[str(data.get("tracking"))] = data
        elif name == "search_policy" and isinstance(data, dict):
            for title in _relied_on(data.get("results") or []):
                if title not in facts.policies:
                    facts.policies.append(title)
        elif name == "issue_refund":
            facts.refunds.append(f"a refund of {args.get('amount')} EUR on {args.get('order_id')} "
                                 f"({_refund_state(result)})")
        elif name == "message_seller" and not failed and args.get("order_id") not in facts.sellers:
            facts.sellers.append(str(args.get("order_id")))
        elif name == "escalate_to_human":
            facts.escalation = args
    return facts


# -- the facts in words --------------------------------------------------------------------------------------

def day(iso) -> str:
    """"26 Nov" for an ISO time from a tool result; "" when it is none."""
    try:
        moment = datetime.fromisoformat(str(iso).replace("Z", "+00:00"))
    except ValueError:
        return ""
    return f"{moment.day} {moment:%b}"


def _amount(value) -> Decimal | None:
    try:
        return Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None


def money_words(total, refunded, refundable, currency: str = "EUR") -> str:
    """"nothing refunded yet", or "300.00 EUR refunded, 180.00 EUR still refundable"."""
    done, left = _amount(refunded), _amount(refundable)
    if done is None or left is None:
        return ""
    if done == 0:
        return "nothing refunded yet"
    if left == 0:
        return f"refunded in full ({done:.2f} {currency})"
    return f"{done:.2f} {currency} refunded, {left:.2f} {currency} still refundable"


def plain(value) -> str:
    """Shop text as the tools hand it to the model, marked as someone else's words ({"untrusted_text_from": ...,
    "text": ...}), or as it was before it was marked: its words. Here it is quoted to staff, never obeyed."""
    if isinstance(value, dict):
        value = value.get("text")
    return "" if value is None else str(value)


def parcel_words(parcel: dict) -> str:
    """"delivered 26 Nov (DPD, Leeds)", or "in transit (DPD, last scan 1 Dec, Wakefield)", from track_parcel."""
    last = parcel.get("last_scan") or {}
    status = str(parcel.get("status") or "?").replace("_", " ")
    when = day(last.get("at")) if last else ""
    where = [x for x in (plain(parcel.get("carrier")), plain(last.get("location"))) if x]
    if status == "delivered":
        return f"delivered {when}".strip() + (f" ({', '.join(where)})" if where else "")
    if when:
        where.insert(1, f"last scan {when}")
    return status + (f" ({', '.join(where)})" if where else "")


def order_words(order: dict, parcels: dict[str, dict], money: dict | None = None) -> str:
    """One order in a sentence: "SU-41533 (480.00 EUR, Brightside Electronics): delivered 26 Nov (DPD, Leeds);
    nothing refunded yet". `money` (total, refunded, refundable) replaces the tool result's, which was true
    when the agent looked (the desk passes the shop's balance now)."""
    seller = order.get("fulfilled_by") or {}
    who = "Sundry" if seller.get("type") == "sundry" else plain(seller.get("name")) or "a marketplace seller"
    money = money or {k: order.get(k) for k in ("total", "refunded", "refundable")}
    total = _amount(money.get("total"))
    head = f"{order.get('order_id')} ({total:.2f} EUR, {who})" if total is not None else f"{order.get('order_id')} ({who})"
    tracked = [parcel_words(parcels[p["tracking"]]) for p in order.get("parcels") or []
               if isinstance(p, dict) and p.get("tracking") in parcels]
    state = "; ".join(tracked) or str(order.get("status") or "?").replace("_", " ")
    paid = money_words(money.get("total"), money.get("refunded"), money.get("refundable"))
    return f"{head}: {state}" + (f"; {paid}" if paid else "")


def found_words(facts: Facts, money: dict[str, dict] | None = None) -> list[str]:
    """What the agent found, one short sentence per order (with its parcels) and one for the policies."""
    money = money or {}
    found = [order_words(o, facts.parcels, money.get(number)) for number, o in facts.orders.items()]
    found += [f"{number}: {why}" for number, why in facts.missing.items()]
    if facts.policies:
        found.append("Policies: " + "; ".join(facts.policies))
    return found


def handoff_reason(messages: list[dict], reason: str, detail: str) -> str:
    """One sentence for the conversation's "why it needs a person" line."""
    escalation = matter_facts(current_matter(messages)).escalation
    if reason == "escalated" and escalation and escalation.get("reason"):
        return clip(f"The agent handed this over: {escalation['reason']}", 290)
    return clip(f"The agent stopped: {REASON_TEXT.get(reason, reason.replace('_', ' '))}.", 290)


def left_words(reason: str, escalation: dict | None) -> str:
    """What is left for the person, from why the agent stopped."""
    if reason == "escalated" and escalation:
        left = clip(escalation.get("reason") or "decide what the agent could not", 300).rstrip(" .")
        return f"{left}. Reply to the customer here."  # never ".."
    return f"answer the customer; the agent stopped because {REASON_TEXT.get(reason, reason.replace('_', ' '))}."


def handoff_summary(messages: list[dict], reason: str, detail: str) -> str:
    """What the customer wants, what the agent found (and asked for), what is left for the person: one line
    each, each thing said once."""
    matter = current_matter(messages)
    facts = matter_facts(matter)
    lines = []
    wants = customer_wants(matter)
    if wants:
        lines.append(f"The customer wants: {wants}")
    found = found_words(facts)
    if found:
        lines.append("Found: " + ". ".join(found) + ".")
    if facts.refunds:
        lines.append("Asked for: " + "; ".join(facts.refunds[-3:]) + ".")
    lines.append("Left for you: " + left_words(reason, facts.escalation))
    return "\n".join(lines)
