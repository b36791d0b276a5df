"""Claim a run, drive the loop on the saved history, persist every message and step as it happens, publish.

A run holds nothing between tasks: pausing for approval ends the task, and any task (a resume, the
sweeper's retry after a crash, a late duplicate) starts again from the database.
"""

from __future__ import annotations

import logging
import sys
import time
import uuid
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from decimal import Decimal
from functools import partial

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, connections, transaction
from django.utils import timezone

from support import profiles
from support.agent import types as agent
from support.agent.loop import run_loop
from support.agent.summary import handoff_reason, handoff_summary
from support.agent.tools import Tool, ToolContext
from support.customers import attachments, languages
from support.desk import assistant, journal, notices, routing, rows, run_start, serializers, services, takeover
from support.desk import waiting as waits
from support.models import Approval, Conversation, Message, Run, Step, ToolCall
from support.ops import metrics, tracing
from support.tools import mcp, tool_by_name

log = logging.getLogger(__name__)

class TakenOver(Exception):
    """A staff member took the conversation over: the agent stops before its next model call."""


def history_for_model(messages, *, images: bool = False, notes: bool = False) -> tuple[list[dict], list[dict]]:
    """The saved messages in the order the model must read them, and those held back.

    A customer may write while tool calls are open (running, or waiting for approval); their message is
    saved with the next seq, but the model must see each call's results right after the call. Such
    messages are held back until the open calls are answered.

    A customer's photos and PDFs are saved beside their message, not in it: here each message with files
    gets a note per file and, with images=True (the run's model call: MODEL_ACCEPTS_IMAGES), its photos as
    image parts. Summaries and hand-over reasons read the notes only. What staff wrote or did is marked
    (agent.AUTHOR = agent.STAFF, a note of the desk's that is never sent) so that compaction keeps it.
    With notes=True (the run's model call), each earlier run's note goes back before the reply it was read
    with, byte for byte (Message.note): the request repeats the previous ones as a prefix.
    """
    out, held, open_ids = [], [], set()
    with_files = attachments.model_wires(messages, images=images)
    for m in messages:
        if m.role == "assistant" and not m.tool_calls and not (m.content or "").strip():
            continue  # an empty reply saved by an older version: servers refuse it in every later request
        wire = with_files.get(m.pk) or m.wire()
        if _by_staff(m):
            wire = {**wire, agent.AUTHOR: agent.STAFF}
        if m.role == "tool":
            if wire["tool_call_id"] in open_ids:
                out.append(wire)
                open_ids.discard(wire["tool_call_id"])
                if not open_ids:
                    out.extend(held)
                    held = []
            continue
        said = [*assistant.note_messages(m.note), wire] if notes and m.note else [wire]
        if open_ids:
            held.extend(said)
            continue
        out.extend(said)
        if m.role == "assistant" and m.tool_calls:
            open_ids = {c["id"] for c in m.tool_calls}
    return out, held


def _by_staff(message: Message) -> bool:
    """A message a person wrote or caused (a reply; a notice of a refund, a take-over or a closing): kept
    word for word when a long history is compacted."""
    return message.role == "assistant" and (message.author == Message.STAFF or (
        message.author == Message.SYSTEM and message.author_user_id is not None))


