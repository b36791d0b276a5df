"""Reads for the console's context panel: the conversation's customer, their orders with items, money, parcels
and latest scans, their other conversations and refunds, and what this staff member may do with them.

The data the agent's tools see, for this customer only. A conversation opened with one order
(Conversation.order_scope) still shows staff the whole customer: staff are not the agent, and a person judging
a case is helped by the customer's history (a third "never arrived" this month). Orders outside the scope
are marked, and actions on them are refused by support/desk/staff_actions.py, as the agent's tools refuse them.
"""

from __future__ import annotations

import logging
from decimal import Decimal

from django.conf import settings
from django.db.models import OuterRef, Q

from support.customers.identity import shop_customer_id
from support.desk import permissions, selectors_earlier, selectors_inbox, serializers, staff_actions
from support.models import Approval, Conversation, Message, StaffAction, UndeliverableAddress
from support.shop import port, shop
from support.tools.common import money

log = logging.getLogger(__name__)

CHANGED = "changed"  # by_staff's mark of an agent's refund whose amount a person chose
LATEST_SCANS = 3
OTHER_CONVERSATIONS = 10


def _ts(value):
    return serializers._ts(value)


def _refund_json(refund: port.RefundRecord, by_staff: dict) -> dict:
    if refund.id in by_staff:
        by = by_staff[refund.id] or "staff"
    elif (CHANGED, refund.idempotency_key) in by_staff:  # the agent asked, a person chose the amount
        by = by_staff[(CHANGED, refund.idempotency_key)]
    elif refund.idempotency_key:
        by = "the agent"
    else:
        by = "the shop"
    return {"id": refund.id, "reference": refund.reference, "order_id": refund.order_number,
            "amount": money(refund.amount), "reason": refund.reason, "created_at": _ts(refund.created_at), "by": by}


def _order_json(order: port.Order, scope: str | None, by_staff: dict, user, can_message: bool) -> dict:
    seller = order.seller
    limit = staff_actions.refund_limit(user, order)
    return {
        "number": order.number, "status": order.status, "placed_at": _ts(order.placed_at),
        "currency": order.currency,
        "seller": {"code": seller.id, "name": seller.name, "is_sundry": not seller.is_marketplace,
                   # "Message the seller" is offered only where there is one and the shop lets the desk write
                   "can_message": can_message and seller.is_marketplace},
        "items": [{"sku": i.sku, "title": i.title, "qty": i.qty, "unit_price": money(i.unit_price),
                   "line_total": money(i.line_total)} for i in order.items],
        "shipping_fee": money(order.shipping_fee), "total": money(order.total),
        "refunded": money(order.refunded), "refundable": money(order.refundable),
        "note": order.note,
        # Within what this conversation may act on: the agent's tools and staff actions alike.
        "in_scope": scope is None or scope == order.number,
        # The most this staff member may refund on it now (null: they may not refund).
        "refund_limit": money(min(limit, order.refundable)) if limit is not None else None,
        "parcels": [{"tracking": p.tracking, "carrier": p.carrier, "status": p.status,
                     "scans": [{"at": _ts(s.at), "event": s.event, "detail": s.detail, "location": s.location}
                               for s in p.scans[::-1][:LATEST_SCANS]]}
                    for p in order.parcels],
        "refunds": [_refund_json(r, by_staff) for r in order.refunds],
    }


def _staff_refunds(customer, orders: list) -> dict:
    """{refund id: the name of the staff member who issued it}, from the desk's own record of staff actions, and
    {(CHANGED, the agent's call's key): "Kim (the agent asked 64.00 EUR)"} for the agent's refunds whose amount
    the approving person changed: the amount is theirs, not the agent's."""
    done = StaffAction.objects.filter(conversation__customer=customer, kind=StaffAction.REFUND,
                                      status=StaffAction.DONE).select_related("user")
    found = {a.result.get("refund_id"): serializers.staff_name(a.user) if a.user_id else None for a in done}
    keys = [r.idempotency_key for o in orders for r in o.refunds if r.idempotency_key]
    approved = Approval.objects.filter(tool_call__idempotency_key__in=keys, decision=Approval.APPROVED) \
        .select_related("tool_call", "decided_by") if keys else []
    for a in approved:
        if selectors_earlier.verdict(a) == "edited":
            found[(CHANGED, a.tool_call.idempotency_key)] = (
                f"{serializers.staff_name(a.decided_by) or 'a former colleague'} "
                f"(the agent asked {a.requested_arguments.get('amount')} EUR)")
    return found


