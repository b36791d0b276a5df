"""The reference shop's HTTP face: the shop contract (docs/shop-contract.md) over a Store, with faults a
test can switch on. Signing is checked here on its own, not with the desk's code, so each checks the other.

A request goes: log it -> down? -> latency -> a queued failure? -> signature (version 2: the key and a nonce
signed) -> the nonce not seen before -> the route -> a malformed answer? -> for a write that committed: hold or
drop the answer -> answer.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import re
import threading
import time
from collections.abc import Awaitable, Callable
from urllib.parse import unquote

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from standin.endless import KINDS, endless_answer
from .store import NoSuchOrder, OverRefundable, ShippedByShop, Store, cents, money

WINDOW_SECONDS = 300
NONCE_SECONDS = 600  # how long an accepted nonce is remembered: longer than a timestamp stays good, either way
_NONCE = re.compile(r"^[A-Za-z0-9_-]{16,64}$")
MAX_KEY = 255
_MONEY = re.compile(r"^[0-9]{1,10}\.[0-9]{2}$")
_TIMESTAMP = re.compile(r"^-?[0-9]{1,15}$")
MALFORMED = ("not_json", "missing_field", "negative_amount")
DEFAULT_FAULTS = {"latency_ms": 0.0, "fail_next": [], "retry_after": None, "malformed_next": None,
                  "hold_after_write_seconds": 0.0, "drop_after_write": False, "down": False,
                  "accept_v1": False, "endless_answer": None}
# accept_v1: a shop not moved to version 2 yet (replayable); endless_answer: "huge" or "trickle" (standin/endless.py)
# What GET /capabilities answers: the Sundry marketplace, or a single-brand store (Store(single_brand=...)).
MARKETPLACE = {"sellers": True, "seller_messages": True, "seller_policies": True, "parcel_tracking": True}
SINGLE_BRAND = {**MARKETPLACE, "sellers": False, "seller_messages": False, "seller_policies": False}
ERROR_CODES = {429: "rate_limited", 500: "internal", 502: "bad_gateway", 503: "unavailable", 504: "timeout"}


class ShopState:
    """The faults switched on and the request log. One lock; never held across I/O."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._generation = 0  # a reset ends every answer being held
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._generation += 1
            self._faults = {k: (list(v) if isinstance(v, list) else v) for k, v in DEFAULT_FAULTS.items()}
            self._log: list[dict] = []
            self._nonces: dict[str, float] = {}  # nonce -> when it may be forgotten, oldest first

    def configure(self, **faults) -> dict:
        unknown = set(faults) - set(DEFAULT_FAULTS)
        if unknown:
            raise ValueError(f"unknown faults: {', '.join(sorted(unknown))}")
        if "fail_next" in faults and not all(isinstance(s, int) and 400 <= s <= 599 for s in faults["fail_next"]):
            raise ValueError("fail_next is a list of HTTP statuses (400 to 599)")
        if faults.get("malformed_next") not in (None, *MALFORMED):
            raise ValueError(f"malformed_next is one of {', '.join(MALFORMED)}")
        if faults.get("endless_answer") not in (None, *KINDS):
            raise ValueError(f"endless_answer is one of {', '.join(KINDS)}")
        with self._lock:
            self._faults.update({k: (list(v) if isinstance(v, list) else v) for k, v in faults.items()})
            return self.faults()

    def faults(self) -> dict:
        return {k: (list(v) if isinstance(v, list) else v) for k, v in self._faults.items()}

    def get(self, name: str):
        with self._lock:
            return self._faults[name]

    async def hold(self, seconds: float) -> None:
        """Wait `seconds`, or until the next reset (a test's answer held past its end would keep the server
        from stopping)."""
        generation, deadline = self._generation, time.monotonic() + seconds
        while self._generation == generation and time.monotonic() < deadline:
            await asyncio.sleep(0.02)

    def going(self) -> Callable[[], bool]:
        """True until the next reset: how a never-ending answer knows to stop."""
        generation = self._generation
        return lambda: self._generation == generation

    def take_nonce(self, nonce: str) -> bool:
        """True the first time a nonce is seen within NONCE_SECONDS; False for a replay."""
        now = time.time()
        with self._lock:
            while self._nonces and next(iter(self._nonces.values())) < now:
                del self._nonces[next(iter(self._nonces))]
            if nonce in self._nonces:
                return False
            self._nonces[nonce] = now + NONCE_SECONDS
            return True

    def take_failure(self) -> int | None:
        with self._lock:
            return self._faults["fail_next"].pop(0) if self._faults["fail_next"] else None

    def take_malformed(self) -> str | None:
        with self._lock:
            kind, self._faults["malformed_next"] = self._faults["malformed_next"], None
            return kind

    def log(self, method: str, path: str) -> dict:
        entry = {"method": method, "path": path, "status": None}
        with self._lock:
            self._log.append(entry)
        return entry

    def answered(self, entry: dict, status: int | str) -> None:
        with self._lock:
            entry["status"] = status

    def requests(self) -> list[dict]:
        with self._lock:
            return [dict(e) for e in self._log]


