"""search_policy: ranked search over the shop's policies and, on a marketplace, one seller's supplements."""

from __future__ import annotations

from support.agent.tools import Tool, ToolContext
from support.shop import port
from support.shop.search import search_policies

QUERY = {"type": "string", "minLength": 1, "maxLength": 300, "description": "what to look up"}
SELLER_ID = {"type": "string", "pattern": "^[A-Za-z0-9-]{1,20}$",
             "description": 'the seller_id from get_order, e.g. "S-HL"'}


def search_policy(ctx: ToolContext, query: str, seller_id: str | None = None) -> dict:
    results = []
    for hit, row in search_policies(str(query)[:300], seller_code=seller_id or None):
        result = {"doc_id": row.doc_id, "title": row.title, "scope": "sundry" if row.seller is None else "seller"}
        if row.seller is not None:
            result["seller_id"] = row.seller.code
        # The version read: the approval card cites it, so a decision can be traced to the words it rested on.
        result.update({"version": row.version, "excerpt": hit.excerpt, "score": hit.score})
        results.append(result)
    return {"results": results}


def search_own_policy(ctx: ToolContext, query: str) -> dict:
    """On a shop without sellers: its own policies only, so no scope to tell apart."""
    results = [{"doc_id": row.doc_id, "title": row.title, "version": row.version, "excerpt": hit.excerpt,
                "score": hit.score} for hit, row in search_policies(str(query)[:300], seller_code=None)]
    return {"results": results}


_WHAT = ("customer-service policies (lost or missing parcels, damaged or wrong items, delays, refunds, when to "
         "hand over to a person). ")
_WHEN = "Use it before promising a refund, replacement or claim. Returns up to 4 documents, best match first, "


def search_policy_tool(capabilities: port.Capabilities, shop_name: str) -> Tool:
    """search_policy in the shop's own terms: a seller's supplement only on a shop whose sellers have them."""
    if capabilities.seller_policies:
        description = (
            f"Search {shop_name}'s {_WHAT}Pass seller_id (from get_order's fulfilled_by) "
            "to also search that marketplace seller's own supplement, which can add rules such as waiting "
            f"periods; always do so for an order fulfilled by a marketplace seller. {_WHEN}each with doc_id, "
            "title, version, scope (sundry or seller), an excerpt and a relevance score.")
        properties, fn = {"query": QUERY, "seller_id": SELLER_ID}, search_policy
    else:
        description = (f"Search {shop_name}'s {_WHAT}{_WHEN}each with doc_id, title, version, an excerpt and a "
                       "relevance score.")
        properties, fn = {"query": QUERY}, search_own_policy
    return Tool(read_only=True, name="search_policy", label="Reading our policies", description=description,
                parameters={"type": "object", "properties": properties, "required": ["query"],
                            "additionalProperties": False},
                fn=fn)


SEARCH_POLICY = search_policy_tool(port.MARKETPLACE, "Sundry")