class DbObserver(agent.Observer):
    """The loop's hooks, backed by the database and the channel layer, fenced by the run's lease.

    What one step of the loop appends (a reply and its trace row; a tool's result, its trace row and its
    call's record) is collected in a unit and written at once by support/desk/journal.py, which checks the
    lease in the same statement: on PostgreSQL a read-only tool's whole step is one round trip.
    """

    # How old the conversation's state returned by our own last append may be for incoming() to use it
    # instead of asking again: our appends hand out seqs, so a seq we did not expect, or a take-over, is in
    # what they return. Between the last tool result and the next model call there is no wait.
    STATE_FRESH_SECONDS = 0.05

    def __init__(self, run: Run, conversation: Conversation, lease: str, held: list[dict], last_seq: int,
                 messages: list[Message] = ()):
        self.run, self.conversation, self.lease = run, conversation, lease
        self.held, self.last_seq = held, last_seq
        # Read from the messages the run started from, kept up to date as it goes (no query at its end): how the
        # customer last wrote (by e-mail: the answer is e-mailed at once), and the tools this run called.
        self.customer_channel = next((m.channel for m in reversed(messages) if m.author == Message.CUSTOMER), "")
        self.tools_called = {c.get("function", {}).get("name") for m in messages if m.run_id == run.pk
                             for c in m.tool_calls or []}
        # The newest customer message this run has read; separate from last_seq, which our own appends move.
        self.user_cursor = last_seq
        # Someone else wrote since we last looked (one of our appends skipped a seq): read before the next call.
        self.unread = False
        self.auto_approved: dict[str, str] = {}
        self._beat = time.monotonic()
        self._unit: journal.Unit | None = None
        self._transaction: ExitStack | None = None  # opened by a nested atomic(): a tool that may write
        self._state_at: float | None = None  # when our last append read the conversation's state
        # The flag standing as the run was claimed (no query): one a step raises later differs from it.
        self.flag_at_start = conversation.attention_reason if conversation.status == Conversation.NEEDS_ATTENTION else ""

    # units and transactions
    @contextmanager
    def atomic(self, savepoint: bool = True):
        """The outermost block is a unit: its messages and trace rows are written together when it ends. A
        nested block is for a tool that may write: it opens the database transaction the unit then commits
        in (its effects with their result), and a savepoint of its own so a failing tool undoes only itself."""
        if self._unit is not None:
            if self._transaction is None:
                self._transaction = ExitStack()
                self._transaction.enter_context(transaction.atomic())
            with transaction.atomic(savepoint=savepoint):
                yield
            return
        self._unit, self._transaction = journal.Unit(), None
        try:
            yield
            self._write(self._unit)
        except BaseException:
            if self._transaction is not None:
                self._transaction.__exit__(*sys.exc_info())  # rolls back; the error goes on below
            raise
        else:
            if self._transaction is not None:
                self._transaction.close()  # commits; the unit's events go out
        finally:
            self._unit = self._transaction = None

    @contextmanager
    def _in_unit(self):
        if self._unit is not None:
            yield self._unit
        else:
            with self.atomic():
                yield self._unit

    def _write(self, unit: journal.Unit) -> None:
        if not unit:
            return
        beat = time.monotonic() - self._beat >= settings.RUN_HEARTBEAT_SECONDS
        journal.write(unit, run=self.run, lease=self.lease, conversation=self.conversation, beat=beat)
        if beat:
            self._beat = time.monotonic()
        for row in unit.messages:
            if row.seq != self.last_seq + 1:
                self.unread = True
            self.last_seq = row.seq
            transaction.on_commit(partial(serializers.publish_message, row))
        if unit.messages:
            self.state_read()
        for call in unit.tool_calls:
            if call.call_id in self.auto_approved:  # the policy let it through: keep the decision on record
                Approval.objects.get_or_create(tool_call=call, defaults={
                    "run": self.run, "requested_arguments": call.arguments, "executed_arguments": call.arguments,
                    "decided_at": timezone.now(), "decision": Approval.APPROVED,
                    "reason": self.auto_approved[call.call_id]})
        for row in unit.steps:
            transaction.on_commit(partial(serializers.publish_step, row, started=False))

    def state_read(self) -> None:
        """The conversation's state (status, last seq) was read just now, past the lease: incoming() may use it."""
        self._state_at = time.monotonic()

    # messages
    def message(self, message: dict) -> None:
        author = Message.AGENT if message["role"] == "assistant" else Message.TOOL
        row = Message(conversation=self.conversation, role=message["role"], author=author, run=self.run,
                      content=message.get("content"), tool_calls=message.get("tool_calls") or None,
                      tool_call_id=message.get("tool_call_id", ""), note=message.get(agent.NOTED))
        with self._in_unit() as unit:
            unit.messages.append(row)

    def incoming(self) -> list[dict]:
        fresh_state = self._state_at is not None and time.monotonic() - self._state_at < self.STATE_FRESH_SECONDS
        if fresh_state:  # our last append, just now, passed the lease check and read the conversation
            status, last_seq = self.conversation.status, self.conversation.last_seq
        else:
            # A take-over stops the run and clears its lease: end here rather than pay for another model call.
            lease, status, last_seq = Run.objects.filter(pk=self.run.pk).values_list(
                "lease", "conversation__status", "conversation__last_seq").get()
            if lease != self.lease and status != Conversation.TAKEN_OVER:
                raise _lease_lost(self.run)
        self._state_at = None
        if status == Conversation.TAKEN_OVER:
            raise TakenOver()
        fresh = []
        if self.unread or last_seq > self.last_seq:
            fresh = list(self.conversation.messages.filter(seq__gt=self.user_cursor, role="user").order_by("seq"))
            self.unread = False
        if fresh:
            self.user_cursor = fresh[-1].seq
            self.customer_channel = fresh[-1].channel if fresh[-1].author == Message.CUSTOMER else self.customer_channel
        with_files = attachments.model_wires(fresh, images=settings.MODEL_ACCEPTS_IMAGES)
        out, self.held = self.held + [with_files.get(m.pk) or m.wire() for m in fresh], []
        return out

    # the trace
    def step_started(self, step: agent.Step) -> None:
        metrics.step_started(self, step)
        tracing.step_started(self, step)
        if step.kind == "model":
            _give_back_connection()  # the model call takes ~all of a run's time and needs no database
        if step.kind == "tool":
            if not step.read_only:
                _tool_call_started(self.run, self.lease, step)  # counted before an effect runs, crash or not
            _fault_pause(settings.FAULT_PAUSE_BEFORE_TOOL, step.tool)
        serializers.publish_step(Step(run=self.run, kind=step.kind, turn=step.turn, label=step.label,
                                      tool=step.tool), started=True)

    def step(self, step: agent.Step) -> None:
        # In the unit's write, behind the lease: a worker presumed dead while it waited on the model adds
        # nothing to the trace when its reply finally arrives.
        row = Step(run=self.run, kind=step.kind, turn=step.turn, label=step.label[:80], model=step.model[:120],
                   tool=step.tool[:64], call_id=step.call_id[:128], arguments=step.arguments[:4000],
                   result=step.result, error=step.error, finish_reason=(step.finish_reason or "")[:20],
                   attempts=step.attempts, prompt_tokens=step.prompt_tokens, completion_tokens=step.completion_tokens,
                   cached_tokens=step.cached_tokens, cost_usd=step.cost_usd, duration_ms=step.duration_ms)
        if step.kind == "tool":
            self.tools_called.add(step.tool)
        with self._in_unit() as unit:
            unit.steps.append(row)
            if step.kind == "model":
                unit.turns += 1
                unit.prompt_tokens += step.prompt_tokens
                unit.completion_tokens += step.completion_tokens
                unit.cost_usd += Decimal(str(step.cost_usd))
            elif step.kind == "tool" and step.call_id:
                unit.tool_calls.append(self._tool_call(step))
        tool = tool_by_name(step.tool) if step.kind == "tool" else None
        server = mcp.server_of(step.tool) or "desk"
        metrics.step_recorded(step, self.run, known_tool=tool is not None, server=server)
        tracing.step_recorded(self, step, gated=bool(tool and tool.gated), server=server)

    def _tool_call(self, step: agent.Step) -> ToolCall:
        """The call's record: inserted (a read-only tool, or a call answered without running: unknown tool,
        bad arguments, a repeat), or its status and result updated (the row _tool_call_started made)."""
        status = ToolCall.FAILED if step.error else ToolCall.EXECUTED
        if step.error == "rejected by staff":
            status = ToolCall.REJECTED
        return ToolCall(run=self.run, call_id=step.call_id, name=step.tool[:64], status=status, result=step.result,
                        arguments=_json_or_raw(step.arguments), attempts=int(step.read_only),
                        idempotency_key=f"{self.run.public_id}:{step.call_id}")

    def parallel(self, thunks: list) -> list:
        # Each read runs in a pool thread with a database connection of its own (Django's are per
        # thread): closed when the read is done, so no connection outlives the thread's work. This thread
        # gives its own back first: with a pool, runs holding theirs while waiting for their readers'
        # could take every connection.
        _give_back_connection()
        def own_connection(thunk):
            def read():
                try:
                    return thunk()
                finally:
                    connections.close_all()
            return read

        return super().parallel([own_connection(t) for t in thunks])

    # liveness
    def heartbeat(self) -> None:
        if time.monotonic() - self._beat >= settings.RUN_HEARTBEAT_SECONDS:
            services.lease_check(self.run, self.lease)
            self._beat = time.monotonic()
            _give_back_connection()  # mid-stream: the rest of the reply needs no database

    def needs_person(self, reason: str) -> None:
        # Once: a conversation already flagged for this very reason, or one a person has taken, is left as it is.
        status, line = Conversation.objects.filter(pk=self.conversation.pk).values_list(
            "status", "attention_reason").get()
        if status == Conversation.TAKEN_OVER or (status == Conversation.NEEDS_ATTENTION and reason in line):
            return
        services.conversation_flag(conversation_id=self.conversation.pk, reason=reason)

    def token(self, delta: str) -> None:
        metrics.token_streamed(self)
        tracing.token(self)
        serializers.publish_token(self.conversation, self.run, self.last_seq, delta)
        self.heartbeat()

    def tokens_reset(self) -> None:
        serializers.publish_token(self.conversation, self.run, self.last_seq, "")


