"""How the desk talks to a shop it does not run: bounded retries for reads and a circuit per shop.

Both remote backends (http.py, shopify.py) call through a Guard:
- `guard.read(fn)` runs fn, and again after a wait when it raises Retryable (a 429, a 5xx, a connection that
  failed or timed out), at most SHOP_READ_RETRIES more times; a Retry-After the shop sent is honoured, up to
  SHOP_RETRY_MAX_WAIT_SECONDS, else the wait grows (0.2 s, 0.4 s, ...) with a little jitter.
- `guard.write(fn)` runs fn once: a write is repeated only by its caller, with the same idempotency key, after
  asking the shop by that key what became of it (support/shop/effects.py).
- Both count towards the circuit (pybreaker): after SHOP_CIRCUIT_FAILURES failures in a row the shop is not
  called for SHOP_CIRCUIT_RESET_SECONDS, and every call fails at once with ShopUnavailable; then one call is
  let through, and its outcome closes or reopens the circuit. An answer the shop meant (not found, invalid,
  over the refundable balance) is not a failure.
The circuit is per process: each worker learns for itself that a shop is down, within a few calls.

Every answer is read through `send_bounded`: at most SHOP_MAX_ANSWER_BYTES, all of it within
SHOP_ANSWER_DEADLINE_SECONDS of the request. A per-read timeout alone lets a shop that sends a byte now and
then hold a worker forever, and one that streams without end fill its memory; either is cut off and is a shop
not answering (a write's outcome unknown), never a 500.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx2
import pybreaker
from django.conf import settings

from support.shop import port

log = logging.getLogger(__name__)
T = TypeVar("T")


class Retryable(port.ShopUnavailable):
    """A failure a read may be tried again after: the shop was busy, failing or unreachable for a moment."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


# What a shop says on purpose: not a sign it is down.
_MEANT = (port.NotFound, port.Invalid, port.ExceedsRefundable)


class Guard:
    def __init__(self, name: str, *, failures: int | None = None, reset_seconds: float | None = None,
                 retries: int | None = None, max_wait: float | None = None, sleep: Callable[[float], None] = time.sleep):
        self.name = name
        self.retries = settings.SHOP_READ_RETRIES if retries is None else retries
        self.max_wait = settings.SHOP_RETRY_MAX_WAIT_SECONDS if max_wait is None else max_wait
        self._sleep = sleep
        self.breaker = pybreaker.CircuitBreaker(
            fail_max=failures or settings.SHOP_CIRCUIT_FAILURES,
            reset_timeout=reset_seconds or settings.SHOP_CIRCUIT_RESET_SECONDS,
            exclude=[lambda e: isinstance(e, _MEANT) or not isinstance(e, port.ShopError)],
            # The call that trips the circuit raises its own error: a write's OutcomeUnknown must stay one.
            name=name, throw_new_error_on_trip=False)

    @property
    def is_open(self) -> bool:
        return self.breaker.current_state == pybreaker.STATE_OPEN

    def read(self, fn: Callable[[], T]) -> T:
        for attempt in range(self.retries + 1):
            try:
                return self._call(fn)
            except Retryable as e:
                if attempt == self.retries or self.is_open:
                    raise port.ShopUnavailable(str(e)) from e
                wait = self._wait(attempt, e.retry_after)
                log.info("shop %s: %s; trying again in %.2f s", self.name, e, wait)
                self._sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    def write(self, fn: Callable[[], T]) -> T:
        try:
            return self._call(fn)
        except Retryable as e:
            raise port.ShopUnavailable(str(e)) from e

    def _call(self, fn: Callable[[], T]) -> T:
        try:
            return self.breaker.call(fn)
        except pybreaker.CircuitBreakerError:
            raise port.ShopUnavailable(
                f"the shop {self.name} failed {self.breaker.fail_max} times in a row; the desk waits "
                f"{self.breaker.reset_timeout:g} s before calling it again") from None

    def _wait(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return max(0.0, min(float(retry_after), self.max_wait))
        return min(self.max_wait, 0.2 * 2 ** attempt) * random.uniform(0.8, 1.2)


def retry_after_seconds(value: str | None) -> float | None:
    """A Retry-After header in seconds (the contract's form); None when absent or not a number."""
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return seconds if seconds is not None and seconds >= 0 else None


@dataclass(frozen=True)
class Answer:
    """A shop's answer read whole: what the backends read of an httpx response."""

    status_code: int
    headers: httpx2.Headers
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.content)


def send_bounded(client: httpx2.Client, request: httpx2.Request, *, write: bool) -> Answer:
    """The answer to `request`, read whole within the byte cap and the deadline. Cut off: ShopUnavailable on a
    read (not tried again: a shop that did it once does it again), OutcomeUnknown on a write (it was sent).
    The deadline is checked as each piece arrives, so a call ends at most one read timeout past it; transport
    errors are the caller's to map."""
    cap, deadline = settings.SHOP_MAX_ANSWER_BYTES, time.monotonic() + settings.SHOP_ANSWER_DEADLINE_SECONDS
    # Nothing compressed: a few KB of gzip may decode to gigabytes before a single piece could be counted.
    request.headers["Accept-Encoding"] = "identity"
    response = client.send(request, stream=True)
    pieces, size = [], 0
    try:
        declared = response.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > cap:
            raise _cut(f"its answer is {declared} bytes, more than SHOP_MAX_ANSWER_BYTES ({cap})", write)
        for piece in response.iter_bytes():
            size += len(piece)
            if size > cap:
                raise _cut(f"its answer is larger than SHOP_MAX_ANSWER_BYTES ({cap} bytes)", write)
            if time.monotonic() > deadline:
                raise _cut("its answer was still coming after SHOP_ANSWER_DEADLINE_SECONDS "
                           f"({settings.SHOP_ANSWER_DEADLINE_SECONDS:g} s)", write)
            pieces.append(piece)
    finally:
        response.close()
    return Answer(response.status_code, response.headers, b"".join(pieces))


def _cut(why: str, write: bool) -> port.ShopError:
    if write:
        return port.OutcomeUnknown(f"the shop's answer to a write was cut off ({why}): it may or may not have "
                                   "done it")
    return port.ShopUnavailable(f"the shop is not answering as it should: {why}")
