"""The copilot's tools: an allowlist computed here, in server code, from the tools the agent's profile offers
(only those that read: `read_only`, not gated, no policy that holds a call for a person, and for an MCP tool only
one its server lists with readOnlyHint true), plus `suggest_action` for a suggestion, which only records a
validated proposal. Each tool's reads are kept as the run's sources (the chips beside a draft)."""

from __future__ import annotations

import threading
from dataclasses import replace
from decimal import Decimal

from support import profiles
from support.agent.tools import Tool, ToolContext, ToolError
from support.desk import assistant
from support.tools import mcp
from support.tools.common import ORDER_ID, money, order_for_customer, parse_amount

SUGGEST_ACTION = "suggest_action"
MESSAGE_CHARS = 2000
REASON_CHARS = 300


def may_offer(tool: Tool) -> bool:
    """A tool the copilot may be given: it reads and nothing else, by the desk's own marks, not the prompt's."""
    if not tool.read_only or tool.gated or tool.needs_person is not None:
        return False
    return mcp.server_of(tool.name) is None or mcp.says_read_only(tool.name)


def read_tools(profile: profiles.Profile) -> list[Tool]:
    return [t for t in assistant.tools(profile) if may_offer(t)]


class Reads:
    """What one run's tools read and proposed (tools may run at once: a reply's reads are made in parallel)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.sources: list[dict] = []
        self.suggestion: dict | None = None

    def add(self, *found: dict) -> None:
        with self._lock:
            for source in found:
                key = (source["kind"], source["id"], source.get("version"))
                if all((s["kind"], s["id"], s.get("version")) != key for s in self.sources):
                    self.sources.append(source)

    def propose(self, proposal: dict) -> None:
        with self._lock:
            self.suggestion = proposal


def sources_of(tool: str, value) -> list[dict]:
    """The chips a tool's result gives: the order it read, the parcel, each policy version it quoted."""
    if not isinstance(value, dict):
        return []
    if tool == "get_order" and value.get("order_id"):
        return [{"kind": "order", "id": value["order_id"], "label": f"{value['order_id']} ({value.get('status')})"}]
    if tool == "track_parcel" and value.get("tracking"):
        return [{"kind": "parcel", "id": value["tracking"],
                 "label": f"{value.get('carrier') or 'Parcel'} {value['tracking']} ({value.get('status')})"}]
    if tool == "search_policy":
        return [{"kind": "policy", "id": r["doc_id"], "label": str(r.get("title") or r["doc_id"]),
                 "version": r.get("version")} for r in value.get("results") or [] if r.get("doc_id")]
    return []


def _reading(tool: Tool, reads: Reads) -> Tool:
    def fn(ctx: ToolContext, **arguments):
        value = tool.fn(ctx, **arguments)
        reads.add(*sources_of(tool.name, value))
        return value
    return replace(tool, fn=fn)


def suggest_action_tool(reads: Reads) -> Tool:
    def suggest(ctx: ToolContext, action: str, order_id: str, amount=None, reason: str = "", message: str = ""):
        order = order_for_customer(ctx, order_id)
        proposal = {"action": action, "order_id": order.number}
        if action == "refund":
            value = parse_amount(amount if amount is not None else "")
            if value > Decimal(order.refundable):
                raise ToolError(f"{money(value)} is more than the {money(order.refundable)} still refundable on "
                                f"{order.number}; propose at most that.")
            proposal.update(amount=money(value), reason=" ".join(str(reason).split())[:REASON_CHARS])
        else:
            text = str(message).strip()
            if not text:
                raise ToolError("A seller message needs its text in `message`.")
            proposal.update(message=text[:MESSAGE_CHARS], reason=" ".join(str(reason).split())[:REASON_CHARS])
        reads.propose(proposal)
        return {"recorded": proposal, "note": "Nothing was done: the staff member decides and acts from the console."}

    return Tool(
        name=SUGGEST_ACTION, read_only=True, label="Suggesting a next step", fn=suggest,
        description=("Record the one staff action you propose: a refund (order_id, amount in EUR as \"24.99\" at most "
                     "the order's refundable amount, reason) or a message to the order's seller (order_id, message, "
                     "reason). It runs nothing: the proposal fills the staff member's action form, and they decide."),
        parameters={"type": "object", "properties": {
            "action": {"type": "string", "enum": ["refund", "seller_message"]},
            "order_id": dict(ORDER_ID),
            "amount": {"type": "string", "pattern": r"^\d{1,7}(\.\d{1,2})?$"},
            "reason": {"type": "string", "maxLength": REASON_CHARS},
            "message": {"type": "string", "maxLength": MESSAGE_CHARS},
        }, "required": ["action", "order_id"], "additionalProperties": False},
    )


def for_run(kind: str, profile: profiles.Profile, reads: Reads) -> list[Tool]:
    """The run's tools: the read tools, each keeping its sources, and suggest_action for a suggestion."""
    offered = [_reading(t, reads) for t in read_tools(profile)]
    return [*offered, suggest_action_tool(reads)] if kind == "suggest" else offered
