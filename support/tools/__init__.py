"""The tools the model can call on the Sundry shop: a plain list, one module per domain area."""

from __future__ import annotations

from support.agent.tools import Tool
from support.tools.escalation import ESCALATE_TO_HUMAN
from support.tools.orders import GET_ORDER
from support.tools.parcels import TRACK_PARCEL
from support.tools.policies import SEARCH_POLICY
from support.tools.refunds import ISSUE_REFUND
from support.tools.sellers import MESSAGE_SELLER

# Roughly the order a case is worked: look up, check, read the rules, act, hand over.
SHOP_TOOLS: list[Tool] = [GET_ORDER, TRACK_PARCEL, SEARCH_POLICY, MESSAGE_SELLER, ISSUE_REFUND, ESCALATE_TO_HUMAN]

_BY_NAME = {tool.name: tool for tool in SHOP_TOOLS}


def tool_by_name(name: str) -> Tool | None:
    """The shop tool called `name`, or None (the loop answers unknown names to the model itself)."""
    return _BY_NAME.get(name)
