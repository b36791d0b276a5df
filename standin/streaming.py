"""A reply as OpenAI's server-sent events: `chat.completion.chunk` lines, usage, then `[DONE]`.

Chunks are built from a shared JSON prefix so hundreds of concurrent streams stay cheap; waits use
asyncio.sleep so a slow or stalled stream never holds up another request.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass
from typing import AsyncIterator

from . import dialects
from .dialects import OPENAI, THINKING, Dialect
from .reply import FINGERPRINT, Reply, new_id, usage

WORDS = re.compile(r"\s*\S+\s*")
ARG_PIECE = 12  # characters of tool-call arguments per delta


@dataclass(frozen=True)
class Pacing:
    token_delay: float = 0.0  # seconds between chunks
    stall_after: int | None = None  # chunks sent before going silent
    stall_for: float = 0.0


def pieces(text: str) -> list[str]:
    """Word-ish pieces that join back to exactly `text`."""
    found = WORDS.findall(text)
    return found if "".join(found) == text else [text]


def chunks(reply: Reply, model: str, prompt: int, include_usage: bool, dialect: Dialect = OPENAI,
           cached: int = 0) -> list[bytes]:
    """Every SSE event of the stream, in order, `[DONE]` included, as `dialect`'s server writes them."""
    head = json.dumps({"id": new_id("chatcmpl-", 29), "object": "chat.completion.chunk",
                       "created": int(time.time()), "model": model,
                       "system_fingerprint": FINGERPRINT}, separators=(",", ":"))[:-1]
    asked = include_usage and dialect.usage == "asked"
    tail = ',"usage":null}' if asked else "}"

    def event(delta: dict, finish: str | None = None, extra: str = "") -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        body = json.dumps(choice, ensure_ascii=False, separators=(",", ":"))
        end = tail if not extra else f",{extra}}}"
        return f'data: {head},"choices":[{body}]{end}\n\n'.encode()

    out = []
    if dialect.keepalive:  # Azure's first chunk: the prompt's filter results, no choices
        out.append(f'data: {{"id":"","object":"","created":0,"model":"","choices":[],'
                   f'"prompt_filter_results":[{{"prompt_index":0,"content_filter_results":{{}}}}]}}\n\n'.encode())
    out.append(event({"role": "assistant", "content": "" if reply.content is not None else None,
                      "refusal": None}))
    if dialect.reasoning:
        out += [event({dialect.reasoning: piece}) for piece in pieces(THINKING)]
    for piece in pieces(reply.content or ""):
        out.append(event({"content": piece}))
    for calls in dialects.call_deltas(dialect, reply.calls, ARG_PIECE):
        out.append(event({"tool_calls": calls}))
    used = json.dumps(usage(reply, prompt, cached), separators=(",", ":"))
    out.append(event({}, dialects.finish(dialect, reply), f'"usage":{used}' if dialect.usage == "always" else ""))
    if asked:
        out.append(f'data: {head},"choices":[],"usage":{used}}}\n\n'.encode())
    out.append(b"data: [DONE]\n\n")
    return out


def broken(events: list[bytes], after: int) -> list[bytes]:
    """The stream as OpenAI's servers end one that fails part-way: some chunks, an error event, the end."""
    error = {"error": {"message": "The server had an error while processing your request. Sorry about that!",
                       "type": "server_error", "param": None, "code": None}}
    keep = max(1, min(after, len(events) - 3))  # never the finish chunk: the reply stays unfinished
    return events[:keep] + [f"data: {json.dumps(error, separators=(',', ':'))}\n\n".encode()]


async def stream(events: list[bytes], pacing: Pacing) -> AsyncIterator[bytes]:
    if not pacing.token_delay and pacing.stall_after is None:
        yield b"".join(events)  # nothing to pace: one write, the client still sees every event
        return
    # A stall always leaves the finish chunk unsent, so the client sees an unfinished reply.
    stall_at = None if pacing.stall_after is None else max(1, min(pacing.stall_after, len(events) - 3))
    for n, data in enumerate(events):
        if n == stall_at:
            await asyncio.sleep(pacing.stall_for)
        elif n and pacing.token_delay:
            await asyncio.sleep(pacing.token_delay)
        yield data
