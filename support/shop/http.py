"""HttpShop: the Shop over HTTP, for any shop that serves the shop contract (docs/shop-contract.md).

Every request is signed; reads go through the Guard (bounded retries, the circuit), writes are sent once.
A write whose answer never came is an OutcomeUnknown, never sent again here: the desk asks the shop by the
idempotency key what became of it. Answers are read strictly by contract.py.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any
from urllib.parse import quote, urlsplit

import httpx2
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from support.ops.outbound import require_https
from support.shop import contract, port
from support.shop.resilience import Answer, Guard, Retryable, retry_after_seconds, send_bounded

log = logging.getLogger(__name__)

CAPABILITIES_MAX_AGE = 300.0  # seconds a shop's answer to GET /capabilities is kept

# Errors before a single byte of the request left: a write may safely be called failed.
_NOT_SENT = (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout)


class HttpShop:
    """A shop reached at SHOP_URL with the key SHOP_API_KEY (or the ones given)."""

    def __init__(self, url: str | None = None, key: str | None = None, *, guard: Guard | None = None,
                 clock: Callable[[], float] = time.time):
        self.url = (settings.SHOP_URL if url is None else url).rstrip("/")
        self.key = settings.SHOP_API_KEY if key is None else key
        if not self.url or not self.key:
            raise ImproperlyConfigured("SHOP_BACKEND=http needs SHOP_URL and SHOP_API_KEY")
        require_https(self.url, "SHOP_URL")
        self.guard = guard or Guard(urlsplit(self.url).netloc or self.url)
        self._clock = clock
        self._capabilities: port.Capabilities | None = None
        self._capabilities_at = 0.0  # time.monotonic() of the answer
        connect, read = settings.SHOP_CONNECT_TIMEOUT_SECONDS, settings.SHOP_READ_TIMEOUT_SECONDS
        # One client for the process: httpx's pool is thread-safe and keeps connections to the shop open.
        self._client = httpx2.Client(base_url=self.url, timeout=httpx2.Timeout(
            connect=connect, read=read, write=read, pool=connect))

    def close(self) -> None:
        self._client.close()

    # -- what the shop has -------------------------------------------------------------------------------

    def capabilities(self) -> port.Capabilities:
        """What the shop says it has (GET /capabilities), kept CAPABILITIES_MAX_AGE seconds: the tool list and
        the prompt of every run read it. A shop without the route (404) is a single-brand store. A shop that
        cannot answer now keeps what it said last, or is a single-brand store until it says otherwise: a
        seller message is never offered on a guess."""
        now = time.monotonic()
        if self._capabilities is not None and now - self._capabilities_at < CAPABILITIES_MAX_AGE:
            return self._capabilities
        try:
            data = self._read("/capabilities", any_404=True)
            known = port.SINGLE_BRAND if data is None else contract.capabilities(
                contract.envelope(data, "capabilities"))
        except port.ShopUnavailable as e:
            log.warning("shop capabilities not read (%s): %s", type(e).__name__, e)
            return self._capabilities or port.SINGLE_BRAND
        self._capabilities, self._capabilities_at = known, now
        return known

    # -- reads ------------------------------------------------------------------------------------------

    def policies(self) -> list[port.ShopPolicy] | None:
        """GET /policies (optional in the contract: a shop without the route, any 404, serves none)."""
        data = self._read("/policies", any_404=True)
        return None if data is None else contract.policies(data)

    def customer_by_email(self, email: str) -> port.ShopCustomer | None:
        data = self._read("/customers", {"email": email})
        return None if data is None else contract.customer(contract.envelope(data, "customer"))

    def orders_of(self, customer_id: str, limit: int | None = None) -> list[port.Order]:
        data = self._read(f"/customers/{_segment(customer_id)}/orders")
        orders = [] if data is None else contract.orders(data)
        return orders[:limit] if limit is not None else orders

    def order_briefs(self, customer_id: str, limit: int | None = None) -> list[port.OrderBrief]:
        return [port.brief(o) for o in self.orders_of(customer_id, limit)]

    def order(self, number: str) -> port.Order | None:
        data = self._read(f"/orders/{_segment(number)}")
        return None if data is None else contract.order(contract.envelope(data, "order"))

    def lock_order(self, number: str) -> None:
        """Nothing to hold: the shop checks the refundable balance itself as it writes."""

    def refund_by_key(self, key: str, order_number: str | None = None) -> port.RefundResult | None:
        data = self._read("/refunds", {"idempotency_key": contract.wire_key(key)})
        return None if data is None else contract.refund(contract.envelope(data, "refund"))

    def seller_message_by_key(self, key: str, order_number: str | None = None) -> port.SellerMessageResult | None:
        # An extension the contract does not require: a shop without the route answers 404 like "not found",
        # and the desk then sends the message again under the same key, which the shop answers idempotently.
        data = self._read("/seller-messages", {"idempotency_key": contract.wire_key(key)}, any_404=True)
        return None if data is None else contract.seller_message(contract.envelope(data, "message"))

    # -- writes -----------------------------------------------------------------------------------------

    def refund(self, *, order_number: str, amount: Decimal, reason: str,
               idempotency_key: str | None) -> port.RefundResult:
        if not isinstance(amount, Decimal) or amount <= 0 or amount != amount.quantize(Decimal("0.01")):
            raise port.Invalid(f"a refund is a positive amount with two decimals, got {amount!r}")
        data = self._write(f"/orders/{_segment(order_number)}/refunds", {"amount": f"{amount:.2f}", "reason": reason},
                           idempotency_key, order_number)
        return contract.refund(contract.envelope(data, "refund"), order_number)

    def message_seller(self, *, order_number: str, message: str, idempotency_key: str | None,
                       conversation: str | None = None) -> port.SellerMessageResult:
        data = self._write(f"/orders/{_segment(order_number)}/seller-messages", {"message": message},
                           idempotency_key, order_number)
        return contract.seller_message(contract.envelope(data, "message"), order_number)

    # -- the wire ---------------------------------------------------------------------------------------

    def _read(self, path: str, params: dict | None = None, *, any_404: bool = False) -> dict | None:
        """The answer's body, or None for a 404 (not_found; any 404 with any_404)."""

        def attempt() -> dict | None:
            response = self._send("GET", path, params, write=False)
            if response.status_code == 404 and any_404:
                return None
            return _answer(response, write=False)

        return self.guard.read(attempt)

    def _write(self, path: str, payload: dict, key: str | None, order_number: str) -> dict:
        # Without a key nothing guards a retry; the contract requires one, so the call gets its own.
        key = contract.wire_key(key or f"desk-{uuid.uuid4()}")

        def attempt() -> dict:
            data = _answer(self._send("POST", path, None, write=True, payload=payload, key=key), write=True)
            if data is None:
                raise port.NotFound(f"no order {order_number}")
            return data

        return self.guard.write(attempt)

    def _send(self, method: str, path: str, params: dict | None, *, write: bool, payload: dict | None = None,
              key: str | None = None) -> Answer:
        body = json.dumps(payload, separators=(",", ":")).encode() if payload is not None else b""
        headers = {"Accept": "application/json"}
        if payload is not None:
            headers["Content-Type"] = "application/json"
        if key is not None:
            headers["Idempotency-Key"] = key
        request = self._client.build_request(method, path, params=params, content=body or None, headers=headers)
        # Signed over the target exactly as it goes on the wire (with the base URL's path, percent-encoded), and
        # in version 2 over the key and a nonce of its own: a retry is a new request the shop has not seen.
        request.headers.update(contract.signed_headers(
            self.key, version=settings.SHOP_CONTRACT_VERSION, timestamp=str(int(self._clock())), method=method,
            path_and_query=request.url.raw_path.decode("ascii"), body=body, idempotency_key=key))
        started, status = time.monotonic(), "no answer"
        try:
            response = send_bounded(self._client, request, write=write)
            status = str(response.status_code)
            return response
        except _NOT_SENT as e:
            status = "not connected"
            if write:
                raise port.ShopUnavailable(f"could not connect to the shop ({type(e).__name__}); nothing was sent")
            raise Retryable(f"could not connect to the shop ({type(e).__name__})") from None
        except httpx2.TransportError as e:
            if write:
                raise port.OutcomeUnknown(f"the shop did not answer the {method} {path} ({type(e).__name__}): "
                                          "it may or may not have done it") from None
            raise Retryable(f"the shop did not answer ({type(e).__name__})") from None
        finally:
            # Query values (an e-mail address, an idempotency key) and the signature stay out of the log.
            query = "?" + "&".join(f"{name}=…" for name in params) if params else ""
            log.info("shop %s %s%s %s %d ms", method, path, query, status, (time.monotonic() - started) * 1000)


