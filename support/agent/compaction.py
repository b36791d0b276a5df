"""Compaction: what the model reads of a long conversation, when the whole history would pass its budget.

The saved history never changes; only the request does. First, old large tool results (before the
customer's last two messages) are cut to a line; if that is not enough, the turns before the customer's
last two messages (or, failing that, the last one) are dropped and a summary of them is added to the
system message. The summary is built from the history, without a model call: it is free, adds no
latency, cannot invent anything, and keeps the facts a run depends on word for word (the orders looked
up, refunds issued, staff decisions, seller messages, what the customer asked). A turn always starts at a
customer message, so no tool result is ever separated from its call.
"""

from __future__ import annotations

import json

from .types import encode

OLD_RESULT_KEEP = 300  # characters of an old tool result that survive the first stage
SUMMARY_HEADER = "Earlier in this conversation (summarised; the desk keeps the full history):"


def estimate_tokens(messages: list[dict]) -> int:
    """About four characters a token, as the model client estimates when the endpoint reports no usage."""
    return sum(len(encode(m)) for m in messages) // 4


def compact(messages: list[dict], budget: int) -> tuple[list[dict], str]:
    """(the messages to send, what was done) within `budget` tokens where the history allows it; the
    messages unchanged and "" when they fit already."""
    if estimate_tokens(messages) <= budget:
        return messages, ""
    head, rest = (messages[:1], messages[1:]) if messages and messages[0].get("role") == "system" else ([], messages)
    users = [i for i, m in enumerate(rest) if m.get("role") == "user"]
    for keep in (2, 1):
        start = users[-keep] if len(users) >= keep else 0
        shrunk = head + [_cut(m) if i < start and m.get("role") == "tool" else m for i, m in enumerate(rest)]
        if estimate_tokens(shrunk) <= budget:
            return shrunk, f"cut {sum(1 for i, m in enumerate(rest) if i < start and m.get('role') == 'tool')} old tool results"
    for keep in (2, 1):
        start = users[-keep] if len(users) >= keep else 0
        if start == 0:
            continue
        summary = summarise(rest[:start])
        system = dict(head[0]) if head else {"role": "system", "content": ""}
        system["content"] = ((system.get("content") or "") + "\n\n" + summary).strip()
        out = [system] + rest[start:]
        if estimate_tokens(out) <= budget or keep == 1:
            return out, f"summarised {start} earlier messages"
    return messages, ""


def _cut(message: dict) -> dict:
    content = message.get("content")
    if not isinstance(content, str) or len(content) <= OLD_RESULT_KEEP:
        return message
    return {**message, "content": content[:OLD_RESULT_KEEP] + f" [… {len(content) - OLD_RESULT_KEEP} more characters "
                                                              "left out of this old result]"}


def summarise(messages: list[dict]) -> str:
    """The facts of these messages a later turn may need, as short lines."""
    calls = {c.get("id"): c.get("function") or {} for m in messages for c in m.get("tool_calls") or []}
    lines = [SUMMARY_HEADER]
    asked = [m.get("content") for m in messages if m.get("role") == "user" and isinstance(m.get("content"), str)]
    for text in asked[-6:]:
        lines.append(f"- The customer wrote: “{_clip(text, 200)}”")
    for m in messages:
        if m.get("role") != "tool":
            continue
        fn = calls.get(m.get("tool_call_id")) or {}
        fact = _fact(fn.get("name", ""), _json(fn.get("arguments")), str(m.get("content") or ""))
        if fact:
            lines.append(f"- {fact}")
    said = [m.get("content") for m in messages if m.get("role") == "assistant" and m.get("content")]
    if said:
        lines.append(f"- You last said: “{_clip(said[-1], 300)}”")
    return "\n".join(lines)


def _fact(name: str, args: dict, result: str) -> str:
    """One line for a tool result worth keeping; "" for the rest."""
    if result.startswith("ERROR: rejected by staff"):
        return f"Staff rejected {name}({_args(args)}): {_clip(result.split(':', 2)[-1].strip(), 200)}"
    if result.startswith("ERROR"):
        return ""
    value = _json(result)
    if name == "get_order" and value:
        return (f"Order {value.get('order_id')}: {value.get('status')}, total {value.get('total')}, refunded "
                f"{value.get('refunded')}, refundable {value.get('refundable')}, fulfilled by "
                f"{(value.get('fulfilled_by') or {}).get('seller_id')}")
    if name == "track_parcel" and value:
        scan = value.get("last_scan") or {}
        return (f"Parcel {value.get('tracking')} ({value.get('carrier')}): {value.get('status')}; last scan "
                f"{scan.get('event')} at {scan.get('at')} ({_clip(scan.get('detail') or '', 80)})")
    if name == "issue_refund" and value:
        note = f" ({value['staff_decision']})" if value.get("staff_decision") else ""
        return f"Refund {value.get('refund_id')} of {value.get('amount')} on {value.get('order_id')} issued{note}"
    if name == "message_seller" and value:
        return f"Seller {value.get('seller')} messaged about {value.get('order_id')} ({value.get('status')})"
    if name == "search_policy" and value:
        titles = [f"{r.get('doc_id')} {r.get('title')}" for r in value.get("results", [])[:4]]
        return "Policies read: " + "; ".join(titles) if titles else ""
    if name == "record_outcome":
        return f"Outcome recorded: {args.get('outcome')} ({_clip(args.get('summary', ''), 120)})"
    if name == "escalate_to_human":
        return f"Handed to a person: {_clip(args.get('reason', ''), 160)}"
    return ""


def _json(text) -> dict:
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _args(args: dict) -> str:
    return ", ".join(f"{k}={_clip(str(v), 40)}" for k, v in args.items() if k != "reason")


def _clip(text: str, n: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"
