"""Prometheus metrics: what each process counts (support/ops/scrape.py reads the desk's state and serves them).

One endpoint per process, no shared files: every daphne answers /metrics with its own counters, and each
Celery worker serves its own on WORKER_METRICS_PORT; Prometheus scrapes every process and sums. (The
client's multiprocess mode would merge processes through files on one machine only; ours run on several.)
The desk's state (runs by status, approvals waiting, the queue) is read from the database and Redis when
/metrics is scraped, so every daphne reports the same values: read those with max(), not sum().
Labels take values from closed sets only (routes, not paths; known tools; stop reasons), so a model or a
client cannot grow the number of series.
"""

from __future__ import annotations

import logging
import re
import time

from prometheus_client import Counter, Gauge, Histogram

from support.agent.types import STOP_REASONS

log = logging.getLogger(__name__)

SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
_STOP_REASONS = frozenset((*STOP_REASONS, "stalled"))  # the loop's, and the sweeper's Run.STALLED
LONG_SECONDS = (0.1, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600)

HTTP_REQUESTS = Counter("desk_http_requests", "HTTP requests answered, by route pattern, method and status.",
                        ["route", "method", "status"])
HTTP_SECONDS = Histogram("desk_http_request_seconds", "Time to answer an HTTP request, by route pattern.",
                         ["route"], buckets=SECONDS)
SOCKETS_OPEN = Gauge("desk_websockets_open", "Websockets open in this process (customer or staff).", ["socket"])
SOCKETS_OPENED = Counter("desk_websockets_opened", "Websockets accepted (customer or staff).", ["socket"])
MODEL_CALLS = Counter("desk_model_calls", "Model calls made by runs, by model and result (ok, error).",
                      ["model", "result"])
MODEL_SECONDS = Histogram("desk_model_call_seconds", "Time of one model call, retries included.", ["model"],
                          buckets=LONG_SECONDS)
MODEL_RETRIES = Counter("desk_model_retries", "Model call attempts past the first (429, 5xx, lost streams).",
                        ["model"])
MODEL_TOKENS = Counter("desk_model_tokens", "Tokens the model endpoint counted, by kind (prompt, completion).",
                       ["model", "kind"])
MODEL_COST = Counter("desk_model_cost_usd", "What model calls cost, in US dollars, from the price table.",
                     ["model"])
TOOL_CALLS = Counter("desk_tool_calls", "Tool calls answered, by where the tool lives (desk, or the MCP server's "
                     "name), tool and result (ok, error, rejected).", ["server", "tool", "result"])
TOOL_SECONDS = Histogram("desk_tool_call_seconds", "Time of one tool call, by server and tool.", ["server", "tool"],
                         buckets=SECONDS)
RUN_TASKS = Counter("desk_run_tasks", "Run tasks a worker ended, by what happened: a stop reason, "
                    "awaiting_approval, or not_claimed / lease_lost / requeued / failed / exception.", ["result"])
RUN_TASK_SECONDS = Histogram("desk_run_task_seconds", "Time a worker spent on one run task.", buckets=LONG_SECONDS)
SWEPT_RUNS = Counter("desk_sweeper_requeued_runs", "Runs the sweeper sent again (a stalled or lost worker).")
SWEPT_APPROVALS = Counter("desk_sweeper_expired_approvals", "Approvals the sweeper expired.")
RUNS_STOPPED = Counter("desk_runs_stopped", "Runs a worker stopped, by stop reason.", ["stop_reason"])
FIRST_TOKEN_SECONDS = Histogram("desk_model_first_token_seconds", "Time from the start of a model call to the "
                                "first streamed text of its reply (calls that stream text only).", ["model"],
                                buckets=SECONDS)
DECISION_SECONDS = Histogram("desk_approval_decision_seconds", "Time from an approval's request to a person's "
                             "decision, by decision (approved, rejected).", ["decision"],
                             buckets=(5, 15, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 12 * 3600, 24 * 3600))
EVENTS_PUBLISHED = Counter("desk_events_published", "Live events sent to the channel layer, by event type.",
                           ["type"])
EVENTS_DROPPED = Counter("desk_events_dropped", "Live events given up after their retries (Redis away): the "
                         "UIs replay them from the database when they notice the gap.", ["type"])
RATE_LIMITED = Counter("desk_rate_limit_refusals", "Requests and sockets refused over a limit, by what the "
                       "limit counts (messages, conversations, sockets, signin).", ["limit"])
SIGNIN_GUESSING = Counter("desk_signin_guessing_alerts", "Alerts on persistent sign-in guessing: an e-mail or a "
                          "client address reached SIGNIN_GUESSING_ALERT_PER_HOUR failed sign-ins in an hour (once an "
                          "hour each).", ["counted_per"])


# -- what the processes count ---------------------------------------------------------------------

def route_of(request) -> str:
    """The URL pattern that answered (bounded), never the path itself (unbounded: ids, probes)."""
    match = getattr(request, "resolver_match", None)
    if match is not None and match.route is not None:
        return "/" + match.route
    return request.path_info if request.path_info in ("/healthz", "/readyz", "/metrics") else "unmatched"


def http_request(method: str, route: str, status: int, seconds: float) -> None:
    method = method if method in ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS") else "other"
    HTTP_REQUESTS.labels(route, method, str(status)).inc()
    HTTP_SECONDS.labels(route).observe(seconds)


def socket_opened(consumer) -> None:
    """A consumer accepted its socket (counted once, so a close without an accept changes nothing)."""
    kind = "staff" if getattr(consumer, "staff", False) else "customer"
    if not getattr(consumer, "_metrics_socket", None):
        consumer._metrics_socket = kind
        SOCKETS_OPEN.labels(kind).inc()
        SOCKETS_OPENED.labels(kind).inc()