def _tool_call_started(run: Run, lease: str, step: agent.Step) -> None:
    """The call is about to run: its row is created, or (run again after a crash) its attempts counted.

    One INSERT ... ON CONFLICT statement, committed on its own before the tool runs, so the count survives
    a crash inside the tool's transaction; it writes only while `lease` is the run's claim.
    """
    now = timezone.now()
    values = {"run_id": run.pk, "call_id": step.call_id, "name": step.tool[:64], "arguments": _json_or_raw(step.arguments),
              "status": ToolCall.RUNNING, "idempotency_key": f"{run.public_id}:{step.call_id}", "attempts": 1,
              "result": "", "created_at": now, "updated_at": now}
    meta, quote = ToolCall._meta, connection.ops.quote_name
    fields = [meta.get_field(name) for name in values]
    table, run_col, call_col = quote(meta.db_table), quote(meta.get_field("run").column), quote(meta.get_field("call_id").column)
    columns = ", ".join(quote(f.column) for f in fields)
    status, attempts, updated = (quote(meta.get_field(n).column) for n in ("status", "attempts", "updated_at"))
    runs, run_pk, run_lease = (quote(n) for n in (Run._meta.db_table, Run._meta.pk.column,
                                                   Run._meta.get_field("lease").column))
    # FOR SHARE: a take-over committing at this instant is waited for and its cleared lease seen, instead
    # of the statement's starting snapshot (which would leave the row "running" for a call answered not run).
    share = " FOR SHARE" if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} ({columns}) SELECT {', '.join(['%s'] * len(fields))} "
            f"WHERE EXISTS (SELECT 1 FROM {runs} WHERE {run_pk} = %s AND {run_lease} = %s{share}) "
            f"ON CONFLICT ({run_col}, {call_col}) DO UPDATE SET {status} = excluded.{status}, "
            f"{attempts} = {table}.{attempts} + 1, {updated} = excluded.{updated}",
            [f.get_db_prep_save(values[f.attname if f.attname in values else f.name], connection) for f in fields]
            + [run.pk, lease])
        if cursor.rowcount == 0:
            raise services.LeaseLost(f"run {run.public_id} was claimed by another worker")


