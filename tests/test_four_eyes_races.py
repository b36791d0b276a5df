"""Four eyes under races: people approving one refund at the same moment, each in its own thread and database
connection, released together by a barrier (tests/test_races.py's at_once). Whatever the interleaving, the
outcome is one some serial order could give: one first approval, one decision, and the call or the staff
refund made exactly once. On SQLite the writers take turns on the whole database; on PostgreSQL (CI's second
pass) they take turns on the run's row, or the approval's for a staff refund.

Who: Sam, Kim and Lee are support leads.
"""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

import pytest

from support.desk import gate, runner, services, staff_actions
from support.models import Approval, Refund, ToolCall
from tests.desk_factories import make_user, pending_refund_approval, start_conversation
from tests.standin_fixture import standin  # noqa: F401
from tests.test_races import at_once

pytestmark = pytest.mark.django_db(transaction=True)

TRIALS = 15


@pytest.fixture(autouse=True)
def four_eyes_above_50(settings):
    settings.SECOND_APPROVAL_ABOVE = Decimal("50.00")


@pytest.fixture
def leads(db):
    return [make_user(name, staff=True, group="leads") for name in ("sam", "kim", "lee")]


def approve(approval, user):
    """One person's approval, on a copy of the row of their own (as each request reads its own)."""
    return lambda: gate.approval_decide(approval=Approval.objects.get(pk=approval.pk), user=user, approve=True)


def fresh_card(customer) -> Approval:
    approval = pending_refund_approval(start_conversation(customer))  # 64.00: two people's approval
    return Approval.objects.select_related("tool_call").get(pk=approval.pk)


def agent_refunds(approval):
    """The refunds the agent's call made: the shop keeps the call's idempotency key with each."""
    return Refund.objects.filter(tool_call_id=approval.tool_call.idempotency_key)


def test_three_people_approving_a_fresh_card_at_once_give_one_first_approval_and_one_decision(desk, queued,
                                                                                             leads):
    for _ in range(TRIALS):
        approval = fresh_card(desk.maya)
        outcomes = at_once(*(approve(approval, person) for person in leads))
        pending = [o for o in outcomes if isinstance(o, Approval) and o.pending]
        decided = [o for o in outcomes if isinstance(o, Approval) and not o.pending]
        refused = [o for o in outcomes if isinstance(o, services.AlreadyDecided)]
        assert (len(pending), len(decided), len(refused)) == (1, 1, 1), outcomes
        approval.refresh_from_db()
        assert approval.decision == Approval.APPROVED
        assert approval.first_approved_by_id != approval.decided_by_id
        assert Counter(queued)[approval.run_id] == 1


def test_two_second_approvers_at_once_run_the_call_exactly_once(desk, queued, leads):
    sam, kim, lee = leads
    for _ in range(TRIALS):
        approval = fresh_card(desk.maya)
        assert gate.approval_decide(approval=approval, user=sam, approve=True).pending
        outcomes = at_once(approve(approval, kim), approve(approval, lee))
        assert sorted(type(o).__name__ for o in outcomes) == ["AlreadyDecided", "Approval"], outcomes
        assert Counter(queued)[approval.run_id] == 1
        Refund.objects.filter(tool_call_id__isnull=False).delete()  # the balance back for this trial's refund
        while queued:
            runner.run_execute(queued.pop())
        assert agent_refunds(approval).count() == 1
        assert ToolCall.objects.get(pk=approval.tool_call_id).status == ToolCall.EXECUTED


def test_the_first_approver_clicking_twice_at_once_is_one_first_approval(desk, queued, leads):
    sam = leads[0]
    for _ in range(TRIALS):
        approval = fresh_card(desk.maya)
        outcomes = at_once(approve(approval, sam), approve(approval, sam))
        assert all(isinstance(o, Approval) and o.pending for o in outcomes), outcomes
        approval.refresh_from_db()
        assert (approval.decided_at, approval.first_approved_by_id) == (None, sam.pk)
        assert queued == []


def test_two_people_approving_a_staff_refund_at_once_make_one_refund(demo, queued, leads):
    sam, kim, lee = leads
    for trial in range(TRIALS):
        Refund.objects.filter(order__number="SU-41533").delete()  # the balance back for the next trial
        conversation = start_conversation(demo.maya)
        action = staff_actions.refund_issue(conversation=conversation, user=sam, order_id="SU-41533",
                                            amount="300.00", reason="cracked screen", key=f"race-{trial}")
        approval = Approval.objects.get(staff_action=action)
        outcomes = at_once(approve(approval, kim), approve(approval, lee))
        assert sorted(type(o).__name__ for o in outcomes) == ["AlreadyDecided", "Approval"], outcomes
        assert list(Refund.objects.filter(order__number="SU-41533").values_list("amount", flat=True)) == [
            Decimal("300.00")]
        action.refresh_from_db()
        assert action.status == action.DONE
