"""Writes: conversations, messages, runs and approvals. Every rule about who may change what lives here."""

# Lock order, for every transaction that touches a run and its conversation: the run's row first, then
# the conversation's row, then rows of the run (its tool calls, approvals). The worker's hot path sets it:
# each of its writes checks the lease (an UPDATE of the run) and then appends (next_seq's UPDATE of the
# conversation). So:
#   - runner._finish: the lease check first, then the conversation;
#   - approval_decide and approvals_expire: SELECT ... FOR UPDATE of the run, then the approval, its tool
#     call, and the conversation when it is flagged; deciders of one run so take turns;
#   - take-over and hand-back: every run of the conversation (FOR UPDATE, by id), then the conversation;
#     a run created between the two is not locked, so they start over (_with_runs_then_conversation);
#   - a customer's message locks only the conversation and may create a run: a row no one else sees,
#     let alone locks, before it commits. Runs are created only under the conversation's lock.
# Taking them the other way round anywhere can deadlock with a worker.

from __future__ import annotations

import logging
import unicodedata
from datetime import timedelta
from datetime import timezone as dt_timezone
from decimal import Decimal, InvalidOperation

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from support.customers import cleaning, languages, words

from support.live import events

from support.ops import limits, metrics

from support.agent.tools import ToolContext, ToolError
from support.desk import assistant, notices, queue, serializers
from support.models import Approval, Conversation, Customer, Message, Order, Run, ToolCall
from support.tools import tool_by_name

log = logging.getLogger(__name__)


class InvalidMessage(ValueError):
    """A customer message we will not save; the text says why, `code` says it to a program."""

    def __init__(self, message: str, code: str = "invalid_message"):
        super().__init__(message)
        self.code = code


class RateLimited(Exception):
    def __init__(self, retry_after: int):
        super().__init__(f"You are sending messages faster than we can read them \u2014 please wait "
                         f"{words.wait_words(retry_after)} and try again.")
        self.retry_after = retry_after


class AlreadyDecided(Exception):
    pass


class InvalidArguments(ValueError):
    pass


class LeaseLost(Exception):
    """This worker's claim on the run was taken over (it was presumed dead): it must stop writing."""


# -- conversations and messages ---------------------------------------------------------------------

def conversation_start(*, customer: Customer) -> Conversation:
    """A new conversation, opened with the agent's system prompt (dated today, fixed for its life)."""
    with transaction.atomic():
        conversation = Conversation.objects.create(customer=customer)
        message_append(conversation=conversation, wire={"role": "system", "content": assistant.system_prompt()},
                       author=Message.SYSTEM)
        transaction.on_commit(lambda: serializers.publish_conversation(conversation))
    return conversation


def conversation_open(*, customer: Customer, order_scope: Order | None = None) -> Conversation:
    """A new conversation; opened with an order number, it sees that order only (support/tools/common.py)."""
    with transaction.atomic():  # the scope is set before the token that opens it exists
        conversation = conversation_start(customer=customer)
        if order_scope is not None:
            Conversation.objects.filter(pk=conversation.pk).update(order_scope=order_scope)
            conversation.order_scope = order_scope
    return conversation


def message_clean(text) -> str:
    """The customer's text as it will be saved, or InvalidMessage saying in plain words what is wrong.

    Line endings become "\n", the text is NFC-normalised and stripped of bidi overrides and isolates, and
    only then measured: normalising can make a text longer, so a size checked before it means nothing.
    """
    if not isinstance(text, str):
        raise InvalidMessage("The message must be text.", code="not_text")
    if not cleaning.is_valid_unicode(text):
        raise InvalidMessage("Your message contains characters that are not valid text; please retype it.",
                             code="invalid_text")
    text = unicodedata.normalize("NFC", text.replace("\r\n", "\n").replace("\r", "\n"))
    text = cleaning.without_bidi_controls(text).strip()
    if cleaning.is_blank(text):
        raise InvalidMessage("Your message is empty.", code="empty")
    bad = cleaning.first_forbidden(text)
    if bad is not None:
        raise InvalidMessage(f"Your message contains a control character (U+{ord(bad):04X}) we cannot show; "
                             "please remove it.", code="control_character")
    limit = settings.MAX_MESSAGE_BYTES
    if len(text.encode("utf-8")) > limit:
        raise InvalidMessage(f"Your message is too long \u2014 please keep it under {limit:,} characters "
                             "(fewer with accents, other alphabets or emoji).", code="too_long")
    return text