class _Answer:
    """What a route decided: a status and a body, and whether a write was committed to make it."""

    def __init__(self, status: int, body: dict, wrote: bool = False):
        self.status, self.body, self.wrote = status, body, wrote


def create_app(store: Store, state: ShopState, keys: tuple[str, ...], control_token: str | None = None,
               reseed: Callable[[], None] | None = None) -> Starlette:
    keys = tuple(k.encode() for k in keys)

    def served(route: Callable[[Request, bytes], Awaitable[_Answer]]):
        async def endpoint(request: Request) -> Response:
            entry = state.log(request.method, request.url.path)
            response = await _serve(request, route)
            state.answered(entry, "dropped" if response is None else response.status_code)
            return response if response is not None else Response(status_code=204)
        return endpoint

    async def _serve(request: Request, route) -> Response | None:
        if state.get("down"):
            return _error(503, "unavailable")
        if latency := state.get("latency_ms"):
            await asyncio.sleep(latency / 1000)
        if (status := state.take_failure()) is not None:
            retry_after = state.get("retry_after")
            headers = {"Retry-After": str(retry_after)} if retry_after is not None and status in (429, 503) else {}
            return _error(status, ERROR_CODES.get(status, "failed"), headers=headers)
        body = await request.body()
        if (refused := _check_signature(request, body, keys, v1=state.get("accept_v1"))) is not None:
            return _error(401, refused)
        # Only a signed, timely request spends its nonce: a stranger cannot use up the desk's.
        if (nonce := request.headers.get("x-desk-nonce")) is not None and not state.take_nonce(nonce):
            return _error(401, "replayed")
        if kind := state.get("endless_answer"):
            return endless_answer(kind, state.going())
        answer = await route(request, body)
        payload = _bend(answer.body, state.take_malformed())
        if answer.wrote:
            if hold := state.get("hold_after_write_seconds"):
                await state.hold(hold)  # committed; a client that gave up never hears of it
            if state.get("drop_after_write"):
                _close_connection(request)
                return None
        if isinstance(payload, bytes):
            return Response(payload, status_code=answer.status, media_type="application/json")
        return JSONResponse(payload, status_code=answer.status)

    async def customer(request: Request, body: bytes) -> _Answer:
        email = request.query_params.get("email")
        if not email:
            return _invalid("the email query parameter is required")
        found = store.customer_by_email(email)
        return _Answer(200, {"customer": found}) if found else _not_found()

    async def orders_of(request: Request, body: bytes) -> _Answer:
        orders = store.orders_of(_param(request, "customer_id"))
        return _Answer(200, {"orders": orders}) if orders is not None else _not_found()

    async def order(request: Request, body: bytes) -> _Answer:
        found = store.order(_param(request, "number"))
        return _Answer(200, {"order": found}) if found else _not_found()

    def by_key(find: Callable[[str], dict | None], name: str):
        async def look_up(request: Request, body: bytes) -> _Answer:
            key = request.query_params.get("idempotency_key")
            if not key:
                return _invalid("the idempotency_key query parameter is required")
            found = find(key)
            return _Answer(200, {name: found}) if found else _not_found()
        return look_up

    async def refund(request: Request, body: bytes) -> _Answer:
        if (key := _idempotency_key(request)) is None:
            return _NO_KEY
        data = _json_object(body)
        amount, reason = data.get("amount"), data.get("reason")
        if not (isinstance(amount, str) and _MONEY.match(amount) and cents(amount) > 0 and isinstance(reason, str)):
            # The same key again answers with its refund whatever the body; only a new one is checked.
            earlier = store.refund_by_key(key)
            if earlier is not None:
                return _Answer(200, {"refund": earlier})
            return _invalid('a refund needs "amount", a positive amount with two decimals, and "reason", a string')
        try:
            made, new = store.refund(_param(request, "number"), cents(amount), reason, key)
        except NoSuchOrder:
            return _not_found()
        except OverRefundable as e:
            return _Answer(409, {"error": "exceeds_refundable", "refundable": money(e.refundable)})
        return _Answer(201 if new else 200, {"refund": made}, wrote=new)

    async def seller_message(request: Request, body: bytes) -> _Answer:
        if (key := _idempotency_key(request)) is None:
            return _NO_KEY
        text = _json_object(body).get("message")
        if not isinstance(text, str) or not text.strip():
            earlier = store.seller_message_by_key(key)
            if earlier is not None:
                return _Answer(200, {"message": earlier})
            return _invalid('a seller message needs "message", a non-empty string')
        try:
            made, new = store.message_seller(_param(request, "number"), text, key)
        except NoSuchOrder:
            return _not_found()
        except ShippedByShop:
            return _invalid("this order is shipped by the shop itself: it has no seller to message")
        return _Answer(201 if new else 200, {"message": made}, wrote=new)

    async def policies(request: Request, body: bytes) -> _Answer:
        return _Answer(200, {"policies": store.policies()})

    async def capabilities(request: Request, body: bytes) -> _Answer:
        return _Answer(200, {"capabilities": SINGLE_BRAND if store.single_brand else MARKETPLACE})

    async def control(request: Request) -> Response:
        given = request.headers.get("x-control-token", "").encode()
        if not control_token or not hmac.compare_digest(given, control_token.encode()):
            return _error(403, "forbidden")
        faults = _json_object(await request.body())
        if faults.pop("reset", False):
            (reseed or store.seed)()
            state.reset()
        try:
            return JSONResponse({"faults": state.configure(**faults)})
        except (TypeError, ValueError) as e:
            return JSONResponse({"error": "invalid", "detail": str(e)}, status_code=422)

    routes = [
        Route("/capabilities", served(capabilities), methods=["GET"]),
        Route("/policies", served(policies), methods=["GET"]),
        Route("/customers", served(customer), methods=["GET"]),
        Route("/customers/{customer_id}/orders", served(orders_of), methods=["GET"]),
        Route("/orders/{number}", served(order), methods=["GET"]),
        Route("/orders/{number}/refunds", served(refund), methods=["POST"]),
        Route("/orders/{number}/seller-messages", served(seller_message), methods=["POST"]),
        Route("/refunds", served(by_key(store.refund_by_key, "refund")), methods=["GET"]),
        # An extension the contract does not require: how a lost seller message's answer is found again.
        Route("/seller-messages", served(by_key(store.seller_message_by_key, "message")), methods=["GET"]),
    ]
    if control_token:
        routes.append(Route("/_control", control, methods=["POST"]))
    return _routed_on_the_raw_path(Starlette(routes=routes))


