"""ShopifyShop: the Shop over Shopify's Admin GraphQL API (version in SHOPIFY_API_VERSION, built for 2026-01).

One POST per call to https://{SHOPIFY_SHOP_DOMAIN}/admin/api/{version}/graphql.json with the custom app's
access token, through a resilience.Guard (reads retried, writes sent once, a circuit). docs/shopify.md says
which scopes the app needs, how vendors map to sellers and how a refund is made exactly once.

Shopify keeps no marketplace sellers and no desk keys, so two things live in the shop's own fields:
- the seller is the line items' vendor, named as in the Sundry catalogue (VENDORS);
- a refund carries the desk's key twice: Shopify's @idempotent directive (it dedupes retries for a while), and
  a line at the end of the refund's note (what refund_by_key reads back, for as long as the order exists);
- a seller message is an order metafield (namespace SELLER_MESSAGES), its key a hash of the desk's key.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from decimal import Decimal, InvalidOperation

import httpx2
from django.conf import settings

import sundry
from support.ops.outbound import require_https
from support.shop import port
from support.shop.resilience import Answer, Guard, Retryable, retry_after_seconds, send_bounded

log = logging.getLogger(__name__)

# -- the queries ------------------------------------------------------------------------------------------
# Page sizes keep each query well under Shopify's 1,000-point single-query limit and a Standard plan's bucket:
# one order asks for about 150 points as below (20 line items, 2 fulfillments of 15 events, 10 refunds,
# 5 transactions), a page of three orders about 450. Shopify charges back what the answer did not use.

ORDER_FIELDS = """
  id name processedAt cancelledAt currencyCode note
  customer { id }
  lineItems(first: 20) {
    nodes { sku title quantity vendor originalUnitPriceSet { shopMoney { amount } } product { description } }
  }
  totalPriceSet { shopMoney { amount } }
  totalShippingPriceSet { shopMoney { amount } }
  totalRefundedSet { shopMoney { amount } }
  transactions(first: 5) { id kind status gateway maximumRefundableV2 { amount } }
  refunds(first: 10) { id createdAt note totalRefundedSet { shopMoney { amount } } }
  fulfillments(first: 2) {
    displayStatus
    trackingInfo(first: 1) { number company url }
    events(first: 15, sortKey: HAPPENED_AT) { nodes { happenedAt status message city } }
  }