def message_append(*, conversation: Conversation, wire: dict, author: str, run: Run | None = None,
                   lease: str | None = None, user=None, client_id: str | None = None) -> Message:
    """Save one message with the conversation's next seq; publish it after commit.

    With a lease, the write happens only while that claim on the run is still current, so a worker
    presumed dead cannot add to a conversation another worker has resumed.
    """
    # Inside a caller's transaction no savepoint is needed: any failure here fails the caller's block too.
    with transaction.atomic(savepoint=False):
        now = timezone.now()
        if lease is not None:
            lease_check(run, lease)
        seq = next_seq(conversation, now)
        message = Message.objects.create(
            conversation=conversation, seq=seq, role=wire["role"], author=author, author_user=user,
            content=wire.get("content"), tool_calls=wire.get("tool_calls") or None,
            tool_call_id=wire.get("tool_call_id", ""), run=run, client_id=client_id,
        )
        transaction.on_commit(lambda: serializers.publish_message(message))
    return message


def lease_check(run: Run, lease: str) -> None:
    """LeaseLost unless `lease` is still the run's claim; marks the run alive. Inside a transaction the
    run's row stays locked until commit, so one check covers every write the transaction makes."""
    if not Run.objects.filter(pk=run.pk, lease=lease).update(heartbeat_at=timezone.now()):
        raise LeaseLost(f"run {run.public_id} was claimed by another worker")


def next_seq(conversation: Conversation, now) -> int:
    """Hand out the conversation's next seq and refresh `conversation` with its current state.

    One conditional UPDATE both allocates the seq and serialises appends to the conversation (it holds the
    row lock until commit); RETURNING reads back the state with it. The caller's object may be old (a
    customer's websocket keeps the one it loaded on connect), and the message's events describe the
    conversation from it (publish_message's conversation.updated: a taken-over one is not "open").
    """
    table, pk = (connection.ops.quote_name(n) for n in (Conversation._meta.db_table, Conversation._meta.pk.column))
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET last_seq = last_seq + 1, updated_at = %s WHERE {pk} = %s "
            "RETURNING last_seq, status, assignee_id, attention_reason",
            [Conversation._meta.get_field("updated_at").get_db_prep_value(now, connection), conversation.pk])
        row = cursor.fetchone()
    if row is None:
        raise Conversation.DoesNotExist(f"conversation {conversation.pk} is gone")
    seq, conversation.status, conversation.assignee_id, conversation.attention_reason = row
    conversation.last_seq, conversation.updated_at = seq, now
    return seq


def conversation_post_message(*, conversation: Conversation, text, client_id: str | None = None,
                              client_address: str | None = None):
    """A customer's message: validated, rate-limited, saved once, then handed to a run.

    Returns (message, run, created). The run is the conversation's active one when there is one: a
    working run sees the message at its next model call, a paused run when it resumes.
    """
    text = message_clean(text)
    if client_id is not None:
        client_id = cleaning.client_id_or_none(client_id)
        if client_id is None:
            raise InvalidMessage("client_id must be 1 to 64 letters, digits or . _ : -", code="invalid_client_id")
        existing = conversation.messages.filter(client_id=client_id).first()
        if existing is not None:  # a retried POST: the same message, saved once
            return existing, active_run(conversation), False
    counted = message_rate_check(conversation=conversation, client_address=client_address)
    try:
        with transaction.atomic():
            message = message_append(conversation=conversation, wire={"role": "user", "content": text},
                                     author=Message.CUSTOMER, client_id=client_id)
            run = run_start_if_idle(conversation_id=conversation.pk, current=conversation)
    except IntegrityError:
        if client_id is None:
            raise
        if counted:  # the same POST, twice at once: one message, counted once
            limits.forget(*counted)
        existing = conversation.messages.get(client_id=client_id)
        return existing, active_run(conversation), False
    return message, run, True


