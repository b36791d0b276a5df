"""Shared fixtures: the seeded Sundry demo shop, and tool contexts acting for one of its customers."""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest
from django.conf import settings
from django.core.management import call_command

from support.agent.tools import ToolContext
from support.models import Customer, Order
from tests import flush
from tests.imap_fixture import imap_server  # noqa: F401  (fixture: a small IMAP server, for the polled mailbox)
from tests.redis_fixture import limits_redis, limits_redis_server  # noqa: F401  (fixtures)
from tests.shop_fixture import reference_shop, reference_shop_server  # noqa: F401  (fixtures)
from tests.shopify_fixture import fake_shopify, fake_shopify_server  # noqa: F401  (fixtures)
from tests.shops import any_shop, remote_shop  # noqa: F401  (a test that asks runs on every (remote) backend)
from tests.standin_fixture import standin  # noqa: F401  (the fixture, for `desk`)

# In this process, database connections close after each use, as with CONN_MAX_AGE=0: the consumers'
# thread pool would otherwise keep connections open past the session and PostgreSQL would refuse to
# drop the test database. Worker and site subprocesses keep the configured default.
settings.DATABASES["default"]["CONN_MAX_AGE"] = 0
# And without settings.DB_POOL's pool: here threads stand in for concurrent requests and meet at barriers while
# holding their connections, and tests repoint the next connection (another port, other options), which a pool
# made at the first query would not follow. The worker and site processes the tests start use the pool.
settings.DATABASES["default"]["OPTIONS"].pop("pool", None)
settings.DB_POOLED = False
# Passwords hashed with PBKDF2's name but few rounds (tests/hashers.py): hashing is not what the tests test.
settings.PASSWORD_HASHERS = ["tests.hashers.QuickPBKDF2PasswordHasher", *settings.PASSWORD_HASHERS]
# The tables a committed test wrote are emptied with DELETE, not TRUNCATE, on PostgreSQL (tests/flush.py).
flush.install()


@pytest.fixture(scope="session", autouse=True)
def _release_test_database(django_db_setup, django_db_blocker):
    """Before the test database is dropped: connections of threads the tests started (concurrent refunds,
    a run in a thread) are closed when those threads' objects are collected, which may not have happened
    yet; PostgreSQL refuses to drop a database that still has sessions."""
    yield
    import gc

    from django.db import connection

    gc.collect()
    if connection.vendor == "postgresql":
        with django_db_blocker.unblock(), connection.cursor() as cursor:
            # The tests' own sessions only: an autovacuum worker on this database is the superuser's, which
            # this role may not end (DROP DATABASE stops it itself).
            cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                           "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                           "AND usename = current_user AND backend_type = 'client backend'")


@pytest.fixture
def demo(db):
    """The demo shop of docs/tools-contract.md, seeded by the real command."""
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    return SimpleNamespace(
        output=out.getvalue(),
        maya=Customer.objects.get(email="maya@example.com"),
        tom=Customer.objects.get(email="tom@example.com"),
        ines=Customer.objects.get(email="ines@example.com"),
        orders={order.number: order for order in Order.objects.select_related("customer", "seller")},
    )


@pytest.fixture
def ctx_for(demo):
    """ctx_for("maya@example.com", call_id="call_1"): a ToolContext as the loop builds it for that customer."""

    def build(email: str, call_id: str = "call_test_1") -> ToolContext:
        customer = Customer.objects.get(email=email)
        return ToolContext(
            customer_id=customer.pk,
            conversation_id="conv-test",
            run_id="run-test",
            call_id=call_id,
            idempotency_key=f"run-test:{call_id}",
        )

    return build


@pytest.fixture(autouse=True)
def _events_stay_in_process(settings, limits_redis):
    """Unit tests publish into an in-memory channel layer: nothing reaches a Redis a developer may be
    running. System tests (tests/system) point this back at their real Redis in their own fixture. Rate
    limits count in the session's own redis-server, every counter at zero (limits_redis)."""
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


@pytest.fixture(autouse=True)
def _fake_servers_are_private_hosts(settings):
    """Tests run with DEBUG off, where the desk sends to https URLs only. The reference shop, the fake Shopify
    and the MCP servers tests start answer plain http on 127.0.0.1: named here as a private-network host, as
    an operator names one (PLAIN_HTTP_PRIVATE_HOSTS), not by loosening the rule."""
    settings.PLAIN_HTTP_PRIVATE_HOSTS = ["127.0.0.1"]


@pytest.fixture(autouse=True)
def _fresh_policy_corpora():
    """Each test's database is rolled back after it: policies a test changed are not cached into the next."""
    from support.shop import search

    search.forget_corpora()


@pytest.fixture
def queued(monkeypatch):
    """Run ids handed to Celery, in order, instead of a broker: tests run them with runner.run_execute."""
    sent = []
    monkeypatch.setattr("support.desk.queue.run_agent", lambda run_id, **ids: sent.append(run_id))
    return sent


@pytest.fixture
def desk(demo, standin, settings, queued):
    """The demo shop with the model stand-in as the configured model and no queue hop."""
    settings.MODEL_BASE_URL = standin.base_url
    settings.MODEL_MAX_RETRY_WAIT = 0.05
    return demo
