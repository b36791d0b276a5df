"""The desk's copilot, scripted: a request whose system message is the copilot's ("You are the copilot of …",
"Copilot task: draft|summary|suggest|ask.", support/copilot/prompts.py) is answered for the member of staff, not
the customer. It reads the conversation it is sent (the order discussed, a refund above the agent's limit that was
handed over, a refund staff declined that the customer disputes), looks the order and the policy up, one call per
reply, with the tools the request offers, then writes the draft, the summary, the suggestion (suggest_action) or
the answer, citing the policy's title and version."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from decimal import Decimal

from .conversation import ORDER_ID
from .reply import Call, Reply

MARK = re.compile(r"^You are the copilot of .+?Copilot task: (draft|summary|suggest|ask)\.", re.S)
AMOUNT = re.compile(r"(\d+\.\d{2}) EUR")
ASKS = "(support staff, not the customer) asks the copilot:"  # the staff member's request; the desk's note may follow


def task(messages: list[dict]) -> str | None:
    """The copilot's task when the request is the copilot's, else None."""
    first = messages[0] if messages else {}
    found = MARK.match(str(first.get("content") or "")) if first.get("role") == "system" else None
    return found.group(1) if found else None


@dataclass
class _Read:
    kind: str
    request: str  # the staff member's words
    history: list[dict]  # the conversation before the request
    results: dict[str, object]  # this run's tool results by tool name (the latest)
    offered: frozenset[str]

    def words(self) -> str:
        return "\n".join(str(m.get("content") or "") for m in self.history if m.get("role") == "user")

    def order_id(self) -> str | None:
        named = ORDER_ID.findall(self.request) if self.kind == "ask" else []
        for m in self.history:
            named += ORDER_ID.findall(str(m.get("content") or ""))
            named += [n for c in m.get("tool_calls") or [] for n in ORDER_ID.findall(c["function"]["arguments"])]
        return named[-1].upper() if named else None

    def calls(self, name: str) -> list[tuple[dict, str]]:
        """(arguments, result) of each call of `name` in the conversation."""
        results = {m.get("tool_call_id"): str(m.get("content") or "") for m in self.history if m.get("role") == "tool"}
        out = []
        for m in self.history:
            for c in m.get("tool_calls") or []:
                if c["function"]["name"] == name:
                    out.append((_json(c["function"]["arguments"]), results.get(c.get("id"), "")))
        return out


def _json(text):
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return None


def _read(messages: list[dict], kind: str, offered: frozenset[str]) -> _Read:
    at = max(i for i, m in enumerate(messages) if m.get("role") == "user" and ASKS in str(m.get("content") or ""))
    names = {c["id"]: c["function"]["name"] for m in messages[at:] for c in m.get("tool_calls") or []}
    results = {names.get(m.get("tool_call_id")): _json(m.get("content")) or str(m.get("content"))
               for m in messages[at:] if m.get("role") == "tool"}
    request = str(messages[at].get("content") or "").split("\n", 1)[-1]
    return _Read(kind, request, messages[1:at], results, offered)


def reply(messages: list[dict], offered: set[str]) -> Reply:
    kind = task(messages)
    r = _read(messages, kind, frozenset(offered))
    oid = r.order_id()
    if oid and "get_order" in r.offered and "get_order" not in r.results:
        return Reply(calls=(Call.of("get_order", order_id=oid),))
    order = r.results.get("get_order") if isinstance(r.results.get("get_order"), dict) else {}
    if "search_policy" in r.offered and "search_policy" not in r.results:
        seller = (order.get("fulfilled_by") or {})
        extra = {"seller_id": seller["seller_id"]} if seller.get("type") == "marketplace_seller" else {}
        return Reply(calls=(Call.of("search_policy", query=_query(r), **extra),))
    docs = (r.results.get("search_policy") or {}).get("results") or [] if isinstance(
        r.results.get("search_policy"), dict) else []
    policy = docs[0] if docs else None
    situation = _situation(r, order)
    if kind == "suggest" and "suggest_action" in r.offered and "suggest_action" not in r.results and order:
        return Reply(calls=(_suggestion(order, situation, policy),))
    return Reply(content=WRITERS[kind](r, order, situation, policy))


@dataclass(frozen=True)
class _Situation:
    asked: str  # the amount the customer asked for, "" when unknown
    declined: str  # the reviewer's reason when staff declined a refund, else ""
    over_limit: bool  # the agent handed a refund above its limit over


def _situation(r: _Read, order: dict) -> _Situation:
    declined, asked = "", ""
    for args, result in r.calls("issue_refund"):
        asked = str((args or {}).get("amount") or asked)
        at = result.lower().find("rejected by staff")
        if at >= 0:
            declined = result[at + len("rejected by staff"):].lstrip(" :-").strip() or "no reason given"
    over = False
    for args, _ in r.calls("escalate_to_human"):
        reason = str((args or {}).get("reason") or "")
        over = over or "limit" in reason
        asked = asked or next(iter(AMOUNT.findall(reason)), "")
    return _Situation(asked or str(order.get("refundable") or ""), declined, over)


def _query(r: _Read) -> str:
    if r.kind == "ask":
        return r.request[:300]
    if any("rejected by staff" in res.lower() for _, res in r.calls("issue_refund")):
        return "customer disputes a refund decision"
    return "refund above the agent limit" if r.calls("escalate_to_human") else "refunds"


def cite(policy: dict | None) -> str:
    if not policy:
        return "our policies"
    return f"{policy.get('title')} (version {policy.get('version')})"


def _suggestion(order: dict, s: _Situation, policy: dict | None) -> Call:
    refundable = Decimal(str(order.get("refundable") or "0"))
    amount = min(Decimal(s.asked), refundable) if s.asked else refundable
    if s.declined and "seller" in s.declined.lower() and (order.get("fulfilled_by") or {}).get("seller_id"):
        return Call.of("suggest_action", action="seller_message", order_id=order["order_id"],
                       message=f"The customer disputes the refund on order {order['order_id']}; please tell us "
                               "what you can offer.", reason=f"Staff declined: {s.declined}")
    why = "the customer disputes the declined refund" if s.declined else "above the agent's limit, a person decides"
    return Call.of("suggest_action", action="refund", order_id=order["order_id"], amount=f"{amount:.2f}",
                   reason=f"{why}; per {cite(policy)}"[:300])


def _draft(r: _Read, order: dict, s: _Situation, policy: dict | None) -> str:
    oid = order.get("order_id") or r.order_id() or "your order"
    if s.declined:
        return (f"Thank you for explaining why you disagree. I've looked at order {oid} again myself. Our team "
                f"declined the refund of {s.asked} EUR because: {s.declined.rstrip('.')}. Under {cite(policy)} a "
                "person reviews a disputed decision, and that is what I'm doing now: I'll come back to you here "
                "with the outcome, and if anything changes the picture (photos, a receipt) please send it.")
    if s.over_limit:
        return (f"Thank you for your patience. I've checked order {oid}: {s.asked} EUR is more than our agent "
                f"may refund alone, so under {cite(policy)} a member of our team decides, and I'm handling it now. "
                f"I'll refund {s.asked} EUR to your original payment method once it's approved; it usually "
                "arrives within 5 business days, and you'll see the confirmation here.")
    return (f"Thank you for your message. I've checked order {oid} and {cite(policy)}; I'll take it from here "
            "and come back to you shortly.")


def _summary(r: _Read, order: dict, s: _Situation, policy: dict | None) -> str:
    oid = order.get("order_id") or r.order_id() or "no order named"
    wants = " ".join(r.words().split())[:160] or "nothing said yet"
    done = "The agent looked the order up."
    if s.declined:
        done = f"Staff declined a refund of {s.asked} EUR ({s.declined.rstrip('.')}); the customer disputes it."
    elif s.over_limit:
        done = f"The agent handed over a refund of {s.asked} EUR: above its limit."
    return (f"Wants: {wants}\nDone: {done}\nOpen: a person decides on order {oid} under {cite(policy)}; "
            f"refundable {order.get('refundable', '?')} EUR.")


def _suggest(r: _Read, order: dict, s: _Situation, policy: dict | None) -> str:
    proposal = r.results.get("suggest_action")
    if not isinstance(proposal, dict):
        return f"I could not propose an action ({str(proposal)[:200]}); check {cite(policy)} by hand."
    done = proposal.get("recorded") or {}
    what = (f"a refund of {done.get('amount')} EUR" if done.get("action") == "refund"
            else "a message to the seller")
    return (f"Suggested: {what} on {done.get('order_id')}. Why: {done.get('reason')}. The refund form keeps its own "
            "limits and approvals.")


def _answer(r: _Read, order: dict, s: _Situation, policy: dict | None) -> str:
    if not policy:
        return "The policies do not say; check with a lead."
    return f"According to {cite(policy)}: {' '.join(str(policy.get('excerpt') or '').split())[:400]}"


WRITERS = {"draft": _draft, "summary": _summary, "suggest": _suggest, "ask": _answer}