def _routed_on_the_raw_path(app: Starlette):
    """Route on the path as sent: an order number with an encoded "/" in it is one segment, not a way into
    another route. Path parameters are unquoted where they are read (_param)."""

    async def routed(scope, receive, send):
        if scope["type"] == "http" and scope.get("raw_path"):
            scope = {**scope, "path": scope["raw_path"].decode("latin-1")}
        await app(scope, receive, send)

    return routed


def _param(request: Request, name: str) -> str:
    return unquote(request.path_params[name])


def _check_signature(request: Request, body: bytes, keys: tuple[bytes, ...], v1: bool = False) -> str | None:
    """None when signed with one of the keys within the window; else the error code. A bad signature is
    reported before a stale timestamp, so a stranger learns nothing of the shop's clock. Version 2 signs the
    Idempotency-Key as sent and a nonce; version 1 (neither) only when the shop still takes it."""
    target = request.scope.get("raw_path") or request.scope["path"].encode()
    if query := request.scope.get("query_string", b""):
        target += b"?" + query
    timestamp = request.headers.get("x-desk-timestamp", "")
    given = request.headers.get("x-desk-signature", "").encode("latin-1")
    nonce = request.headers.get("x-desk-nonce", "")
    if given.startswith(b"v2=") and _NONCE.match(nonce):
        message, version = _signed_v2(timestamp, nonce, request.method, target,
                                      request.headers.get("idempotency-key", ""), body), b"v2="
    elif v1 and given.startswith(b"v1=") and not nonce:
        message = timestamp.encode("latin-1") + b"." + request.method.encode() + b"." + target + b"." + body
        version = b"v1="
    else:
        return "bad_signature"
    if not any(hmac.compare_digest(given, version + hmac.new(k, message, hashlib.sha256).hexdigest().encode())
               for k in keys):
        return "bad_signature"
    if not _TIMESTAMP.match(timestamp) or abs(time.time() - int(timestamp)) > WINDOW_SECONDS:
        return "stale_timestamp"
    return None