def active_run(conversation) -> Run | None:
    return Run.objects.filter(conversation=conversation, status__in=Run.ACTIVE).first()


def run_start_if_idle(*, conversation_id: int, current: Conversation | None = None) -> Run | None:
    """Start a run for the conversation unless one is active or a person has it. Call inside a transaction
    that has just appended to the conversation (which holds the conversation's row lock). `current`: the
    conversation as that append read it back (message_append refreshes it), saving a read."""
    conversation = current if current is not None else Conversation.objects.get(pk=conversation_id)
    if conversation.status != Conversation.OPEN:
        return None  # a person has this conversation; the message waits for them
    run = Run.objects.filter(conversation_id=conversation_id, status__in=Run.ACTIVE).first()
    if run is not None:
        return run
    with transaction.atomic():  # a savepoint: losing the unique-constraint race leaves the message saved
        try:
            run = Run.objects.create(conversation_id=conversation_id, heartbeat_at=timezone.now())
        except IntegrityError:
            return Run.objects.get(conversation_id=conversation_id, status__in=Run.ACTIVE)
    run_enqueue(run)
    return run


def run_enqueue(run: Run) -> None:
    """Hand the run to a worker once the transaction that queued it has committed.

    Nothing here may raise: it runs after the commit, so the message or decision that queued the run is
    saved, and an error would tell the client it was not (a retry without client_id would save it twice).
    A run the broker did not take stays queued; the sweeper (runs_recover) sends it again once its
    heartbeat is RUN_STALE_SECONDS old, which is how it reaches a worker after a Redis outage.
    """

    def send():
        try:
            queue.run_agent(run.pk)
        except Exception as error:  # kombu's OperationalError once its publish retries are spent, or worse
            log.error("run %s (conversation id %s) stays queued: the broker did not take it (%s: %s); "
                      "the sweeper sends it again", run.public_id, run.conversation_id,
                      type(error).__name__, error)

    def publish():
        try:
            serializers.publish_run(run)
        except Exception:  # the live UIs miss this event; they replay from the database
            log.warning("run %s (conversation id %s): status event not published", run.public_id,
                        run.conversation_id, exc_info=True)

    transaction.on_commit(send)
    transaction.on_commit(publish)


# -- rate limits ------------------------------------------------------------------------------------

def message_rate_check(*, conversation: Conversation, client_address: str | None) -> tuple:
    """Count one customer message against the conversation's, the customer's and the address's limits,
    all at once and atomically (support/ops/limits.py), or RateLimited with nothing counted.

    Returns what `limits.forget` needs to take it back. Without Redis the conversation's own limit is still
    kept, from the database (a race can pass it; it is the fallback, not the rule)."""
    checked = [limits.messages_of_conversation(conversation.public_id),
               limits.messages_of_customer(conversation.customer_id)]
    if client_address:
        checked.append(limits.messages_from(client_address))
    try:
        return limits.hit(*checked), *checked
    except limits.Limited as over:
        raise RateLimited(retry_after=over.retry_after) from None
    except limits.Unavailable as error:
        limits.warn_unavailable("message limits counted from the database, per conversation only", error)
    window = timezone.now() - timedelta(seconds=60)
    recent = conversation.messages.filter(author=Message.CUSTOMER, created_at__gte=window).count()
    if recent >= settings.MESSAGES_PER_MINUTE:
        raise RateLimited(retry_after=60)
    return ()


# -- approvals --------------------------------------------------------------------------------------

class ApprovalExpired(AlreadyDecided):
    """The approval's time ran out before this decision came: it is expired, by the system."""


