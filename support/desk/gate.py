"""The approval gate: a person's decision written once and in time (two people's above SECOND_APPROVAL_ABOVE:
four_eyes.py), expiry, and which calls need no person (the lock order is services.py's)."""

from __future__ import annotations

from datetime import timedelta
from datetime import timezone as dt_timezone

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from support.agent.tools import ToolContext, ToolError
from support.desk import four_eyes, selectors_earlier, serializers, staff_actions
from support.desk.services import AlreadyDecided, InvalidArguments, conversation_flag, run_enqueue
from support.models import Approval, Run, ToolCall
from support.ops import metrics, tracing
from support.tools import tool_by_name

# -- approvals --------------------------------------------------------------------------------------

class ApprovalExpired(AlreadyDecided):
    """The approval's time ran out before this decision came: it is expired, by the system."""


def _lock_run(run_id: int) -> None:
    """The run's row lock, taken before anything else of the run or its conversation (the lock order)."""
    list(Run.objects.select_for_update().filter(pk=run_id).values_list("pk", flat=True))


def _lock(approval: Approval) -> None:
    """What deciders of an approval take turns on: its run's row, or (a staff member's refund, which has no
    run) the approval's own row."""
    if approval.run_id:
        _lock_run(approval.run_id)
    else:
        list(Approval.objects.select_for_update().filter(pk=approval.pk).values_list("pk", flat=True))


def _expired(now) -> Q:
    """Approvals past their time: the expiry stamped when asked, or a timeout shortened since then."""
    return Q(expires_at__lte=now) | Q(requested_at__lte=now - timedelta(seconds=settings.APPROVAL_TIMEOUT_SECONDS))


OverRejection = selectors_earlier.OverRejection  # approving against an earlier rejection, unconfirmed


class NeedsSecondLook(Exception):
    """The customer wrote after the call was requested: approving needs a person to confirm they read it."""


def approval_decide(*, approval: Approval, user, approve: bool, arguments=None, reason: str = "",
                    confirm_seen: bool = True, channel: str = "", first_allowed: bool = True,
                    confirm_over_rejection: bool = True) -> Approval:
    """Write a staff decision once, while the approval is in time. Approval may carry edited arguments,
    validated against the tool's schema. AlreadyDecided when someone decided first; ApprovalExpired once
    its time is up, whatever the sweeper has done (this request then expires it, as the sweeper would).

    Repeating a decision (the same person, the same verdict and arguments or reason: a double click, a
    retried request) answers the approval as decided and changes nothing. confirm_seen=False (the staff
    API, unless the person ticked "I have read them") refuses to approve while customer messages written
    since the request exist: NeedsSecondLook. Callers that show no card (the ask command) keep the default.
    `channel` (Approval.CONSOLE, BULK, EMAIL or SLACK) is written with the decision, or with a first
    approval: where the person made it.

    Four eyes (four_eyes.py): a refund above SECOND_APPROVAL_ABOVE needs two different people. The first
    approval is recorded and the approval stays pending (nothing runs); the approval returned is then still
    pending. first_allowed=False (bulk decisions) refuses to give a first approval: NeedsSecondApprover.
    """
    reason = (reason or "").strip()[:2000]
    edited = _validated(approval, arguments) if approve else None
    if not approve and not reason:
        raise InvalidArguments("A rejection needs a reason; the agent relays it to the customer.")
    now = timezone.now()
    with transaction.atomic():
        # Deciders of one run take turns on its row: each sees the decisions committed before it, so
        # exactly one finds nothing pending and requeues the run (with two at once, neither would).
        _lock(approval)
        waiting = Approval.objects.filter(pk=approval.pk, decided_at__isnull=True).exclude(_expired(now))
        state = waiting.values("first_approved_by", "first_approved_at", "first_arguments").first()
        if state is not None:  # as committed before this lock: what a second approval approves
            approval.first_arguments = state["first_arguments"]
        executed = approval.arguments_to_run(edited) if approve else None
        if approve and state is not None:
            if not confirm_seen and approval.run_id and serializers.customer_messages_since(approval).exists():
                raise NeedsSecondLook("The customer wrote after this was requested; read their messages and "
                                      "confirm you have seen them to approve.")
            rejection = None if confirm_over_rejection else selectors_earlier.rejection_before(approval)
            if rejection is not None:
                raise OverRejection(selectors_earlier.refusal(rejection))
            step = four_eyes.step(approval, user, state, executed=executed, edited=edited)
            if step == four_eyes.FIRST and not first_allowed:
                raise four_eyes.NeedsSecondApprover(four_eyes.NEEDS_TWO)
            if step == four_eyes.FIRST:
                _record_first(approval, waiting, user=user, arguments=executed, now=now, channel=channel)
            if step in (four_eyes.FIRST, four_eyes.AGAIN):
                approval.refresh_from_db()
                return approval  # waiting for a second person: nothing runs
        decided = waiting.update(
            decided_at=now, decided_by=user, decided_via=channel, reason=reason,
            decision=Approval.APPROVED if approve else Approval.REJECTED, executed_arguments=executed,
        )
        if decided:
            approval.refresh_from_db()
            metrics.approval_decided(approval)
            tracing.approval_decided(approval)
            _on_decided(approval)
            serializers.as_decided(approval)
            transaction.on_commit(lambda: serializers.publish_approval(approval))
        else:
            _expire(approval, now)  # too late, if still pending: expired now, as the sweeper would
    if not decided:  # raised after the commit, so an expiry written here is kept
        approval.refresh_from_db()
        if approval.decision == Approval.EXPIRED:
            raise ApprovalExpired(f"This approval expired: {approval.reason}.")
        executed = approval.arguments_to_run(edited) if approve else None
        if not (_same_decision(approval, user, approve=approve, executed=executed, reason=reason)
                or (approve and four_eyes.gave_first(approval, user, executed))):
            raise AlreadyDecided(_already_decided(approval, now))
    if approval.staff_action_id and approval.decision == Approval.APPROVED:
        # Outside the decision's transaction: the shop is asked. Done once, whoever gets here (a retry too).
        staff_actions.refund_approved(action=approval.staff_action)
    return approval