def _json_or_raw(arguments: str):
    import json

    try:
        value = json.loads(arguments or "{}")
        return value if isinstance(value, dict) else {"_raw": arguments}
    except ValueError:
        return {"_raw": arguments}


def _fault_pause(setting: str, tool_name: str) -> None:
    name, _, seconds = setting.partition(":")
    if name and name == tool_name:
        time.sleep(float(seconds or 5))


def _with_fault_pause(tools: list[Tool]) -> list[Tool]:
    """Recovery tests kill the worker at chosen points (off, empty, by default):
    FAULT_PAUSE_BEFORE_TOOL="name:seconds" waits before the tool runs, outside any transaction;
    FAULT_PAUSE_AFTER_TOOL waits after its effect, inside the transaction its result commits with."""
    name, _, seconds = settings.FAULT_PAUSE_AFTER_TOOL.partition(":")
    if not name:
        return tools

    def paused(fn):
        def run(ctx, **arguments):
            value = fn(ctx, **arguments)
            time.sleep(float(seconds or 5))
            return value
        return run

    return [replace(t, fn=paused(t.fn)) if t.name == name else t for t in tools]


def run_execute(run_id: int) -> str:
    """Claim the run if it is queued, work it until it stops or pauses. Returns what happened, for logs."""
    lease = uuid.uuid4().hex
    if not _claim(run_id, lease):
        return "not claimed"  # a duplicate or late task: someone else has it, or it is over
    run = run_start.run_read(run_id)
    with tracing.run_span(run), profiles.read_once():  # the live limits read once per run; the next run rereads
        return _execute(run, lease)