"""

CUSTOMER_BY_EMAIL = """
query CustomerByEmail($query: String!) {
  customers(first: 5, query: $query) { nodes { id displayName defaultEmailAddress { emailAddress } } }
}
"""

ORDERS_OF_CUSTOMER = """
query OrdersOfCustomer($query: String!, $after: String) {
  orders(first: 3, after: $after, query: $query, sortKey: PROCESSED_AT, reverse: true) {
    nodes { %s }
    pageInfo { hasNextPage endCursor }
  }
}
""" % ORDER_FIELDS

# The customer's recent orders in brief, told to the model at the start of every run (known_orders): what a brief
# says and nothing else, in one page. About 140 of the bucket for five orders, where orders_of's full orders cost
# about 450 a page of three: read at every run, the full query left too little of the bucket for the tools.
ORDER_BRIEFS = """
query OrderBriefs($query: String!, $first: Int!, $after: String) {
  orders(first: $first, after: $after, query: $query, sortKey: PROCESSED_AT, reverse: true) {
    nodes {
      id name processedAt cancelledAt currencyCode
      lineItems(first: 20) { nodes { title vendor } }
      totalPriceSet { shopMoney { amount } }
      fulfillments(first: 2) { displayStatus }
    }
    pageInfo { hasNextPage endCursor }
  }
}
"""
BRIEFS_A_PAGE = 10

ORDER_BY_NAME = """
query OrderByName($query: String!, $namespace: String!, $key: String!) {
  orders(first: 2, query: $query) {
    nodes { %s sellerMessage: metafield(namespace: $namespace, key: $key) { id } }
  }
}
""" % ORDER_FIELDS

REFUND_CREATE = """
mutation RefundCreate($input: RefundInput!, $idempotencyKey: String!) {
  refundCreate(input: $input) @idempotent(key: $idempotencyKey) {
    refund { id createdAt note totalRefundedSet { shopMoney { amount } } }
    userErrors { field message }
  }
}
"""

METAFIELDS_SET = """
mutation SellerMessageSet($metafields: [MetafieldsSetInput!]!) {
  metafieldsSet(metafields: $metafields) {
    metafields { id key namespace }
    userErrors { field message code }
  }
}
"""

SHOP_POLICIES = """
query ShopPolicies { shop { shopPolicies { type title body } } }
"""

QUERIES = (SHOP_POLICIES, CUSTOMER_BY_EMAIL, ORDERS_OF_CUSTOMER, ORDER_BRIEFS, ORDER_BY_NAME, REFUND_CREATE, METAFIELDS_SET)

# -- the mappings -----------------------------------------------------------------------------------------

# Vendor name -> the seller the desk knows. The catalogue's seller names are the vendors the Sundry store puts
# on its products; the one it ships itself is not a marketplace seller. A vendor missing here is a
# marketplace seller named by its vendor text.
VENDORS = {name: port.Seller(id=code, name=name, is_marketplace=not own) for code, name, own in sundry.SELLERS}
SELLER_MESSAGES = "desk_seller_messages"  # the order metafield namespace
KEY_LINE = "desk-key: "  # how the refund's note ends: the desk's idempotency key, on a line of its own

# FulfillmentEventStatus -> the desk's scan event. DELAYED stands for what the demo calls "held".
SCAN_EVENTS = {"LABEL_PRINTED": "label_created", "LABEL_PURCHASED": "label_created", "CONFIRMED": "confirmed",
               "CARRIER_PICKED_UP": "picked_up", "PICKED_UP": "picked_up", "IN_TRANSIT": "in_transit",
               "OUT_FOR_DELIVERY": "out_for_delivery", "DELIVERED": "delivered", "DELAYED": "held",
               "ATTEMPTED_DELIVERY": "attempted_delivery", "READY_FOR_PICKUP": "ready_for_pickup",
               "FAILURE": "failure"}
IN_TRANSIT = {"IN_TRANSIT", "OUT_FOR_DELIVERY", "DELAYED", "ATTEMPTED_DELIVERY", "CARRIER_PICKED_UP"}
REFUNDABLE_KINDS = {"SALE", "CAPTURE"}
UNAVAILABLE = {
    401: "Shopify refused the access token (SHOPIFY_ACCESS_TOKEN): it is wrong, revoked, or the app was uninstalled",
    402: "the Shopify store is frozen: its plan's payment is overdue (402 Payment Required)",
    403: "the Shopify app lacks a scope this call needs (403): see docs/shopify.md",
    404: "no Shopify Admin API there: check SHOPIFY_SHOP_DOMAIN and SHOPIFY_API_VERSION (404)",
    423: "the Shopify store is locked (423): Shopify has closed it to API calls",
}
WRITE_THROTTLE_ATTEMPTS = 3  # a throttled write was not run: it is sent again after the wait, this many times


class _Throttled(Retryable):
    """THROTTLED or a 429: Shopify did not run the call."""


@dataclass(frozen=True)
class _Found:
    """An order as read, with the raw node the writes need (its GID, transactions, refunds)."""

    order: port.Order
    node: dict


class ShopifyShop:
    def __init__(self, *, guard: Guard | None = None, sleep: Callable[[float], None] = time.sleep,
                 transport: httpx2.BaseTransport | None = None):
        self._sleep = sleep
        self.guard = guard or Guard("shopify", sleep=sleep)
        self._http = httpx2.Client(transport=transport)

    def capabilities(self) -> port.Capabilities:
        """A single-brand store (its vendors are brands, not sellers) unless SHOPIFY_VENDORS_ARE_SELLERS says
        the store is a marketplace; read on every call, so a changed setting takes effect."""
        return port.MARKETPLACE if settings.SHOPIFY_VENDORS_ARE_SELLERS else port.SINGLE_BRAND

    # -- reads ---------------------------------------------------------------------------------------------

    def policies(self) -> list[port.ShopPolicy] | None:
        """The store's policies as its own pages show them (refund, shipping, terms...: Shopify's shopPolicies,
        HTML; the custom app needs the read_legal_policies scope)."""
        nodes = _path(self._read(SHOP_POLICIES, {}), "shop", "shopPolicies")
        return [port.ShopPolicy(id=_text(n, "type"), title=_text(n, "title"), body=_text(n, "body"), html=True)
                for n in nodes if isinstance(n, dict)]

    def customer_by_email(self, email: str) -> port.ShopCustomer | None:
        data = self._read(CUSTOMER_BY_EMAIL, {"query": f"email:{_quoted(email)}"})
        customers = [_customer(node) for node in _path(data, "customers", "nodes")]
        # Shopify's search is loose; the port's answer is the exact address, ignoring case.
        same = [c for c in customers if c.email.lower() == email.lower()]
        exact = [c for c in same if c.email == email]
        return (exact or same)[0] if len(exact) == 1 or len(same) == 1 else None

    def order_briefs(self, customer_id: str, limit: int | None = None) -> list[port.OrderBrief]:
        """The orders in brief from a query that asks for a brief's fields only (ORDER_BRIEFS)."""
        first = min(limit, BRIEFS_A_PAGE) if limit else BRIEFS_A_PAGE
        return self._pages(customer_id, limit, lambda number, after: self._read(
            ORDER_BRIEFS, {"query": f"customer_id:{number}", "first": first, "after": after}), _brief)

    def orders_of(self, customer_id: str, limit: int | None = None) -> list[port.Order]:
        return self._pages(customer_id, limit, lambda number, after: self._read(
            ORDERS_OF_CUSTOMER, {"query": f"customer_id:{number}", "after": after}), _order)

    def _pages(self, customer_id: str, limit: int | None, read, made) -> list:
        number = customer_id.rsplit("/", 1)[-1]
        if not customer_id.startswith("gid://shopify/Customer/") or not number.isdigit():
            return []
        orders, after = [], None
        # A bounded number of pages: a customer with hundreds of orders (or a store that always says there is
        # another page) must not hold a run for minutes; the newest come first, an older one is still found
        # by its number (order()).
        for _ in range(settings.SHOPIFY_MAX_ORDER_PAGES):
            page = _path(read(number, after), "orders")
            orders += [made(node) for node in _path(page, "nodes")]
            if limit is not None and len(orders) >= limit:
                return orders[:limit]  # newest first: the pages after hold older ones
            if not _path(page, "pageInfo", "hasNextPage"):
                return orders
            after = _path(page, "pageInfo", "endCursor")
        log.warning("shop shopify: a customer's orders go past SHOPIFY_MAX_ORDER_PAGES (%d); the older ones are "
                    "not listed", settings.SHOPIFY_MAX_ORDER_PAGES)
        return orders

    def order(self, number: str) -> port.Order | None:
        found = self._find(number)
        return found.order if found else None

    def lock_order(self, number: str) -> None:
        """Shopify has no lock a caller can hold: refundCreate checks the balance itself as it writes."""

    # -- refunds -------------------------------------------------------------------------------------------

    def refund(self, *, order_number: str, amount: Decimal, reason: str,
               idempotency_key: str | None) -> port.RefundResult:
        _check_amount(amount)
        found = self._find(order_number)
        if found is None:
            raise port.NotFound(f"no order {order_number}")
        if idempotency_key and (earlier := _refund_with_key(found, idempotency_key)) is not None:
            return earlier
        if amount > found.order.refundable:
            raise port.ExceedsRefundable(found.order.refundable)
        node = found.node
        note = f"{reason}\n{KEY_LINE}{idempotency_key}" if idempotency_key else reason
        refund_input = {"orderId": _path(node, "id"), "note": note, "notify": False,
                        "transactions": _refund_transactions(node, amount)}
        # Without a desk key nothing guards a retry (the port's rule), but Shopify still wants one from 2026-04.
        key = _shopify_key(idempotency_key) if idempotency_key else str(uuid.uuid4())
        data = self._write(REFUND_CREATE, {"input": refund_input, "idempotencyKey": key})
        payload = _path(data, "refundCreate")
        if errors := _path(payload, "userErrors"):
            self._refused(order_number, amount, errors)
        return _refund_result(_path(payload, "refund"), order_number)

    def refund_by_key(self, key: str, order_number: str | None = None) -> port.RefundResult | None:
        # Shopify cannot search refunds by note: the desk's key is found on the order's own refunds.
        if not order_number:
            return None
        found = self._find(order_number)
        return _refund_with_key(found, key) if found else None

    def _refused(self, order_number: str, amount: Decimal, errors: list) -> None:
        """Shopify's userErrors carry no code for refunds: the balance, read again, tells an over-refund
        from anything else."""
        messages = "; ".join(str(e.get("message", "")) for e in errors if isinstance(e, dict)) or "refused"
        found = self._find(order_number)
        if found is not None and amount > found.order.refundable:
            raise port.ExceedsRefundable(found.order.refundable)
        raise port.Invalid(f"Shopify refused the refund on {order_number}: {messages}")

    # -- seller messages -----------------------------------------------------------------------------------

    def message_seller(self, *, order_number: str, message: str, idempotency_key: str | None,
                       conversation: str | None = None) -> port.SellerMessageResult:
        key = idempotency_key or str(uuid.uuid4())
        found = self._find(order_number, message_key=key)
        if found is None:
            raise port.NotFound(f"no order {order_number}")
        if (earlier := _seller_message(found)) is not None:
            return earlier
        if not found.order.seller.is_marketplace:
            raise port.Invalid(f"order {order_number} is fulfilled by Sundry itself: it has no seller")
        value = {"text": message, "at": datetime.now(timezone.utc).isoformat(), "key": idempotency_key,
                 "conversation": conversation, "seller": found.order.seller.id}
        # metafieldsSet is an upsert on (owner, namespace, key): sent twice, it is still one message.
        data = self._write(METAFIELDS_SET, {"metafields": [{
            "ownerId": _path(found.node, "id"), "namespace": SELLER_MESSAGES, "key": _metafield_key(key),
            "type": "json", "value": json.dumps(value, ensure_ascii=False)}]})
        payload = _path(data, "metafieldsSet")
        if errors := _path(payload, "userErrors"):
            raise port.Invalid("Shopify refused the seller message: " +
                               "; ".join(str(e.get("message", "")) for e in errors if isinstance(e, dict)))
        written = _path(payload, "metafields")
        if not isinstance(written, list) or not written:
            raise port.BadAnswer("metafieldsSet answered no metafield and no error")
        return port.SellerMessageResult(id=_text(written[0], "id"), order_number=found.order.number)

    def seller_message_by_key(self, key: str, order_number: str | None = None) -> port.SellerMessageResult | None:
        if not order_number:
            return None
        found = self._find(order_number, message_key=key)
        return _seller_message(found) if found else None

    # -- one order by its name -----------------------------------------------------------------------------

    def _find(self, number: str, message_key: str | None = None) -> _Found | None:
        # An order name goes into Shopify's search syntax: anything but a plain name cannot be one.
        if not re.fullmatch(r"#?[A-Za-z0-9][A-Za-z0-9_-]{0,39}", str(number)):
            return None
        data = self._read(ORDER_BY_NAME, {"query": f"name:{_quoted(number)}", "namespace": SELLER_MESSAGES,
                                          "key": _metafield_key(message_key or "none")})
        # The name search is tokenized on Shopify: only the order of exactly that name counts.
        for node in _path(data, "orders", "nodes"):
            if _text(node, "name").lower() == str(number).lower():
                return _Found(order=_order(node), node=node)
        return None

    # -- HTTP ----------------------------------------------------------------------------------------------

    def _read(self, query: str, variables: dict) -> dict:
        return self.guard.read(lambda: self._post(query, variables, write=False))

    def _write(self, query: str, variables: dict) -> dict:
        """Sent once, and again only when Shopify said THROTTLED (or 429): then it did not run the mutation."""
        for attempt in range(WRITE_THROTTLE_ATTEMPTS):
            try:
                return self.guard.write(lambda: self._post(query, variables, write=True))
            except port.ShopUnavailable as e:
                throttled = e.__cause__ if isinstance(e.__cause__, _Throttled) else None
                if throttled is None or attempt == WRITE_THROTTLE_ATTEMPTS - 1:
                    raise
                wait = min(throttled.retry_after or 1.0, settings.SHOP_RETRY_MAX_WAIT_SECONDS)
                log.info("shop shopify: write throttled; sending it again in %.2f s", wait)
                self._sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    def _post(self, query: str, variables: dict, *, write: bool) -> dict:
        require_https(origin(), "SHOPIFY_SHOP_DOMAIN")  # the access token goes with every request
        url = f"{origin()}/admin/api/{settings.SHOPIFY_API_VERSION}/graphql.json"
        timeout = httpx2.Timeout(settings.SHOP_READ_TIMEOUT_SECONDS, connect=settings.SHOP_CONNECT_TIMEOUT_SECONDS)
        request = self._http.build_request("POST", url, json={"query": query, "variables": variables},
                                           timeout=timeout, headers={"X-Shopify-Access-Token": settings.SHOPIFY_ACCESS_TOKEN})
        try:
            response = send_bounded(self._http, request, write=write)
        except (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout) as e:
            # Nothing reached Shopify: a write may be tried again as safely as a read.
            raise Retryable(f"Shopify could not be reached ({type(e).__name__})") from e
        except httpx2.TransportError as e:
            if write:
                raise port.OutcomeUnknown(f"the write was sent to Shopify and its answer was lost "
                                          f"({type(e).__name__}); ask by the key before sending it again") from e
            raise Retryable(f"Shopify's answer was lost ({type(e).__name__})") from e
        return _answer(response, write=write)


