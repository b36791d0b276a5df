"""Refunds (count and amount, by who let them through) and what the model cost.

A refund is the desk's record of one the shop made (ShopEffect, kind refund), keyed by who asked: the agent's
key is its tool call's idempotency key ("<run>:<call id>"), a staff member's starts with "staff:".
"""

from __future__ import annotations

from decimal import Decimal

from django.db.models import Exists, OuterRef, QuerySet, Subquery, Sum

from support.models import Approval, Run

STAFF_PREFIX = "staff:"
CENT, MICRO = Decimal("0.01"), Decimal("0.000001")


def _approved_by_a_person():
    return Exists(Approval.objects.filter(tool_call__idempotency_key=OuterRef("key"), decided_by__isnull=False,
                                          decision=Approval.APPROVED))


def refunds_automatic(refunds: QuerySet) -> QuerySet:
    """Refunds made automatically: the agent's, which no person approved (the policy let them through, or the
    tool was not gated)."""
    return refunds.exclude(key__startswith=STAFF_PREFIX).filter(~_approved_by_a_person())


def refunds_by_approval(refunds: QuerySet) -> QuerySet:
    """Refunds by people's approval: the agent's, approved by a person (as asked or changed)."""
    return refunds.exclude(key__startswith=STAFF_PREFIX).filter(_approved_by_a_person())


def refunds_by_staff(refunds: QuerySet) -> QuerySet:
    """Refunds staff made themselves from the console (a second person's approval included)."""
    return refunds.filter(key__startswith=STAFF_PREFIX)


def amount(refunds: QuerySet) -> Decimal:
    """The refunds' total in the shop's currency, to the cent (SQLite sums decimals as floats)."""
    return Decimal(refunds.aggregate(total=Sum("amount"))["total"] or 0).quantize(CENT)


def model_cost(conversations: QuerySet) -> Decimal:
    """What the model cost: the sum of the runs' cost (USD) on the conversations, every run whenever it ran."""
    # Each conversation's runs summed through its index: a join of every run made the planner scan them all.
    runs = Run.objects.filter(conversation=OuterRef("pk")).order_by().values("conversation").annotate(
        cost=Sum("cost_usd")).values("cost")
    total = conversations.annotate(cost=Subquery(runs)).aggregate(total=Sum("cost"))["total"]
    return Decimal(total or 0).quantize(MICRO)
