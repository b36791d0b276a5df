"""The tools the model can call on the shop: a plain list, one module per domain area. SHOP_TOOLS is every one
(the Sundry marketplace's); shop_tools() the ones a given shop can back, in its own terms."""

from __future__ import annotations

from dataclasses import replace
from functools import wraps

from support.agent.tools import Tool, ToolUnavailable
from support.shop import port
from support.tools import mcp
from support.tools.escalation import ESCALATE_TO_HUMAN
from support.tools.orders import GET_ORDER, get_order_tool
from support.tools.parcels import TRACK_PARCEL
from support.tools.policies import SEARCH_POLICY, search_policy_tool
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



def shop_tools(capabilities: port.Capabilities, shop_name: str) -> list[Tool]:
    """The tools offered on a shop with these capabilities, in SHOP_TOOLS' order: a tool whose capability the
    shop lacks is left out (no message_seller without seller messages, no track_parcel without tracking),
    and a description names no concept the shop lacks (no seller on a single-brand store). Enforced here,
    where the list is built: the loop answers a call to a tool not in its list as an unknown tool."""
    described = {"get_order": get_order_tool(capabilities, shop_name),
                 "search_policy": search_policy_tool(capabilities, shop_name)}
    lacking = {"message_seller": not capabilities.seller_messages, "track_parcel": not capabilities.parcel_tracking}
    return [_reaching_the_shop(described[tool.name]) if tool.name in described else tool
            for tool in SHOP_TOOLS if not lacking.get(tool.name)]


_BY_NAME = {tool.name: tool for tool in SHOP_TOOLS}
mcp.reserve([*_BY_NAME, "record_outcome"])  # an MCP tool of one of these names is offered as <server>__<name>


def tool_by_name(name: str) -> Tool | None:
    """The shop tool, or MCP server tool (support/tools/mcp.py), called `name`, or None (the loop answers
    unknown names to the model itself)."""
    return _BY_NAME.get(name) or mcp.tool_by_name(name)