def _record_first(approval: Approval, waiting, *, user, arguments: dict, now, channel: str) -> None:
    """The first of two approvals: who, when, where, what they approved; in the trace and on every console."""
    waiting.update(first_approved_by=user, first_approved_at=now, first_arguments=arguments,
                   first_approved_via=channel)
    approval.refresh_from_db()
    four_eyes.trace_first(approval)
    transaction.on_commit(lambda: serializers.publish_approval(approval))


def _validated(approval: Approval, arguments) -> dict | None:
    """Edited arguments, checked against the tool's schema and as the tool will check them; None: as they are."""
    tool = tool_by_name(approval.tool_call.name) if approval.tool_call_id else None
    if approval.staff_action_id:
        if arguments is not None and arguments != approval.requested_arguments:
            raise InvalidArguments("A staff member's own refund is approved as they asked, or rejected: ask them "
                                   "to send another amount if this one is wrong.")
        return None
    problem = tool.validation_error(approval.requested_arguments if arguments is None else arguments) \
        if tool else "the tool no longer exists"
    if problem:
        raise InvalidArguments(problem)
    if arguments is not None:
        _check_as_the_tool_would(approval, tool, arguments)
    return arguments


def _on_decided(approval: Approval) -> None:
    """What follows a decision, in its transaction: the call's status and the run's resume, or a staff
    member's refund made ready (or refused). Call holding the lock _lock took."""
    if approval.staff_action_id:
        staff_actions.refund_request_decided(approval)
        return
    ToolCall.objects.filter(pk=approval.tool_call_id, status=ToolCall.PENDING_APPROVAL).update(
        status=ToolCall.APPROVED if approval.decision == Approval.APPROVED else ToolCall.REJECTED)
    if approval.first_approved_at is not None:
        four_eyes.trace_decided(approval)
    _resume_when_decided(approval.run_id)


def decision_answer(approval: Approval, build, *, first: bool = False) -> dict:
    """The answer to a decision: built once (`build()`, the card as it is then), kept with the approval, and
    the same for every repeat of that decision. Whoever stores it first wins; everyone answers with what
    was stored, read back, so the bytes agree even where the database orders a JSON object's keys itself.
    first=True: the answer to the first of two approvals (four eyes), kept apart."""
    field = "first_answer" if first else "decision_answer"
    stored = Approval.objects.filter(pk=approval.pk).values_list(field, flat=True).first()
    if stored is None:
        Approval.objects.filter(pk=approval.pk, **{f"{field}__isnull": True}).update(**{field: build()})
        stored = Approval.objects.filter(pk=approval.pk).values_list(field, flat=True).first()
    return stored


