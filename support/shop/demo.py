"""DemoShop: the Shop over the demo's own tables (support/models/shop.py), in the caller's transaction.

A write runs inside whatever transaction the caller holds, so the desk commits an effect and its record of it
together.
"""

from __future__ import annotations

import functools
import uuid
from decimal import Decimal

from django.db import IntegrityError, transaction
from django.db.models import Prefetch, Subquery

from support import models
from support.ops.prepared import Prepared, columns
from support.shop import port


# The customer of an exact address (compiled once: read at every run's start for the known-orders line).
_EXACT_CUSTOMER = Prepared(models.Customer, lambda email: models.Customer.objects.filter(email=email).order_by(
    "pk").values(*columns(models.Customer))[:1], text=("email",))


@functools.cache
def _briefs_query(limit: int | None) -> Prepared:
    """The customer's `limit` newest orders with their seller's name and their items, one row per item."""

    def build(pk):
        recent = models.Order.objects.filter(customer_id=pk).order_by("-placed_at", "-pk").values("pk")
        return (models.Order.objects.filter(pk__in=Subquery(recent[:limit] if limit is not None else recent))
                .order_by("-placed_at", "-pk", "items__pk")
                .values("pk", "number", "status", "placed_at", "seller__name", "currency", "shipping_fee",
                        "items__title", "items__qty", "items__unit_price"))

    return Prepared(models.Order, build, "pk")


class DemoShop:
    """The Sundry demo shop. Customer ids are the Customer rows' primary keys, as text."""

    def capabilities(self) -> port.Capabilities:
        return port.MARKETPLACE  # Sundry: its own warehouse and marketplace sellers with their supplements

    def policies(self) -> list[port.ShopPolicy] | None:
        return None  # the demo's policies are the desk's own rows, seeded with it: nothing to import

    def customer_by_email(self, email: str) -> port.ShopCustomer | None:
        # The exact address first; otherwise a case-insensitive match, but only when it is unambiguous.
        found = _EXACT_CUSTOMER.instances(email=email)
        row = found[0] if found else None
        if row is None:
            matches = list(models.Customer.objects.filter(email__iexact=email)[:2])
            row = matches[0] if len(matches) == 1 else None
        return _customer(row) if row is not None else None

    def orders_of(self, customer_id: str, limit: int | None = None) -> list[port.Order]:
        pk = _pk(customer_id)
        if pk is None:
            return []
        rows = _orders().filter(customer_id=pk).order_by("-placed_at", "-pk")
        return [_order(row) for row in (rows[:limit] if limit is not None else rows)]

    def order_briefs(self, customer_id: str, limit: int | None = None) -> list[port.OrderBrief]:
        """The orders with their seller and items only: one read (orders_of's is five), a row per item."""
        pk = _pk(customer_id)
        if pk is None:
            return []
        briefs: dict[int, dict] = {}
        for row in _briefs_query(limit).rows(pk=pk):  # newest first, each order's items in their order
            brief = briefs.setdefault(row["pk"], {**row, "titles": [], "items_total": Decimal("0.00")})
            if row["items__title"] is not None:  # an order without items has one row, its item columns NULL
                brief["titles"].append(row["items__title"])
                brief["items_total"] += row["items__unit_price"] * row["items__qty"]
        return [port.OrderBrief(number=b["number"], status=b["status"], placed_at=b["placed_at"],
                                seller_name=b["seller__name"], item_titles=tuple(b["titles"]),
                                total=b["items_total"] + b["shipping_fee"], currency=b["currency"])
                for b in briefs.values()]

    def order(self, number: str) -> port.Order | None:
        row = _orders().filter(number=str(number)).first()
        return _order(row) if row is not None else None

    def lock_order(self, number: str) -> None:
        # PostgreSQL holds the row lock to the end of the caller's transaction; SQLite serialises writers anyway.
        list(models.Order.objects.select_for_update().filter(number=str(number)).values_list("pk", flat=True))

    def refund(self, *, order_number: str, amount: Decimal, reason: str,
               idempotency_key: str | None) -> port.RefundResult:
        _check_amount(amount)
        try:
            with transaction.atomic():
                # The order's row lock: two refunds at once cannot both see the same balance.
                locked = models.Order.objects.select_for_update().filter(number=str(order_number)).first()
                if locked is None:
                    raise port.NotFound(f"no order {order_number}")
                # First, and under the lock: the same key again (a retry, a resumed run, a concurrent run of
                # the same call) gets its refund, although the balance has shrunk since.
                if (earlier := _refund_by_key(idempotency_key)) is not None:
                    return _refund_result(earlier)
                left = locked.refundable()
                if amount > left:
                    raise port.ExceedsRefundable(left)
                row = models.Refund.objects.create(order=locked, amount=amount, reason=reason,
                                                   tool_call_id=idempotency_key)
        except IntegrityError:
            # The same key committed between our look and our insert (a writer that took no lock).
            earlier = _refund_by_key(idempotency_key)
            if earlier is None:
                raise
            return _refund_result(earlier)
        return _refund_result(row, order_number=locked.number)

    def refund_by_key(self, key: str, order_number: str | None = None) -> port.RefundResult | None:
        row = _refund_by_key(key)
        return _refund_result(row) if row is not None else None

    def message_seller(self, *, order_number: str, message: str, idempotency_key: str | None,
                       conversation: str | None = None) -> port.SellerMessageResult:
        try:
            with transaction.atomic():
                locked = (models.Order.objects.select_for_update().select_related("seller")
                          .filter(number=str(order_number)).first())
                if locked is None:
                    raise port.NotFound(f"no order {order_number}")
                if (earlier := _seller_message_by_key(idempotency_key)) is not None:
                    return _seller_message_result(earlier)
                if locked.seller.is_sundry:
                    raise port.Invalid(f"order {locked.number} is fulfilled by Sundry itself: it has no seller")
                row = models.SellerMessage.objects.create(order=locked, seller=locked.seller, body=message,
                                                          tool_call_id=idempotency_key, conversation=conversation)
        except IntegrityError:
            earlier = _seller_message_by_key(idempotency_key)
            if earlier is None:
                raise
            return _seller_message_result(earlier)
        return port.SellerMessageResult(id=str(row.public_id), order_number=locked.number)

    def seller_message_by_key(self, key: str, order_number: str | None = None) -> port.SellerMessageResult | None:
        row = _seller_message_by_key(key)
        return _seller_message_result(row) if row is not None else None