def _lock_run(run_id: int) -> None:
    """The run's row lock, taken before anything else of the run or its conversation (the lock order)."""
    list(Run.objects.select_for_update().filter(pk=run_id).values_list("pk", flat=True))


def _expired(now) -> Q:
    """Approvals past their time: the expiry stamped when asked, or a timeout shortened since then."""
    return Q(expires_at__lte=now) | Q(requested_at__lte=now - timedelta(seconds=settings.APPROVAL_TIMEOUT_SECONDS))


class NeedsSecondLook(Exception):
    """The customer wrote after the call was requested: approving needs a person to confirm they read it."""


def approval_decide(*, approval: Approval, user, approve: bool, arguments=None, reason: str = "",
                    confirm_seen: bool = True) -> Approval:
    """Write a staff decision once, while the approval is in time. Approval may carry edited arguments,
    validated against the tool's schema. AlreadyDecided when someone decided first; ApprovalExpired once
    its time is up, whatever the sweeper has done (this request then expires it, as the sweeper would).

    Repeating a decision (the same person, the same verdict and arguments or reason: a double click, a
    retried request) answers the approval as decided and changes nothing. confirm_seen=False (the staff
    API, unless the person ticked "I have read them") refuses to approve while customer messages written
    since the request exist: NeedsSecondLook. Callers that show no card (the ask command) keep the default.
    """
    reason = (reason or "").strip()[:2000]
    executed = None
    if approve:
        executed = approval.requested_arguments if arguments is None else arguments
        tool = tool_by_name(approval.tool_call.name)
        problem = tool.validation_error(executed) if tool else "the tool no longer exists"
        if problem:
            raise InvalidArguments(problem)
        if arguments is not None:
            _check_as_the_tool_would(approval, tool, executed)
    elif not reason:
        raise InvalidArguments("A rejection needs a reason; the agent relays it to the customer.")
    now = timezone.now()
    with transaction.atomic():
        # Deciders of one run take turns on its row: each sees the decisions committed before it, so
        # exactly one finds nothing pending and requeues the run (with two at once, neither would).
        _lock_run(approval.run_id)
        waiting = Approval.objects.filter(pk=approval.pk, decided_at__isnull=True).exclude(_expired(now))
        if approve and not confirm_seen and waiting.exists() \
                and serializers.customer_messages_since(approval).exists():
            raise NeedsSecondLook("The customer wrote after this was requested; read their messages and "
                                  "confirm you have seen them to approve.")
        decided = waiting.update(
            decided_at=now, decided_by=user, reason=reason,
            decision=Approval.APPROVED if approve else Approval.REJECTED, executed_arguments=executed,
        )
        if decided:
            approval.refresh_from_db()
            metrics.approval_decided(approval)
            ToolCall.objects.filter(pk=approval.tool_call_id, status=ToolCall.PENDING_APPROVAL).update(
                status=ToolCall.APPROVED if approve else ToolCall.REJECTED)
            _resume_when_decided(approval.run_id)
            transaction.on_commit(lambda: serializers.publish_approval(approval))
        else:
            _expire(approval, now)  # too late, if still pending: expired now, as the sweeper would
    if not decided:  # raised after the commit, so an expiry written here is kept
        approval.refresh_from_db()
        if approval.decision == Approval.EXPIRED:
            raise ApprovalExpired(f"This approval expired: {approval.reason}.")
        if _same_decision(approval, user, approve=approve, executed=executed, reason=reason):
            return approval
        raise AlreadyDecided(_already_decided(approval, now))
    return approval


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
            _lock_run(approval.run_id)  # as a staff decision does: one of the two requeues the run
            count += _expire(approval, now)
    return count