def socket_closed(consumer) -> None:
    kind = getattr(consumer, "_metrics_socket", None)
    if kind:
        consumer._metrics_socket = None
        SOCKETS_OPEN.labels(kind).dec()


def step_recorded(step, run=None, *, known_tool: bool = False, server: str = "desk") -> None:
    """A row of the trace was saved (support.agent.types.Step) for `run`: a model call or a tool call. A
    failed one is also logged, at WARNING with the run's and conversation's ids (the operator's view of
    model and tool errors; the error text is ours or the endpoint's, never the customer's message).
    A tool step is counted under its name only when `known_tool` (one of the desk's tools, or a tool MCP_SERVERS
    lists), else "unknown"; `server` is "desk" for the desk's own tools, else the MCP server's configured name
    (both closed sets: names come from the code and the setting, never from the model)."""
    if step.error and step.error != "rejected by staff":
        _log_step_error(step, run)
    if step.kind == "model":
        model = (step.model or "unknown")[:60]
        MODEL_CALLS.labels(model, "error" if step.error else "ok").inc()
        MODEL_SECONDS.labels(model).observe(step.duration_ms / 1000)
        if step.attempts > 1:
            MODEL_RETRIES.labels(model).inc(step.attempts - 1)
        MODEL_TOKENS.labels(model, "prompt").inc(step.prompt_tokens)
        MODEL_TOKENS.labels(model, "completion").inc(step.completion_tokens)
        MODEL_COST.labels(model).inc(max(float(step.cost_usd), 0.0))
        return
    if step.kind != "tool":  # a compaction of the history: no call to count
        return
    tool = step.tool if known_tool else "unknown"
    server = server if known_tool else "desk"
    result = "rejected" if step.error == "rejected by staff" else "error" if step.error else "ok"
    TOOL_CALLS.labels(server, tool, result).inc()
    TOOL_SECONDS.labels(server, tool).observe(step.duration_ms / 1000)


def _log_step_error(step, run) -> None:
    ids = {}
    if run is not None:
        ids = {"run": str(run.public_id), "conversation": str(getattr(run.conversation, "public_id", ""))}
    what = f"model call ({step.model or 'unknown model'})" if step.kind == "model" else f"tool {step.tool[:64]!r}"
    log.warning("run %s: %s failed after %d attempt(s): %s", ids.get("run", "?"), what, max(step.attempts, 1),
                step.error[:500], extra=ids)


def step_started(observer, step) -> None:
    """A run's step starts (DbObserver.step_started): a model call's first token is timed from here."""
    if step.kind != "model":
        return
    observer._metrics_call_started = time.monotonic()


def token_streamed(observer) -> None:
    """A run's model call streamed text (DbObserver.token): the first one of the call is timed."""
    started = getattr(observer, "_metrics_call_started", None)
    if started is not None:
        observer._metrics_call_started = None
        FIRST_TOKEN_SECONDS.labels(_model_name()).observe(time.monotonic() - started)


def _model_name() -> str:
    from django.conf import settings

    return settings.MODEL_NAME[:60]


def approval_decided(approval) -> None:
    """A person's decision was written (gate.approval_decide): how long the approval waited."""
    if approval.decided_at and approval.requested_at and approval.decision in ("approved", "rejected"):
        DECISION_SECONDS.labels(approval.decision).observe(
            max((approval.decided_at - approval.requested_at).total_seconds(), 0.0))


_EVENT_TYPE = re.compile(r"[a-z_]{1,20}(\.[a-z_]{1,20}){0,2}")


def events_sent(items, *, dropped: bool = False) -> None:
    """Events the publisher sent (or gave up on): [(group, message)], one event in several groups counted once."""
    seen = {}
    for _, message in items:
        kind = str((message.get("event") or {}).get("type", ""))
        seen[message.get("id")] = kind if _EVENT_TYPE.fullmatch(kind) else "other"
    counter = EVENTS_DROPPED if dropped else EVENTS_PUBLISHED
    for kind in seen.values():
        counter.labels(kind).inc()


LIMIT_KINDS = ("messages", "conversations", "sockets", "signin")


def rate_limited(limits) -> None:
    """A request or socket was refused over one of `limits` (support.ops.limits.Limit); counted once."""
    kinds = {limit.key.split(":", 1)[0] for limit in limits}
    kind = kinds.pop() if len(kinds) == 1 else "other"
    RATE_LIMITED.labels(kind if kind in LIMIT_KINDS else "other").inc()


def signin_guessing(counted_per: str) -> None:
    """Failed sign-ins for one e-mail or from one address (`counted_per`) reached the alert's threshold."""
    SIGNIN_GUESSING.labels(counted_per if counted_per in ("email", "address") else "other").inc()


def task_ended(task_name: str, retval, seconds: float | None) -> None:
    """A Celery task returned (or raised: retval is then the exception)."""
    if task_name == "support.tasks.run_agent":
        result = "exception" if isinstance(retval, BaseException) else str(retval).replace(" ", "_")[:40]
        RUN_TASKS.labels(result).inc()
        if result in _STOP_REASONS:
            RUNS_STOPPED.labels(result).inc()
        if seconds is not None:
            RUN_TASK_SECONDS.observe(seconds)
    elif task_name == "support.tasks.sweep" and isinstance(retval, dict):
        SWEPT_RUNS.inc(_count(retval.get("requeued")))
        SWEPT_APPROVALS.inc(_count(retval.get("expired")))


def _count(done) -> int:
    """The sweeper's results are lists of ids or counts (services.runs_recover, approvals_expire)."""
    return done if isinstance(done, int) else len(done or ())
