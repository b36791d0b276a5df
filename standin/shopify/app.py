"""The HTTP face of the fake Shopify: POST /admin/api/{version}/graphql.json, as Shopify answers it.

A request goes: down? -> latency -> version and access token -> a queued HTTP failure -> parse and validate
the GraphQL -> cost against the token's bucket (THROTTLED when short) -> execute -> for a mutation, hold or
drop the answer after the write -> bend the answer when asked to -> JSON with extensions.cost.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import threading
import time
from datetime import datetime, timedelta, timezone

from graphql import (GraphQLError, OperationDefinitionNode, build_schema, execute, get_operation_ast, parse,
                     validate)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from standin.endless import endless_answer
from . import cost, views
from .store import Store

SCHEMA = build_schema((pathlib.Path(__file__).with_name("schema.graphql")).read_text())
INVALID_TOKEN = "[API] Invalid API key or access token (unrecognized login or wrong password)"
# What Shopify answers for a shop that cannot be used; 402 and 423 bodies are assumed (Shopify documents
# the status codes, not their texts).
FAILURE_BODIES = {
    402: {"errors": "Unavailable Shop"},
    403: {"errors": "[API] This action requires merchant approval for the needed scope."},
    404: {"errors": "Not Found"},
    423: {"errors": "This shop is unavailable"},
    429: {"errors": "Exceeded 2 calls per second for api client. Reduce request rates to resume uninterrupted service."},
}
BUCKET = ("bucket_size", "restore_rate", "bucket_available")
MALFORMED = ("not_json", "missing_field", "negative_amount")
DEFAULTS = {"latency_ms": 0.0, "fail_next": [], "malformed_next": [], "hold_after_write_seconds": 0.0,
            "drop_after_write": False, "down": False, "endless_answer": None}  # "huge" or "trickle": standin/endless.py


class FakeState:
    """Everything the fake holds: the store, the buckets, the faults and the log. Thread-safe: the tests
    reach it from their own thread while uvicorn serves from its loop."""

    def __init__(self, token: str, api_version: str, bucket_size: float, restore_rate: float):
        self.token, self.api_version = token, api_version
        self._initial = (bucket_size, restore_rate)
        self.lock = threading.RLock()
        self.generation = 0  # a reset ends every answer being held; a request from before it takes no fault
        self.reset()

    def reset(self) -> None:
        with self.lock:
            self.generation += 1
            self._offset = 0.0
            self._frozen_at: float | None = None  # freeze_clock(): only advance() moves the clock
            self.store = Store()
            self.buckets = cost.Buckets(*self._initial, clock=self.clock)
            self.config = {k: (list(v) if isinstance(v, list) else v) for k, v in DEFAULTS.items()}
            self.log: list[dict] = []

    def clock(self) -> float:
        return (time.monotonic() if self._frozen_at is None else self._frozen_at) + self._offset

    def freeze_clock(self) -> None:
        """Stop the clock where it is until the next reset: the buckets refill only by advance(), so what a test
        reads of them does not depend on how fast the machine runs it."""
        with self.lock:
            self._frozen_at = time.monotonic()

    def now(self) -> datetime:
        return datetime.now(timezone.utc) + timedelta(seconds=self._offset)

    def advance(self, seconds: float) -> None:
        """Move the fake's clock on: its buckets refill as if that time had passed."""
        with self.lock:
            self._offset += seconds

    def configure(self, **faults) -> dict:
        with self.lock:
            for name, value in faults.items():
                if name == "bucket_available":
                    self.buckets.set_level(self.token, float(value))
                    continue
                if name in ("bucket_size", "restore_rate"):
                    setattr(self.buckets, {"bucket_size": "size"}.get(name, name), float(value))
                    continue
                if name not in DEFAULTS:
                    raise ValueError(f"unknown fault {name!r}; known: {', '.join([*DEFAULTS, *BUCKET])}")
                if name in ("fail_next", "malformed_next"):
                    value = [value] if isinstance(value, (str, int)) else list(value)
                    if name == "malformed_next" and set(value) - set(MALFORMED):
                        raise ValueError(f"malformed_next takes {', '.join(MALFORMED)}")
                self.config[name] = value
            return {**self.config, "bucket_size": self.buckets.size, "restore_rate": self.buckets.restore_rate}

    def next_fault(self, name: str, generation: int):
        """The next fault of that kind, for a request that began in this generation (a request held across a
        reset must not take the fault the next test set up)."""
        with self.lock:
            queue = self.config[name]
            return queue.pop(0) if queue and generation == self.generation else None

    async def hold(self, seconds: float, generation: int) -> None:
        """Sleep up to `seconds`; a reset ends the wait."""
        deadline = time.monotonic() + seconds
        while generation == self.generation and (left := deadline - time.monotonic()) > 0:
            await asyncio.sleep(min(left, 0.05))


def create_app(state: FakeState) -> Starlette:
    async def graphql_endpoint(request: Request) -> Response:
        entry = {"version": request.path_params["version"], "status": None, "operation": None, "fields": [],
                 "cost": None, "throttled": False, "available": None, "idempotency_key": None}
        with state.lock:
            state.log.append(entry)
            generation = state.generation
        response = await _answer(state, request, entry, generation)
        entry["status"] = response.status_code
        return response

    return Starlette(routes=[Route("/admin/api/{version}/graphql.json", graphql_endpoint, methods=["POST"])])


