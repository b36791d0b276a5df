"""The HTTP face of the stand-in: OpenAI's chat-completions and models endpoints, plus /_standin controls.

A request goes: parse -> OpenAI's rules -> pick a fault -> wait (latency, delay) -> maybe fail with an
HTTP error -> decide the reply -> let the fault bend it -> answer, as JSON or as a stream.
"""

from __future__ import annotations

import asyncio
import json

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from . import dialects, facts, faults, streaming
from .conversation import context_first, read_turn, text_of, without_summaries
from .faults import Fault
from .reply import Reply, completion, completion_tokens, estimate_tokens, images_in, new_id, prompt_tokens
from .rules import error_body, parse_error, validate_request
from .scenarios import decide
from .state import ControlState

MODEL = "sundry-standin-1"


def create_app(state: ControlState | None = None) -> Starlette:
    state = state or ControlState()

    async def chat_completions(request: Request) -> Response:
        n = state.next_n()
        try:
            body = json.loads(await request.body())
        except ValueError:
            body = None
            status, error = parse_error()
        else:
            dialect = dialects.DIALECTS[state.config["dialect"]]
            status, error = dialects.validate(dialect, body) or validate_request(body) or (200, None)
        if error is not None:
            messages = body.get("messages") if isinstance(body, dict) else None
            state.log(n, status, None, False, len(messages) if isinstance(messages, list) else 0,
                      error=error["error"]["message"])
            return JSONResponse(error, status_code=status, headers=_request_id())
        return await _answer(state, n, body, peer=f"{request.client.host}:{request.client.port}" if request.client else None)

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [_model(MODEL)]})

    async def model(request: Request) -> Response:
        return JSONResponse(_model(request.path_params["model"]))

    async def control_faults(request: Request) -> Response:
        if request.method == "GET":
            return JSONResponse({"pending": state.pending()})
        if request.method == "DELETE":
            state.clear_faults()
            return JSONResponse({"pending": []})
        try:
            body = await _json(request)
            queued = state.queue_faults(body.get("faults", []), body.get("match"))
        except ValueError as e:
            return JSONResponse({"error": str(e)}, status_code=400)
        return JSONResponse({"queued": queued, "pending": len(state.pending())})

    async def control_config(request: Request) -> Response:
        if request.method == "GET":
            return JSONResponse(state.config)
        try:
            return JSONResponse(state.configure(**await _json(request)))
        except (ValueError, TypeError) as e:
            return JSONResponse({"error": str(e)}, status_code=400)

    async def control_requests(request: Request) -> Response:
        return JSONResponse(state.requests())

    async def control_reset(request: Request) -> Response:
        state.reset()
        return JSONResponse({"ok": True})

    async def health(request: Request) -> Response:
        return JSONResponse({"ok": True, "model": MODEL})

    async def not_found(request: Request, exc: HTTPException) -> Response:
        # OpenAI answers unknown URLs with its usual error object, not an HTML page.
        message = f"Invalid URL ({request.method} {request.url.path})" if exc.status_code == 404 else exc.detail
        return JSONResponse(error_body(message), status_code=exc.status_code)

    app = Starlette(routes=[
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/models/{model:path}", model, methods=["GET"]),
        Route("/_standin/faults", control_faults, methods=["GET", "POST", "DELETE"]),
        Route("/_standin/config", control_config, methods=["GET", "POST"]),
        Route("/_standin/requests", control_requests, methods=["GET"]),
        Route("/_standin/reset", control_reset, methods=["POST"]),
        Route("/_standin/health", health, methods=["GET"]),
    ], exception_handlers={HTTPException: not_found})
    app.state.control = state
    return app