# -- rows to values ---------------------------------------------------------------------------------------

def _orders():
    return models.Order.objects.select_related("seller").prefetch_related(
        "items",
        Prefetch("refunds", queryset=models.Refund.objects.order_by("created_at", "pk")),
        Prefetch("parcels", queryset=models.Parcel.objects.order_by("pk").prefetch_related(
            Prefetch("scans", queryset=models.Scan.objects.order_by("at", "pk")))))


def _order(row: models.Order) -> port.Order:
    seller = row.seller
    refunds = tuple(_refund_record(r, row.number) for r in row.refunds.all())
    return port.Order(
        number=row.number, customer_id=str(row.customer_id), status=row.status, placed_at=row.placed_at,
        currency=row.currency,
        seller=port.Seller(id=seller.code, name=seller.name, is_marketplace=not seller.is_sundry),
        items=tuple(port.Item(sku=i.sku, title=i.title, qty=i.qty, unit_price=i.unit_price,
                              seller_description=i.seller_description) for i in row.items.all()),
        shipping_fee=row.shipping_fee, total=row.total(), refunded=row.refunded(), refundable=row.refundable(),
        note=row.note,
        parcels=tuple(port.Parcel(tracking=p.tracking, carrier=p.carrier, status=p.status,
                                  scans=tuple(port.Scan(at=s.at, event=s.event, detail=s.detail, location=s.location)
                                              for s in p.scans.all()))
                      for p in row.parcels.all()),
        refunds=refunds,
    )


def _customer(row: models.Customer) -> port.ShopCustomer:
    return port.ShopCustomer(id=str(row.pk), name=row.name, email=row.email)


def _refund_record(row: models.Refund, order_number: str) -> port.RefundRecord:
    return port.RefundRecord(id=str(row.public_id), reference=row.reference, amount=row.amount, reason=row.reason,
                             created_at=row.created_at, order_number=order_number, idempotency_key=row.tool_call_id)


def _refund_result(row: models.Refund, order_number: str | None = None) -> port.RefundResult:
    if order_number is None:
        order_number = models.Order.objects.filter(pk=row.order_id).values_list("number", flat=True).first()
    return port.RefundResult(id=str(row.public_id), reference=row.reference, amount=row.amount,
                             created_at=row.created_at, order_number=order_number or "")


def _seller_message_result(row: models.SellerMessage) -> port.SellerMessageResult:
    number = models.Order.objects.filter(pk=row.order_id).values_list("number", flat=True).first()
    return port.SellerMessageResult(id=str(row.public_id), order_number=number or "")


def _refund_by_key(key: str | None) -> models.Refund | None:
    return models.Refund.objects.filter(tool_call_id=key).first() if key else None


def _seller_message_by_key(key: str | None) -> models.SellerMessage | None:
    return models.SellerMessage.objects.filter(tool_call_id=key).first() if key else None


def _check_amount(amount: Decimal) -> None:
    if not isinstance(amount, Decimal) or amount <= 0 or amount != amount.quantize(Decimal("0.01")):
        raise port.Invalid(f"a refund is a positive amount with two decimals, got {amount!r}")


def _pk(customer_id: str) -> int | None:
    text = str(customer_id)
    return int(text) if text.isascii() and text.isdigit() else None


def _uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None
