"""Writes: conversations, messages and runs (decisions on approvals: gate.py; take-over: takeover.py). Every rule
about who may change what lives here."""

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
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal, InvalidOperation

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from support import profiles
from support.customers import attachments, cleaning, languages, notify, words
from support.desk import assistant, notices, queue, routing, serializers
from support.models import Conversation, Customer, Message, Run
from support.ops import limits

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


class BeingSetUp(Exception):
    """A shop's own desk with no agent profile published yet: no customer message is taken from the widget."""

    code = "being_set_up"

    def __init__(self):
        super().__init__("Support is being set up and can't take messages yet. Please come back a little later.")


def setup_check() -> None:
    """BeingSetUp until the desk has gone live (profiles.being_set_up): checked by every way a customer's
    message reaches a run from the widget, in server code, so a client that ignores the widget's face is
    refused too."""
    if profiles.being_set_up():
        raise BeingSetUp()


class AlreadyDecided(Exception):
    pass


class InvalidArguments(ValueError):
    pass


class LeaseLost(Exception):
    """This worker's claim on the run was taken over (it was presumed dead): it must stop writing."""


# -- conversations and messages ---------------------------------------------------------------------

def conversation_start(*, customer: Customer) -> Conversation:
    """A new conversation, opened with the agent's system prompt (dated today, fixed for its life)."""
    with transaction.atomic(savepoint=False):  # all or nothing with the caller's: no savepoint of its own
        # Its first seq is known: the row is new, so no append can come between (message_append's UPDATE).
        conversation = Conversation.objects.create(customer=customer, last_seq=1)
        prompt = Message.objects.create(conversation=conversation, seq=1, role="system", author=Message.SYSTEM,
                                        content=assistant.system_prompt())
        transaction.on_commit(lambda: serializers.publish_message(prompt))
        transaction.on_commit(lambda: serializers.publish_conversation(conversation))
    return conversation


def conversation_open(*, customer: Customer, order_number: str | None = None) -> Conversation:
    """A new conversation; opened with an order number, it sees that order only (support/tools/common.py)."""
    with transaction.atomic():  # the scope is set before the token that opens it exists
        conversation = conversation_start(customer=customer)
        if order_number:
            Conversation.objects.filter(pk=conversation.pk).update(order_scope=order_number)
            conversation.order_scope = order_number
    return conversation


@dataclass(frozen=True)
class Opening:
    """Who opens a conversation and how the widget found them: the order the sign-in proved (None: every
    order), the customer's language code and time zone when the browser said them."""
    customer: Customer
    order_number: str | None = None
    language: str | None = None
    time_zone: str | None = None


def conversation_open_with_message(*, opening: Opening, text, client_id: str | None = None,
                                   client_address: str | None = None):
    """A new conversation and the customer's first message, saved together, the run started as any message
    starts one. Returns (conversation, message, run, created).

    A retry with the same client_id (the answer was lost after we saved) finds the conversation that
    message opened: the same conversation, the message saved once, nothing counted again. Nothing is saved
    when the message is refused (its words, its size, a rate limit): no empty conversation is left behind.
    """
    setup_check()
    text = message_clean(text)
    client_id = _client_id(client_id)
    customer, scope = opening.customer, opening.order_number or ""
    if client_id is not None and (found := _opened_by(customer.pk, scope, client_id)) is not None:
        return found.conversation, found, active_run(found.conversation), False
    conversation_rate_check(customer_id=customer.pk, client_address=client_address or "")
    with transaction.atomic():
        # Two copies of one request at once take turns on the customer's row (SQLite: the whole database);
        # the second finds the first's message and answers with it.
        Customer.objects.select_for_update().filter(pk=customer.pk).first()
        if client_id is not None and (found := _opened_by(customer.pk, scope, client_id)) is not None:
            return found.conversation, found, active_run(found.conversation), False
        conversation = conversation_open(customer=customer, order_number=opening.order_number)
        if opening.language:
            Conversation.objects.filter(pk=conversation.pk).update(language=opening.language)
            conversation.language = opening.language
        if opening.time_zone:
            notify.set_time_zone(conversation, opening.time_zone)
        message_rate_check(conversation=conversation, client_address=client_address)  # RateLimited: rolled back
        message = message_append(conversation=conversation, wire={"role": "user", "content": text},
                                 author=Message.CUSTOMER, client_id=client_id)
        run = run_start_if_idle(conversation_id=conversation.pk, current=conversation)
    return conversation, message, run, True


def _client_id(client_id) -> str | None:
    if client_id is None:
        return None
    cleaned = cleaning.client_id_or_none(client_id)
    if cleaned is None:
        raise InvalidMessage("client_id must be 1 to 64 letters, digits or . _ : -", code="invalid_client_id")
    return cleaned


