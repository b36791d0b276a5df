"""Errors of the JSON API: one shape, stable codes, and never an error for something that was saved.

Every error under /api/ is {"error": words, "code": code, "retryable": bool}, in DEBUG or not. A database
that is down, locked or busy answers 503 with Retry-After and leaves nothing half-saved. Redis being down
after a message or a decision was saved is logged, not answered as an error: the client would retry and
save it twice. The run stays queued and the sweeper sends it once the broker is back.

These tests commit for real (transactional_db): on-commit callbacks then run inside the request, as in
production, and a second database connection sees the rows it must lock.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import sqlite3
import subprocess
import sys
import time
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.db import OperationalError, connection, connections
from django.http import Http404
from django.test import Client, override_settings
from django.utils import timezone

from support.customers import identity
from support.desk import services
from support.models import Approval, Conversation, Message, Run
from support.web.middleware import unavailable_message
from tests.desk_factories import make_user, pending_refund_approval, start_conversation
from tests.redis_fixture import free_port, start_redis

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.django_db(transaction=True)
postgres_only = pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's own locking")
sqlite_only = pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's own locking")


# -- helpers ----------------------------------------------------------------------------------------

@contextmanager
def broker_at(url: str):
    """Celery's broker and the channel layer at `url`, as if the site had been started with REDIS_URL=url.
    Celery read its broker URL when it was configured: the app and its pools are pointed there anew."""
    from agentsite.celery import app

    def point(to):
        app.conf.broker_url = to
        app._pool = None
        amqp = app.__dict__.get("amqp")
        if amqp is not None:
            amqp._producer_pool = None

    previous = app.conf.broker_url
    layers = {"default": {"BACKEND": "support.live.channel_layer.PubSubChannelLayer", "CONFIG": {"hosts": [url]}}}
    point(url)
    try:
        with override_settings(CELERY_BROKER_URL=url, REDIS_URL=url, CHANNEL_LAYERS=layers):
            yield
    finally:
        point(previous)


def tasks_in_queue(port: int) -> list[tuple[str, list]]:
    """(task name, args) of each message waiting in Celery's default queue."""
    client = redis.Redis(port=port)
    try:
        out = []
        for raw in client.lrange("celery", 0, -1):
            message = json.loads(raw)
            args, _kwargs, _embed = json.loads(base64.b64decode(message["body"]))
            out.append((message["headers"]["task"], args))
        return out
    finally:
        client.close()


@contextmanager
def next_connection(**changes):
    """The database settings of the connections opened inside the block: OPTIONS given as options=...,
    anything else (NAME, PORT) replaced. The current connection is closed so the next query opens one."""
    saved = {key: connection.settings_dict.get(key) for key in changes}
    saved_options = dict(connection.settings_dict["OPTIONS"])
    for key, value in changes.items():
        if key == "options":
            connection.settings_dict["OPTIONS"].update(value)
        else:
            connection.settings_dict[key] = value
    connection.close()
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict.update(saved)
        connection.settings_dict["OPTIONS"].clear()
        connection.settings_dict["OPTIONS"].update(saved_options)


def say(client, conversation, text, **fields):
    return client.post(f"/api/conversations/{conversation.public_id}/messages", json.dumps({"text": text, **fields}),
                       content_type="application/json",
                       HTTP_AUTHORIZATION=f"Bearer {identity.conversation_token(conversation)}")


def assert_api_error(response, status: int, code: str, retryable: bool) -> dict:
    assert response.status_code == status, response.content[:500]
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert {"error", "code", "retryable"} <= set(body) <= {"error", "code", "retryable", "approval"}, body
    assert (body["code"], body["retryable"]) == (code, retryable)
    assert isinstance(body["error"], str) and body["error"] and "Traceback" not in body["error"]
    return body


@pytest.fixture
def chat(demo):
    return start_conversation(demo.maya)


@pytest.fixture
def sam_client(demo):
    client = Client()
    client.force_login(make_user("sam", staff=True))
    return client


# -- Redis down after the write -----------------------------------------------------------------------

def test_a_message_saved_while_redis_is_down_is_accepted_and_its_run_stays_queued(client, chat, caplog):
    with broker_at(f"redis://127.0.0.1:{free_port()}/0"), caplog.at_level(logging.WARNING, logger="support"):
        response = say(client, chat, "My parcel never came.")  # no client_id: a retry would save it again

    assert response.status_code == 202, response.content[:500]
    assert response.json()["created"] is True
    run = Run.objects.get(conversation=chat)
    assert run.status == Run.QUEUED
    assert Message.objects.filter(conversation=chat, author=Message.CUSTOMER).count() == 1
    assert any(r.levelno >= logging.ERROR and str(run.public_id) in r.getMessage() and "stays queued" in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]


