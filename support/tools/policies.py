"""search_policy: ranked search over Sundry's policies and, when asked, one seller's supplements."""

from __future__ import annotations

from support.agent.tools import Tool, ToolContext
from support.shop.search import search_policies


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


SEARCH_POLICY = Tool(
    read_only=True,
    name="search_policy",
    label="Reading our policies",
    description=(
        "Search Sundry's customer-service policies (lost or missing parcels, damaged or wrong items, "
        "delays, refunds, when to hand over to a person). Pass seller_id (from get_order's fulfilled_by) "
        "to also search that marketplace seller's own supplement, which can add rules such as waiting "
        "periods; always do so for an order fulfilled by a marketplace seller. Use it before promising a "
        "refund, replacement or claim. Returns up to 4 documents, best match first, each with doc_id, "
        "title, version, scope (sundry or seller), an excerpt and a relevance score."
    ),
    parameters={
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "maxLength": 300, "description": "what to look up"},
            "seller_id": {
                "type": "string",
                "pattern": "^[A-Za-z0-9-]{1,20}$",
                "description": 'the seller_id from get_order, e.g. "S-HL"',
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    fn=search_policy,
)