# -- the answer -----------------------------------------------------------------------------------------------

def _answer(response: Answer, *, write: bool) -> dict:
    status = response.status_code
    if status in UNAVAILABLE:
        raise port.ShopUnavailable(UNAVAILABLE[status])
    if status == 429:
        raise _Throttled("Shopify answered 429 Too Many Requests",
                         retry_after_seconds(response.headers.get("Retry-After")))
    if status >= 500:
        if write:
            raise port.OutcomeUnknown(f"Shopify failed ({status}) after the write was sent; ask by the key")
        raise Retryable(f"Shopify failed ({status})")
    if status != 200:
        raise port.BadAnswer(f"Shopify answered HTTP {status}")
    try:
        body = response.json()
    except ValueError:
        raise port.BadAnswer("Shopify's answer is not JSON") from None
    if not isinstance(body, dict):
        raise port.BadAnswer("Shopify's answer is not a JSON object")
    if body.get("errors"):
        _errors(body, write=write)
    data = body.get("data")
    if not isinstance(data, dict):
        raise port.BadAnswer("Shopify's answer has no data")
    return data


def _errors(body: dict, *, write: bool) -> None:
    errors = body["errors"]
    codes = {(e.get("extensions") or {}).get("code") for e in errors if isinstance(e, dict)} \
        if isinstance(errors, list) else set()
    if "THROTTLED" in codes:
        raise _Throttled("Shopify throttled the call (its cost bucket is short)", _refill_wait(body))
    if "ACCESS_DENIED" in codes:
        raise port.ShopUnavailable(UNAVAILABLE[403])
    if "INTERNAL_SERVER_ERROR" in codes:
        if write:
            raise port.OutcomeUnknown("Shopify failed while running the write; ask by the key")
        raise Retryable("Shopify failed while running the query")
    if "MAX_COST_EXCEEDED" in codes:
        raise port.ShopUnavailable("the query costs more than Shopify lets one query cost")
    first = errors[0].get("message") if isinstance(errors, list) and errors and isinstance(errors[0], dict) else errors
    raise port.BadAnswer(f"Shopify answered an error the desk does not know: {str(first)[:200]}")


