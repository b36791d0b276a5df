"""The tools the model can call on the Sundry shop: a plain list, one module per domain area."""

from __future__ import annotations

from dataclasses import replace
from functools import wraps

from support.agent.tools import Tool, ToolUnavailable
from support.shop import port
from support.tools import mcp
from support.tools.escalation import ESCALATE_TO_HUMAN
from support.tools.orders import GET_ORDER
from support.tools.parcels import TRACK_PARCEL
from support.tools.policies import SEARCH_POLICY
from support.tools.refunds import ISSUE_REFUND
from support.tools.sellers import MESSAGE_SELLER



def _reaching_the_shop(tool: Tool) -> Tool:
    """The tool as the loop runs it: the shop away (or answering nonsense) is ToolUnavailable, which stops the
    run and hands the conversation to a person, instead of an error the model would have to explain."""
    def guarded(fn):
        if fn is None:
            return None

        @wraps(fn)
        def call(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except port.ShopUnavailable as e:
                raise ToolUnavailable(_plain(e)) from e
        return call
    return replace(tool, fn=guarded(tool.fn), check=guarded(tool.check))


def _plain(e: port.ShopUnavailable) -> str:
    if isinstance(e, port.OutcomeUnknown):
        return f"the shop did not confirm whether this was done ({e}); a person must check at the shop"
    return f"the shop could not be reached or answered something the desk could not read ({e})"


# Roughly the order a case is worked: look up, check, read the rules, act, hand over.
SHOP_TOOLS: list[Tool] = [_reaching_the_shop(tool) for tool in (
    GET_ORDER, TRACK_PARCEL, SEARCH_POLICY, MESSAGE_SELLER, ISSUE_REFUND, ESCALATE_TO_HUMAN)]

_BY_NAME = {tool.name: tool for tool in SHOP_TOOLS}
mcp.reserve([*_BY_NAME, "record_outcome"])  # an MCP tool of one of these names is offered as <server>__<name>


def tool_by_name(name: str) -> Tool | None:
    """The shop tool, or MCP server tool (support/tools/mcp.py), called `name`, or None (the loop answers
    unknown names to the model itself)."""
    return _BY_NAME.get(name) or mcp.tool_by_name(name)
