"""Health probes: /healthz says the process answers, /readyz whether it can serve (database, schema, Redis).

Who may call them: anyone who reaches the process, by any Host and over plain http (a balancer checks each
process by its own address); they answer GET only and tell nothing a stranger could use.
"""

from __future__ import annotations

import logging
import socket

import pytest
from django.db import OperationalError
from django.test import Client

from support.ops import health


class _Redis:
    """A Redis client that answers PING, for the tests that are about the other checks."""

    def ping(self):
        return True


@pytest.fixture
def redis_up(monkeypatch):
    monkeypatch.setattr("support.ops.health.redis_client", lambda url: _Redis())


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_healthz_answers_ok_without_asking_the_database(client):
    response = client.get("/healthz")  # no django_db mark: a query here would fail the test
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_readyz_is_ready_when_the_database_answers_with_every_migration_applied_and_redis_answers(client, redis_up):
    response = client.get("/readyz")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "ready"
    assert {name: check["ok"] for name, check in body["checks"].items()} == {
        "database": True, "schema": True, "redis": True}


@pytest.mark.django_db
def test_readyz_answers_503_naming_redis_when_redis_is_down(client, settings):
    settings.REDIS_URL = f"redis://127.0.0.1:{_closed_port()}/0"
    settings.LIMITS_REDIS_URL = settings.REDIS_URL
    response = client.get("/readyz")
    assert response.status_code == 503
    checks = response.json()["checks"]
    assert checks["redis"]["ok"] is False and checks["redis"]["error"] == "ConnectionError"
    assert checks["database"]["ok"] is True


@pytest.mark.django_db
def test_readyz_checks_the_limits_redis_too_when_it_is_another_server(client, settings, monkeypatch):
    asked = []

    class Recording(_Redis):
        def __init__(self, url):
            asked.append(url)

    monkeypatch.setattr("support.ops.health.redis_client", Recording)
    settings.LIMITS_REDIS_URL = "redis://127.0.0.1:1/5"
    assert client.get("/readyz").status_code == 200
    assert sorted(asked) == sorted([settings.REDIS_URL, "redis://127.0.0.1:1/5"])


@pytest.mark.django_db
def test_readyz_answers_503_without_the_error_text_when_the_database_is_down(client, redis_up, monkeypatch):
    def down():
        raise OperationalError('connection to server at "db.internal" failed: password authentication failed '
                               'for user "desk" (password s3cret)')

    monkeypatch.setattr(health, "_database", down)
    response = client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["checks"]["database"] == {"ok": False, "ms": body["checks"]["database"]["ms"],
                                          "error": "OperationalError"}
    assert body["checks"]["schema"]["ok"] is False
    assert body["checks"]["redis"]["ok"] is True  # still checked: the answer names everything that is down
    assert b"db.internal" not in response.content and b"s3cret" not in response.content


@pytest.mark.django_db
def test_readyz_answers_503_while_a_migration_is_not_applied(client, redis_up, monkeypatch):
    from django.db.migrations.executor import MigrationExecutor

    monkeypatch.setattr(health, "_schema_ready", False)
    monkeypatch.setattr(MigrationExecutor, "migration_plan", lambda self, targets: [("support.0099_new", False)])
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["schema"] == {
        "ok": False, "ms": response.json()["checks"]["schema"]["ms"], "error": "1 migration(s) not applied"}


@pytest.mark.django_db
def test_a_process_that_is_not_ready_is_logged_as_a_warning_not_a_server_error(client, settings, caplog):
    settings.REDIS_URL = settings.LIMITS_REDIS_URL = f"redis://127.0.0.1:{_closed_port()}/0"
    with caplog.at_level(logging.INFO):
        assert client.get("/readyz").status_code == 503
    assert [r.levelname for r in caplog.records if r.name == "support.ops.health"] == ["WARNING"]
    assert not [r for r in caplog.records if r.name == "django.request"]


def test_probes_answer_a_balancer_by_any_host_over_plain_http_with_the_https_redirect_on(settings):
    settings.ALLOWED_HOSTS = ["desk.example"]
    settings.SECURE_SSL_REDIRECT = True
    client = Client(HTTP_HOST="10.0.3.7:8000")
    assert client.get("/healthz").status_code == 200
    assert client.get("/api/conversations").status_code == 400  # every other path still checks the host


def test_probes_answer_get_only(client):
    response = client.post("/healthz")
    assert response.status_code == 405
    assert response["Allow"] == "GET, HEAD"
