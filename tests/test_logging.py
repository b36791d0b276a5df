"""Logs: every line says which request, conversation, run and task it was written for, as JSON or as text.

A request id comes from the request's X-Request-ID when it is a plain id (else a new one), is answered in
the response, travels with the Celery task the request sent, and is on every line that task writes.
"""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from celery.signals import before_task_publish, task_postrun, task_prerun

import support.worker  # noqa: F401  (its signal handlers)
from support.models import Run
from support.ops import log_context
from tests.desk_factories import start_conversation

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def lines():
    """What the `support` loggers write through a handler set up as LOGGING sets up the console's, as JSON."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(log_context.JsonFormatter())
    handler.addFilter(log_context.ContextFilter())
    logger = logging.getLogger("support")
    logger.addHandler(handler)
    previous, logger.level = logger.level, logging.INFO
    yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    logger.removeHandler(handler)
    logger.level = previous


def test_a_json_line_carries_time_level_logger_message_and_the_bound_fields(lines):
    with log_context.bound(request_id="req-1", conversation="c-2"):
        with log_context.bound(run="r-3"):
            logging.getLogger("support.desk.runner").warning("run %s: lease lost", "r-3", extra={"attempt": 2})
        logging.getLogger("support.desk.runner").info("after the run")
    first, second = lines()
    assert {k: first[k] for k in ("level", "logger", "message", "request_id", "conversation", "run", "attempt")} == {
        "level": "WARNING", "logger": "support.desk.runner", "message": "run r-3: lease lost", "request_id": "req-1",
        "conversation": "c-2", "run": "r-3", "attempt": 2}
    assert first["time"].endswith("+00:00") and first["process"] == os.getpid()
    assert "run" not in second and second["conversation"] == "c-2"


def test_a_json_line_carries_the_traceback_in_one_field(lines):
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("support.desk.runner").exception("failed")
    (line,) = lines()
    assert line["message"] == "failed" and "ValueError: boom" in line["exc"]


def test_the_plain_format_appends_the_bound_fields_after_the_message():
    record = logging.LogRecord("support.x", logging.INFO, __file__, 1, "hello", None, None)
    with log_context.bound(request_id="abc", run="r9"):
        text = log_context.PlainFormatter().format(record)
    assert text.endswith("INFO support.x: hello [request_id=abc run=r9]")


def test_a_request_gets_an_id_answered_in_its_response_and_on_its_access_line(client, caplog):
    with caplog.at_level(logging.INFO, logger="support.http"):
        response = client.get("/healthz", HTTP_X_REQUEST_ID="edge-42")
        other = client.get("/no-such-page/")
    assert response["X-Request-ID"] == "edge-42"
    assert len(other["X-Request-ID"]) == 32
    (access,) = [r for r in caplog.records if r.name == "support.http"]  # the probe writes no access line
    assert (access.method, access.path, access.status, access.request_id) == (
        "GET", "/no-such-page/", 404, other["X-Request-ID"])


@pytest.mark.parametrize("sent", ["a\nforged line", "x" * 65, "<script>", ""])
def test_a_request_id_that_is_not_a_plain_id_is_replaced(client, sent):
    response = client.get("/healthz", HTTP_X_REQUEST_ID=sent)
    assert response["X-Request-ID"] != sent and len(response["X-Request-ID"]) == 32


def test_a_task_sent_during_a_request_carries_its_id():
    headers = {}
    with log_context.bound(request_id="req-77"):
        before_task_publish.send(sender="support.tasks.run_agent", body=(), headers=headers, exchange="",
                                 routing_key="celery")
    assert headers["request_id"] == "req-77"


@pytest.mark.django_db
def test_a_run_tasks_lines_carry_the_request_id_run_conversation_and_task(demo, lines):
    run = Run.objects.create(conversation=start_conversation(demo.maya))
    from support.tasks import run_agent as task

    task.push_request(id="task-1", request_id="req-9")
    try:
        task_prerun.send(sender=task, task_id="task-1", task=task, args=(run.pk,), kwargs={})
        logging.getLogger("support.desk.runner").info("working")
        task_postrun.send(sender=task, task_id="task-1", task=task, args=(run.pk,), kwargs={}, retval="answered")
        logging.getLogger("support.desk.runner").info("done")
    finally:
        task.pop_request()
    working, done = lines()
    assert {k: working.get(k) for k in ("request_id", "task", "run", "conversation")} == {
        "request_id": "req-9", "task": "task-1", "run": str(run.public_id),
        "conversation": str(run.conversation.public_id)}
    assert not {"request_id", "task", "run", "conversation"} & set(done)


def test_celerys_own_handlers_are_given_our_format_and_fields(settings):
    from celery.signals import after_setup_logger

    settings.LOG_FORMAT = "json"
    logger, stream = logging.getLogger("test.celery.root"), io.StringIO()
    logger.propagate = False
    handler = logging.StreamHandler(stream)
    logger.addHandler(handler)
    after_setup_logger.send(sender=None, logger=logger, loglevel=logging.INFO, logfile=None, format="", colorize=False)
    with log_context.bound(task="t-5"):
        logger.warning("Task succeeded")
    assert json.loads(stream.getvalue()) | {"time": None, "process": None} == {
        "time": None, "process": None, "level": "WARNING", "logger": "test.celery.root",
        "message": "Task succeeded", "task": "t-5"}


@pytest.mark.parametrize("variable, value", [("LOG_FORMAT", "xml"), ("LOG_LEVEL", "loud")])
def test_a_malformed_log_setting_stops_start_up_naming_it(variable, value, tmp_path):
    env = {**os.environ, variable: value, "VAR_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", "import agentsite.settings"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and f"{variable} must be" in done.stderr


@pytest.mark.django_db
def test_a_run_task_sent_with_its_ids_reads_nothing_to_label_its_lines(demo, lines, django_assert_num_queries):
    run = Run.objects.create(conversation=start_conversation(demo.maya))
    from support.tasks import run_agent as task

    task.push_request(id="task-2", run=str(run.public_id), conversation=str(run.conversation.public_id))
    try:
        with django_assert_num_queries(0):
            task_prerun.send(sender=task, task_id="task-2", task=task, args=(run.pk,), kwargs={})
        logging.getLogger("support.desk.runner").info("working")
        task_postrun.send(sender=task, task_id="task-2", task=task, args=(run.pk,), kwargs={}, retval="answered")
    finally:
        task.pop_request()
    working = lines()[0]
    assert (working["run"], working["conversation"]) == (str(run.public_id), str(run.conversation.public_id))


def test_a_queued_run_carries_its_public_ids_in_the_tasks_headers(monkeypatch):
    from support.desk import queue

    sent = []
    monkeypatch.setattr(queue.app, "send_task", lambda name, **kw: sent.append((name, kw)))
    queue.run_agent(7, run="r-1", conversation="c-1")
    queue.run_agent(8)
    assert sent == [(queue.RUN_AGENT, {"args": [7], "headers": {"run": "r-1", "conversation": "c-1"}}),
                    (queue.RUN_AGENT, {"args": [8], "headers": None})]
