"""The fake shop's data: the Sundry catalogue as Shopify would hold it, and the two writes the desk makes.

Seeded from `sundry` with times relative to the moment of seeding. Each catalogue order becomes an order whose
name is the catalogue number (a store whose order prefix is "SU-"), one line item per catalogue item with the
seller's name as its vendor, one successful SALE transaction for the total, one fulfillment for the parcel
with an event per carrier scan, and a refund per catalogue refund. Plain dicts: `views.py` shapes them for
GraphQL.
"""

from __future__ import annotations

import hashlib
import html
import itertools
import json
import uuid
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import sundry

POLICY_TYPES = ("REFUND_POLICY", "SHIPPING_POLICY", "TERMS_OF_SALE", "TERMS_OF_SERVICE", "PRIVACY_POLICY",
                "LEGAL_NOTICE", "CONTACT_INFORMATION", "SUBSCRIPTION_POLICY")

GATEWAY = "shopify_payments"
CURRENCY = "EUR"
GID = "gid://shopify/{}/{}"

# Catalogue scan events as Shopify's FulfillmentEventStatus, and a parcel's status as the fulfillment's
# displayStatus. A weather hold has no status of its own in Shopify: DELAYED is the nearest.
EVENT_STATUS = {"label_created": "LABEL_PRINTED", "picked_up": "CARRIER_PICKED_UP", "in_transit": "IN_TRANSIT",
                "out_for_delivery": "OUT_FOR_DELIVERY", "delivered": "DELIVERED", "held": "DELAYED"}
DISPLAY_STATUS = {"delivered": "DELIVERED", "delayed": "DELAYED", "in_transit": "IN_TRANSIT"}
TRACKING_URLS = {"Royal Mail": "https://www.royalmail.com/track-your-item#/tracking-results/{}",
                 "DPD": "https://track.dpd.co.uk/parcels/{}", "Evri": "https://www.evri.com/track/parcel/{}",
                 "DX Freight": "https://www.dxdelivery.com/consumer/my-tracking/{}"}


def iso(at: datetime) -> str:
    return at.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class RefundRefused(Exception):
    """What refundCreate answers in userErrors: (field path, message)."""

    def __init__(self, field: list[str], message: str):
        super().__init__(message)
        self.field = field