def _claim(run_id: int, lease: str) -> bool:
    """The run is ours if it is still queued: one conditional UPDATE (written out, as the run's end is: the
    ORM's would build the same statement each time)."""
    meta = Run._meta
    col = {name: rows.q(meta.get_field(name).column) for name in ("status", "lease", "attempts", "heartbeat_at")}
    now = meta.get_field("heartbeat_at").get_db_prep_save(timezone.now(), connection)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {rows.q(meta.db_table)} SET {col['status']} = %s, {col['lease']} = %s, "
                       f"{col['attempts']} = {col['attempts']} + 1, {col['heartbeat_at']} = %s "
                       f"WHERE {rows.q(meta.pk.column)} = %s AND {col['status']} = %s",
                       [Run.RUNNING, lease, now, run_id, Run.QUEUED])
        return cursor.rowcount == 1


def _execute(run: Run, lease: str) -> str:
    try:
        return _work(run, lease)
    except TakenOver:
        _stop_taken_over(run, lease)
        return agent.TAKEN_OVER
    except services.LeaseLost:
        if isinstance(_lease_lost(run), TakenOver):  # the lease went with a take-over: nothing is wrong
            log.info("run %s: taken over by staff; the worker stops", run.public_id)
            return agent.TAKEN_OVER
        log.warning("run %s: lease lost; another worker carries on", run.public_id)
        return "lease lost"
    except Exception as e:  # our own failure: never leave the run "running" until the sweeper notices
        log.exception("run %s (conversation %s) failed unexpectedly", run.public_id, run.conversation.public_id)
        return _recover_from_error(run, lease, e)


def _work(run: Run, lease: str) -> str:
    conversation = run.conversation
    serializers.publish_run(run)
    problem = assistant.model_price_problem()
    if problem:  # refused before any spending: a cost cap that cannot count is no cap
        log.error("run %s not started: %s", run.public_id, problem)
        return _stop_with(run, lease, agent.MODEL_ERROR, problem)
    messages = attachments.messages_with_files(conversation)
    # The version live when the run was queued, read with the run.
    profile = profiles.version_profile(run.profile_version_id, version=run.profile_version)
    history, held = history_for_model(messages, images=settings.MODEL_ACCEPTS_IMAGES, notes=True)
    history = assistant.with_profile(history, conversation, profile)  # its prompt and the shop's rules
    history = languages.with_model_line(history, conversation)  # the customer's language, told each run
    observer = DbObserver(run, conversation, lease, held, messages[-1].seq if messages else 0, messages)
    observer.state_read()  # the conversation was read with the run, after the claim: the first call reads it not again
    # their local time and the orders the desk knows go after the history (what changed since the last note),
    # so all before is a cached prefix
    note, facts = assistant.run_context(conversation, told=assistant.last_note(messages))
    transcript = agent.Transcript(history, context=note, context_facts=facts,
                                  cache_key=assistant.cache_key(conversation))
    options = dict(
        model=assistant.shared_model(), tools=_with_fault_pause(assistant.tools(profile)),
        limits=assistant.limits(profile),
        observer=observer,
        ctx=ToolContext(customer_id=conversation.customer_id, conversation_id=str(conversation.public_id),
                        run_id=str(run.public_id)),
        needs_approval=_approval_policy(observer),
    )
    # Read even for a run that has not called the model: it can start with another run's open calls
    # (a hand-back after a take-over), pause on them and be decided before its first model call.
    decisions, rejected, waiting = run_start.decisions_and_rejections(run, conversation)
    spent = run.spent()
    options.update(rejected=rejected, day_before=run_start.spent_today(run),
                   waiting=run_start.approvals_waiting(waiting, history))
    while True:
        result = run_loop(transcript, spent=spent, decisions=decisions, **options)
        if _finish(run, conversation, lease, observer, result):
            return result.stop_reason or result.status
        spent, decisions = result.spent, {}  # the customer wrote again as it answered: go on


TRANSIENT_ERRORS = (OperationalError, InterfaceError)  # the database went away or is busy: worth another try


def _recover_from_error(run: Run, lease: str, error: Exception) -> str:
    """A transient database failure requeues the run at once (within its attempts); anything else stops
    it as internal_error and hands it to a person. If even that cannot be written, the sweeper's
    heartbeat check requeues it later."""
    try:
        _fresh_connection()
        if isinstance(error, TRANSIENT_ERRORS) and run.attempts < settings.RUN_MAX_ATTEMPTS:
            with transaction.atomic():
                if Run.objects.filter(pk=run.pk, lease=lease).update(status=Run.QUEUED, lease="",
                                                                      heartbeat_at=timezone.now()):
                    services.run_enqueue(run)
            return "requeued"
        return _stop_with(run, lease, agent.INTERNAL_ERROR,
                          f"the run failed unexpectedly ({type(error).__name__}); see the worker's log")
    except Exception:
        log.exception("run %s: could not record the failure; the sweeper will pick it up", run.public_id)
        return "failed"


