"""The Sundry demo shop (docs/tools-contract.md): seed_demo() writes the catalogue (sundry/) into the demo's tables
idempotently, with times relative to now; the demo staff login.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from sundry import (  # noqa: F401 - the catalogue, re-exported for the desk's callers
    CUSTOMERS,
    HOSTILE_TEXT,
    ORDERS,
    POLICIES,
    SELLERS,
    DemoOrder,
)
from support import profiles
from support.desk import permissions
from support.models import (
    Charge,
    Conversation,
    Customer,
    Order,
    OrderItem,
    Parcel,
    PolicyDocument,
    Refund,
    SavedReply,
    Scan,
    Seller,
    SellerMessage,
    ShopEffect,
)

# A few replies the demo's support team keeps at hand (the console's reply box inserts them for editing).
SAVED_REPLIES = [
    ("Greeting", "Hi, I'm picking this up from our assistant and I've read everything above. Give me a moment "
                 "to check the details."),
    ("Refund issued", "I've issued the refund to your original payment method. It usually shows within 5 "
                      "business days. Is there anything else I can help with?"),
    ("Asked the seller", "I've written to the seller about your order and asked them to look into it. I'll let "
                         "you know here as soon as they reply."),
    ("Closing", "I'm glad we could sort this out. If anything else comes up, just write here."),
]


def seed_demo() -> dict[str, int]:
    """Create or update the demo shop; the demo orders are reset to their contract situation.

    Natural keys (email, seller code, doc_id, order number, tracking) make reruns update rather than
    duplicate; items, charges, scans and refunds of the demo orders are replaced. Returns row counts.
    """
    now = timezone.now().replace(second=0, microsecond=0)

    def ago(hours: int):
        return now - timedelta(hours=hours)

    with transaction.atomic():
        permissions.ensure_groups()
        if settings.DEBUG:  # the demo site: its staff logins may decide every approval
            demo_staff_user()
            demo_staff_user(username=DEMO_SECOND_USERNAME, first_name=DEMO_SECOND_NAME)
        customers = {e: Customer.objects.update_or_create(email=e, defaults={"name": n})[0] for n, e in CUSTOMERS}
        sellers = {
            c: Seller.objects.update_or_create(code=c, defaults={"name": n, "is_sundry": s})[0] for c, n, s in SELLERS
        }
        for doc_id, seller, title, body in POLICIES:
            PolicyDocument.objects.update_or_create(
                doc_id=doc_id, defaults={"title": title, "body": body, "seller": sellers[seller] if seller else None}
            )
        if Order.objects.filter(number__in=[spec.number for spec in ORDERS]).exists() or Parcel.objects.filter(
                tracking__in=[spec.parcel.tracking for spec in ORDERS]).exists():
            for spec in ORDERS:
                _seed_order(spec, customers[spec.customer], sellers[spec.seller], ago)
        else:  # none there yet (a new database: every test's): the same rows in a few statements
            _seed_orders_anew(customers, sellers, ago)
        for title, body in SAVED_REPLIES:  # created when missing: the team's own edits stay
            SavedReply.objects.get_or_create(title=title, defaults={"body": body})
        profiles.version_seed(profile=profiles.SUNDRY)  # Sundry's profile as version 1, unless one exists
    models = [Customer, Seller, PolicyDocument, Order, OrderItem, Charge, Parcel, Scan, Refund, SellerMessage]
    return {m._meta.verbose_name_plural: m.objects.count() for m in models}


def demo_conversations_delete() -> int:
    """Delete every conversation of the demo customers (their runs, messages, trace, approvals and notes go with
    them) and the desk's record of the demo shop's effects, which seed_demo's fresh orders no longer have.
    Returns the rows deleted. For `./dev reset` and each evaluation trial: the demo as first seeded."""
    with transaction.atomic():
        deleted, _ = Conversation.objects.filter(customer__email__in=[email for _, email in CUSTOMERS]).delete()
        ShopEffect.objects.filter(backend="demo").delete()
    return deleted


DEMO_STAFF_USERNAME = "staff"
DEMO_STAFF_GROUP = permissions.LEADS  # decides every approval, refunds above the threshold included
# A second demo person, a lead too, so four eyes and routing can be tried at once (docs/console.md).
DEMO_SECOND_USERNAME, DEMO_SECOND_NAME = "alex", "Alex"


def demo_staff_user(*, password: str | None = None, username: str = DEMO_STAFF_USERNAME, first_name: str = "Sam"):
    """A demo staff login (`manage.py demo_staff` gives each its password): staff, in DEMO_STAFF_GROUP.

    Created when missing, with no usable password until one is given; kept in the group on every call, so
    `seed_demo` and `demo_staff` may run in either order."""
    user, created = get_user_model().objects.get_or_create(username=username, defaults={"first_name": first_name})
    if created and password is None:
        user.set_unusable_password()
    if password is not None:
        user.set_password(password)
    user.is_staff = True
    user.save()
    user.groups.add(permissions.ensure_groups()[DEMO_STAFF_GROUP])
    return user


def _seed_orders_anew(customers: dict, sellers: dict, ago) -> None:
    """What _seed_order makes of every demo order, on a database that has none of them: each kind of row in one
    INSERT."""
    orders = Order.objects.bulk_create(_order(spec, customers[spec.customer], sellers[spec.seller], ago)
                                       for spec in ORDERS)
    parcels = Parcel.objects.bulk_create(_parcel(spec, order) for spec, order in zip(ORDERS, orders, strict=True))
    OrderItem.objects.bulk_create(i for spec, order in zip(ORDERS, orders, strict=True) for i in _items(spec, order))
    Charge.objects.bulk_create(c for spec, order in zip(ORDERS, orders, strict=True) for c in _charges(spec, order))
    Scan.objects.bulk_create(s for spec, parcel in zip(ORDERS, parcels, strict=True) for s in _scans(spec, parcel, ago))
    for spec, order in zip(ORDERS, orders, strict=True):
        _refunds(spec, order, ago)


def _seed_order(spec: DemoOrder, customer: Customer, seller: Seller, ago) -> None:
    made = _order(spec, customer, seller, ago)
    order, _ = Order.objects.update_or_create(
        number=spec.number, defaults={f: getattr(made, f) for f in ORDER_FIELDS})
    # A reseed resets the demo: what agents refunded or sent in earlier demos goes too.
    for related in (order.refunds, order.seller_messages, order.items, order.charges):
        related.all().delete()
    OrderItem.objects.bulk_create(_items(spec, order))
    Charge.objects.bulk_create(_charges(spec, order))
    order.parcels.exclude(tracking=spec.parcel.tracking).delete()
    made = _parcel(spec, order)
    parcel, _ = Parcel.objects.update_or_create(
        tracking=made.tracking, defaults={"order": order, "carrier": made.carrier, "status": made.status})
    parcel.scans.all().delete()
    Scan.objects.bulk_create(_scans(spec, parcel, ago))
    _refunds(spec, order, ago)


# -- a demo order's rows, unsaved: both ways of seeding write these ----------------------------------------

ORDER_FIELDS = ("customer", "seller", "status", "placed_at", "currency", "shipping_fee", "note")


def _order(spec: DemoOrder, customer: Customer, seller: Seller, ago) -> Order:
    return Order(number=spec.number, customer=customer, seller=seller, status=spec.status,
                 placed_at=ago(spec.placed), currency="EUR", shipping_fee=Decimal(spec.shipping_fee), note="")


def _items(spec: DemoOrder, order: Order) -> list[OrderItem]:
    return [OrderItem(order=order, sku=sku, title=title, qty=qty, unit_price=Decimal(price),
                      seller_description=description) for sku, title, qty, price, description in spec.items]


def _charges(spec: DemoOrder, order: Order) -> list[Charge]:
    charges = [Charge(order=order, kind=Charge.Kind.ITEM, amount=Decimal(price) * qty)
               for _, _, qty, price, _ in spec.items]
    if Decimal(spec.shipping_fee):
        charges.append(Charge(order=order, kind=Charge.Kind.SHIPPING, amount=Decimal(spec.shipping_fee)))
    return charges


def _parcel(spec: DemoOrder, order: Order) -> Parcel:
    return Parcel(order=order, tracking=spec.parcel.tracking, carrier=spec.parcel.carrier, status=spec.parcel.status)


def _scans(spec: DemoOrder, parcel: Parcel, ago) -> list[Scan]:
    return [Scan(parcel=parcel, at=ago(hours), event=event, detail=detail, location=place)
            for hours, event, detail, place in spec.parcel.scans()]


def _refunds(spec: DemoOrder, order: Order, ago) -> None:
    """Made outside the agent, each saved on its own (Refund.save draws its reference)."""
    for amount, reason, hours in spec.refunds:
        Refund.objects.create(order=order, amount=Decimal(amount), reason=reason, created_at=ago(hours))
