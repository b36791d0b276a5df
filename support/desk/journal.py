"""The durable step: what a run appends (a message, its trace row, its tool call's record, what the model
call spent) written at once, fenced by the run's lease.

One write is one unit of the loop: a model call's trace row with the reply it produced, or a tool's result
message with its trace row and its call's record. On PostgreSQL a unit of at most one message, one trace
row and one tool call is ONE statement (data-modifying CTEs), so a read-only tool's whole step commits in
one round trip; anything larger, and SQLite, runs the same writes as separate statements in one
transaction. Either way nothing of the unit is written unless the lease is still the run's claim, and the
conversation's seq is handed out by the same conditional UPDATE that serialises appends (run row first,
then the conversation's: the lock order of support/desk/services.py).

Rows are built as unsaved model instances, and their column values come from Django's own field API
(`pre_save` + `get_db_prep_save`, what the ORM's INSERT uses), so a new column with a default needs no
change here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache

import psycopg
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from support.desk import services
from support.desk.services import LeaseLost
from support.models import Conversation, Message, Run, Step, ToolCall


@dataclass
class Unit:
    """What one step of the loop appends. `messages` get the conversation's next seqs, in order."""

    messages: list[Message] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)  # inserted, or their status and result updated
    turns: int = 0  # what a model call spent, added to the run's totals
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: Decimal = Decimal(0)

    def __bool__(self) -> bool:
        return bool(self.messages or self.steps or self.tool_calls or self.turns)


def write(unit: Unit, *, run: Run, lease: str, conversation: Conversation, beat: bool = True) -> None:
    """Write the unit, or nothing and LeaseLost. Saved rows get their ids (and messages their seqs);
    `conversation` is refreshed with its state after the append (status, last_seq) when a message was
    written. With beat, the run is marked alive (heartbeat_at): the caller says when one is due, since the
    column is indexed and writing it makes every append a new index entry. Events are the caller's."""
    now = timezone.now()
    simple = len(unit.messages) <= 1 and len(unit.steps) <= 1 and len(unit.tool_calls) <= 1
    if connection.vendor == "postgresql" and simple:
        # Autocommitted; or, inside a transaction (a tool that wrote), committed with the tool's writes.
        _write_one_statement(unit, run, lease, conversation, now, beat)
    else:
        with transaction.atomic(savepoint=False):
            _write_statements(unit, run, lease, conversation, now, beat)
    if unit.turns:  # the run's totals as written, kept on `run` once committed: the run's end reads them not again
        transaction.on_commit(lambda: _add_spent(run, unit))


def _add_spent(run: Run, unit: Unit) -> None:
    for name in SPENDING:
        setattr(run, name, getattr(run, name) + getattr(unit, name))


# -- PostgreSQL: one statement ------------------------------------------------------------------------------

SPENDING = ("turns", "prompt_tokens", "completion_tokens", "cost_usd")
CONVERSATION_STATE = ("last_seq", "status", "assignee_id", "attention_reason")


def _q(name: str) -> str:
    return connection.ops.quote_name(name)


def _insert_fields(model, *, skip: tuple[str, ...] = ()) -> list:
    return [f for f in model._meta.concrete_fields if not f.primary_key and f.attname not in skip]


def _values(obj, fields) -> list:
    """The prepared values of an unsaved row, as the ORM's INSERT computes them (auto_now_add included)."""
    return [f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields]


@lru_cache(maxsize=64)
def _statement(spent: tuple[str, ...], beat: bool, message: bool, step: bool, tool_call: bool) -> str:
    """The statement for one shape of unit (built once per shape; the values are its parameters).

    r: the lease check. It locks the run's row until commit, so a take-over (which clears the lease) waits
    for the unit or finds it written; it adds what a model call spent and marks the run alive when asked,
    and otherwise only reads (FOR SHARE: no new row version). Every other part reads r, so none writes
    unless the lease held. c: the next seq, serialising appends to the conversation.
    m, s, t: the message (its seq from c), the trace row, the tool call's record (inserted, or its status and
    result updated). The SELECT returns what the caller needs back, one row always."""
    run, conv = Run._meta, Conversation._meta

    def col(meta, name):
        return _q(meta.get_field(name).column)

    def insert(name, model, fields, source, extra_column="", extra_value="", tail=""):
        columns = ", ".join([_q(f.column) for f in fields] + ([extra_column] if extra_column else []))
        values = ", ".join(["%s"] * len(fields) + ([extra_value] if extra_value else []))
        return (f"{name} AS (INSERT INTO {_q(model._meta.db_table)} ({columns}) SELECT {values} FROM {source}"
                f"{tail} RETURNING {_q(model._meta.pk.column)})")

    sets = ", ".join([f"{col(run, 'heartbeat_at')} = %s"] * beat + [f"{col(run, n)} = {col(run, n)} + %s" for n in spent])
    where = f"WHERE {_q(run.pk.column)} = %s AND {col(run, 'lease')} = %s"
    if sets:
        parts = [f"r AS (UPDATE {_q(run.db_table)} SET {sets} {where} RETURNING {_q(run.pk.column)})"]
    else:
        parts = [f"r AS (SELECT {_q(run.pk.column)} FROM {_q(run.db_table)} {where} FOR SHARE)"]
    returned = [f"(SELECT {_q(run.pk.column)} FROM r)"]
    if message:
        state = ", ".join(col(conv, n) for n in CONVERSATION_STATE)
        parts.append(f"c AS (UPDATE {_q(conv.db_table)} SET {col(conv, 'last_seq')} = {col(conv, 'last_seq')} + 1, "
                     f"{col(conv, 'updated_at')} = %s WHERE {_q(conv.pk.column)} = %s AND EXISTS (SELECT 1 FROM r) "
                     f"RETURNING {state})")
        returned += [f"(SELECT {col(conv, n)} FROM c)" for n in CONVERSATION_STATE]
        parts.append(insert("m", Message, _insert_fields(Message, skip=("seq",)), "c",
                            col(Message._meta, "seq"), col(conv, "last_seq")))
        returned.append(f"(SELECT {_q(Message._meta.pk.column)} FROM m)")
    if step:
        parts.append(insert("s", Step, _insert_fields(Step), "r"))
        returned.append(f"(SELECT {_q(Step._meta.pk.column)} FROM s)")
    if tool_call:
        meta = ToolCall._meta
        updated = ", ".join(f"{col(meta, n)} = EXCLUDED.{col(meta, n)}" for n in ("status", "result", "updated_at"))
        parts.append(insert("t", ToolCall, _insert_fields(ToolCall), "r",
                            tail=f" ON CONFLICT ({col(meta, 'run')}, {col(meta, 'call_id')}) DO UPDATE SET {updated}"))
        returned.append(f"(SELECT {_q(meta.pk.column)} FROM t)")
    return f"WITH {', '.join(parts)} SELECT {', '.join(returned)}"


