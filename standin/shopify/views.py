"""The store as GraphQL sees it: dicts whose keys are field names, and functions (info, **args) where a field
takes arguments (graphql-core's default resolver calls them). Also the search syntax of `query:` arguments.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal

from graphql import GraphQLError, get_directive_values

from .store import CURRENCY, RefundRefused, Store, cursor_position, iso, opaque_cursor

MAX_PAGE = 250  # Shopify refuses first/last above 250


def money(amount: Decimal) -> dict:
    return {"amount": f"{amount:.2f}", "currencyCode": CURRENCY}


def bag(amount: Decimal) -> dict:
    return {"shopMoney": money(amount), "presentmentMoney": money(amount)}


def connection(nodes: list, first: int | None = None, after: str | None = None, last: int | None = None,
               before: str | None = None, reverse: bool = False, **_) -> dict:
    """A Relay connection over nodes, paginated forward or backward with opaque cursors."""
    if first is None and last is None:
        raise GraphQLError("you must provide one of first or last")
    for n in (first, last):
        if n is not None and not 0 <= n <= MAX_PAGE:
            raise GraphQLError(f"The first or last argument must be between 0 and {MAX_PAGE}.")
    indexed = list(enumerate(reversed(nodes) if reverse else nodes))
    try:
        if after is not None:
            indexed = [(i, n) for i, n in indexed if i > cursor_position(after)]
        if before is not None:
            indexed = [(i, n) for i, n in indexed if i < cursor_position(before)]
    except ValueError as e:
        raise GraphQLError(str(e)) from None
    more_after = more_before = False
    if first is not None:
        more_after, indexed = len(indexed) > first, indexed[:first]
    if last is not None:
        more_before, indexed = len(indexed) > last, indexed[-last:] if last else []
    edges = [{"cursor": opaque_cursor(i), "node": n} for i, n in indexed]
    return {"edges": edges, "nodes": [e["node"] for e in edges], "pageInfo": {
        "hasNextPage": more_after, "hasPreviousPage": more_before or after is not None,
        "startCursor": edges[0]["cursor"] if edges else None, "endCursor": edges[-1]["cursor"] if edges else None}}


def capped(items: list, first: int | None) -> list:
    """A plain list field with `first` (refunds, fulfillments, transactions, trackingInfo)."""
    return items if first is None else items[:max(first, 0)]


# -- the `query:` search syntax -------------------------------------------------------------------------
# Shopify's search syntax, the part the desk uses: terms `field:value` joined by spaces (AND), a value in
# double quotes when it holds spaces or punctuation. Shopify matches some fields loosely (name is tokenized);
# this fake matches exactly, ignoring case, which the desk's exact check after the search tolerates either way.

_TERM = re.compile(r'(\w+):(?:"((?:[^"\\]|\\.)*)"|(\S+))')


def search_terms(query: str | None) -> list[tuple[str, str]]:
    if not query:
        return []
    terms = [(m.group(1).lower(), re.sub(r"\\(.)", r"\1", m.group(2)) if m.group(2) is not None else m.group(3))
             for m in _TERM.finditer(query)]
    if not terms:
        raise GraphQLError(f"Unsupported search query in this fake: {query!r}")
    return terms


def matches(terms: list[tuple[str, str]], fields: dict[str, Callable[[], str]]) -> bool:
    for name, wanted in terms:
        if name not in fields:
            raise GraphQLError(f"Unsupported search field in this fake: {name!r}")
        if fields[name]().lower() != wanted.lower():
            return False
    return True


def numeric_id(gid: str) -> str:
    return gid.rsplit("/", 1)[-1]


# -- the objects ------------------------------------------------------------------------------------------

def customer_view(c: dict) -> dict:
    return {"id": c["id"], "displayName": c["displayName"], "firstName": c["firstName"], "lastName": c["lastName"],
            "defaultEmailAddress": {"emailAddress": c["email"]}}


def transaction_view(store: Store, order: dict, t: dict) -> dict:
    refundable = store.refundable_on(order, t) if t["kind"] in ("SALE", "CAPTURE") else Decimal("0")
    parent = t["parent"]
    return {"id": t["id"], "kind": t["kind"], "status": t["status"], "gateway": t["gateway"],
            "processedAt": iso(t["processedAt"]), "amountSet": bag(t["amount"]),
            "maximumRefundableV2": money(refundable),
            "parentTransaction": (lambda info: transaction_view(store, order, parent)) if parent else None}


def refund_view(store: Store, order: dict, r: dict) -> dict:
    return {"id": r["id"], "createdAt": iso(r["createdAt"]), "note": r["note"], "totalRefundedSet": bag(r["amount"]),
            "transactions": lambda info, **page: connection(
                [transaction_view(store, order, t) for t in r["transactions"]], **page)}


def fulfillment_view(f: dict) -> dict:
    events = [{**e, "happenedAt": iso(e["happenedAt"])} for e in f["events"]]

    def events_page(info, sortKey="ID", **page):
        ordered = sorted(events, key=lambda e: e["happenedAt"]) if sortKey == "HAPPENED_AT" else events
        return connection(ordered, **page)

    return {"id": f["id"], "createdAt": iso(f["createdAt"]), "status": f["status"],
            "displayStatus": f["displayStatus"], "trackingInfo": lambda info, first=None: capped([f["tracking"]], first),
            "events": events_page}


def metafield_view(m: dict) -> dict:
    return {**m, "createdAt": iso(m["createdAt"]), "updatedAt": iso(m["updatedAt"])}


def order_view(store: Store, o: dict) -> dict:
    fulfilled = bool(o["fulfillments"])
    return {
        "id": o["id"], "name": o["name"], "createdAt": iso(o["createdAt"]), "processedAt": iso(o["processedAt"]),
        "cancelledAt": iso(o["cancelledAt"]) if o["cancelledAt"] else None, "currencyCode": o["currency"],
        "customer": customer_view(o["customer"]), "note": o["note"],
        "displayFulfillmentStatus": "FULFILLED" if fulfilled else "UNFULFILLED",
        "lineItems": lambda info, **page: connection([
            {"id": i["id"], "sku": i["sku"], "title": i["title"], "quantity": i["quantity"], "vendor": i["vendor"],
             "originalUnitPriceSet": bag(i["price"]),
             "product": {"id": i["product"], "description": i["description"]}} for i in o["items"]], **page),
        "totalPriceSet": bag(o["total"]), "totalShippingPriceSet": bag(o["shipping"]),
        "totalRefundedSet": bag(store.refunded(o)),
        "transactions": lambda info, first=None, **_: capped(
            [transaction_view(store, o, t) for t in o["transactions"]], first),
        "refunds": lambda info, first=None: capped([refund_view(store, o, r) for r in o["refunds"]], first),
        "fulfillments": lambda info, first=None: capped([fulfillment_view(f) for f in o["fulfillments"]], first),
        "metafield": lambda info, key, namespace=None: _metafield(o, namespace or "$app", key),
    }


def _metafield(order: dict, namespace: str, key: str) -> dict | None:
    found = order["metafields"].get((namespace, key))
    return metafield_view(found) if found else None


# -- the roots --------------------------------------------------------------------------------------------

def query_root(store: Store) -> dict:
    def customers(info, query=None, sortKey="ID", **page):
        terms = search_terms(query)
        found = [c for c in store.customers if matches(terms, {
            "email": lambda c=c: c["email"], "id": lambda c=c: numeric_id(c["id"])})]
        if sortKey == "NAME":
            found.sort(key=lambda c: c["displayName"])
        return connection([customer_view(c) for c in found], **page)

    def orders(info, query=None, sortKey="PROCESSED_AT", **page):
        terms = search_terms(query)
        found = [o for o in store.orders if matches(terms, {
            "name": lambda o=o: o["name"], "customer_id": lambda o=o: numeric_id(o["customer"]["id"]),
            "email": lambda o=o: o["customer"]["email"]})]
        keys = {"PROCESSED_AT": lambda o: (o["processedAt"], o["id"]), "CREATED_AT": lambda o: (o["createdAt"], o["id"]),
                "ORDER_NUMBER": lambda o: o["name"], "ID": lambda o: int(numeric_id(o["id"]))}
        found.sort(key=keys.get(sortKey, keys["ID"]))
        return connection([order_view(store, o) for o in found], **page)

    def shop(info):
        return {"shopPolicies": store.shop_policies}

    return {"customers": customers, "orders": orders, "shop": shop}


def mutation_root(store: Store, now: Callable[[], datetime]) -> dict:
    def refund_create(info, input):
        key = idempotency_key(info)
        try:
            order, refund = store.refund_create(input, key, now())
        except RefundRefused as e:
            return {"order": None, "refund": None, "userErrors": [{"field": e.field, "message": str(e)}]}
        return {"order": order_view(store, order), "refund": refund_view(store, order, refund), "userErrors": []}

    def metafields_set(info, metafields):
        if len(metafields) > 25:
            return {"metafields": None, "userErrors": [{"code": "LESS_THAN_OR_EQUAL_TO", "elementIndex": None,
                                                        "field": ["metafields"],
                                                        "message": "Exceeded the maximum metafields input limit of 25."}]}
        done, errors = [], []
        for n, entry in enumerate(metafields):
            try:
                done.append(metafield_view(store.metafield_set(entry, now())))
            except ValueError as e:
                errors.append({"code": "INVALID_VALUE" if str(e) == "value" else "INVALID", "elementIndex": n,
                               "field": ["metafields", str(n), str(e)], "message": f"{e} is invalid"})
        # Shopify sets all of them or none: with an error, nothing is answered as set.
        return {"metafields": None if errors else done, "userErrors": errors}

    return {"refundCreate": refund_create, "metafieldsSet": metafields_set}


def idempotency_key(info) -> str | None:
    directive = info.schema.get_directive("idempotent")
    values = get_directive_values(directive, info.field_nodes[0], info.variable_values)
    return values["key"] if values else None