def _expire(approval: Approval, now) -> bool:
    """Reject a pending approval for the system, flag the conversation, resume the run once nothing is
    pending. False if it was decided meanwhile. Call holding the run's lock."""
    reason = (f"no one decided within {_duration(settings.APPROVAL_TIMEOUT_SECONDS)}; "
              "a person will follow up with the customer")
    if not Approval.objects.filter(pk=approval.pk, decided_at__isnull=True).update(
            decided_at=now, decision=Approval.EXPIRED, reason=reason):
        return False
    ToolCall.objects.filter(pk=approval.tool_call_id, status=ToolCall.PENDING_APPROVAL).update(
        status=ToolCall.REJECTED)
    conversation_id = Run.objects.values_list("conversation_id", flat=True).get(pk=approval.run_id)
    conversation_flag(conversation_id=conversation_id, reason=f"approval expired: {reason}")
    _resume_when_decided(approval.run_id)
    approval.refresh_from_db()
    transaction.on_commit(lambda: serializers.publish_approval(approval))
    return True


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:g} hours"
    if seconds >= 60:
        return f"{seconds / 60:g} minutes"
    return f"{seconds:g} seconds"


def conversation_flag(*, conversation_id: int, reason: str) -> None:
    Conversation.objects.filter(pk=conversation_id).update(
        status=Conversation.NEEDS_ATTENTION, attention_reason=reason[:300], updated_at=timezone.now())
    transaction.on_commit(lambda: serializers.publish_conversation(Conversation.objects.get(pk=conversation_id)))


def refund_auto_approvable(arguments: dict) -> bool:
    """The per-tool policy: refunds up to AUTO_APPROVE_REFUNDS_UP_TO run without a person (0: never)."""
    limit = settings.AUTO_APPROVE_REFUNDS_UP_TO
    try:
        return limit > 0 and Decimal(str(arguments.get("amount"))) <= limit
    except (InvalidOperation, TypeError):
        return False


# -- recovery ---------------------------------------------------------------------------------------

def runs_recover(*, now=None) -> list[int]:
    """Requeue runs whose worker stopped heartbeating; stop those that used up their attempts."""
    now = now or timezone.now()
    stale = now - timedelta(seconds=settings.RUN_STALE_SECONDS)
    requeued = []
    for run in Run.objects.filter(status__in=(Run.RUNNING, Run.QUEUED), heartbeat_at__lt=stale):
        if run.attempts >= settings.RUN_MAX_ATTEMPTS:
            if Run.objects.filter(pk=run.pk, status=run.status, heartbeat_at=run.heartbeat_at).update(
                    status=Run.STOPPED, stop_reason=Run.STALLED, lease="", finished_at=now,
                    detail=f"the run's worker was lost {run.attempts} times; recovery gave up",
                    summary="The agent's worker stopped repeatedly on this conversation; please take it over."):
                with transaction.atomic():

                    message_append(conversation=run.conversation, author=Message.SYSTEM, run=run,
                                   wire={"role": "assistant",
                                         "content": languages.say(run.conversation, notices.STOPPED)})
                    conversation_flag(conversation_id=run.conversation_id, reason="the agent's run stalled")
                serializers.publish_run(Run.objects.get(pk=run.pk))
            continue
        # Conditional on the heartbeat we read: a worker that is alive after all, or another sweeper,
        # wins and this does nothing. The old lease is cleared, so a live-but-slow worker stops writing.
        if Run.objects.filter(pk=run.pk, status=run.status, heartbeat_at=run.heartbeat_at).update(
                status=Run.QUEUED, lease="", heartbeat_at=now):
            with transaction.atomic():
                run_enqueue(run)
            requeued.append(run.pk)
    return requeued


# -- staff taking a conversation over ----------------------------------------------------------------

TAKEN_OVER = "a staff member took the conversation over"
TAKEN_OVER_RESULT = f"ERROR: not run: {TAKEN_OVER}"
HANDED_BACK = "a person had the conversation before it was handed back"


class _RunStartedMeanwhile(Exception):
    """A customer's message created a run after the runs were locked and before the conversation was."""