async def _answer(state: FakeState, request: Request, entry: dict, generation: int) -> Response:
    if state.config["down"]:
        return PlainTextResponse("Service Unavailable", status_code=503)
    if state.config["latency_ms"]:
        await asyncio.sleep(state.config["latency_ms"] / 1000)
    if request.path_params["version"] != state.api_version:
        return JSONResponse(FAILURE_BODIES[404], status_code=404)
    if request.headers.get("x-shopify-access-token") != state.token:
        return JSONResponse({"errors": INVALID_TOKEN}, status_code=401)
    if (status := state.next_fault("fail_next", generation)) is not None:
        return _failure(int(status))
    if kind := state.config["endless_answer"]:
        return endless_answer(kind, lambda: state.generation == generation)
    try:
        body = json.loads(await request.body())
        source, variables = body["query"], body.get("variables") or {}
        document = parse(source)
    except GraphQLError as e:
        return JSONResponse({"errors": [e.formatted]})
    except (ValueError, KeyError, TypeError):
        return JSONResponse({"errors": {"query": "Required parameter missing or invalid"}}, status_code=400)
    if errors := validate(SCHEMA, document):
        return JSONResponse({"errors": [e.formatted for e in errors]})
    operation = get_operation_ast(document, body.get("operationName"))
    if not isinstance(operation, OperationDefinitionNode):
        return JSONResponse({"errors": [{"message": "An operation name is required"}]})
    entry["operation"] = operation.operation.value
    entry["fields"] = [s.name.value for s in operation.selection_set.selections if hasattr(s, "name")]
    try:
        requested = cost.requested_cost(SCHEMA, document, operation, variables)
    except GraphQLError as e:
        return JSONResponse({"errors": [e.formatted]})
    entry["cost"] = requested
    return await _run(state, document, operation, variables, requested, entry, generation)


async def _run(state, document, operation, variables, requested, entry, generation) -> Response:
    buckets = state.buckets
    if requested > buckets.size:
        return JSONResponse({"errors": [{"message": f"Query cost is {requested}, which exceeds the single query max "
                                                    f"cost limit ({buckets.size:g}).",
                                         "extensions": {"code": "MAX_COST_EXCEEDED", "cost": requested,
                                                        "maxCost": buckets.size}}]})
    taken, level = buckets.take(state.token, requested)
    cost_info = {"requestedQueryCost": requested, "actualQueryCost": requested if taken else None,
                 "throttleStatus": buckets.status(level)}
    if not taken:
        entry["throttled"], entry["available"] = True, level
        return JSONResponse({"errors": [{"message": "Throttled", "extensions": {
            "code": "THROTTLED", "documentation": "https://shopify.dev/api/usage/limits#rate-limits"}}],
            "extensions": {"cost": cost_info}})
    is_write = operation.operation.value == "mutation"
    with state.lock:
        root = views.mutation_root(state.store, state.now) if is_write else views.query_root(state.store)
        result = execute(SCHEMA, document, root_value=root, variable_values=variables,
                         operation_name=operation.name.value if operation.name else None)
        if is_write:
            entry["idempotency_key"] = _logged_key(operation, variables)
    actual = cost.actual_cost(result.data, requested, is_write)
    level = buckets.give_back(state.token, requested - actual)
    cost_info = {**cost_info, "actualQueryCost": actual, "throttleStatus": buckets.status(level)}
    answer = {"data": result.data, "extensions": {"cost": cost_info}}
    if result.errors:
        answer["errors"] = [e.formatted for e in result.errors]
    bent = state.next_fault("malformed_next", generation)
    if is_write and state.config["hold_after_write_seconds"]:
        await state.hold(state.config["hold_after_write_seconds"], generation)
    if is_write and state.config["drop_after_write"]:
        return _Dropped()
    return _bent(answer, bent)


def _logged_key(operation, variables) -> str | None:
    for field in operation.selection_set.selections:
        for d in getattr(field, "directives", None) or ():
            if d.name.value == "idempotent":
                arg = d.arguments[0].value
                return variables.get(arg.name.value) if arg.kind == "variable" else getattr(arg, "value", None)
    return None


def _failure(status: int) -> Response:
    if status >= 500:
        # Shopify's own outage pages are HTML, not JSON.
        return Response(f"<!DOCTYPE html><html><body><h1>{status}</h1><p>There was a problem loading this "
                        "website.</p></body></html>", status_code=status, media_type="text/html")
    headers = {"Retry-After": "2.0"} if status == 429 else None
    return JSONResponse(FAILURE_BODIES.get(status, {"errors": "Bad Request"}), status_code=status, headers=headers)


def _bent(answer: dict, kind: str | None) -> Response:
    if kind == "not_json":
        return Response("<!DOCTYPE html><html><body>Oops</body></html>", media_type="text/html")
    if kind == "missing_field":
        _change_first(answer["data"], "id", lambda d: d.pop("id"))
    elif kind == "negative_amount":
        _change_first(answer["data"], "amount", lambda d: d.update(amount=f"-{d['amount']}"))
    return JSONResponse(answer)


def _change_first(value, key: str, change) -> bool:
    """Apply change to the first object (depth first) that has `key`."""
    if isinstance(value, dict):
        if key in value:
            change(value)
            return True
        return any(_change_first(v, key, change) for v in value.values())
    if isinstance(value, list):
        return any(_change_first(v, key, change) for v in value)
    return False


class _Dropped(Response):
    """The write is made, then the connection goes: headers and half a body, and no more."""

    def __init__(self):
        super().__init__(status_code=200)

    async def __call__(self, scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", b"4096")]})
        await send({"type": "http.response.body", "body": b'{"data":{', "more_body": True})
        # Returning without the rest makes uvicorn close the connection mid-answer.
