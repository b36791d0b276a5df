"""Reads for the console's context panel: the conversation's customer, their orders with items, money, parcels
and latest scans, their other conversations and refunds, and what this staff member may do with them.

The data the agent's tools see, for this customer only. A conversation opened with one order
(Conversation.order_scope) still shows staff the whole customer: staff are not the agent, and a person judging
a case is helped by the customer's history (a third "never arrived" this month). Orders outside the scope
are marked, and actions on them are refused by support/desk/staff_actions.py, as the agent's tools refuse them.
"""

from __future__ import annotations

from django.db.models import Prefetch

from support.desk import permissions, serializers, staff_actions
from support.models import Conversation, Message, Order, Parcel, Refund, Scan, StaffAction
from support.tools.common import money

LATEST_SCANS = 3
OTHER_CONVERSATIONS = 10


def _ts(value):
    return serializers._ts(value)


def _refund_json(refund: Refund, by_staff: dict) -> dict:
    if refund.pk in by_staff:
        by = by_staff[refund.pk] or "staff"
    elif refund.tool_call_id:
        by = "the agent"
    else:
        by = "the shop"
    return {"id": str(refund.public_id), "reference": refund.reference, "order_id": refund.order.number, "amount": money(refund.amount),
            "reason": refund.reason, "created_at": _ts(refund.created_at), "by": by}


def _order_json(order: Order, scope_id: int | None, by_staff: dict, user) -> dict:
    seller = order.seller
    limit = staff_actions.refund_limit(user, order)
    return {
        "number": order.number, "status": order.status, "placed_at": _ts(order.placed_at),
        "currency": order.currency,
        "seller": {"code": seller.code, "name": seller.name, "is_sundry": seller.is_sundry},
        "items": [{"sku": i.sku, "title": i.title, "qty": i.qty, "unit_price": money(i.unit_price),
                   "line_total": money(i.line_total())} for i in order.items.all()],
        "shipping_fee": money(order.shipping_fee), "total": money(order.total()),
        "refunded": money(order.refunded()), "refundable": money(order.refundable()),
        "note": order.note,
        # Within what this conversation may act on: the agent's tools and staff actions alike.
        "in_scope": scope_id is None or scope_id == order.pk,
        # The most this staff member may refund on it now (null: they may not refund).
        "refund_limit": money(min(limit, order.refundable())) if limit is not None else None,
        "parcels": [{"tracking": p.tracking, "carrier": p.carrier, "status": p.status,
                     "scans": [{"at": _ts(s.at), "event": s.event, "detail": s.detail, "location": s.location}
                               for s in list(p.scans.all())[::-1][:LATEST_SCANS]]}
                    for p in order.parcels.all()],
        "refunds": [_refund_json(r, by_staff) for r in order.refunds.all()],
    }


def conversation_context(conversation: Conversation, user) -> dict:
    customer = conversation.customer
    orders = list(Order.objects.filter(customer=customer).select_related("seller").prefetch_related(
        "items", Prefetch("refunds", queryset=Refund.objects.select_related("order").order_by("created_at", "pk")),
        Prefetch("parcels", queryset=Parcel.objects.prefetch_related(
            Prefetch("scans", queryset=Scan.objects.order_by("at", "pk"))))).order_by("-placed_at", "-pk"))
    by_staff = {a.refund_id: serializers.staff_name(a.user) if a.user_id else None
                for a in StaffAction.objects.filter(refund__order__customer=customer).select_related("user")}
    conversations = list(Conversation.objects.filter(customer=customer).order_by("-created_at", "-pk")
                         [:OTHER_CONVERSATIONS + 1])
    first_words = {}
    for c in conversations:
        first = Message.objects.filter(conversation=c, author=Message.CUSTOMER).order_by("seq").values_list(
            "content", flat=True).first()
        first_words[c.pk] = first or ""
    since = min([o.placed_at for o in orders] + [c.created_at for c in conversations] + [conversation.created_at])
    refunds = sorted((r for o in orders for r in o.refunds.all()), key=lambda r: (r.created_at, r.pk), reverse=True)
    limit = staff_actions.refund_limit(user)
    return {
        "customer": {"name": customer.name, "email": customer.email, "since": _ts(since),
                     "orders": len(orders), "conversations": Conversation.objects.filter(customer=customer).count()},
        "scope": conversation.order_scope.number if conversation.order_scope_id else None,
        "orders": [_order_json(o, conversation.order_scope_id, by_staff, user) for o in orders],
        "conversations": [{"id": str(c.public_id), "status": c.status, "created_at": _ts(c.created_at),
                           "updated_at": _ts(c.updated_at), "first_message": first_words[c.pk][:200],
                           "current": c.pk == conversation.pk}
                          for c in conversations if c.pk != conversation.pk][:OTHER_CONVERSATIONS],
        "refunds": [_refund_json(r, by_staff) for r in refunds],
        "viewer": {"can_refund": user.has_perm(permissions.DECIDE_APPROVAL),
                   # null with the large-refund permission: up to each order's balance
                   "refund_limit": money(limit) if limit is not None else None},
    }