def test_a_decision_saved_while_redis_is_down_is_accepted_and_the_run_stays_queued(sam_client, chat, caplog):
    approval = pending_refund_approval(chat)
    with broker_at(f"redis://127.0.0.1:{free_port()}/0"), caplog.at_level(logging.WARNING, logger="support"):
        response = sam_client.post(f"/api/staff/approvals/{approval.public_id}/approve", "{}",
                                   content_type="application/json")

    assert response.status_code == 200, response.content[:500]
    assert response.json()["approval"]["status"] == "approved"
    assert Approval.objects.get(pk=approval.pk).decision == Approval.APPROVED
    assert Run.objects.get(pk=approval.run_id).status == Run.QUEUED
    assert any(r.levelno >= logging.ERROR and str(approval.run.public_id) in r.getMessage() for r in caplog.records)


def test_the_sweeper_sends_a_run_queued_while_redis_was_down_once_it_is_back(client, chat):
    port = free_port()
    with broker_at(f"redis://127.0.0.1:{port}/0"):
        assert say(client, chat, "My parcel never came.").status_code == 202
        run = Run.objects.get(conversation=chat)
        assert services.runs_recover() == []  # its heartbeat is fresh: not yet
        stale = timedelta(seconds=settings.RUN_STALE_SECONDS + 1)
        later = timezone.now() + stale
        assert services.runs_recover(now=later) == [run.pk]  # a pass while Redis is still down: no harm done
        assert Run.objects.get(pk=run.pk).status == Run.QUEUED

        server = start_redis(port)  # the broker is back, at the address the site was given
        try:
            assert services.runs_recover(now=later + stale) == [run.pk]
            assert tasks_in_queue(port) == [("support.tasks.run_agent", [run.pk])]
            assert Run.objects.get(pk=run.pk).status == Run.QUEUED
        finally:
            server.terminate()
            server.wait(5)


# -- the database down, locked or busy --------------------------------------------------------------------

def test_a_database_that_cannot_be_reached_answers_503_in_json(client, chat, settings):
    unreachable = {"PORT": str(free_port()), "HOST": "127.0.0.1"} if connection.vendor == "postgresql" else \
        {"NAME": str(ROOT / "var" / "no-such-directory" / "db.sqlite3")}
    token = identity.conversation_token(chat)
    for debug in (False, True):
        settings.DEBUG = debug
        with next_connection(**unreachable):
            response = client.get(f"/api/conversations/{chat.public_id}", HTTP_AUTHORIZATION=f"Bearer {token}")
        body = assert_api_error(response, 503, "unavailable", True)
        assert response["Retry-After"] == "5"
        assert "cannot be reached" in body["error"]


@postgres_only
def test_every_postgresql_connection_has_the_configured_lock_and_statement_timeouts(db):
    connection.close()
    with connection.cursor() as cursor:
        cursor.execute("SELECT extract(epoch FROM current_setting('lock_timeout')::interval) * 1000, "
                       "extract(epoch FROM current_setting('statement_timeout')::interval) * 1000")
        lock_ms, statement_ms = cursor.fetchone()
    assert (int(lock_ms), int(statement_ms)) == (settings.DB_LOCK_TIMEOUT_MS, settings.DB_STATEMENT_TIMEOUT_MS)


@postgres_only
def test_a_message_blocked_by_a_lock_answers_503_after_the_lock_timeout_and_saves_nothing(client, chat):
    other = connections.create_connection("default")
    other.set_autocommit(False)
    with other.cursor() as cursor:  # e.g. a long migration: no run can be inserted while it holds this
        cursor.execute(f"LOCK TABLE {connection.ops.quote_name(Run._meta.db_table)} IN SHARE MODE")
    try:
        with next_connection(options={"options": "-c lock_timeout=300 -c statement_timeout=30000"}):
            started = time.monotonic()
            response = say(client, chat, "My parcel never came.")
            elapsed = time.monotonic() - started
    finally:
        other.rollback()
        other.close()

    body = assert_api_error(response, 503, "unavailable", True)
    assert response["Retry-After"] == "5" and "busy" in body["error"]
    assert 0.3 <= elapsed < 3, elapsed
    # The message was inserted before the run's insert waited: the whole transaction was rolled back.
    assert not Message.objects.filter(conversation=chat, author=Message.CUSTOMER).exists()
    assert Conversation.objects.get(pk=chat.pk).last_seq == chat.last_seq
    assert not Run.objects.filter(conversation=chat).exists()


@sqlite_only
def test_a_message_while_sqlite_is_locked_answers_503_and_saves_nothing(client, chat):
    other = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process in the middle of a write
    try:
        with next_connection(options={"timeout": 0.3}):
            started = time.monotonic()
            response = say(client, chat, "My parcel never came.")
            elapsed = time.monotonic() - started
    finally:
        other.execute("ROLLBACK")
        other.close()

    body = assert_api_error(response, 503, "unavailable", True)
    assert "busy" in body["error"] and elapsed < 5
    assert not Message.objects.filter(conversation=chat, author=Message.CUSTOMER).exists()
    assert not Run.objects.filter(conversation=chat).exists()


def test_a_database_error_that_is_a_bug_is_a_500_not_a_retryable_503():
    def wrapped(message):
        try:
            try:
                raise sqlite3.OperationalError(message)
            except sqlite3.OperationalError as cause:
                raise OperationalError(message) from cause
        except OperationalError as error:
            return error

    assert unavailable_message(wrapped("no such table: support_run")) is None
    assert unavailable_message(wrapped("database is locked")) is not None


