"""Four eyes: a refund above SECOND_APPROVAL_ABOVE (the agent's, a gated MCP tool's amount, a staff member's
own) needs two different people. Which step a person's approval is (gate.approval_decide asks, holding the
lock), the refusals with their codes, and the trace rows that name both people.

The agent's refund: the first approval records the person and what they approved, and the approval stays
pending (the run stays paused); a second person, not the first, approves the same arguments and the call
runs once. A staff member's own refund: they asked, so they count as the first; another person approves
it. Rejecting needs one person, whoever: either may end it.
"""

from __future__ import annotations

import json

from django.db import transaction

from support.customers.words import staff_name
from support.desk import permissions, serializers
from support.models import Approval, Step

FIRST, AGAIN, FINAL = "first", "again", "final"  # a first approval, the same first approval again, the decision
NEEDS_TWO = ("This refund needs two people's approval, given one at a time on its card: it is not approved "
             "in bulk before someone else has approved it first.")


class SamePerson(Exception):
    """This person already counts as one of the two: they approved first, or asked for the refund."""

    code = "same_person"


class DiffersFromFirst(Exception):
    """The second person approves what the first approved, or rejects it: never a third version."""

    code = "differs_from_first_approval"


class NeedsSecondApprover(Exception):
    """A first approval where the caller allows none (bulk decisions)."""

    code = "needs_second_approver"


def step(approval: Approval, user, state: dict, *, executed: dict, edited: dict | None) -> str:
    """FIRST, AGAIN or FINAL for this person approving `executed`; SamePerson or DiffersFromFirst when they
    may not. `state`: the approval's first_* as read under the lock."""
    me = getattr(user, "pk", None)
    if approval.staff_action_id:
        if me is not None and me == approval.requested_by_id:
            raise SamePerson("You asked for this refund, so another person must approve it; you may withdraw "
                             "it by rejecting it.")
        return FINAL
    if state["first_approved_at"] is None:
        return FIRST if permissions.needs_second_approver(approval.tool_name, executed) else FINAL
    first = state["first_arguments"]
    if me == state["first_approved_by"]:
        if executed == first:
            return AGAIN  # a double click or a retry of the first approval: it stands, nothing more
        raise SamePerson("You gave the first approval; a second person must give the other.")
    if edited is not None and edited != first:
        who = _name_of(approval.first_approved_by)
        raise DiffersFromFirst(f"{who} approved it as {approved_as(approval, first)}; approve that, or reject it "
                               "and let the agent ask again.")
    return FINAL


def gave_first(approval: Approval, user, executed) -> bool:
    """This person's approval is the first of two on record, with these arguments, and no one has said no
    since: a retry of it after the second person decided is answered as it was, not refused."""
    return (approval.first_approved_at is not None and user is not None
            and approval.first_approved_by_id == user.pk and approval.first_arguments == executed
            and approval.decision in ("", Approval.APPROVED))


def answered_as_first(approval: Approval, user) -> bool:
    """Whether this person's answer is the first approval's (kept apart from the decision's)."""
    return (approval.first_approved_at is not None and approval.first_approved_by_id == getattr(user, "pk", None)
            and approval.decided_by_id != approval.first_approved_by_id)


# -- the trace -----------------------------------------------------------------------------------------------

def trace_first(approval: Approval) -> None:
    """The run's trace says who approved first and that a second person is awaited."""
    _trace(approval, "First approval", approval.first_arguments,
           f"approved by {_name_of(approval.first_approved_by)}; a second person must approve before it runs",
           "awaiting_approval")


def trace_decided(approval: Approval) -> None:
    """The run's trace names both people of a decision that had a first approval."""
    first, by = _name_of(approval.first_approved_by), _name_of(approval.decided_by)
    if approval.decision == Approval.APPROVED:
        _trace(approval, "Second approval", approval.executed_arguments,
               f"approved by {by}, after the first approval by {first}", "")
    else:
        _trace(approval, "Rejected after a first approval", approval.first_arguments,
               f"{approval.decision} by {by} (first approval by {first}): {approval.reason}", "")


def _trace(approval: Approval, label: str, arguments, result: str, finish_reason: str) -> None:
    call = approval.tool_call
    step = Step.objects.create(run_id=approval.run_id, kind="approval", turn=approval.run.turns, label=label,
                               tool=call.name, call_id=call.call_id[:128],
                               arguments=json.dumps(arguments)[:4000], result=result, finish_reason=finish_reason)
    transaction.on_commit(lambda: serializers.publish_step(step, started=False))


def _name_of(user) -> str:
    return staff_name(user) if user is not None else "a former colleague"


def approved_as(approval: Approval, arguments) -> str:
    """"64.00": the amount of these arguments (JSON when they have none)."""
    amount = permissions.refund_amount(approval.tool_name, arguments)
    return f"{amount:.2f}" if amount is not None else json.dumps(arguments)