def _refill_wait(body: dict) -> float | None:
    """How long until the bucket holds the query's cost: (requested - available) / restore rate, or None
    when Shopify did not say (the Guard then backs off on its own)."""
    try:
        cost = body["extensions"]["cost"]
        status = cost["throttleStatus"]
        needed = float(cost["requestedQueryCost"]) - float(status["currentlyAvailable"])
        rate = float(status["restoreRate"])
    except (KeyError, TypeError, ValueError):
        return None
    if rate <= 0:
        return None
    return max(0.0, needed / rate)


# -- Shopify's nodes to the port's values -------------------------------------------------------------------

def _order(node: dict) -> port.Order:
    _text(node, "id")  # the writes need it: an order without one is not an answer to trust
    items = tuple(port.Item(sku=_text(i, "sku", optional=True), title=_text(i, "title"), qty=_count(i, "quantity"),
                            unit_price=_money(i, "originalUnitPriceSet"),
                            seller_description=_text(i.get("product") or {}, "description", optional=True))
                  for i in _path(node, "lineItems", "nodes"))
    refunds = tuple(_refund_record(r, _text(node, "name")) for r in _path(node, "refunds"))
    parcels = tuple(_parcel(f) for f in _path(node, "fulfillments"))
    refundable = sum((_amount(_path(t, "maximumRefundableV2"), "amount") for t in _path(node, "transactions")
                      if _refundable(t)), Decimal("0"))
    vendors = [_text(i, "vendor", optional=True) for i in _path(node, "lineItems", "nodes")]
    return port.Order(
        number=_text(node, "name"), customer_id=_text(_path(node, "customer"), "id") if node.get("customer") else "",
        status=_status(node), placed_at=_time(node, "processedAt"), currency=_text(node, "currencyCode"),
        seller=_seller(vendors), items=items, shipping_fee=_money(node, "totalShippingPriceSet"),
        total=_money(node, "totalPriceSet"), refunded=_money(node, "totalRefundedSet"), refundable=refundable,
        note=_text(node, "note", optional=True), parcels=parcels, refunds=tuple(sorted(refunds, key=lambda r: r.created_at)))