def _signed_v2(timestamp: str, nonce: str, method: str, target: bytes, idempotency_key: str, body: bytes) -> bytes:
    """What version 2 signs: timestamp.nonce.METHOD.target.idempotency_key.body, the headers as received."""
    head = [timestamp.encode("latin-1"), nonce.encode("latin-1"), method.encode(), target,
            idempotency_key.encode("latin-1")]
    return b".".join(head) + b"." + body


def _bend(body: dict, kind: str | None) -> dict | bytes:
    """The answer as a broken shop would send it: not JSON, its first field gone, or a negative amount."""
    if kind == "not_json":
        return b"<html><body>Service temporarily unavailable</body></html>"
    inner = next(iter(body.values()), None) if body else None
    if isinstance(inner, list):
        inner = inner[0] if inner else None
    if not isinstance(inner, dict):
        return body
    inner = json.loads(json.dumps(inner))  # a copy: the store's dicts are not shared, but stay safe
    if kind == "missing_field":
        inner.pop(next(iter(inner)))
    elif kind == "negative_amount":
        field = next((f for f in ("refundable", "amount", "total") if f in inner), None)
        if field:
            inner[field] = "-" + inner[field]
    else:
        return body
    name, value = next(iter(body.items()))
    return {name: [inner, *value[1:]] if isinstance(value, list) else inner}


def _close_connection(request: Request) -> None:
    """Close the socket without a byte of answer: what a crashed shop or a cut network looks like. ASGI has
    no word for it; uvicorn's receive is a method of its request cycle, which holds the transport."""
    cycle = getattr(request.receive, "__self__", None)
    transport = getattr(cycle, "transport", None)
    if transport is None:
        raise RuntimeError("drop_after_write needs uvicorn's h11 or httptools protocol")
    transport.close()


def _json_object(body: bytes) -> dict:
    try:
        data = json.loads(body) if body else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _idempotency_key(request: Request) -> str | None:
    key = request.headers.get("idempotency-key", "")
    return key if 0 < len(key) <= MAX_KEY else None


_NO_KEY = _Answer(422, {"error": "invalid", "detail": f"an Idempotency-Key of 1 to {MAX_KEY} characters is required"})


def _not_found() -> _Answer:
    return _Answer(404, {"error": "not_found"})


def _invalid(detail: str) -> _Answer:
    return _Answer(422, {"error": "invalid", "detail": detail})


def _error(status: int, code: str, headers: dict | None = None) -> Response:
    return JSONResponse({"error": code}, status_code=status, headers=headers)