def _with_runs_then_conversation(conversation: Conversation, work):
    """work(runs) in a transaction that holds every run of the conversation, then the conversation.

    Runs are created only under the conversation's lock: one that appears between the two steps was
    committed by a message that got the lock first, and locking it now, after the conversation, could
    deadlock with a worker claiming it. So start over; the next attempt locks it in order.
    """
    for attempt in range(5):
        try:
            with transaction.atomic():
                runs = list(Run.objects.select_for_update().filter(conversation=conversation).order_by("pk"))
                list(Conversation.objects.select_for_update().filter(pk=conversation.pk).values_list("pk"))
                if Run.objects.filter(conversation=conversation).exclude(pk__in=[r.pk for r in runs]).exists():
                    raise _RunStartedMeanwhile()
                return work(runs)
        except _RunStartedMeanwhile:
            if attempt == 4:
                raise


def conversation_take_over(*, conversation: Conversation, user) -> Conversation:
    """A staff member answers from now on. The active run stops now, whatever it is doing: a worker on it
    finds its lease gone at its next write and saves nothing more (a tool transaction in progress holds
    the run's lock, so this waits for it and sees its result). Every call of the history without a result
    is answered as not run, so nothing asked for before (pending, approved, half-run) runs after."""
    def take_over(runs: list[Run]) -> None:
        if not Conversation.objects.filter(pk=conversation.pk).exclude(
                status=Conversation.TAKEN_OVER, assignee=user).update(
                status=Conversation.TAKEN_OVER, assignee=user, attention_reason="", updated_at=timezone.now()):
            return  # already taken over by this person
        conversation.refresh_from_db()
        for run in runs:
            if run.status in Run.ACTIVE:
                _stop_taken_over_run(run)
        tool_calls_close_open(conversation, runs, TAKEN_OVER)
        # One notice, after the open calls' results (the model's history stays valid), in both transcripts.
        message_append(conversation=conversation, author=Message.SYSTEM, user=user,
                       wire={"role": "assistant", "content": joined_notice(user, conversation=conversation)})
        transaction.on_commit(lambda: serializers.publish_conversation(conversation, "conversation.assigned"))

    _with_runs_then_conversation(conversation, take_over)
    return conversation


def _stop_taken_over_run(run: Run) -> None:
    """Stop a run whose lock is held. Clearing the lease fences its worker, if it has one, out."""
    Run.objects.filter(pk=run.pk).update(status=Run.STOPPED, stop_reason="taken_over", lease="",
                                         finished_at=timezone.now(), detail=TAKEN_OVER)
    run.refresh_from_db()
    transaction.on_commit(lambda: serializers.publish_run(run))


def tool_calls_close_open(conversation: Conversation, runs: list[Run], why: str) -> None:
    """Answer every call of the history that has no result as not run, and mark its rows: the tool call
    rejected, a pending approval expired, an approved one kept as decided but marked not run. Call holding
    the runs' and the conversation's locks: no worker can add a result meanwhile."""
    messages = list(conversation.messages.filter(role__in=("assistant", "tool")).order_by("seq").only(
        "role", "tool_calls", "tool_call_id", "run_id"))
    answered = {m.tool_call_id for m in messages if m.role == "tool"}
    open_calls = [(m.run_id, c["id"]) for m in messages if m.role == "assistant" for c in m.tool_calls or []
                  if c.get("id") and c["id"] not in answered]
    if not open_calls:
        return
    by_pk, now, result = {r.pk: r for r in runs}, timezone.now(), f"ERROR: not run: {why}"
    for run_id, call_id in open_calls:
        message_append(conversation=conversation, author=Message.TOOL, run=by_pk.get(run_id),
                       wire={"role": "tool", "tool_call_id": call_id, "content": result})
    calls = ToolCall.objects.filter(run__conversation=conversation, call_id__in=[c for _, c in open_calls])
    approvals = Approval.objects.filter(tool_call__in=calls)
    changed = list(approvals.filter(Q(decided_at__isnull=True) | Q(decision=Approval.APPROVED, not_run_reason=""))
                   .values_list("pk", flat=True))
    approvals.filter(decided_at__isnull=True).update(decided_at=now, decision=Approval.EXPIRED, reason=why,
                                                     not_run_reason=why)
    approvals.filter(decision=Approval.APPROVED, not_run_reason="").update(not_run_reason=why)
    calls.exclude(status__in=(ToolCall.EXECUTED, ToolCall.FAILED, ToolCall.REJECTED)).update(
        status=ToolCall.REJECTED, result=result, updated_at=now)
    for pk in changed:
        transaction.on_commit(lambda pk=pk: serializers.publish_approval(Approval.objects.get(pk=pk)))