def _check_as_the_tool_would(approval: Approval, tool, arguments: dict) -> None:
    """Arguments a person edited are checked as the tool will check them when it runs (ownership, ceiling,
    balance), so an impossible edit is refused here, in plain words, instead of failing after approval."""
    if tool.check is None:
        return
    conversation = approval.run.conversation
    ctx = ToolContext(customer_id=conversation.customer_id, conversation_id=str(conversation.public_id),
                      run_id=str(approval.run.public_id), call_id=approval.tool_call.call_id)
    try:
        tool.check(ctx, **arguments)
    except ToolError as e:
        raise InvalidArguments(str(e)) from None


def _same_decision(approval: Approval, user, *, approve: bool, executed, reason: str) -> bool:
    """This very decision, by this very person, is the one on record."""
    if approval.decided_by_id != getattr(user, "pk", None):
        return False
    if approve:
        return approval.decision == Approval.APPROVED and approval.executed_arguments == executed
    return approval.decision == Approval.REJECTED and approval.reason == reason


def _already_decided(approval: Approval, now) -> str:
    """"Sam Lee already approved this at 14:02 UTC." (with the date when it was not today)."""
    user = approval.decided_by
    name = (user.get_full_name() or user.get_username()) if user is not None else "The system"
    at = approval.decided_at.astimezone(dt_timezone.utc)
    when = at.strftime("%H:%M UTC") if at.date() == now.astimezone(dt_timezone.utc).date() \
        else at.strftime("%H:%M UTC on %d %b %Y")
    return f"{name} already {approval.decision} this at {when}."


def _resume_when_decided(run_id: int) -> None:
    """Once no approval of the run is pending, queue the run again. Call holding the run's lock: the
    deciders before this one have committed, so the check sees their decisions."""
    if Approval.objects.filter(run_id=run_id, decided_at__isnull=True).exists():
        return
    if Run.objects.filter(pk=run_id, status=Run.AWAITING_APPROVAL).update(
            status=Run.QUEUED, heartbeat_at=timezone.now()):
        run_enqueue(Run.objects.get(pk=run_id))


def approvals_expire(*, now=None) -> int:
    """Pending approvals past their time are rejected by the system, and the conversation flagged."""
    now = now or timezone.now()
    count = 0
    for approval in Approval.objects.filter(_expired(now), decided_at__isnull=True):
        with transaction.atomic():
            _lock(approval)  # as a staff decision does: one of the two requeues the run
            count += _expire(approval, now)
    return count


def _expire(approval: Approval, now) -> bool:
    """Reject a pending approval for the system, flag the conversation, resume the run once nothing is
    pending. False if it was decided meanwhile. Call holding the run's lock."""
    reason = (f"no one decided within {_duration(settings.APPROVAL_TIMEOUT_SECONDS)}; "
              "a person will follow up with the customer")
    if approval.staff_action_id:
        reason = f"no second person approved it within {_duration(settings.APPROVAL_TIMEOUT_SECONDS)}"
    if not Approval.objects.filter(pk=approval.pk, decided_at__isnull=True).update(
            decided_at=now, decision=Approval.EXPIRED, reason=reason):
        return False
    if approval.staff_action_id:  # a staff member's refund: refused on record; there is no run to resume
        approval.refresh_from_db()
        staff_actions.refund_request_decided(approval)
        transaction.on_commit(lambda: serializers.publish_approval(approval))
        return True
    ToolCall.objects.filter(pk=approval.tool_call_id, status=ToolCall.PENDING_APPROVAL).update(
        status=ToolCall.REJECTED)
    conversation_id = Run.objects.values_list("conversation_id", flat=True).get(pk=approval.run_id)
    conversation_flag(conversation_id=conversation_id, reason=f"approval expired: {reason}")
    _resume_when_decided(approval.run_id)
    approval.refresh_from_db()
    serializers.as_decided(approval)
    transaction.on_commit(lambda: serializers.publish_approval(approval))
    return True


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:g} hours"
    if seconds >= 60:
        return f"{seconds / 60:g} minutes"
    return f"{seconds:g} seconds"