def _setting_money(value) -> str | None:
    """A money setting as the API writes amounts; None when it is 0 or unset (the rule is off)."""
    amount = Decimal(str(value or 0))
    return money(amount) if amount > 0 else None


def conversation_context(conversation: Conversation, user) -> dict:
    customer = conversation.customer
    try:
        owner = shop_customer_id(customer.pk)
        orders = shop().orders_of(owner) if owner is not None else []
        shop_away = ""
    except port.ShopUnavailable as away:  # the panel shows the rest, and says what it cannot show
        log.warning("context of %s: the shop did not answer (%s)", conversation.public_id, away)
        orders, shop_away = [], ("The shop can't be reached right now, so this customer's orders and refunds "
                                 "can't be shown. Try again in a minute.")
    by_staff = _staff_refunds(customer, orders)
    # Conversations nobody wrote in are not shown (nor counted): there is nothing in them to go to.
    theirs = Conversation.objects.filter(Q(pk=conversation.pk) | Q(selectors_inbox.said_anything(OuterRef("pk"))),
                                         customer=customer)
    conversations = list(theirs.order_by("-created_at", "-pk")[:OTHER_CONVERSATIONS + 1])
    first_words = {}
    for c in conversations:
        first = Message.objects.filter(conversation=c, author=Message.CUSTOMER).order_by("seq").values_list(
            "content", flat=True).first()
        first_words[c.pk] = first or ""
    shown = {row["id"]: row for row in selectors_inbox.inbox(
        user, filter_="all", ids=[c.public_id for c in conversations], limit=len(conversations)).rows}
    since = min([o.placed_at for o in orders] + [c.created_at for c in conversations] + [conversation.created_at])
    # Newest first; refunds of one order at the same instant, the later issued first (the sort is stable).
    refunds = sorted((r for o in orders for r in o.refunds[::-1]), key=lambda r: r.created_at, reverse=True)
    limit = staff_actions.refund_limit(user)
    can_message = shop().capabilities().seller_messages  # a single-brand store has no seller to write to
    scope = conversation.order_scope or None  # "unverified": no order in scope, so no action on any
    undeliverable = UndeliverableAddress.objects.filter(customer=customer).first()
    return {
        "customer": {"name": customer.name, "email": customer.email, "since": _ts(since),
                     "orders": len(orders), "conversations": theirs.count(),
                     # a mail to this address bounced: no more e-mail goes to it (support/desk/inbound_mail.py)
                     "undeliverable": {"reason": undeliverable.reason, "at": _ts(undeliverable.created_at)}
                     if undeliverable else None},
        "scope": scope if scope != Conversation.UNVERIFIED else None,
        # Started by an e-mail, and no order number of the customer's given yet: the agent sees no order.
        "unverified": scope == Conversation.UNVERIFIED,
        "shop_unavailable": shop_away,  # "" when the shop answered
        "orders": [_order_json(o, scope, by_staff, user, can_message) for o in orders],
        "conversations": [{"id": str(c.public_id), "status": c.status, "created_at": _ts(c.created_at),
                           # the inbox's status and words, true for this one too ("Closed", "With Sam")
                           "inbox_status": shown.get(str(c.public_id), {}).get("status"),
                           "status_label": shown.get(str(c.public_id), {}).get("status_label"),
                           "updated_at": _ts(c.updated_at), "first_message": first_words[c.pk][:200],
                           "current": c.pk == conversation.pk}
                          for c in conversations if c.pk != conversation.pk][:OTHER_CONVERSATIONS],
        "refunds": [_refund_json(r, by_staff) for r in refunds],
        "viewer": {"can_refund": user.has_perm(permissions.DECIDE_APPROVAL),
                   # null with the large-refund permission: up to each order's balance
                   "refund_limit": money(limit) if limit is not None else None,
                   # the console asks "Refund 300.00 EUR on SU-41533 to …?" above this (null: never)
                   "confirm_refund_above": _setting_money(settings.STAFF_REFUND_CONFIRM_ABOVE),
                   # four eyes: a refund above this waits for a colleague (null: off)
                   "second_approval_above": _setting_money(permissions.second_approval_above())},
    }