class NotTakenOver(Exception):
    pass


def conversation_staff_reply(*, conversation: Conversation, user, text) -> Message:
    """A staff member's reply, shown to the customer live and read by the agent if it is handed back."""
    text = message_clean(text)
    with transaction.atomic():
        current = Conversation.objects.select_for_update().get(pk=conversation.pk)
        if current.status != Conversation.TAKEN_OVER:
            raise NotTakenOver("Take the conversation over before replying.")
        return message_append(conversation=conversation, wire={"role": "assistant", "content": text},
                              author=Message.STAFF, user=user)


def joined_notice(user, *, conversation: Conversation | None = None) -> str:
    """What the customer (and the model) read when a staff member takes the conversation over, in the
    conversation's language."""
    name = serializers.staff_name(user)
    if not name:
        return languages.say(conversation, _("A member of our team has joined the conversation."))
    return languages.say(conversation, _("%(name)s from our team has joined the conversation."), name=name)


def handed_back_notice(user, *, joined: bool = True, conversation: Conversation | None = None) -> str:
    """What the customer (and the model) read on hand-back. The model reads it as its own words, so it also
    tells the model that a person took care of everything above: only what the customer writes after it
    is the agent's to answer (a "Thanks Sam" before it was meant for the person). joined=False: nobody had
    joined (a conversation waiting for a person, handed back from the queue)."""
    if not joined:
        return languages.say(conversation, _("Our assistant is back on this conversation and will answer "
                                             "anything new you write here."))
    name = serializers.staff_name(user)
    if not name:
        return languages.say(conversation, _("A member of our team took care of the conversation above and has "
                                             "handed it back to our assistant, which will answer anything new "
                                             "you write here."))
    return languages.say(conversation, _("%(name)s from our team took care of the conversation above and has "
                                         "handed it back to our assistant, which will answer anything new you "
                                         "write here."), name=name)


def conversation_hand_back(*, conversation: Conversation, user) -> Run | None:
    """The agent answers again. Calls still without a result (a run that stalled inside a tool) are answered
    as not run first: a person had the conversation, so nothing asked for before it runs now.

    From a person who had joined (taken over): one notice, and no run: what the customer wrote to the person
    was for the person, so the agent starts when the customer next writes. From the queue (nobody joined):
    the customer's unanswered message is the agent's to answer, so a run starts for it; with nothing
    unanswered, one notice says the assistant is back."""
    def hand_back(runs: list[Run]) -> Run | None:
        was = Conversation.objects.filter(pk=conversation.pk).values_list("status", flat=True).get()  # locked
        if not Conversation.objects.filter(pk=conversation.pk).exclude(status=Conversation.OPEN).update(
                status=Conversation.OPEN, assignee=None, attention_reason="", updated_at=timezone.now()):
            return None
        conversation.refresh_from_db()
        if not any(run.status in Run.ACTIVE for run in runs):  # an active run answers its own calls
            tool_calls_close_open(conversation, runs, HANDED_BACK)
        last = conversation.messages.exclude(role__in=("tool", "system")).order_by("-seq").first()
        run = None
        if was != Conversation.TAKEN_OVER and last is not None and last.role == "user":
            run = run_start_if_idle(conversation_id=conversation.pk)
        else:
            message_append(conversation=conversation, author=Message.SYSTEM, user=user,
                           wire={"role": "assistant",
                                 "content": handed_back_notice(user, joined=was == Conversation.TAKEN_OVER,
                                                               conversation=conversation)})
        transaction.on_commit(lambda: serializers.publish_conversation(conversation, "conversation.assigned"))
        return run

    return _with_runs_then_conversation(conversation, hand_back)
