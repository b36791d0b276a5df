"""What a new customer turn costs the database, counted: a budget of SQL statements, not a timing.

A new customer turn is what the widget does for a first message: the conversation created over the API, the
customer's socket opened and replayed, one message sent on it, and its run (two model calls on the stand-in:
a tool call, then the answer) worked to the end. Counted as the database sees them: every statement the desk
sends through Django's connections (its ORM, its raw cursors, savepoints and their releases), from every
thread, and each transaction's COMMIT, and on PostgreSQL its BEGIN (the driver sends both, not through a
cursor; SQLite's BEGIN IMMEDIATE is a cursor statement, counted as one); not counted: a pool's health check.
The budget differs by backend because the journal writes a step as one statement on PostgreSQL and as several
on SQLite (support/desk/journal.py), and a few other writes are one chained statement on PostgreSQL only;
bench/history.md lists each one. Counted in a process that has served a turn before, as a running desk has. A
change that adds a statement to this path fails here and lists them (with STATEMENTS_WHERE=1, each with the
code that sent it).
"""

from __future__ import annotations

import json
import os
import threading
import traceback

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.db import connection
from django.db.backends import utils
from django.db.backends.base.base import BaseDatabaseWrapper
from django.test import Client

from agentsite.asgi import application
from support.customers import identity
from support.desk import runner
from support.models import Run
from tests.redis_fixture import limits_redis, limits_redis_server  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("limits_redis")]

# As PostgreSQL's log shows them: 20 statements and one transaction (its BEGIN and COMMIT); on SQLite 40 statements
# and 6 COMMITs (bench/history.md). The replay reads no messages when the client has every one it may see; the
# demo shop reads the orders in brief with their items in one statement.
BUDGET = {"postgresql": 22, "sqlite": 46}
ORIGIN = [(b"origin", b"http://127.0.0.1:8000"), (b"host", b"127.0.0.1:8000")]


def _where() -> str:
    if not os.environ.get("STATEMENTS_WHERE"):
        return ""
    frames = [f for f in traceback.extract_stack() if "/support/" in f.filename]
    return "  <- " + " < ".join(f"{f.filename.split('/support/')[1]}:{f.lineno}:{f.name}" for f in frames[-4:][::-1])


class Statements(list):
    """Every statement run through a Django cursor while it is installed, from any thread, in order, and each
    transaction's COMMIT (and, on PostgreSQL, its BEGIN) as the database sees them."""

    def __init__(self, monkeypatch):
        super().__init__()
        lock = threading.Lock()
        plain, many = utils.CursorWrapper._execute, utils.CursorWrapper._executemany
        commit = BaseDatabaseWrapper.commit

        def record(sql) -> None:
            with lock:
                self.append(" ".join(str(sql).split())[:160] + _where())

        def execute(wrapper, sql, params, *rest):
            record(sql)
            return plain(wrapper, sql, params, *rest)

        def executemany(wrapper, sql, param_list, *rest):
            record(sql)
            return many(wrapper, sql, param_list, *rest)

        def committed(wrapper):
            if wrapper.vendor == "postgresql":
                record("BEGIN (sent by the driver before the transaction's first statement)")
            record("COMMIT")
            return commit(wrapper)

        monkeypatch.setattr(utils.CursorWrapper, "_execute", execute)
        monkeypatch.setattr(utils.CursorWrapper, "_executemany", executemany)
        monkeypatch.setattr(BaseDatabaseWrapper, "commit", committed)


@pytest.fixture
def turn(desk, queued, settings, monkeypatch):
    """Runs one new customer turn and returns the statements it took (the demo seeded before counting)."""
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    # The conversation's state read with the run serves its first model call when the start reads took under
    # STATE_FRESH_SECONDS (a few ms on a local database); a busy test machine must not change the count.
    monkeypatch.setattr(runner.DbObserver, "STATE_FRESH_SECONDS", 60.0)

    def go(text="Hello, are you there? #steps:1"):
        statements = Statements(monkeypatch)
        response = Client().post("/api/conversations", json.dumps(
            {"customer_token": identity.customer_token("maya@example.com")}), content_type="application/json")
        assert response.status_code == 201, response.content
        async_to_sync(_socket_turn)(response.json()["conversation"]["id"], response.json()["token"], text)
        run_id = queued.pop()
        assert runner.run_execute(run_id) == "answered"
        counted = list(statements)
        assert Run.objects.get(pk=run_id).status == Run.STOPPED
        return counted

    return go


async def _socket_turn(conversation_id, token, text):
    ws = WebsocketCommunicator(application, f"/ws/conversations/{conversation_id}/", headers=ORIGIN)
    assert (await ws.connect())[0]
    await ws.send_json_to({"type": "resume", "token": token, "last_seq": 0})
    while (await ws.receive_json_from(timeout=3))["type"] != "replay.done":
        pass
    await ws.send_json_to({"type": "message", "text": text, "client_id": "turn-1"})
    while (await ws.receive_json_from(timeout=3))["type"] != "message.accepted":
        pass
    await ws.disconnect()


def test_a_new_customer_turn_stays_within_its_statement_budget(turn):
    turn()  # the process's first turn also fills what a process keeps (the built profile): not counted
    statements = turn()
    budget = BUDGET[connection.vendor]
    assert len(statements) <= budget, f"{len(statements)} statements on {connection.vendor}:\n{listing(statements)}"


def listing(statements: list[str]) -> str:
    return "\n".join(f"{i:3} {s}" for i, s in enumerate(statements, 1))
