"""What every API view shares: JSON errors, allowed methods, "a JSON object or 4xx", "staff or 403".

Every error under /api/ has one shape: {"error": "<plain words for a person>", "code": "<stable code>",
"retryable": true|false}. Clients branch on `code` (or the status), never on the words; the codes are
listed in ERROR_CODES and in docs/api.md. support/web/middleware.py gives errors raised outside a view's
ApiError (a database that is down, an unexpected exception, Django's own 404) the same shape.
"""

from __future__ import annotations

import functools
import json

from django.conf import settings
from django.http import HttpResponseNotAllowed, JsonResponse
from django.middleware.csrf import CsrfViewMiddleware, get_token
from django.views.decorators.http import require_http_methods

# status -> the stable code of an error with that status. Only 429 and 503 are worth retrying (after the
# Retry-After they carry): the same request will be refused the same way otherwise.
ERROR_CODES = {
    400: "invalid_request",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    415: "unsupported_media_type",
    429: "rate_limited",
    500: "internal_error",
    503: "unavailable",
}
RETRYABLE = {429, 503}


class ApiError(Exception):
    """Raised anywhere in a view: answered as {"error": message, "code": ..., "retryable": ...}."""

    def __init__(self, status: int, message: str, headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}

    def response(self) -> JsonResponse:
        return json_error(self.status, self.message, self.headers)


def json_error(status: int, message: str, headers: dict | None = None) -> JsonResponse:
    code = ERROR_CODES.get(status) or ("internal_error" if status >= 500 else "invalid_request")
    return JsonResponse({"error": message, "code": code, "retryable": status in RETRYABLE},
                        status=status, headers=headers)


def api(*methods: str):
    """The methods a view answers (405 otherwise, in JSON); ApiError raised inside becomes its response."""

    def decorate(view):
        guarded = require_http_methods(list(methods))(view)

        @functools.wraps(view)
        def wrapper(request, *args, **kwargs):
            try:
                response = guarded(request, *args, **kwargs)
            except ApiError as error:
                return error.response()
            if isinstance(response, HttpResponseNotAllowed):
                return json_error(405, f"Use {' or '.join(methods)} here.", {"Allow": response["Allow"]})
            return response

        return wrapper

    return decorate


def not_found(request, *args, **kwargs) -> JsonResponse:
    """Any other path under api/: a JSON 404 rather than an HTML page."""
    return json_error(404, "There is no such API endpoint.")


# -- the request body -----------------------------------------------------------------------------------

def body_limit() -> int:
    """The largest body we read: a maximal message, every character escaped, plus room for the rest."""
    return 4 * settings.MAX_MESSAGE_BYTES + 1024


def json_body(request) -> dict:
    """The request's JSON object, or ApiError: 413 too large, 415 not JSON, 400 malformed or not an object."""
    limit = body_limit()
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    # The declared length first, so an oversized body is refused before it is read.
    if declared > limit:
        raise ApiError(413, f"The request body is larger than {limit} bytes.")
    if request.content_type != "application/json":
        raise ApiError(415, "Send the request body as JSON (Content-Type: application/json).")
    body = request.body
    if len(body) > limit:
        raise ApiError(413, f"The request body is larger than {limit} bytes.")
    try:
        data = json.loads(body)
    except ValueError:  # malformed JSON or bytes that are not UTF-8
        raise ApiError(400, "The request body is not valid JSON.") from None
    if not isinstance(data, dict):
        raise ApiError(400, "The request body must be a JSON object.")
    return data


def optional_string(body: dict, field: str, *, max_length: int) -> str | None:
    value = body.get(field)
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > max_length:
        raise ApiError(400, f"{field} must be a non-empty string of at most {max_length} characters.")
    return value


# -- staff ----------------------------------------------------------------------------------------------

class _JsonCsrfCheck(CsrfViewMiddleware):
    def _reject(self, request, reason):
        return json_error(403, f"CSRF check failed ({reason}). Send the csrftoken cookie's value "
                               "in an X-CSRFToken header.")


def staff_required(view):
    """A logged-in staff member, or 403 in JSON (an API call is never redirected to the login page).

    CSRF is checked here, after the staff check, instead of by the middleware, so its failure is JSON too.
    """

    @functools.wraps(view)
    def wrapper(request, *args, **kwargs):
        if not request.user.is_authenticated:
            raise ApiError(403, "Log in with a staff account to use the staff API.")
        if not request.user.is_staff:
            raise ApiError(403, "This needs a staff account.")
        rejected = _JsonCsrfCheck(lambda r: None).process_view(request, None, (), {})
        if rejected is not None:
            return rejected
        get_token(request)  # every staff response carries the CSRF cookie the console's next POST needs
        return view(request, *args, **kwargs)

    wrapper.csrf_exempt = True  # from the middleware only: the check above replaces it
    return wrapper
