"""The Sundry shop: customers, sellers, orders, parcels and scans, policies, refunds, seller messages."""

import secrets
import uuid
from decimal import Decimal

from django.db import IntegrityError, models, transaction
from django.db.models import Q
from django.utils import timezone


def money_field(**kwargs) -> models.DecimalField:
    return models.DecimalField(max_digits=10, decimal_places=2, **kwargs)


# --- The Sundry shop -------------------------------------------------------------------------------


class Customer(models.Model):
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    name = models.CharField(max_length=120)
    email = models.EmailField(unique=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} <{self.email}>"


class Seller(models.Model):
    """Who fulfils an order: Sundry itself (is_sundry) or a marketplace seller."""

    code = models.CharField(max_length=20, unique=True)  # "sundry", "S-HL"; the model sees it as seller_id
    name = models.CharField(max_length=120)
    is_sundry = models.BooleanField(default=False)

    class Meta:
        ordering = ["code"]

    def __str__(self) -> str:
        return f"{self.name} ({self.code})"


class Order(models.Model):
    class Status(models.TextChoices):
        PLACED = "placed"
        SHIPPED = "shipped"
        IN_TRANSIT = "in_transit"
        DELIVERED = "delivered"
        CANCELLED = "cancelled"

    number = models.CharField(max_length=20, unique=True)  # "SU-41207"
    customer = models.ForeignKey(Customer, on_delete=models.PROTECT, related_name="orders")
    seller = models.ForeignKey(Seller, on_delete=models.PROTECT, related_name="orders")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PLACED)
    placed_at = models.DateTimeField(default=timezone.now)
    currency = models.CharField(max_length=3, default="EUR")
    shipping_fee = money_field(default=Decimal("0.00"))
    note = models.TextField(blank=True, help_text="Shown to the agent with the order, e.g. a known carrier issue.")

    class Meta:
        ordering = ["-placed_at"]

    def __str__(self) -> str:
        return self.number

    # Summed in Python rather than with aggregates: a handful of rows, usually prefetched, and
    # Decimal arithmetic stays exact on SQLite too (which would compute qty * unit_price as a float).
    def items_total(self) -> Decimal:
        return sum((item.line_total() for item in self.items.all()), Decimal("0.00"))

    def total(self) -> Decimal:
        return self.items_total() + self.shipping_fee

    def refunded(self) -> Decimal:
        return sum((refund.amount for refund in self.refunds.all()), Decimal("0.00"))

    def refundable(self) -> Decimal:
        return max(self.total() - self.refunded(), Decimal("0.00"))


class OrderItem(models.Model):
    order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="items")
    sku = models.CharField(max_length=40)
    title = models.CharField(max_length=200)
    qty = models.PositiveIntegerField(default=1)
    unit_price = money_field()
    # The seller's own words: shown to the model as data, never as instructions.
    seller_description = models.TextField(blank=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.qty} x {self.title}"

    def line_total(self) -> Decimal:
        return self.unit_price * self.qty


class Charge(models.Model):
    """What the customer paid, line by line (the items and the shipping fee)."""

    class Kind(models.TextChoices):
        ITEM = "item"
        SHIPPING = "shipping"

    order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="charges")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    amount = money_field()

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.kind} {self.amount}"


class Parcel(models.Model):
    class Status(models.TextChoices):
        LABEL_CREATED = "label_created"
        IN_TRANSIT = "in_transit"
        DELAYED = "delayed"
        OUT_FOR_DELIVERY = "out_for_delivery"
        DELIVERED = "delivered"
        RETURNED = "returned"

    order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="parcels")
    tracking = models.CharField(max_length=40, unique=True)
    carrier = models.CharField(max_length=60)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.LABEL_CREATED)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.carrier} {self.tracking}"


class Scan(models.Model):
    """One carrier event for a parcel ("delivered", "Delivered: left in porch", "Leeds")."""

    parcel = models.ForeignKey(Parcel, on_delete=models.CASCADE, related_name="scans")
    at = models.DateTimeField()
    event = models.CharField(max_length=40)  # label_created, picked_up, in_transit, held, delivered, ...
    detail = models.CharField(max_length=200, blank=True)
    location = models.CharField(max_length=120, blank=True)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.event}"


