"""The desk's own record of what it made happen in the shop: each refund and seller message, once per key.

A shop's refunds live in the shop (its database, its payment provider); this is what the desk did there, written
in the transaction that saves the result the model or the person reads, so a worker killed after the shop
answered and before that commit leaves no row, and the resumed call (asking the shop by the same key) writes it
once. It also answers the desk's own questions without asking the shop: what a conversation already sent to
sellers today (its limits), what an action did.
"""

import uuid

from django.db import models

from .desk import Conversation


class ShopEffect(models.Model):
    REFUND, SELLER_MESSAGE = "refund", "seller_message"
    KINDS = [(REFUND, "refund"), (SELLER_MESSAGE, "seller message")]

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    kind = models.CharField(max_length=20, choices=KINDS)
    # The idempotency key the shop was sent: "<run>:<tool call id>" for the agent, "staff:<user>:<key>" for a person.
    key = models.CharField(max_length=255)
    backend = models.CharField(max_length=20)  # SHOP_BACKEND when it was made
    order_number = models.CharField(max_length=64)
    conversation = models.ForeignKey(Conversation, null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="shop_effects")
    amount = models.DecimalField(max_digits=12, decimal_places=2, null=True, blank=True)  # a refund's
    text = models.TextField(blank=True)  # a refund's reason, a seller message's body
    shop_id = models.CharField(max_length=128)  # the shop's id for it
    reference = models.CharField(max_length=64, blank=True)  # a refund's reference for the customer
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["kind", "key"], name="shop_effect_once_per_key")]
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return f"{self.kind} {self.shop_id} on {self.order_number}"
