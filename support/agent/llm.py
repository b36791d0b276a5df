"""The model call, in one place: the only module that imports openai.

Streams every reply (token deltas go to the observer as they arrive), retries with backoff inside the
call for 429, 5xx, connection errors, stalls, broken streams and one empty reply (honouring Retry-After),
never for other 4xx nor for a used-up quota, reads the stream forgivingly enough for any OpenAI-compatible
server (see _Reply), and prices each reply from a per-model table, the tokens the endpoint served from its
prompt cache at the cached-input price.
"""

from __future__ import annotations

import json
import logging
import random
import ssl
import time
from dataclasses import dataclass
from typing import Callable

import anyio
import httpx2
import openai

from .compaction import estimate_tokens
from .types import EMPTY_REPLY, QUOTA_EXCEEDED, ModelError, ModelReply, Observer, Transcript

log = logging.getLogger(__name__)

RETRYABLE_STATUS = {408, 409, 429, 500, 502, 503, 504}
# Failures of the transport under a streamed reply (what openai's own stream maps to APIConnectionError):
# anyio's EndOfStream and ssl.SSLError can escape httpx2 unwrapped.
TRANSPORT_ERRORS = (httpx2.RequestError, httpx2.StreamError, ssl.SSLError, anyio.EndOfStream, OSError)
# The model writes these strings; they are clipped here to fit the columns they are saved in.
MAX_TOOL_NAME, MAX_CALL_ID, MAX_FINISH_REASON, MAX_MODEL_NAME = 64, 128, 20, 120
EMPTY_RETRIES = 1  # an empty reply is asked for again once; a second one is a failure of its own


@dataclass(frozen=True)
class Dialect:
    """What the desk may send an endpoint beyond the messages every OpenAI-compatible server reads
    (MODEL_DIALECT; docs/deploy.md)."""

    name: str
    cache_key: bool = False  # sends prompt_cache_key (OpenAI's; servers that refuse unknown fields never get it)
    context_role: str = "system"  # the role of the per-run note after the history (Transcript.context)


# OpenAI takes a system message anywhere and prompt_cache_key. Any other server: no extra field, and the per-run
# note as a user message, since many chat templates served by vLLM and llama.cpp refuse a system message that
# is not first (Qwen's: "System message must be at the beginning") or drop every system message but the first.
DIALECTS = {d.name: d for d in (Dialect("openai", cache_key=True), Dialect("compatible", context_role="user"))}


class IncompleteStream(Exception):
    """The stream closed before the reply was finished."""


class BrokenStream(Exception):
    """A chunk was JSON but not the shape of a chat-completion chunk: the server is misbehaving."""


class EmptyReply(Exception):
    """The model finished a reply with neither text nor tool calls."""


class _EventStream(openai.Stream[object]):
    """The reply's server-sent events as parsed JSON objects, read to the end of the body.

    openai's own Stream stops reading at `data: [DONE]` and closes the response with the chunked body's
    last bytes unread, which costs the connection: every call would open a new one. Reading on to the
    end hands the connection back to the client's pool for the next call.
    """

    def __stream__(self):
        response = self.response
        try:
            yield from self._events(response)
        except httpx2.TimeoutException as e:  # a stalled stream
            raise openai.APITimeoutError(request=response.request) from e
        except TRANSPORT_ERRORS as e:  # as openai's own stream maps them: the connection failed under us
            raise openai.APIConnectionError(request=response.request) from e
        finally:
            response.close()

    @staticmethod
    def _events(response):
        data: list[str] = []
        lines = response.iter_lines()
        for line in lines:
            if line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
                continue
            if line or not data:
                continue  # event:, id:, retry:, comments; or a blank line with nothing gathered
            payload, data = "\n".join(data), []
            if payload.strip() == "[DONE]":
                _drain(lines)
                return
            try:
                chunk = json.loads(payload)
            except ValueError:
                raise BrokenStream("the stream sent a chunk that is not JSON") from None
            if not isinstance(chunk, dict):
                raise BrokenStream(f"the stream sent a chunk that is not a JSON object: {payload[:40]!r}")
            if chunk.get("error"):
                error = chunk["error"]
                message = error.get("message") if isinstance(error, dict) else None
                raise openai.APIError(message=message if isinstance(message, str) and message
                                      else "An error occurred during streaming",
                                      request=response.request, body=error)
            yield chunk


def _drain(lines) -> None:
    """Read what follows [DONE], normally only the end of the body, so the connection can be reused. The
    reply is complete by then: a server that misbehaves after it costs the connection, not the reply."""
    try:
        for _ in lines:
            pass
    except (httpx2.HTTPError, *TRANSPORT_ERRORS):
        pass