class PolicyDocument(models.Model):
    """A policy the agent searches; seller is None for a Sundry-wide one, else that seller's supplement."""

    doc_id = models.CharField(max_length=40, unique=True)  # "POL-LOSS", "POL-HL-LOSS"
    title = models.CharField(max_length=200)
    body = models.TextField()
    seller = models.ForeignKey(Seller, null=True, blank=True, on_delete=models.CASCADE, related_name="policies")
    # Raised by each import that changes the title, body or seller; the agent's search cites it.
    version = models.PositiveIntegerField(default=1)
    source = models.CharField(max_length=500, blank=True)  # the file or URL it was imported from, if any

    class Meta:
        ordering = ["doc_id"]

    def __str__(self) -> str:
        return f"{self.doc_id}: {self.title}"


class PolicyVersion(models.Model):
    """One version of a policy as it was imported or edited: the history a later save never overwrites."""

    doc = models.ForeignKey(PolicyDocument, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    title = models.CharField(max_length=200)
    body = models.TextField()
    seller_code = models.CharField(max_length=20, blank=True)  # as it was then; empty for a Sundry-wide policy
    source = models.CharField(max_length=500, blank=True)
    imported_at = models.DateTimeField(default=timezone.now)
    changed_by = models.CharField(max_length=150, default="import")  # "import", "admin: <user>", "console: <user>"
    note = models.CharField(max_length=200, blank=True)  # what changed, in the editor's words (the console asks)

    class Meta:
        ordering = ["doc", "version"]
        constraints = [models.UniqueConstraint(fields=["doc", "version"], name="policy_version_once")]

    def __str__(self) -> str:
        return f"{self.doc_id} v{self.version}"


# Refund references a customer reads out or types: no 0/O, 1/I/L or U/V look-alikes.
REFERENCE_ALPHABET = "23456789ABCDEFGHJKMNPQRSTWXYZ"
REFERENCE_LENGTH = 5  # 29^5: 20 million references


def new_refund_reference() -> str:
    return "RF-" + "".join(secrets.choice(REFERENCE_ALPHABET) for _ in range(REFERENCE_LENGTH))


class Refund(models.Model):
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    # What the customer and the agent are told ("RF-7K2M9"); the UUID stays the API's identifier.
    reference = models.CharField(max_length=12, unique=True, default=new_refund_reference, editable=False)
    order = models.ForeignKey(Order, on_delete=models.PROTECT, related_name="refunds")
    amount = money_field()
    reason = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)
    # The model's tool call id: a retried or resumed call finds the refund it already issued.
    # NULL for refunds made outside the agent (NULLs never collide in a unique index).
    tool_call_id = models.CharField(max_length=128, null=True, blank=True, unique=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [models.CheckConstraint(condition=Q(amount__gt=0), name="refund_amount_positive")]

    def __str__(self) -> str:
        return f"{self.reference}: {self.amount} on {self.order_id}"

    def save(self, *args, **kwargs):
        """A new refund whose reference collides with another's draws a new one (a savepoint each try), so
        a collision never fails the refund."""
        if not self._state.adding:
            return super().save(*args, **kwargs)
        for attempt in range(8):
            try:
                with transaction.atomic():
                    return super().save(*args, **kwargs)
            except IntegrityError:
                if attempt == 7 or not Refund.objects.filter(reference=self.reference).exists():
                    raise  # another constraint (the tool call id): the caller's to handle
                self.reference = new_refund_reference()


class SellerMessage(models.Model):
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    order = models.ForeignKey(Order, on_delete=models.PROTECT, related_name="seller_messages")
    seller = models.ForeignKey(Seller, on_delete=models.PROTECT, related_name="messages")
    body = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)
    tool_call_id = models.CharField(max_length=128, null=True, blank=True, unique=True)  # as Refund's
    # The desk conversation that sent it (its public id), for the per-conversation limit and duplicates.
    conversation = models.CharField(max_length=64, null=True, blank=True, db_index=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"to {self.seller_id} about {self.order_id}"
