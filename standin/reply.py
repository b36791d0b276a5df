"""What the stand-in answers, as plain values, and its non-streaming `chat.completion` form.

Only ids are random; everything else follows from the conversation, so runs are reproducible.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass, field

FINGERPRINT = "fp_standin"


@dataclass(frozen=True)
class Call:
    """One tool call. `arguments` is the exact JSON text sent: faults may make it invalid."""

    name: str
    arguments: str
    id: str = field(default_factory=lambda: new_id("call_", 24))

    @classmethod
    def of(cls, name: str, **arguments) -> "Call":
        return cls(name, json.dumps(arguments, ensure_ascii=False))


@dataclass(frozen=True)
class Reply:
    content: str | None = None
    calls: tuple[Call, ...] = ()
    finish_reason: str = ""  # "" = decided by the shape: tool_calls when there are calls, else stop

    @property
    def finish(self) -> str:
        return self.finish_reason or ("tool_calls" if self.calls else "stop")


def new_id(prefix: str, length: int = 24) -> str:
    return prefix + secrets.token_urlsafe(length)[:length].replace("-", "x").replace("_", "y")


def estimate_tokens(chars: int) -> int:
    # Roughly four characters a token, like OpenAI's rule of thumb for English.
    return max(1, chars // 4)


def prompt_tokens(body: dict) -> int:
    chars = len(json.dumps(body.get("messages") or [], ensure_ascii=False))
    if body.get("tools"):
        chars += len(json.dumps(body["tools"], ensure_ascii=False))
    return estimate_tokens(chars)


def completion_tokens(reply: Reply) -> int:
    chars = len(reply.content or "") + sum(len(c.name) + len(c.arguments) for c in reply.calls)
    return estimate_tokens(chars)


def usage(reply: Reply, prompt: int) -> dict:
    done = completion_tokens(reply)
    return {"prompt_tokens": prompt, "completion_tokens": done, "total_tokens": prompt + done}


def message(reply: Reply) -> dict:
    out: dict = {"role": "assistant", "content": reply.content, "refusal": None}
    if reply.calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in reply.calls
        ]
    return out


def completion(reply: Reply, model: str, prompt: int) -> dict:
    """The whole non-streaming response body."""
    return {
        "id": new_id("chatcmpl-", 29),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": FINGERPRINT,
        "choices": [{"index": 0, "message": message(reply), "logprobs": None, "finish_reason": reply.finish}],
        "usage": usage(reply, prompt),
    }