class _PreparedCursor(psycopg.Cursor):
    """Binds parameters on the server and prepares every statement it runs (psycopg's documented `prepare`
    argument): the journal has a handful of statement shapes, so PostgreSQL plans each once per connection
    instead of on every append. Django's own cursors bind on the client and never prepare (its PostgreSQL
    backend's default), which this leaves as it is."""

    def execute(self, query, params=None, *, prepare=None, binary=None):
        return super().execute(query, params, prepare=True, binary=binary)


def _prepared_cursor():
    """A _PreparedCursor on Django's connection, wrapped the way Django wraps its own cursors, so its error
    translation, execute_wrapper hooks and query logging apply."""
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    raw = _PreparedCursor(connection.connection)
    return connection.make_debug_cursor(raw) if connection.queries_logged else connection.make_cursor(raw)


def _write_one_statement(unit: Unit, run: Run, lease: str, conversation: Conversation, now, beat: bool) -> None:
    spent = tuple(n for n in SPENDING if getattr(unit, n))
    prep_now = Run._meta.get_field("heartbeat_at").get_db_prep_save(now, connection)
    params = [prep_now] * beat + [*(getattr(unit, n) for n in spent), run.pk, lease]
    if unit.messages:
        params += [prep_now, conversation.pk, *_values(unit.messages[0], _insert_fields(Message, skip=("seq",)))]
    if unit.steps:
        params += _values(unit.steps[0], _insert_fields(Step))
    if unit.tool_calls:
        params += _values(unit.tool_calls[0], _insert_fields(ToolCall))
    with _prepared_cursor() as cursor:
        cursor.execute(_statement(spent, beat, bool(unit.messages), bool(unit.steps), bool(unit.tool_calls)), params)
        row = list(cursor.fetchone())
    if row.pop(0) is None:
        raise LeaseLost(f"run {run.public_id} was claimed by another worker")
    if unit.messages:
        seq, status, assignee_id, attention_reason, message_pk = row[:5]
        del row[:5]
        if seq is None:
            raise Conversation.DoesNotExist(f"conversation {conversation.pk} is gone")
        _refresh(conversation, seq, status, assignee_id, attention_reason, now)
        unit.messages[0].pk, unit.messages[0].seq = message_pk, seq
    for obj in unit.messages + unit.steps + unit.tool_calls:
        if obj.pk is None:
            obj.pk = row.pop(0)
        obj._state.adding, obj._state.db = False, connection.alias


def _locked(claim) -> bool:
    if connection.features.has_select_for_update:
        claim = claim.select_for_update(no_key=connection.features.has_select_for_no_key_update)
    return bool(list(claim.values_list("pk", flat=True)))


def _refresh(conversation: Conversation, seq: int, status, assignee_id, attention_reason, now) -> None:
    conversation.last_seq, conversation.updated_at = seq, now
    conversation.status, conversation.assignee_id, conversation.attention_reason = status, assignee_id, attention_reason


# -- any database: the same writes, one statement each, in one transaction ---------------------------------

def _write_statements(unit: Unit, run: Run, lease: str, conversation: Conversation, now, beat: bool) -> None:
    changes = {name: F(name) + getattr(unit, name) for name in SPENDING if getattr(unit, name)}
    if beat:
        changes["heartbeat_at"] = now
    claim = Run.objects.filter(pk=run.pk, lease=lease)
    # Without changes, a locking read (SELECT ... FOR NO KEY UPDATE where the database has it; SQLite's
    # write transactions take the whole database already).
    held = claim.update(**changes) if changes else _locked(claim)
    if not held:
        raise LeaseLost(f"run {run.public_id} was claimed by another worker")
    for message in unit.messages:
        message.seq = services.next_seq(conversation, now)
        message.save(force_insert=True)
    for step in unit.steps:
        step.save(force_insert=True)
    for call in unit.tool_calls:
        saved = ToolCall.objects.filter(run=run, call_id=call.call_id).update(
            status=call.status, result=call.result, updated_at=now)
        if not saved:
            call.save(force_insert=True)
        else:
            call.pk = ToolCall.objects.filter(run=run, call_id=call.call_id).values_list("pk", flat=True).get()
            call._state.adding = False