def test_the_timeouts_are_read_from_the_environment_and_bad_values_stop_start_up():
    def options(**env):
        code = "import json, agentsite.settings as s; print(json.dumps(s.DATABASES['default'].get('OPTIONS')))"
        return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                              env={**os.environ, "DATABASE_URL": "postgres://u:p@127.0.0.1:1/x", **env})

    done = options(DB_LOCK_TIMEOUT_MS="250", DB_STATEMENT_TIMEOUT_MS="0", DB_CONNECT_TIMEOUT="3")
    got = json.loads(done.stdout)
    got.pop("pool", None)  # settings.DB_POOL: tests/test_db_pool_settings.py
    assert got == {"options": "-c lock_timeout=250 -c statement_timeout=0", "connect_timeout": 3}
    refused = options(DB_LOCK_TIMEOUT_MS="soon")
    assert refused.returncode != 0 and "DB_LOCK_TIMEOUT_MS must be a whole number" in refused.stderr


# -- JSON, never HTML ---------------------------------------------------------------------------------

@pytest.mark.parametrize("debug", [False, True])
def test_an_unknown_api_path_is_a_json_404_in_debug_or_not(client, settings, debug):
    settings.DEBUG = debug
    assert_api_error(client.get("/api/nothing/here"), 404, "not_found", False)
    assert_api_error(client.post("/api/nothing/here", "{}", content_type="application/json"), 404, "not_found", False)


@pytest.mark.parametrize("debug", [False, True])
def test_an_unexpected_error_is_a_json_500_without_internals_and_is_logged(client, chat, settings, monkeypatch,
                                                                          caplog, debug):
    settings.DEBUG = debug

    def broken(conversation):
        raise RuntimeError("secret internals")

    monkeypatch.setattr("support.desk.selectors.latest_run", broken)
    token = identity.conversation_token(chat)
    with caplog.at_level(logging.ERROR, logger="support"):
        response = client.get(f"/api/conversations/{chat.public_id}", HTTP_AUTHORIZATION=f"Bearer {token}")
    body = assert_api_error(response, 500, "internal_error", False)
    assert "secret" not in response.content.decode() and body["error"]
    assert any(r.exc_info and "secret internals" in str(r.exc_info[1]) for r in caplog.records)


def test_http404_raised_in_an_api_view_is_json(client, chat, monkeypatch, settings):
    settings.DEBUG = True

    def gone(conversation):
        raise Http404("gone")

    monkeypatch.setattr("support.desk.selectors.latest_run", gone)
    token = identity.conversation_token(chat)
    response = client.get(f"/api/conversations/{chat.public_id}", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert_api_error(response, 404, "not_found", False)


class _DatabaseDownInMiddleware:
    """A middleware after ours whose database call fails: Django renders that as HTML before we see it."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        raise OperationalError("connection to server failed: Connection refused")


def test_an_error_raised_by_another_middleware_is_rewritten_as_json(settings):
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, f"{__name__}._DatabaseDownInMiddleware"]
    settings.DEBUG = True
    response = Client(raise_request_exception=False).get("/api/staff/approvals")
    assert_api_error(response, 503, "unavailable", True)
    assert response["Retry-After"] == "5"


def test_pages_outside_the_api_keep_their_html_errors(client):
    response = client.get("/no-such-page/")
    assert response.status_code == 404 and "application/json" not in response["Content-Type"]


def test_every_api_refusal_carries_its_code(client, chat, sam_client, settings, monkeypatch):
    token = identity.conversation_token(chat)
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    url = f"/api/conversations/{chat.public_id}/messages"
    assert_api_error(client.post(url, "{", content_type="application/json", **auth), 400, "invalid_request", False)
    assert_api_error(client.post(url, "x", content_type="text/plain", **auth), 415, "unsupported_media_type", False)
    assert_api_error(client.get(f"/api/conversations/{chat.public_id}"), 404, "not_found", False)
    assert_api_error(client.delete(url, **auth), 405, "method_not_allowed", False)
    assert_api_error(client.get("/api/staff/approvals"), 403, "forbidden", False)
    big = json.dumps({"text": "x" * (4 * settings.MAX_MESSAGE_BYTES + 2048)})
    assert_api_error(client.post(url, big, content_type="application/json", **auth), 413, "too_large", False)
    approval = pending_refund_approval(chat)
    sam_client.post(f"/api/staff/approvals/{approval.public_id}/reject", '{"reason": "no"}',
                    content_type="application/json")
    again = sam_client.post(f"/api/staff/approvals/{approval.public_id}/approve", '{}',
                            content_type="application/json")  # a different decision (the same one is a 200)
    assert_api_error(again, 409, "conflict", False)
    settings.MESSAGES_PER_MINUTE = 1
    monkeypatch.setattr("support.desk.queue.run_agent", lambda run_id, **ids: None)  # no broker needed to count
    say(client, chat, "one")
    limited = say(client, chat, "two")
    body = assert_api_error(limited, 429, "rate_limited", True)
    assert limited["Retry-After"] == "60" and "about a minute" in body["error"]