def _opened_by(customer_id: int, scope: str, client_id: str) -> Message | None:
    """The customer's message with this client_id in a conversation of the same order scope, if any."""
    return (Message.objects.select_related("conversation")
            .filter(conversation__customer_id=customer_id, conversation__order_scope=scope,
                    author=Message.CUSTOMER, client_id=client_id).order_by("pk").first())


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
                   lease: str | None = None, user=None, client_id: str | None = None,
                   channel: str = Message.WIDGET) -> Message:
    """Save one message with the conversation's next seq; publish it after commit.

    With a lease, the write happens only while that claim on the run is still current, so a worker
    presumed dead cannot add to a conversation another worker has resumed.
    """
    # Inside a caller's transaction no savepoint is needed: any failure here fails the caller's block too.
    with transaction.atomic(savepoint=False):
        now = timezone.now()
        if lease is not None:
            lease_check(run, lease)
        # The customer's words end whatever the case waited for (waiting.py): cleared by the seq's own UPDATE.
        seq = next_seq(conversation, now, wait_ends=author == Message.CUSTOMER)
        message = Message.objects.create(
            conversation=conversation, seq=seq, role=wire["role"], author=author, author_user=user,
            content=wire.get("content"), tool_calls=wire.get("tool_calls") or None,
            tool_call_id=wire.get("tool_call_id", ""), run=run, client_id=client_id, channel=channel,
        )
        if author in notify.REPLY_AUTHORS and wire["role"] == "assistant" and wire.get("content"):
            reply_email_after_commit(conversation.pk)
        transaction.on_commit(lambda: serializers.publish_message(message))
    return message


def reply_email_after_commit(conversation_pk: int) -> None:
    """An answer was saved: when the customer wrote by e-mail, it goes to them once this commits, not after
    the widget's wait (support/customers/notify.py)."""
    if notify.by_email(conversation_pk):
        transaction.on_commit(lambda: _reply_email(conversation_pk))


def _reply_email(conversation_pk: int) -> None:
    """Never raises: the answer is saved, and the beat e-mails it if the broker lost this."""
    try:
        queue.reply_email(conversation_pk)
    except Exception:
        log.warning("conversation id %s: its reply e-mail not queued; the beat sends it", conversation_pk,
                    exc_info=True)


def lease_check(run: Run, lease: str) -> None:
    """LeaseLost unless `lease` is still the run's claim; marks the run alive. Inside a transaction the
    run's row stays locked until commit, so one check covers every write the transaction makes."""
    if not Run.objects.filter(pk=run.pk, lease=lease).update(heartbeat_at=timezone.now()):
        raise LeaseLost(f"run {run.public_id} was claimed by another worker")


def next_seq(conversation: Conversation, now, *, wait_ends: bool = False) -> int:
    """Hand out the conversation's next seq and refresh `conversation` with its current state.

    One conditional UPDATE both allocates the seq and serialises appends to the conversation (it holds the
    row lock until commit); RETURNING reads back the state with it. The caller's object may be old (a
    customer's websocket keeps the one it loaded on connect), and the message's events describe the
    conversation from it (publish_message's conversation.updated: a taken-over one is not "open").
    """
    table, pk = (connection.ops.quote_name(n) for n in (Conversation._meta.db_table, Conversation._meta.pk.column))
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET last_seq = last_seq + 1, updated_at = %s"
            + (", waiting_for = '', waiting_until = NULL" if wait_ends else "")
            + f" WHERE {pk} = %s RETURNING last_seq, status, assignee_id, attention_reason",
            [Conversation._meta.get_field("updated_at").get_db_prep_value(now, connection), conversation.pk])
        row = cursor.fetchone()
    if row is None:
        raise Conversation.DoesNotExist(f"conversation {conversation.pk} is gone")
    seq, conversation.status, conversation.assignee_id, conversation.attention_reason = row
    conversation.last_seq, conversation.updated_at = seq, now
    if wait_ends:
        conversation.waiting_for, conversation.waiting_until = "", None
    return seq