def _give_back_connection() -> None:
    """With a pool (settings.DB_POOL), return this thread's connection while the run waits on the network, so
    a run holds one only while it reads or writes. Never inside a transaction; per-thread connections stay."""
    if settings.DB_POOLED and connection.connection is not None and not connection.in_atomic_block:
        connection.close()


def _fresh_connection() -> None:
    """After a failure the connection may be unusable (a broken transaction, a dead server): start afresh."""
    if connection.connection is not None and (connection.needs_rollback or not connection.is_usable()):
        connection.close()


def _stop_with(run: Run, lease: str, reason: str, detail: str) -> str:
    """Stop the run now with `reason` (its lease still held), every open call answered as not run, and
    hand the conversation to a person with a notice for the customer."""
    conversation = run.conversation
    with transaction.atomic():
        messages = list(conversation.messages.order_by("seq"))
        history, _ = history_for_model(messages)
        if not Run.objects.filter(pk=run.pk, lease=lease).update(
                status=Run.STOPPED, stop_reason=reason, lease="", finished_at=timezone.now(), detail=detail[:2000],
                outcome=agent.HANDED_TO_PERSON, summary=handoff_summary(history, reason, detail)):
            return "lease lost"
        takeover.tool_calls_close_open(conversation, [run], "the run was stopped")
        services.message_append(conversation=conversation, author=Message.SYSTEM, run=run,
                                wire={"role": "assistant", "content": languages.say(conversation, notices.STOPPED)})
        services.conversation_flag(conversation_id=conversation.pk, reason=f"{reason}: {detail}")
        transaction.on_commit(lambda: serializers.publish_run(Run.objects.get(pk=run.pk)))
    return reason


def _approval_policy(observer: DbObserver):
    def needs_approval(tool: Tool, arguments: dict, call: agent.ToolCall) -> bool:
        if not tool.needs_approval(arguments):
            return False
        if tool.name == "issue_refund" and services.refund_auto_approvable(arguments):
            observer.auto_approved[call.id] = (
                f"auto-approved: refunds up to {profiles.effective_limits().auto_approve_up_to} need no person")
            return False
        return True

    return needs_approval


def _finish(run: Run, conversation: Conversation, lease: str, observer: DbObserver, result: agent.RunResult) -> bool:
    """Record how the loop ended. False when the customer wrote while it answered: the run goes on."""
    now = timezone.now()
    if _finish_answered_at_once(run, conversation, lease, observer, result, now):
        return True
    with transaction.atomic():
        # The run's row first, then the conversation's: the lock order of services.py, which every other
        # write of this worker follows too (the opposite could deadlock with a take-over or a decision).
        if not Run.objects.filter(pk=run.pk, lease=lease).update(heartbeat_at=now):
            raise _lease_lost(run)
        # Lock the conversation row (as a customer's append does) so a message cannot slip in between
        # "nothing new" and "stopped" and be left without a run.
        last_seq = _lock_conversation(conversation, now)
        if result.status == agent.STOPPED and result.stop_reason == agent.ANSWERED and (
                observer.unread or last_seq > observer.last_seq):  # else nothing was appended since our last
            if conversation.messages.filter(seq__gt=observer.user_cursor, role="user").exists():
                observer.unread = True  # the next model call reads it, whatever the seqs said
                return False
        fields = dict(outcome=result.outcome or "", outcome_summary=result.outcome_summary,
                      summary=result.summary, detail=result.detail[:2000], lease="")
        if result.stop_reason == agent.ANSWERED and result.outcome != agent.HANDED_TO_PERSON \
                and observer.tools_called.intersection(waits.WAIT_TOOLS) and (wait := waits.wait_of_run(run)) is not None:
            fields["outcome"] = agent.WAITING  # from the tool's deadline, whatever the model recorded
            waits.wait_start(conversation=conversation, wait=wait)
        if result.status == agent.AWAITING_APPROVAL:
            # A clean pause: attempts count the claims since, so a run that pauses often is not taken
            # for one whose worker keeps dying.
            fields.update(status=Run.AWAITING_APPROVAL, attempts=0)
        else:
            fields.update(status=Run.STOPPED, stop_reason=result.stop_reason, finished_at=now)
        Run.objects.filter(pk=run.pk, lease=lease).update(**fields)  # its lock is ours: the lease holds
        if result.stop_reason == agent.ANSWERED:  # the answer was saved by the journal, not message_append
            services.reply_email_after_commit(conversation.pk, by_email=observer.customer_channel == Message.EMAIL)
        if result.status == agent.AWAITING_APPROVAL:
            _request_approvals(run, result.pending, turn=result.spent.turns)
        elif result.stop_reason != agent.ANSWERED or result.outcome == agent.HANDED_TO_PERSON:
            notice = {agent.ESCALATED: notices.ESCALATED,
                      agent.TOOL_UNAVAILABLE: notices.SHOP_AWAY}.get(result.stop_reason, notices.STOPPED)
            notice = languages.say(conversation, notice)
            services.message_append(conversation=conversation, wire={"role": "assistant", "content": notice},
                                    author=Message.SYSTEM, run=run)
            # The queue's "why" line in plain words; the exact code and detail stay on the run.
            if result.stop_reason == agent.ANSWERED:
                why = f"The agent handed this over: {result.outcome_summary or 'it could not help further'}"[:300]
            else:
                history, _ = history_for_model(list(conversation.messages.order_by("seq")))
                why = handoff_reason(history, result.stop_reason, result.detail)
            services.conversation_flag(conversation_id=conversation.pk, reason=_after_flags_of_the_run(
                conversation, observer.flag_at_start, why))
        for name, value in fields.items():  # what the UPDATE wrote; the totals the steps added are on `run`
            setattr(run, name, value)  # (journal.write adds each unit's once committed, under the lease)
        transaction.on_commit(lambda: serializers.publish_run(run))
    return True


