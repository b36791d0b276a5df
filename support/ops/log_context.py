"""Log lines that say where they came from: the request, conversation, run and task they were written for.

What a line is about is kept in context variables (one value per thread and per asyncio task), set by the
request middleware here and by the Celery signals in agentsite/celery.py, and copied onto every record by
ContextFilter. LOG_FORMAT=json writes one JSON object per line for a log collector; plain writes text with
the same fields appended. Imports nothing of Django's models: settings load this module.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime, timezone

from support.ops import metrics, tracing
from support.ops.redaction import redacted_args, redacted_path

# The fields a line may carry besides its own, in the order the plain format prints them.
FIELDS = ("request_id", "conversation", "run", "task")
_context: ContextVar[dict] = ContextVar("log_context", default={})

# A request id a client or the balancer sent is kept only when it is plainly an id: it goes into every
# line written for the request, so it must not be able to forge a line or fill the log.
REQUEST_ID_HEADER = "X-Request-ID"
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")
# Requests a balancer or a scraper makes every few seconds: not worth an access line each.
QUIET_PATHS = ("/healthz", "/readyz", "/metrics")


def current() -> dict:
    return _context.get()


@contextmanager
def bound(**fields):
    """Within the block, every log line carries `fields` (and those bound outside it)."""
    token = _context.set({**_context.get(), **{k: str(v) for k, v in fields.items() if v not in (None, "")}})
    try:
        yield
    finally:
        _context.reset(token)


def bind(**fields) -> object:
    """Bind `fields` until unbind(token): for code that cannot wrap a block (Celery's prerun/postrun)."""
    return _context.set({**_context.get(), **{k: str(v) for k, v in fields.items() if v not in (None, "")}})


def unbind(token) -> None:
    try:
        _context.reset(token)
    except ValueError:  # set in another context (a signal sent from another thread): forget it instead
        _context.set({})


def request_id_from(value: str | None) -> str:
    """The request id sent with the request when it is a plain id, else a new one."""
    if value and _REQUEST_ID.fullmatch(value):
        return value
    return uuid.uuid4().hex


class ContextFilter(logging.Filter):
    """Copies the bound fields onto each record (as attributes), so any formatter can print them; a path among
    its arguments loses its token (Django's own "Not Found: <path>" lines)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.args = redacted_args(record.args)
        context = _context.get()
        for name in FIELDS:
            if not hasattr(record, name):
                setattr(record, name, context.get(name, ""))
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, process, the bound fields
    that are set, any `extra` fields the call passed, and the traceback as `exc`."""

    _standard = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", *FIELDS}

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "process": record.process,
        }
        context = _context.get()
        for name in FIELDS:
            value = getattr(record, name, "") or context.get(name, "")
            if value:
                line[name] = value
        line.update(tracing.current_ids())  # with tracing on: the trace this line belongs to
        for name, value in vars(record).items():
            if name not in self._standard and not name.startswith("_"):
                line[name] = value if isinstance(value, (int, float, bool, type(None))) else str(value)
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False)


class PlainFormatter(logging.Formatter):
    """Text for a person at a terminal: time, level, logger, message, then the bound fields as name=value."""

    def __init__(self):
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        context = _context.get()
        fields = [(n, getattr(record, n, "") or context.get(n, "")) for n in FIELDS]
        fields.append(("trace_id", tracing.current_ids().get("trace_id", "")))
        tail = " ".join(f"{n}={v}" for n, v in fields if v)
        if not tail:
            return text
        first, newline, rest = text.partition("\n")  # after the message, before any traceback
        return f"{first} [{tail}]{newline}{rest}"


def formatter(kind: str) -> logging.Formatter:
    return JsonFormatter() if kind == "json" else PlainFormatter()


access_log = logging.getLogger("support.http")


class RequestContextMiddleware:
    """First in the chain: gives the request its id (kept from X-Request-ID when plain, else new), binds it
    for every line written while the request is handled, answers it in the response's X-Request-ID, and
    writes one access line per request (not for health checks and scrapes). Sync and async both: daphne
    runs it in its event loop and the views in threads, and the context variable follows."""

    sync_capable = async_capable = True

    def __init__(self, get_response):
        from asgiref.sync import iscoroutinefunction, markcoroutinefunction

        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self.is_async:
            return self._acall(request)
        with self._bound(request) as done:
            return done(self.get_response(request))

    async def _acall(self, request):
        with self._bound(request) as done:
            return done(await self.get_response(request))

    @contextmanager
    def _bound(self, request):
        request_id = request_id_from(request.headers.get(REQUEST_ID_HEADER))
        started = time.perf_counter()

        def done(response):
            response[REQUEST_ID_HEADER] = request_id
            _after(request, response, time.perf_counter() - started)
            return response

        with bound(request_id=request_id):
            yield done


def _after(request, response, seconds: float) -> None:
    route = metrics.route_of(request)
    metrics.http_request(request.method, route, response.status_code, seconds)
    if request.path_info not in QUIET_PATHS:
        path = redacted_path(request.path)  # a link's or a file's token would open it for whoever reads the log
        access_log.info("%s %s %s %.1f ms", request.method, path, response.status_code, seconds * 1000,
                        extra={"method": request.method, "path": path, "route": route,
                               "status": response.status_code, "duration_ms": round(seconds * 1000, 1)})
