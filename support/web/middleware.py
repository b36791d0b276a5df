"""Errors under /api/ answer JSON in the API's one shape, whatever raised them and whether DEBUG is on.

A view's own refusals are ApiError (support/web/views/common.py). Everything else that escapes a view is
mapped here: a database that is down, busy or locked (or Redis, read before anything was saved) is a
retryable 503 with Retry-After; Http404 and PermissionDenied keep their status; anything else is logged
with its traceback and answered as a 500 that names no internals. An error Django turned into an HTML page
before it reached us (raised by another middleware) is rewritten with the same codes.
"""

from __future__ import annotations

import logging
import sys

from django.core.exceptions import PermissionDenied, RequestDataTooBig, SuspiciousOperation
from django.core.signals import got_request_exception
from django.db import DatabaseError, InterfaceError, OperationalError
from django.http import Http404, HttpResponse, JsonResponse

from support import profiles
from support.desk import services
from support.ops.redaction import redacted_path
from support.shop import port
from support.web.views.common import json_error

log = logging.getLogger(__name__)

API_PREFIX = "/api/"
RETRY_AFTER_SECONDS = 5
DATABASE_BUSY = "The database is busy. Try again in a few seconds."
DATABASE_DOWN = "The database cannot be reached. Try again in a few seconds."
SERVICE_DOWN = "A service the desk depends on cannot be reached. Try again in a few seconds."
SHOP_DOWN = "The shop's order system can't be reached right now. Try again in a minute."
INTERNAL = "Something went wrong on our side; it has been logged."
# What Django's own HTML error pages said, in words for the API's clients.
GENERIC = {
    400: "The request was refused as malformed.",
    403: "You may not do that.",
    404: "There is no such API endpoint.",
    405: "This endpoint does not answer that method.",
    500: INTERNAL,
    503: "The desk is unavailable for a moment. Try again in a few seconds.",
}
# PostgreSQL's SQLSTATEs for "waited too long or lost a race": the request would work a moment later.
BUSY_SQLSTATES = {"55P03", "57014", "40001", "40P01"}  # lock_not_available, query_canceled, serialization, deadlock
# SQLite's OperationalError also covers programming errors ("no such table"); only these are the database's state.
SQLITE_UNAVAILABLE = ("database is locked", "database table is locked", "unable to open database file",
                      "disk i/o error")


def is_api(request) -> bool:
    return request.path_info.startswith(API_PREFIX)


def error_response(request, exception: BaseException):
    """The JSON answer to an exception that escaped an API view."""
    if isinstance(exception, Http404):
        return json_error(404, "Not found.")
    if isinstance(exception, PermissionDenied):
        return json_error(403, "You may not do that.")
    if isinstance(exception, RequestDataTooBig):
        return json_error(413, "The request body is too large.")
    if isinstance(exception, SuspiciousOperation):
        return json_error(400, "The request was refused as malformed.")
    if isinstance(exception, services.BeingSetUp):  # not retryable: it lasts until the desk goes live
        return JsonResponse({"error": str(exception), "code": exception.code, "retryable": False}, status=503)
    unavailable = unavailable_message(exception)
    if unavailable is not None:
        log.warning("%s %s: answered 503: %s: %s", request.method, redacted_path(request.path),
                    type(exception).__name__, str(exception).strip())
        return json_error(503, unavailable, {"Retry-After": str(RETRY_AFTER_SECONDS)})
    log.error("%s %s: answered 500", request.method, redacted_path(request.path),
              exc_info=(type(exception), exception, exception.__traceback__))
    return json_error(500, INTERNAL)


def unavailable_message(exception: BaseException) -> str | None:
    """What to tell the client when the exception means a service is down or busy (a retry may work); None
    when it is a bug or a refusal that a retry would meet again."""
    if isinstance(exception, (OperationalError, InterfaceError)):
        cause = exception.__cause__
        if type(cause).__module__.startswith("sqlite3"):
            text = str(exception).lower()
            if not any(s in text for s in SQLITE_UNAVAILABLE):
                return None
            return DATABASE_BUSY if "locked" in text else DATABASE_DOWN
        return DATABASE_BUSY if getattr(cause, "sqlstate", None) in BUSY_SQLSTATES else DATABASE_DOWN
    if isinstance(exception, DatabaseError):
        return None  # integrity, programming and data errors: a bug, not an outage
    if _is_redis_outage(exception):
        return SERVICE_DOWN
    if isinstance(exception, port.ShopUnavailable):  # a remote shop down, refusing us or answering nonsense
        return SHOP_DOWN
    return None


def _is_redis_outage(exception: BaseException) -> bool:
    """Redis read or written before anything was saved (a counter, a cache). Not Celery's broker errors:
    a run is sent only after its transaction committed, and services.run_enqueue keeps those to itself;
    one that escaped anyway must not be told "retry" for something that was saved."""
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeout

    return isinstance(exception, (RedisConnectionError, RedisTimeout))


def _remember_exception(sender, request=None, **kwargs):
    """Django announces an exception it is about to turn into an HTML page; keep it for the rewrite below."""
    if request is not None:
        request._api_exception = sys.exc_info()[1]


got_request_exception.connect(_remember_exception, dispatch_uid="support.web.middleware.remember_exception")


class ApiErrorsMiddleware:
    """First in MIDDLEWARE, so that it sees the response every other layer produced."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if is_api(request) and response.status_code >= 400 and \
                not response.get("Content-Type", "").startswith("application/json"):
            response = self._rewrite(request, response)
        return response

    def process_exception(self, request, exception):
        """An exception from a view: answered here, so Django never renders its HTML page for it."""
        if is_api(request):
            return error_response(request, exception)
        if isinstance(exception, port.ShopUnavailable):  # a page (a sign-in link, the console): plain words
            log.warning("%s %s: answered 503: %s", request.method, redacted_path(request.path), exception)
            return HttpResponse(SHOP_DOWN, status=503, content_type="text/plain; charset=utf-8",
                                headers={"Retry-After": "60"})
        return None

    @staticmethod
    def _rewrite(request, response):
        exception = getattr(request, "_api_exception", None)
        if exception is not None:
            rewritten = error_response(request, exception)
        else:
            status = response.status_code
            rewritten = json_error(status, GENERIC.get(status, INTERNAL if status >= 500 else GENERIC[400]))
        for header, value in response.items():  # CORS, Allow, Retry-After... but not the HTML's type or size
            if header.lower() not in ("content-type", "content-length") and header not in rewritten:
                rewritten[header] = value
        return rewritten


class ProfileOnceMiddleware:
    """A request reads the live agent profile's pointer once: its limits, the widget's face and the setup gate
    all come from the version live when it began (a publish in the request reads it again)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        with profiles.read_once():
            return self.get_response(request)