def _finish_answered_at_once(run: Run, conversation: Conversation, lease: str, observer: DbObserver,
                             result: agent.RunResult, now) -> bool:
    """The common end on PostgreSQL, in one statement: an answer, nothing appended since the run's own last append,
    no wait to start, no notice to write. The run's row is locked first (FOR UPDATE, under the lease), then the
    conversation's, only while its last seq is still ours (the lock order of _finish's transaction), and the run
    is stopped only if both held. False (nothing written) when it is not that case or the conversation moved on:
    _finish's transaction then decides."""
    if (connection.vendor != "postgresql" or result.status != agent.STOPPED or result.stop_reason != agent.ANSWERED
            or result.outcome == agent.HANDED_TO_PERSON or observer.unread
            or observer.tools_called.intersection(waits.WAIT_TOOLS)):
        return False
    fields = dict(outcome=result.outcome or "", outcome_summary=result.outcome_summary, summary=result.summary,
                  detail=result.detail[:2000], lease="", status=Run.STOPPED, stop_reason=result.stop_reason,
                  finished_at=now)
    run_meta, conv_meta = Run._meta, Conversation._meta
    col = {name: rows.q(run_meta.get_field(name).column) for name in ("lease", *fields)}
    run_table, run_pk = rows.q(run_meta.db_table), rows.q(run_meta.pk.column)
    conv_table, conv_pk = rows.q(conv_meta.db_table), rows.q(conv_meta.pk.column)
    last_seq, updated_at = (rows.q(conv_meta.get_field(n).column) for n in ("last_seq", "updated_at"))
    sets = ", ".join(f"{col[name]} = %s" for name in fields)
    values = [run_meta.get_field(name).get_db_prep_save(value, connection) for name, value in fields.items()]
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH r AS (SELECT {run_pk} FROM {run_table} WHERE {run_pk} = %s AND {col['lease']} = %s FOR UPDATE), "
            f"c AS (UPDATE {conv_table} SET {updated_at} = %s WHERE {conv_pk} = %s AND {last_seq} = %s "
            f"AND EXISTS (SELECT 1 FROM r) RETURNING {conv_pk}), "
            f"f AS (UPDATE {run_table} SET {sets} WHERE {run_pk} = %s AND EXISTS (SELECT 1 FROM c) RETURNING {run_pk}) "
            f"SELECT (SELECT {run_pk} FROM r), (SELECT {run_pk} FROM f)",
            [run.pk, lease, conv_meta.get_field("updated_at").get_db_prep_value(now, connection), conversation.pk,
             observer.last_seq, *values, run.pk])
        claimed, stopped = cursor.fetchone()
    if claimed is None:
        raise _lease_lost(run)
    if stopped is None:
        return False  # something was appended after our last append: _finish reads what
    services.reply_email_after_commit(conversation.pk, by_email=observer.customer_channel == Message.EMAIL)
    for name, value in fields.items():
        setattr(run, name, value)
    transaction.on_commit(lambda: serializers.publish_run(run))
    return True