class _Reply:
    """One streamed attempt as it arrives, read the way every OpenAI-compatible server can send it.

    Servers differ from OpenAI (docs/agent-loop.md, "Model servers"): a call may come whole in one chunk, with
    `index` missing or 0 for every call, `arguments` as a JSON object; `reasoning_content` / `reasoning`
    deltas carry thinking that is neither the customer's text nor part of the history, so only `content`
    is read; chunks with no choices (usage, keep-alives) carry nothing else. A chunk whose structure has
    the wrong types is a broken stream (retried like an unreadable one); a scalar of the wrong type
    (model, finish_reason, token counts) is ignored.
    """

    def __init__(self, model: str):
        self.model = model
        self.content: list[str] = []
        self.calls: list[dict] = []
        self._by_index: dict[int, dict] = {}
        self.finish_reason: str | None = None
        self.usage: tuple[int, int, int] | None = None  # prompt, completion, cached (of prompt)

    def read(self, chunk: dict, sink: Observer) -> None:
        if isinstance(chunk.get("model"), str) and chunk["model"]:
            self.model = chunk["model"][:MAX_MODEL_NAME]
        if isinstance(chunk.get("usage"), dict):
            usage = chunk["usage"]
            prompt = _count(usage.get("prompt_tokens"))
            self.usage = (prompt, _count(usage.get("completion_tokens")), min(prompt, cached_tokens(chunk)))
        choices = _typed(chunk.get("choices"), list, "choices")
        for choice in choices:
            choice = _typed(choice, dict, "a choice")
            if choice.get("index") not in (None, 0):
                continue  # we never ask for n > 1
            delta = _typed(choice.get("delta"), dict, "delta")
            text = delta.get("content")
            if isinstance(text, str) and text:
                self.content.append(text)
                sink.token(text)
            for position, call in enumerate(_typed(delta.get("tool_calls"), list, "tool_calls")):
                self._add_call(position, _typed(call, dict, "a tool call"))
            if isinstance(choice.get("finish_reason"), str) and choice["finish_reason"]:
                self.finish_reason = choice["finish_reason"][:MAX_FINISH_REASON]

    def _add_call(self, position: int, delta: dict) -> None:
        fn = _typed(delta.get("function"), dict, "function")
        call_id = delta.get("id") if isinstance(delta.get("id"), str) else ""
        slot = self._slot(delta.get("index"), call_id, fn.get("name"))
        slot["id"] = slot["id"] or call_id
        name = fn.get("name")
        if isinstance(name, str) and name and name != slot["function"]["name"]:
            slot["function"]["name"] += name
        arguments = fn.get("arguments")
        if arguments is not None:  # an object (some servers) is sent back as the JSON string OpenAI expects
            piece = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
            slot["function"]["arguments"] += piece

    def _slot(self, index, call_id: str, name) -> dict:
        """The call this delta continues, or a new one. With an index, that index's call unless the delta
        brings another id (servers that send index 0 for every call); without an index, the call with
        this id, else a new call when it names one, else the latest call (a piece of its arguments)."""
        if isinstance(index, int) and not isinstance(index, bool):
            slot = self._by_index.get(index)
            if slot is not None and not (call_id and slot["id"] and call_id != slot["id"]):
                return slot
            slot = self._by_index[index] = self._new()
            return slot
        known = next((c for c in self.calls if call_id and c["id"] == call_id), None)
        if known is not None:
            return known
        if call_id or name or not self.calls:
            return self._new()
        return self.calls[-1]

    def _new(self) -> dict:
        slot = {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
        self.calls.append(slot)
        return slot

    def message(self) -> dict:
        """The assistant message as it goes into the history. A reply of calls without text has content ""
        rather than null: OpenAI accepts both, but Ollama and older llama.cpp servers refuse null."""
        message: dict = {"role": "assistant", "content": "".join(self.content)}
        if self.calls:
            message["tool_calls"] = [
                {"id": c["id"][:MAX_CALL_ID], "type": "function",
                 "function": {"name": c["function"]["name"][:MAX_TOOL_NAME], "arguments": c["function"]["arguments"]}}
                for c in self.calls
            ]
        return message

    @property
    def empty(self) -> bool:
        return not self.calls and not "".join(self.content).strip()


def _typed(value, kind: type, what: str):
    """`value` when it has the type the protocol gives it (None reads as empty); else the stream is broken."""
    if value is None:
        return kind()
    if not isinstance(value, kind):
        raise BrokenStream(f"the stream sent {what} of type {type(value).__name__}")
    return value


def _count(value) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def cached_tokens(chunk: dict) -> int:
    """The prompt tokens the server read from its prefix cache, as each reports them: OpenAI, vLLM (with
    --enable-prompt-tokens-details) and newer llama.cpp in usage.prompt_tokens_details.cached_tokens;
    llama.cpp's llama-server also in timings.cache_n beside the usage. 0 when the server says nothing."""
    details = chunk["usage"].get("prompt_tokens_details")
    if isinstance(details, dict) and details.get("cached_tokens") is not None:
        return _count(details.get("cached_tokens"))
    timings = chunk.get("timings")
    return _count(timings.get("cache_n")) if isinstance(timings, dict) else 0


class OpenAIModel:
    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        model: str,
        prices: dict[str, tuple[float, ...]] | None = None,
        default_price: tuple[float, ...] | None = None,
        dialect: str = "openai",
        connect_timeout: float = 5.0,
        read_timeout: float = 30.0,
        max_retries: int = 3,
        max_retry_wait: float = 20.0,
        backoff_base: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.model = model
        self.base_url = base_url
        self.prices = prices or {}
        self.default_price = default_price
        self.dialect = DIALECTS[dialect]
        self.max_retries = max_retries
        self.max_retry_wait = max_retry_wait
        self.backoff_base = backoff_base
        self.sleep = sleep
        # Our own retry loop below is the only one: the client's would retry outside our accounting.
        self.client = openai.OpenAI(
            base_url=base_url, api_key=api_key, max_retries=0,
            timeout=httpx2.Timeout(read_timeout, connect=connect_timeout),
        )
        self._tools_key: tuple = ()
        self._tools_json = b"[]"

    # -- the request body ----------------------------------------------------------------------
    def body(self, transcript: Transcript, tools: list[dict]) -> bytes:
        """The request as bytes, joined from each message's encoding made once when it was appended.

        The messages are already valid wire JSON (they came from the model or from us), so the client's
        per-call transformation of the whole list, which grows with the history, is skipped.
        """
        key = tuple(t["function"]["name"] for t in tools)
        if key != self._tools_key:
            self._tools_key, self._tools_json = key, json.dumps(tools, separators=(",", ":")).encode()
        head = {"model": self.model, "stream": True, "stream_options": {"include_usage": True}}
        if self.dialect.cache_key and transcript.cache_key:
            head["prompt_cache_key"] = transcript.cache_key  # routes the conversation's calls to one cache
        return b"".join([json.dumps(head)[:-1].encode(), b',"tools":', self._tools_json,
                         b',"messages":[', b",".join([*transcript.encoded, *transcript.context_encoded]), b"]}"])

    # -- the call ------------------------------------------------------------------------------
    def complete(self, transcript: Transcript, tools: list[dict], sink: Observer) -> ModelReply:
        body = self.body(transcript, tools)
        t0 = time.monotonic()
        spent = [0, 0, 0]  # tokens the endpoint reported for attempts that failed: they still count and cost
        attempt = empties = 0
        while True:
            attempt += 1
            current = _Reply(self.model)
            code = ""
            try:
                reply = self._stream_once(body, sink, current, transcript)
                reply.prompt_tokens += spent[0]
                reply.completion_tokens += spent[1]
                reply.cached_tokens += spent[2]
                reply.attempts, reply.duration_ms = attempt, round((time.monotonic() - t0) * 1000, 2)
                return reply
            except openai.APIStatusError as e:
                failure, status = f"{e.status_code}: {_error_message(e)}", e.status_code
                if e.status_code == 429 and _quota_used_up(e):
                    log.error("The model endpoint %s says the quota of its account is used up (%s). Every run "
                              "stops as quota_exceeded until credit is added or MODEL_API_KEY is changed.",
                              self.base_url, _error_message(e))
                    raise self._error(failure, spent, current, status=429, attempts=attempt,
                                      code=QUOTA_EXCEEDED) from None
                if e.status_code not in RETRYABLE_STATUS and e.status_code < 500:
                    raise self._error(failure, spent, current, status=status, attempts=attempt) from None
                wait_hint = _retry_after(e.response)
            except EmptyReply as e:
                empties += 1
                failure, wait_hint, status, code = str(e), None, None, EMPTY_REPLY
                if empties > EMPTY_RETRIES:
                    raise self._error(f"{failure}, again after a retry", spent, current, attempts=attempt,
                                      code=EMPTY_REPLY) from None
            except (openai.APIConnectionError, httpx2.TransportError, openai.APIError, IncompleteStream,
                    BrokenStream) as e:
                # Connection refused, a read timeout (a stalled stream), an error event or a broken chunk.
                failure, wait_hint, status = f"{type(e).__name__}: {e}", None, None
            _add_usage(spent, current)
            sink.tokens_reset()
            if attempt > self.max_retries:
                raise self._error(f"gave up after {attempt} attempts; last error {failure}", spent, current,
                                  status=status, attempts=attempt, code=code, counted=True)
            sink.heartbeat()
            self.sleep(self._wait(attempt, wait_hint))

    def _error(self, message: str, spent: list[int], current: _Reply, *, status: int | None = None,
               attempts: int, code: str = "", counted: bool = False) -> ModelError:
        if not counted:
            _add_usage(spent, current)
        return ModelError(message, status=status, attempts=attempts, code=code, prompt_tokens=spent[0],
                          completion_tokens=spent[1], cached_tokens=spent[2], model=current.model)

    def _wait(self, attempt: int, hint: float | None) -> float:
        if hint is not None:
            return min(hint, self.max_retry_wait)
        backoff = self.backoff_base * (2 ** (attempt - 1))
        return min(backoff + random.uniform(0, backoff / 2), self.max_retry_wait)

    def _stream_once(self, body: bytes, sink: Observer, reply: _Reply, transcript: Transcript) -> ModelReply:
        # Each chunk comes back as parsed JSON: no response models to build per token.
        stream = self.client.post(
            "/chat/completions", cast_to=object, content=body,
            options={"headers": {"Content-Type": "application/json"}},
            stream=True, stream_cls=_EventStream,
        )
        with stream:
            for chunk in stream:
                sink.heartbeat()  # throttled by the sink; a reply of tool calls streams no tokens
                reply.read(chunk, sink)
        if reply.finish_reason is None:
            raise IncompleteStream("the stream ended without a finish reason")
        message = reply.message()
        if reply.usage is None:  # an endpoint that reports no usage still counts against the budget, by estimate
            # (its photos as the provider counts them, not by their base64 text: compaction.py)
            reply.usage = (estimate_tokens(transcript.sent()) + len(self._tools_json) // 4,
                           len(json.dumps(message)) // 4, 0)
        if reply.empty:
            raise EmptyReply(f"the model sent an empty reply (finish reason {reply.finish_reason!r})")
        return ModelReply(message=message, finish_reason=reply.finish_reason, model=reply.model,
                          prompt_tokens=reply.usage[0], completion_tokens=reply.usage[1],
                          cached_tokens=reply.usage[2])

    # -- prices --------------------------------------------------------------------------------
    def cost(self, reply: ModelReply | ModelError) -> float:
        """USD for the reply: fresh input, cached input (at the input price when none is given) and output."""
        price = self.prices.get(reply.model) or self.prices.get(self.model) or self.default_price or (0.0, 0.0)
        price_in, price_out = price[0], price[1]
        price_cached = price[2] if len(price) > 2 else price_in
        cached = min(reply.cached_tokens, reply.prompt_tokens)
        return ((reply.prompt_tokens - cached) * price_in + cached * price_cached
                + reply.completion_tokens * price_out) / 1_000_000

    def is_priced(self) -> bool:
        """Whether calls are priced: the configured model is in the table, or a default price is given."""
        return self.model in self.prices or self.default_price is not None


def _add_usage(spent: list[int], attempt: _Reply) -> None:
    """Add what the server reported for a failed attempt (nothing when it reported nothing)."""
    if attempt.usage is not None:
        for i, n in enumerate(attempt.usage):
            spent[i] += n


def _quota_used_up(e: openai.APIStatusError) -> bool:
    """OpenAI's 429 for an account out of credit: not a rate limit, and waiting does not help."""
    body = e.body if isinstance(e.body, dict) else {}
    err = body.get("error", body) if isinstance(body, dict) else {}
    return isinstance(err, dict) and "insufficient_quota" in (err.get("code"), err.get("type"))


def _error_message(e: openai.APIStatusError) -> str:
    body = e.body if isinstance(e.body, dict) else {}
    err = body.get("error", body) if isinstance(body, dict) else {}
    return (err.get("message") if isinstance(err, dict) else None) or e.message


def _retry_after(response: httpx2.Response | None) -> float | None:
    """Seconds from Retry-After (or retry-after-ms); None when absent or unreadable."""
    if response is None:
        return None
    if response.headers.get("retry-after-ms"):
        try:
            return max(0.0, float(response.headers["retry-after-ms"]) / 1000)
        except ValueError:
            pass
    raw = response.headers.get("retry-after")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        from email.utils import parsedate_to_datetime

        try:
            return max(0.0, parsedate_to_datetime(raw).timestamp() - time.time())
        except (TypeError, ValueError):
            return None