def _answer(response: Answer, *, write: bool) -> dict | None:
    """The body of a 2xx answer; None for 404 not_found; else the error the status means."""
    status = response.status_code
    if 200 <= status < 300:
        return _body(response)
    if status == 429:
        # Nothing was done: a write refused this way fails plainly (Guard.write), a read is tried again.
        raise Retryable("the shop is busy (429)", retry_after_seconds(response.headers.get("Retry-After")))
    if status >= 500:
        if write:
            raise port.OutcomeUnknown(f"the shop failed ({status}) on a write: it may or may not have done it")
        raise Retryable(f"the shop failed ({status})", retry_after_seconds(response.headers.get("Retry-After")))
    error = _error_body(response)
    code = error.get("error")
    if status == 404 and code == "not_found":
        return None
    if status == 401:
        if code == "stale_timestamp":
            raise port.ShopUnavailable("the shop refused the desk's timestamp: the desk's clock and the shop's "
                                       "are more than 300 s apart")
        raise port.ShopUnavailable("the shop refused the desk's signature (check SHOP_API_KEY) or its clock")
    if status == 409 and code == "exceeds_refundable":
        raise port.ExceedsRefundable(contract.money(error.get("refundable"), "refundable"))
    if status == 422 and code == "invalid":
        raise port.Invalid(contract.shown(error.get("detail") or "the shop refused the request as invalid"))
    raise port.BadAnswer(f"unexpected answer: {status} {contract.shown(code or 'without an error code')}")


def _body(response: Answer) -> dict:
    return contract.decode(response.content, response.status_code)


def _error_body(response: Answer) -> dict:
    try:
        return _body(response)
    except port.BadAnswer:
        return {}


def _segment(value: Any) -> str:
    """An id as one path segment: a "/" or "?" in it cannot reach another route."""
    return quote(str(value), safe="")