def _brief(node: dict) -> port.OrderBrief:
    _text(node, "id")  # as _order: an order without one is not an answer to trust
    lines = _path(node, "lineItems", "nodes")
    return port.OrderBrief(
        number=_text(node, "name"), status=_status(node), placed_at=_time(node, "processedAt"),
        seller_name=_seller([_text(i, "vendor", optional=True) for i in lines]).name,
        item_titles=tuple(_text(i, "title") for i in lines), total=_money(node, "totalPriceSet"),
        currency=_text(node, "currencyCode"))


def _seller(vendors: list[str]) -> port.Seller:
    """The order's seller: its first marketplace vendor, else the shop itself. A Shopify order may mix
    vendors; the desk speaks of one seller an order, and a marketplace one is who a message must reach."""
    sellers = [VENDORS.get(v) or port.Seller(id=v, name=v, is_marketplace=True) for v in vendors if v]
    own = next((s for s in VENDORS.values() if not s.is_marketplace), None)
    return next((s for s in sellers if s.is_marketplace), None) or (sellers[0] if sellers else own)


def _status(node: dict) -> str:
    if node.get("cancelledAt"):
        return "cancelled"
    shown = [f.get("displayStatus") for f in _path(node, "fulfillments")]
    if not shown:
        return "placed"
    if all(s == "DELIVERED" for s in shown):
        return "delivered"
    return "in_transit" if any(s in IN_TRANSIT for s in shown) else "shipped"