class Store:
    def __init__(self, now: datetime | None = None):
        now = now or datetime.now(timezone.utc)
        self._ids = itertools.count(1001)
        self.customers: list[dict] = []
        self.orders: list[dict] = []
        self.refund_keys: dict[str, tuple[str, str]] = {}  # @idempotent key -> (order id, refund id)
        # The store's policies as Shopify serves them: HTML bodies, one per type (the catalogue's shop-wide ones).
        self.shop_policies = [
            {"id": self.new_id("ShopPolicy"), "type": kind, "title": title, "body": f"<p>{html.escape(body)}</p>",
             "url": f"https://sundry-demo.myshopify.com/policies/{kind.lower().replace('_', '-')}"}
            for kind, (_, _, title, body) in zip(POLICY_TYPES, [p for p in sundry.POLICIES if p[1] is None])]
        self._seed(now)

    def new_id(self, kind: str) -> str:
        return GID.format(kind, next(self._ids))

    # -- seeding -------------------------------------------------------------------------------------------

    def _seed(self, now: datetime) -> None:
        by_email = {}
        for name, email in sundry.CUSTOMERS:
            first, _, last = name.partition(" ")
            customer = {"id": self.new_id("Customer"), "displayName": name, "firstName": first, "lastName": last,
                        "email": email}
            self.customers.append(customer)
            by_email[email] = customer
        vendors = {code: name for code, name, _ in sundry.SELLERS}
        for o in sundry.ORDERS:
            self.orders.append(self._order(o, by_email[o.customer], vendors[o.seller], now))

    def _order(self, o: sundry.DemoOrder, customer: dict, vendor: str, now: datetime) -> dict:
        placed = now - timedelta(hours=o.placed)
        items = [{"id": self.new_id("LineItem"), "sku": sku, "title": title, "quantity": qty, "vendor": vendor,
                  "price": Decimal(price), "description": description, "product": self.new_id("Product")}
                 for sku, title, qty, price, description in o.items]
        shipping = Decimal(o.shipping_fee)
        total = sum((i["price"] * i["quantity"] for i in items), Decimal("0")) + shipping
        sale = {"id": self.new_id("OrderTransaction"), "kind": "SALE", "status": "SUCCESS", "gateway": GATEWAY,
                "amount": total, "processedAt": placed, "parent": None}
        parcel = o.parcel
        events = [{"id": self.new_id("FulfillmentEvent"), "happenedAt": now - timedelta(hours=hours),
                   "status": EVENT_STATUS[event], "message": detail, "city": where, "province": None,
                   "country": "United Kingdom"} for hours, event, detail, where in parcel.scans()]
        fulfillment = {"id": self.new_id("Fulfillment"), "createdAt": events[0]["happenedAt"], "status": "SUCCESS",
                       "displayStatus": DISPLAY_STATUS[parcel.status],
                       "tracking": {"company": parcel.carrier, "number": parcel.tracking,
                                    "url": TRACKING_URLS[parcel.carrier].format(parcel.tracking)},
                       "events": events}
        order = {"id": self.new_id("Order"), "name": o.number, "customer": customer, "createdAt": placed,
                 "processedAt": placed, "cancelledAt": None, "currency": CURRENCY, "note": None,
                 "items": items, "shipping": shipping, "total": total, "transactions": [sale], "refunds": [],
                 "fulfillments": [fulfillment], "metafields": {}}
        for amount, reason, hours in o.refunds:
            self._add_refund(order, [(sale, Decimal(amount))], reason, now - timedelta(hours=hours))
        return order

    # -- reads ---------------------------------------------------------------------------------------------

    def order_by_id(self, gid: str) -> dict | None:
        return next((o for o in self.orders if o["id"] == gid), None)

    def refunded(self, order: dict) -> Decimal:
        return sum((r["amount"] for r in order["refunds"]), Decimal("0"))

    def refundable_on(self, order: dict, sale: dict) -> Decimal:
        """What a SALE or CAPTURE transaction may still have refunded against it (maximumRefundableV2)."""
        taken = sum((t["amount"] for r in order["refunds"] for t in r["transactions"] if t["parent"] is sale),
                    Decimal("0"))
        return sale["amount"] - taken

    # -- refundCreate --------------------------------------------------------------------------------------

    def refund_create(self, fields: dict, key: str | None, now: datetime) -> tuple[dict, dict]:
        """(order, refund) made from a RefundInput; the same @idempotent key again returns the first refund.
        RefundRefused for what Shopify answers in userErrors."""
        if key is not None and key in self.refund_keys:
            order_id, refund_id = self.refund_keys[key]
            if order_id != fields.get("orderId"):
                # Shopify's IDEMPOTENCY_KEY_PARAMETER_MISMATCH, said in words: the refund payload has no code.
                raise RefundRefused(["input"], "The same idempotency key cannot be used with different "
                                               "operation parameters.")
            order = self.order_by_id(order_id)
            return order, next(r for r in order["refunds"] if r["id"] == refund_id)
        order = self.order_by_id(fields.get("orderId") or "")
        if order is None:
            raise RefundRefused(["orderId"], "Order does not exist")
        parts = []
        for n, t in enumerate(fields.get("transactions") or []):
            sale = next((s for s in order["transactions"] if s["id"] == t.get("parentId")), None)
            if sale is None or sale["kind"] not in ("SALE", "CAPTURE") or t.get("kind") != "REFUND":
                raise RefundRefused(["transactions", str(n), "parentId"], "Parent transaction is not refundable")
            try:
                amount = Decimal(str(t["amount"]))
            except ArithmeticError:
                raise RefundRefused(["transactions", str(n), "amount"], "Amount is invalid") from None
            if amount <= 0:
                raise RefundRefused(["transactions", str(n), "amount"], "Amount must be greater than 0")
            left = self.refundable_on(order, sale)
            # Assumed wording: Shopify says the amount is over the balance, but its exact text is not published.
            if amount > left:
                raise RefundRefused(["transactions", str(n), "amount"],
                                    f"Amount cannot be greater than the refundable amount of {left:.2f}")
            parts.append((sale, amount))
        if not parts:
            raise RefundRefused(["transactions"], "Refund must have at least one transaction or line item")
        refund = self._add_refund(order, parts, fields.get("note"), now)
        if key is not None:
            self.refund_keys[key] = (order["id"], refund["id"])
        return order, refund

    def _add_refund(self, order: dict, parts: list[tuple[dict, Decimal]], note: str | None, at: datetime) -> dict:
        transactions = [{"id": self.new_id("OrderTransaction"), "kind": "REFUND", "status": "SUCCESS",
                         "gateway": sale["gateway"], "amount": amount, "processedAt": at, "parent": sale}
                        for sale, amount in parts]
        refund = {"id": self.new_id("Refund"), "createdAt": at, "note": note, "transactions": transactions,
                  "amount": sum((a for _, a in parts), Decimal("0"))}
        order["refunds"].append(refund)
        order["transactions"].extend(transactions)
        return refund

    # -- metafieldsSet -------------------------------------------------------------------------------------

    def metafield_set(self, entry: dict, now: datetime) -> dict:
        """Create or overwrite one order metafield (metafieldsSet is an upsert: the same input twice is one
        metafield). ValueError with the field name for what Shopify refuses."""
        order = self.order_by_id(entry.get("ownerId") or "")
        if order is None:
            raise ValueError("ownerId")
        namespace, key, value = entry.get("namespace") or "$app", entry["key"], entry["value"]
        if not (2 <= len(key) <= 64) or not all(c.isalnum() or c in "-_" for c in key):
            raise ValueError("key")
        if entry.get("type") == "json":
            try:
                json.loads(value)
            except ValueError:
                raise ValueError("value") from None
        found = order["metafields"].get((namespace, key))
        if found is None:
            found = {"id": self.new_id("Metafield"), "namespace": namespace, "key": key, "createdAt": now}
            order["metafields"][(namespace, key)] = found
        found.update(type=entry.get("type") or "single_line_text_field", value=value, updatedAt=now)
        return found


def opaque_cursor(index: int) -> str:
    """Shopify's cursors are opaque; ours hide a position behind a hash-looking prefix."""
    tag = hashlib.sha1(str(index).encode()).hexdigest()[:8]
    return f"{tag}:{index}"


def cursor_position(cursor: str) -> int:
    try:
        return int(cursor.rsplit(":", 1)[1])
    except (IndexError, ValueError):
        raise ValueError(f"Invalid cursor {cursor!r}") from None


def new_request_id() -> str:
    return str(uuid.uuid4())