def conversation_post_message(*, conversation: Conversation, text, client_id: str | None = None,
                              client_address: str | None = None):
    """A customer's message: validated, rate-limited, saved once, then handed to a run.

    Returns (message, run, created). The run is the conversation's active one when there is one: a
    working run sees the message at its next model call, a paused run when it resumes.
    """
    setup_check()
    text = message_clean(text)
    client_id = _client_id(client_id)
    # A retried POST (the same client_id) is found by the unique constraint below, not by a read first; one
    # that comes at the limit still gets its message.
    try:
        counted = message_rate_check(conversation=conversation, client_address=client_address)
    except RateLimited:
        existing = conversation.messages.filter(client_id=client_id).first() if client_id is not None else None
        if existing is None:
            raise
        return existing, active_run(conversation), False
    try:
        with transaction.atomic():
            message = message_append(conversation=conversation, wire={"role": "user", "content": text},
                                     author=Message.CUSTOMER, client_id=client_id)
            attachments.none_yet(message)  # words only: its events read no files
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
            # With the conversation object, so announcing the run reads nothing more.
            # With the live profile version's id: the run works with it even if another goes live meanwhile.
            run = Run.objects.create(conversation=conversation, heartbeat_at=timezone.now(),
                                     profile_version=profiles.live_version())
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
            queue.run_agent(run.pk, run=str(run.public_id), conversation=str(run.conversation.public_id))
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

    # "queued" is handed to the publisher before the task to the broker, so it is on its way before the
    # worker can send "running" (the UIs also ignore a late "queued" for a run they saw stopped).
    transaction.on_commit(publish)
    transaction.on_commit(send)


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
        limits.warn_unavailable("message limits counted from the database and per process", error)
    # Without Redis: the conversation's and the customer's limits from the database (a race can pass them:
    # the fallback, not the rule), the address's in this process.
    window = timezone.now() - timedelta(seconds=60)
    recent = Message.objects.filter(author=Message.CUSTOMER, created_at__gte=window)
    if recent.filter(conversation=conversation).count() >= settings.MESSAGES_PER_MINUTE \
            or recent.filter(conversation__customer_id=conversation.customer_id).count() \
            >= settings.CUSTOMER_MESSAGES_PER_MINUTE:
        raise RateLimited(retry_after=60)
    if client_address:
        try:
            limits.process_windows.hit(limits.messages_from(client_address))
        except limits.Limited as over:
            raise RateLimited(retry_after=over.retry_after) from None
    return ()


def conversation_rate_check(*, customer_id: int, client_address: str) -> None:
    """Count one new conversation against the customer's and the address's hourly limits, or
    limits.Limited. Without Redis the customer's limit is counted from the database and the address's in
    this process: a new conversation is where a flood of runs would start."""
    checked = (limits.conversations_from(client_address), limits.conversations_of_customer(customer_id))
    try:
        limits.hit(*checked)
        return
    except limits.Unavailable as error:
        limits.warn_unavailable("new conversations counted from the database and per process", error)
    since = timezone.now() - timedelta(hours=1)
    if Conversation.objects.filter(customer_id=customer_id, created_at__gte=since).count() \
            >= settings.CUSTOMER_CONVERSATIONS_PER_HOUR:
        raise limits.Limited(retry_after=60)
    limits.process_windows.hit(checked[0])


def conversations_empty_delete(*, now=None) -> int:
    """Delete conversations nobody wrote in (only the system prompt) that are older than EMPTY_CONVERSATION_HOURS:
    an API client's chat opened and never used. Hourly on the beat (support.tasks.delete_empty_conversations).
    Each is deleted only if it is still empty at that moment, so a message arriving meanwhile keeps it."""
    before = (now or timezone.now()) - timedelta(hours=settings.EMPTY_CONVERSATION_HOURS)
    written = Message.objects.filter(conversation=OuterRef("pk")).exclude(role="system")
    deleted = 0
    for pk in Conversation.objects.filter(created_at__lt=before, updated_at__lt=before).filter(~Exists(written)) \
            .values_list("pk", flat=True)[:1000]:
        with transaction.atomic():
            # Under the conversation's row lock (the lock every append takes first): still empty, then gone.
            if Conversation.objects.select_for_update().filter(pk=pk, updated_at__lt=before).filter(
                    ~Exists(written)).exists():
                Conversation.objects.filter(pk=pk).delete()
                deleted += 1
    return deleted


def conversation_flag(*, conversation_id: int, reason: str) -> None:
    """Hand the conversation to a person, and into an online team member's queue (routing.py); flagged again
    while it still waits, it stays in the queue it is in."""
    was = Conversation.objects.filter(pk=conversation_id).values_list("status", flat=True).first()
    Conversation.objects.filter(pk=conversation_id).update(
        status=Conversation.NEEDS_ATTENTION, attention_reason=reason[:300], updated_at=timezone.now())
    routing.conversation_route(conversation_id=conversation_id, keep=was == Conversation.NEEDS_ATTENTION)
    transaction.on_commit(lambda: serializers.publish_conversation(Conversation.objects.get(pk=conversation_id)))


def refund_auto_approvable(arguments: dict) -> bool:
    """The per-tool policy: refunds up to AUTO_APPROVE_REFUNDS_UP_TO (or the live profile's lower limit) run
    without a person (0: never)."""
    limit = profiles.effective_limits().auto_approve_up_to
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