def _parcel(fulfillment: dict) -> port.Parcel:
    tracking = _path(fulfillment, "trackingInfo")
    first = tracking[0] if tracking else {}
    scans = tuple(sorted((port.Scan(at=_time(e, "happenedAt"), event=SCAN_EVENTS.get(_text(e, "status"),
                                                                                 _text(e, "status").lower()),
                                    detail=_text(e, "message", optional=True), location=_text(e, "city", optional=True))
                          for e in _path(fulfillment, "events", "nodes")), key=lambda s: s.at))
    shown = fulfillment.get("displayStatus") or "FULFILLED"
    return port.Parcel(tracking=_text(first, "number", optional=True), carrier=_text(first, "company", optional=True),
                       status=str(shown).lower(), scans=scans)


def _refund_record(node: dict, order_number: str) -> port.RefundRecord:
    reason, key = _note_and_key(node.get("note"))
    return port.RefundRecord(id=_text(node, "id"), reference=_reference(node), amount=_money(node, "totalRefundedSet"),
                             reason=reason, created_at=_time(node, "createdAt"), order_number=order_number,
                             idempotency_key=key)


def _refund_result(node, order_number: str) -> port.RefundResult:
    if not isinstance(node, dict):
        raise port.BadAnswer("refundCreate answered no refund and no error")
    return port.RefundResult(id=_text(node, "id"), reference=_reference(node), amount=_money(node, "totalRefundedSet"),
                             created_at=_time(node, "createdAt"), order_number=order_number)


def _refund_with_key(found: _Found, key: str) -> port.RefundResult | None:
    for record in found.order.refunds:
        if record.idempotency_key == key:
            return port.RefundResult(id=record.id, reference=record.reference, amount=record.amount,
                                     created_at=record.created_at, order_number=record.order_number)
    return None


