"""What Celery processes get besides the tasks: log lines in LOG_FORMAT with the request id, run,
conversation and task they were written for, per-task metrics, a /metrics endpoint of each worker's own, and
the request id carried from a web request to the task it sends. Connected by SupportConfig.ready, so every
process (site or worker) has them before it sends or runs a task."""

from __future__ import annotations

import logging
import time

from celery.signals import (
    after_setup_logger,
    after_setup_task_logger,
    before_task_publish,
    task_postrun,
    task_prerun,
    worker_init,
    worker_ready,
)
from django.conf import settings

from support.desk.assistant import model_price_problem
from support.desk.queue import RUN_AGENT
from support.models import Run
from support.ops import metrics
from support.ops.log_context import ContextFilter, bind, current, formatter, unbind
from support.ops.scrape import serve_worker_metrics


@worker_ready.connect
def _say_what_will_be_refused(**kwargs):
    """Workers run no Django checks: a configuration that refuses every run is logged at start-up."""
    problem = model_price_problem()
    if problem:
        logging.getLogger("support").error("Runs will be refused: %s.", problem)


@worker_init.connect
def _serve_metrics(**kwargs):
    if settings.WORKER_METRICS_PORT:
        serve_worker_metrics(settings.WORKER_METRICS_HOST, settings.WORKER_METRICS_PORT)


@after_setup_logger.connect
@after_setup_task_logger.connect
def _log_in_our_format(logger=None, **kwargs):
    """Celery's handlers (its own lines, and anything else reaching the root logger) write LOG_FORMAT with
    the bound fields, like the site's."""
    for handler in logger.handlers:
        handler.setFormatter(formatter(settings.LOG_FORMAT))
        handler.addFilter(ContextFilter())


@before_task_publish.connect
def _pass_the_request_id(headers=None, **kwargs):
    """A task sent while a request is handled carries its id, so the run's lines can be found from it."""
    request_id = current().get("request_id")
    if request_id and headers is not None:
        headers.setdefault("request_id", request_id)


_started: dict[str, tuple[float, object]] = {}  # task id -> (start, log context token); threads pool: one dict


@task_prerun.connect
def _bind_task(task_id=None, task=None, args=None, kwargs=None, **extra):
    fields = {"task": task_id, "request_id": task.request.get("request_id")}
    if task.name == RUN_AGENT:
        run, conversation = task.request.get("run"), task.request.get("conversation")
        if isinstance(run, str) and isinstance(conversation, str) and run and conversation:
            fields.update(run=run, conversation=conversation)  # sent with the task: nothing to read
        else:
            fields.update(_run_fields((args or [None])[0] if args else (kwargs or {}).get("run_id")))
    _started[task_id] = (time.monotonic(), bind(**fields))


@task_postrun.connect
def _count_task(task_id=None, task=None, retval=None, **extra):
    started, token = _started.pop(task_id, (None, None))
    metrics.task_ended(task.name, retval, None if started is None else time.monotonic() - started)
    if token is not None:
        unbind(token)


def _run_fields(run_id) -> dict:
    """The run's and its conversation's public ids, for every line the run's task writes."""
    try:
        run, conversation = Run.objects.filter(pk=run_id).values_list("public_id", "conversation__public_id").get()
    except Exception:  # gone, or the database is down: the task will say so itself
        return {}
    return {"run": run, "conversation": conversation}