async def _answer(state: ControlState, n: int, body: dict, peer: str | None = None) -> Response:
    messages, stream = body["messages"], bool(body.get("stream"))
    read = context_first(without_summaries(messages))  # a summary of older turns is data, not the request
    facts.CUSTOMER_ZONE.set(facts.zone_in(read))  # this request's task only: times in the customer's zone
    turn = read_turn(read)
    fault, directive_repeat = faults.pick(state, read, turn)
    config = state.config
    if config["latency_ms"]:
        await asyncio.sleep(config["latency_ms"] / 1000)
    if fault is not None and fault.name in faults.HTTP_ERRORS:
        state.log(n, faults.HTTP_ERRORS[fault.name], fault, stream, len(messages))
        return _http_fault(fault, body)
    if fault is not None and fault.name == "delay":
        await asyncio.sleep(fault.get("ms") / 1000)
    if fault is not None and fault.name == "stall" and not stream:
        await asyncio.sleep(fault.get("seconds"))  # a hung non-streaming call: nothing, then the answer

    if not turn.spin_warned and (directive_repeat or faults.repeating(turn)) and turn.batches:
        reply = faults.repeat(turn)  # the "same call forever" model, until the loop warns it
    else:
        reply = decide(read, body.get("tools"), body.get("tool_choice"), config["outcome_style"], turn)
    dialect = dialects.DIALECTS[config["dialect"]]
    reply = dialects.restyle(dialect, _cap(faults.apply(fault, reply, turn), body))
    prompt, cached = prompt_tokens(body), state.prompt_cache.read(body)
    state.log(n, 200, fault, stream, len(messages), finish_reason=reply.finish, prompt_tokens=prompt,
              cached_tokens=cached, completion_tokens=completion_tokens(reply),
              tool_calls=[c.name for c in reply.calls], peer=peer, images=images_in(messages))
    # What the desk wrote for the model (its system messages and the tools it offered), kept once each.
    state.remember_sent([text_of(m.get("content")) for m in messages
                         if isinstance(m, dict) and m.get("role") == "system"]
                        + [json.dumps(t, ensure_ascii=False, sort_keys=True) for t in body.get("tools") or []])
    if not stream:
        return JSONResponse(dialects.bend_completion(dialect, reply, completion(reply, body["model"], prompt, cached)),
                            headers=_request_id())
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    events = streaming.chunks(reply, body["model"], prompt, include_usage, dialect, cached)
    if fault is not None and fault.name == "stream_error":
        events = streaming.broken(events, int(fault.get("after_chunks")))
    stall = fault is not None and fault.name == "stall"
    pacing = streaming.Pacing(token_delay=config["token_delay_ms"] / 1000,
                              stall_after=int(fault.get("after_chunks")) if stall else None,
                              stall_for=fault.get("seconds") if stall else 0.0)
    return StreamingResponse(streaming.stream(events, pacing), media_type="text/event-stream",
                             headers={"cache-control": "no-cache", **_request_id()})


def _cap(reply: Reply, body: dict) -> Reply:
    """Honour max_tokens on text the way a model does: cut off, finish_reason "length"."""
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    if isinstance(limit, int) and reply.content and not reply.calls and estimate_tokens(len(reply.content)) > limit:
        return faults.truncated(reply.content, keep=limit * 4)
    return reply


def _http_fault(fault: Fault, body: dict) -> Response:
    if fault.name == "quota":  # OpenAI's answer to an account out of credit: a 429 that waiting does not cure
        message = ("You exceeded your current quota, please check your plan and billing details. For more "
                   "information on this error, read the docs: "
                   "https://platform.openai.com/docs/guides/error-codes/api-errors.")
        return JSONResponse(error_body(message, None, "insufficient_quota", "insufficient_quota"), status_code=429,
                            headers=_request_id())
    if fault.name == "429":
        wait = fault.get("retry_after")
        seconds = str(int(wait)) if float(wait).is_integer() else str(wait)
        message = (f"Rate limit reached for {body.get('model')} in organization org-standin on requests per min "
                   f"(RPM): Limit 60, Used 60, Requested 1. Please try again in {seconds}s. Visit "
                   "https://platform.openai.com/account/rate-limits to learn more.")
        headers = {"retry-after": seconds, "x-ratelimit-limit-requests": "60",
                   "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": f"{seconds}s"}
        return JSONResponse(error_body(message, None, "rate_limit_exceeded", "requests"), status_code=429,
                            headers={**headers, **_request_id()})
    message = ("The server had an error while processing your request. Sorry about that!" if fault.name == "500"
               else "The engine is currently overloaded, please try again later")
    return JSONResponse(error_body(message, None, None, "server_error"), status_code=int(fault.name),
                        headers=_request_id())


def _request_id() -> dict:
    return {"x-request-id": new_id("req_", 32)}


def _model(name: str) -> dict:
    return {"id": name, "object": "model", "created": 1764000000, "owned_by": "sundry"}


async def _json(request: Request) -> dict:
    """A control request's JSON object; ValueError when it is anything else."""
    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise ValueError("the body must be a JSON object")
    return body