def _seller_message(found: _Found) -> port.SellerMessageResult | None:
    written = found.node.get("sellerMessage")
    return port.SellerMessageResult(id=_text(written, "id"), order_number=found.order.number) if written else None


def _note_and_key(note) -> tuple[str, str | None]:
    text = note if isinstance(note, str) else ""
    head, sep, key = text.rpartition("\n" + KEY_LINE)
    return (head, key.strip() or None) if sep else (text, None)


def _reference(node: dict) -> str:
    """What the customer is told: the refund's number in Shopify, as the desk writes references."""
    return "RF-" + _text(node, "id").rsplit("/", 1)[-1]


def _refundable(transaction: dict) -> bool:
    return transaction.get("kind") in REFUNDABLE_KINDS and transaction.get("status") == "SUCCESS"


def _refund_transactions(node: dict, amount: Decimal) -> list[dict]:
    """The refund spread over the order's successful sales and captures, each up to what it has left."""
    parts, left = [], amount
    for t in _path(node, "transactions"):
        if left <= 0 or not _refundable(t):
            continue
        share = min(left, _amount(_path(t, "maximumRefundableV2"), "amount"))
        if share > 0:
            parts.append({"orderId": _path(node, "id"), "parentId": _text(t, "id"), "kind": "REFUND",
                          "gateway": _text(t, "gateway"), "amount": f"{share:.2f}"})
            left -= share
    return parts


def _customer(node: dict) -> port.ShopCustomer:
    address = node.get("defaultEmailAddress")
    return port.ShopCustomer(id=_text(node, "id"), name=_text(node, "displayName"),
                             email=_text(address, "emailAddress") if address else "")


# -- reading fields strictly ------------------------------------------------------------------------------

def _path(value, *keys):
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            raise port.BadAnswer(f"Shopify's answer lacks {key!r}")
        value = value[key]
    return value


def _text(node, key: str, *, optional: bool = False) -> str:
    value = node.get(key) if isinstance(node, dict) else None
    if value is None and optional:
        return ""
    if not isinstance(value, str):
        raise port.BadAnswer(f"Shopify's answer lacks {key!r} or it is not text")
    return value


def _count(node, key: str) -> int:
    value = _path(node, key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise port.BadAnswer(f"Shopify's {key!r} is not a count")
    return value


def _amount(node, key: str) -> Decimal:
    try:
        value = Decimal(str(_path(node, key)))
    except InvalidOperation:
        raise port.BadAnswer(f"Shopify's {key!r} is not an amount") from None
    if not value.is_finite() or value < 0:
        raise port.BadAnswer(f"Shopify's {key!r} is negative or not a number")
    return value.quantize(Decimal("0.01"))


def _money(node, key: str) -> Decimal:
    return _amount(_path(node, key, "shopMoney"), "amount")


def _time(node, key: str) -> datetime:
    try:
        at = datetime.fromisoformat(_text(node, key).replace("Z", "+00:00"))
    except ValueError:
        raise port.BadAnswer(f"Shopify's {key!r} is not a time") from None
    return at if at.tzinfo else at.replace(tzinfo=timezone.utc)


# -- small helpers --------------------------------------------------------------------------------------------

def origin() -> str:
    """SHOPIFY_SHOP_DOMAIN as a URL origin: a bare domain is https; one with a scheme (a local fake) is kept."""
    domain = settings.SHOPIFY_SHOP_DOMAIN.strip().rstrip("/")
    return domain if "://" in domain else f"https://{domain}"


def _quoted(value: str) -> str:
    """A value for Shopify's search syntax, in double quotes so spaces and colons stay part of it."""
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _shopify_key(key: str) -> str:
    # Shopify recommends UUID-sized keys; a long desk key is hashed to stay within what it accepts.
    return key if len(key) <= 64 else hashlib.sha256(key.encode()).hexdigest()


def _metafield_key(key: str) -> str:
    """A metafield key (2-64 letters, digits, - and _) for the desk's key, whatever characters it has."""
    return "msg_" + hashlib.sha256(key.encode()).hexdigest()[:40]


def _check_amount(amount: Decimal) -> None:
    if not isinstance(amount, Decimal) or amount <= 0 or amount != amount.quantize(Decimal("0.01")):
        raise port.Invalid(f"a refund is a positive amount with two decimals, got {amount!r}")
