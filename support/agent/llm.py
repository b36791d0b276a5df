"""The model call, in one place: the only module that imports openai.

Streams every reply (token deltas go to the observer as they arrive), retries with backoff inside the
call for 429, 5xx, connection errors and stalls (honouring Retry-After), never for other 4xx, and prices
each reply from a per-model table.
"""

from __future__ import annotations

import json
import random
import ssl
import time
from typing import Callable

import anyio
import httpx2
import openai

from .types import ModelError, ModelReply, Observer, Transcript

RETRYABLE_STATUS = {408, 409, 429, 500, 502, 503, 504}
# Failures of the transport under a streamed reply (what openai's own stream maps to APIConnectionError):
# anyio's EndOfStream and ssl.SSLError can escape httpx2 unwrapped.
TRANSPORT_ERRORS = (httpx2.RequestError, httpx2.StreamError, ssl.SSLError, anyio.EndOfStream, OSError)


class IncompleteStream(Exception):
    """The stream closed before the reply was finished."""


class _EventStream(openai.Stream[object]):
    """The reply's server-sent events as parsed JSON, read to the end of the body.

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
                raise openai.APIError(message="the stream sent a chunk that is not JSON",
                                      request=response.request, body=None) from None
            if isinstance(chunk, dict) and chunk.get("error"):
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


class OpenAIModel:
    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        model: str,
        prices: dict[str, tuple[float, float]] | None = None,
        connect_timeout: float = 5.0,
        read_timeout: float = 30.0,
        max_retries: int = 3,
        max_retry_wait: float = 20.0,
        backoff_base: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.model = model
        self.prices = prices or {}
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
        head = json.dumps({"model": self.model, "stream": True, "stream_options": {"include_usage": True}})
        return b"".join([head[:-1].encode(), b',"tools":', self._tools_json,
                         b',"messages":[', b",".join(transcript.encoded), b"]}"])

    # -- the call ------------------------------------------------------------------------------
    def complete(self, transcript: Transcript, tools: list[dict], sink: Observer) -> ModelReply:
        body = self.body(transcript, tools)
        t0 = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            try:
                reply = self._stream_once(body, sink)
                reply.attempts, reply.duration_ms = attempt, round((time.monotonic() - t0) * 1000, 2)
                return reply
            except openai.APIStatusError as e:
                if e.status_code not in RETRYABLE_STATUS and e.status_code < 500:
                    raise ModelError(f"{e.status_code}: {_error_message(e)}", status=e.status_code,
                                     attempts=attempt) from None
                failure, wait_hint = f"{e.status_code}: {_error_message(e)}", _retry_after(e.response)
                status = e.status_code
            except (openai.APIConnectionError, httpx2.TransportError, openai.APIError, IncompleteStream) as e:
                # Connection refused, a read timeout (a stalled stream), an error event mid-stream.
                failure, wait_hint, status = f"{type(e).__name__}: {e}", None, None
            sink.tokens_reset()
            if attempt > self.max_retries:
                raise ModelError(f"gave up after {attempt} attempts; last error {failure}",
                                 status=status, attempts=attempt)
            sink.heartbeat()
            self.sleep(self._wait(attempt, wait_hint))

    def _wait(self, attempt: int, hint: float | None) -> float:
        if hint is not None:
            return min(hint, self.max_retry_wait)
        backoff = self.backoff_base * (2 ** (attempt - 1))
        return min(backoff + random.uniform(0, backoff / 2), self.max_retry_wait)

    def _stream_once(self, body: bytes, sink: Observer) -> ModelReply:
        # Each chunk comes back as parsed JSON: no response models to build per token.
        stream = self.client.post(
            "/chat/completions", cast_to=object, content=body,
            options={"headers": {"Content-Type": "application/json"}},
            stream=True, stream_cls=_EventStream,
        )
        content: list[str] = []
        calls: dict[int, dict] = {}
        finish_reason, usage, model = None, None, self.model
        with stream:
            for chunk in stream:
                sink.heartbeat()  # throttled by the sink; a reply of tool calls streams no tokens
                model = chunk.get("model") or model
                if chunk.get("usage"):
                    usage = chunk["usage"]
                for choice in chunk.get("choices") or []:
                    delta = choice.get("delta") or {}
                    if delta.get("content"):
                        content.append(delta["content"])
                        sink.token(delta["content"])
                    for tc in delta.get("tool_calls") or []:
                        slot = calls.setdefault(tc.get("index", 0), {"id": "", "type": "function",
                                                                     "function": {"name": "", "arguments": ""}})
                        slot["id"] = tc.get("id") or slot["id"]
                        fn = tc.get("function") or {}
                        slot["function"]["name"] += fn.get("name") or ""
                        slot["function"]["arguments"] += fn.get("arguments") or ""
                    finish_reason = choice.get("finish_reason") or finish_reason
        if finish_reason is None:
            raise IncompleteStream("the stream ended without a finish reason")
        message: dict = {"role": "assistant", "content": "".join(content) or None}
        if calls:
            message["tool_calls"] = [calls[i] for i in sorted(calls)]
        reply = ModelReply(message=message, finish_reason=finish_reason, model=model)
        if usage:
            reply.prompt_tokens = int(usage.get("prompt_tokens") or 0)
            reply.completion_tokens = int(usage.get("completion_tokens") or 0)
        else:  # an endpoint that reports no usage still counts against the budget, by estimate
            reply.prompt_tokens = len(body) // 4
            reply.completion_tokens = len(json.dumps(message)) // 4
        return reply

    def cost(self, reply: ModelReply) -> float:
        price_in, price_out = self.prices.get(reply.model) or self.prices.get(self.model) or (0.0, 0.0)
        return (reply.prompt_tokens * price_in + reply.completion_tokens * price_out) / 1_000_000


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