def _lock_conversation(conversation: Conversation, now) -> int:
    """Lock the conversation's row until commit (its updated_at written) and return its last seq, in one UPDATE."""
    table, pk = (connection.ops.quote_name(n) for n in (Conversation._meta.db_table, Conversation._meta.pk.column))
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET updated_at = %s WHERE {pk} = %s RETURNING last_seq",
                       [Conversation._meta.get_field("updated_at").get_db_prep_value(now, connection), conversation.pk])
        row = cursor.fetchone()
    return row[0] if row else 0


def _standing_flag(conversation: Conversation) -> str:
    current = Conversation.objects.filter(pk=conversation.pk).values_list("status", "attention_reason").first()
    return current[1] if current and current[0] == Conversation.NEEDS_ATTENTION else ""


def _after_flags_of_the_run(conversation: Conversation, at_start: str, why: str) -> str:
    """The hand-over's line, after the one a step of this run raised (a gated MCP call that may have run):
    what a person must check first stays first, and is not replaced by the agent's own words."""
    raised = _standing_flag(conversation)
    if not raised or raised == at_start or why in raised:
        return why
    both = f"{raised} Then: {why}"
    return both if len(both) <= 300 else both[:299] + "…"


def _request_approvals(run: Run, pending: list[agent.PendingCall], turn: int) -> None:
    for p in pending:
        call, _ = ToolCall.objects.update_or_create(
            run=run, call_id=p.call.id,
            defaults={"name": p.call.name, "arguments": p.arguments, "status": ToolCall.PENDING_APPROVAL,
                      "idempotency_key": f"{run.public_id}:{p.call.id}"})
        approval, created = Approval.objects.get_or_create(
            tool_call=call, defaults={"run": run, "requested_arguments": p.arguments})
        if created:
            _trace_policy_reason(run, p, turn)
            routing.approval_route(approval=approval)  # into an online decider's queue, before it is published
            transaction.on_commit(lambda a=approval: serializers.publish_approval(a))


def _trace_policy_reason(run: Run, pending: agent.PendingCall, turn: int) -> None:
    """A call of an ungated tool that its policy held for a person (a seller message linking to another
    site, say) gets a trace row of kind "approval" saying why, as the approval card's title does: the card
    is gone once decided, the trace stays. The call's own "tool" row follows when it runs or is rejected."""
    tool = tool_by_name(pending.call.name)
    why = tool.needs_person(pending.arguments) if tool and not tool.gated and tool.needs_person else ""
    if not why:
        return
    step = Step.objects.create(run=run, kind="approval", turn=turn, label="Waiting for a person", tool=tool.name,
                               call_id=pending.call.id[:128], arguments=pending.call.arguments[:4000],
                               result=f"needs a person: {why}", finish_reason="awaiting_approval")
    transaction.on_commit(partial(serializers.publish_step, step, started=False))


def _stop_taken_over(run: Run, lease: str) -> None:
    """The worker's end after a take-over. The take-over has stopped the run, answered its open calls and
    published it, so there is normally nothing left to write; the conditional UPDATE is for a run it
    could not stop (none today), and does nothing once the lease is gone."""
    if Run.objects.filter(pk=run.pk, lease=lease).update(
            status=Run.STOPPED, stop_reason=agent.TAKEN_OVER, lease="", finished_at=timezone.now(),
            detail=takeover.TAKEN_OVER):
        serializers.publish_run(Run.objects.get(pk=run.pk))
    log.info("run %s: taken over by staff; the worker stops", run.public_id)


def _lease_lost(run: Run) -> Exception:
    """What a worker whose lease is gone raises: TakenOver when a take-over stopped its run (it ends
    quietly, like any run taken over), LeaseLost when another worker claimed it."""
    if Run.objects.filter(pk=run.pk, status=Run.STOPPED, stop_reason=agent.TAKEN_OVER).exists():
        return TakenOver()
    return services.LeaseLost(f"run {run.public_id} was claimed by another worker")
