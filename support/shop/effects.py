"""Refunds and seller messages made exactly once, whatever the shop and whatever fails between us.

The agent's tools and the staff actions write to the shop only through here. Each write carries an idempotency
key derived from what asked for it (the run and the model's tool call id; the person and their request's key),
saved before the request (the tool call's row, the pending staff action), so it is the same on every retry and
after any restart. In order:
1. the desk's own record (ShopEffect) of that key: done before, answered from it without asking the shop;
2. the shop asked by the key: made before, but its answer never saved (a worker killed after the shop answered,
   a connection dropped): recorded now;
3. the write, with the key;
4. its answer lost (OutcomeUnknown): never sent again blindly, the shop is asked by the key once more; found, it
   is recorded; not found, the shop never made it and the write is sent again with the same key (which the shop
   answers with the one refund should the first arrive after all); the shop still away, OutcomeUnknown goes up
   and the caller hands the matter to a person.
The record is written in the caller's transaction, with the result the model or the person reads: both, or
neither.
"""

from __future__ import annotations

import logging
from decimal import Decimal

from django.conf import settings
from django.db import IntegrityError, transaction

from support.models import ShopEffect
from support.shop import port, shop

log = logging.getLogger(__name__)


def refund(*, order_number: str, amount: Decimal, reason: str, key: str,
           conversation_id: int | None = None) -> port.RefundResult:
    done = ShopEffect.objects.filter(kind=ShopEffect.REFUND, key=key).first()
    if done is not None:
        return port.RefundResult(id=done.shop_id, reference=done.reference, amount=done.amount,
                                 created_at=done.created_at, order_number=done.order_number)
    made = shop().refund_by_key(key, order_number)
    if made is None:
        try:
            made = shop().refund(order_number=order_number, amount=amount, reason=reason, idempotency_key=key)
        except port.OutcomeUnknown as lost:
            made = _resolve(lambda: shop().refund_by_key(key, order_number), lost, "refund", order_number)
            if made is None:
                made = shop().refund(order_number=order_number, amount=amount, reason=reason, idempotency_key=key)
    _record(ShopEffect(kind=ShopEffect.REFUND, key=key, order_number=made.order_number or order_number,
                       amount=made.amount, text=reason, shop_id=made.id, reference=made.reference,
                       conversation_id=conversation_id))
    return made


def seller_message(*, order_number: str, message: str, key: str,
                   conversation_id: int | None = None, conversation_public_id: str | None = None
                   ) -> port.SellerMessageResult:
    done = ShopEffect.objects.filter(kind=ShopEffect.SELLER_MESSAGE, key=key).first()
    if done is not None:
        return port.SellerMessageResult(id=done.shop_id, order_number=done.order_number)
    sent = shop().seller_message_by_key(key, order_number)
    if sent is None:
        # Idempotent on the key at the shop, so a lost answer is resolved by sending it again with the same key.
        def send():
            return shop().message_seller(order_number=order_number, message=message, idempotency_key=key,
                                         conversation=conversation_public_id)
        try:
            sent = send()
        except port.OutcomeUnknown as lost:
            sent = _resolve(lambda: shop().seller_message_by_key(key, order_number), lost, "seller message",
                            order_number) or send()
    _record(ShopEffect(kind=ShopEffect.SELLER_MESSAGE, key=key, order_number=sent.order_number or order_number,
                       text=message, shop_id=sent.id, conversation_id=conversation_id))
    return sent


def sent_seller_messages(conversation_id: int) -> list[ShopEffect]:
    """What that conversation has sent to sellers, oldest first (its per-conversation limits count these)."""
    return list(ShopEffect.objects.filter(kind=ShopEffect.SELLER_MESSAGE, conversation_id=conversation_id))


def _resolve(look_up, lost: port.OutcomeUnknown, what: str, order_number: str):
    log.warning("the shop's answer to a %s on %s was lost (%s); asking it by the key", what, order_number, lost)
    try:
        return look_up()
    except port.ShopUnavailable as away:
        raise port.OutcomeUnknown(f"the shop did not answer whether the {what} on {order_number} was made, and "
                                  f"could not be asked afterwards ({away})") from away


def _record(effect: ShopEffect) -> None:
    effect.backend = settings.SHOP_BACKEND
    try:
        with transaction.atomic():
            effect.save()
    except IntegrityError:
        # The same key recorded meanwhile (a concurrent run of the same call): one record is what we want.
        if not ShopEffect.objects.filter(kind=effect.kind, key=effect.key).exists():
            raise
