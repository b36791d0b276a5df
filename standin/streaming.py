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


def chunks(reply: Reply, model: str, prompt: int, include_usage: bool) -> list[bytes]:
    """Every SSE event of the stream, in order, `[DONE]` included."""
    head = json.dumps({"id": new_id("chatcmpl-", 29), "object": "chat.completion.chunk",
                       "created": int(time.time()), "model": model,
                       "system_fingerprint": FINGERPRINT}, separators=(",", ":"))[:-1]
    tail = ',"usage":null}' if include_usage else "}"

    def event(delta: dict, finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        body = json.dumps(choice, ensure_ascii=False, separators=(",", ":"))
        return f'data: {head},"choices":[{body}]{tail}\n\n'.encode()

    out = [event({"role": "assistant", "content": "" if reply.content is not None else None,
                  "refusal": None})]
    for piece in pieces(reply.content or ""):
        out.append(event({"content": piece}))
    for index, call in enumerate(reply.calls):
        out.append(event({"tool_calls": [{"index": index, "id": call.id, "type": "function",
                                          "function": {"name": call.name, "arguments": ""}}]}))
        args = call.arguments
        for start in range(0, len(args), ARG_PIECE):
            out.append(event({"tool_calls": [{"index": index,
                                              "function": {"arguments": args[start:start + ARG_PIECE]}}]}))
    out.append(event({}, reply.finish))
    if include_usage:
        body = json.dumps({"choices": [], "usage": usage(reply, prompt)}, separators=(",", ":"))[1:]
        out.append(f"data: {head},{body}\n\n".encode())
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
