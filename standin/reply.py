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


@dataclass(frozen=True)
class Finish:
    """The end of a plan: the outcome recorded, then the answer."""

    outcome: str  # resolved | waiting_on_customer | not_resolved | handed_to_person
    summary: str  # one line for the staff console
    text: str  # the answer the customer reads


def sentence(text: str) -> str:
    """Someone's words (a reviewer's reason) as a sentence of the answer: one full stop at the end, never two."""
    text = text.strip()
    return text if text.endswith((".", "!", "?", "…")) else f"{text}."


def declined_answer(asked: str, reason: str) -> str:
    """The answer when staff declined what the agent asked them to approve (`asked`: "a refund of 64.00 EUR")."""
    return (f"I asked our team to approve {asked}, but they decided against it: {sentence(reason)} I'm sorry this "
            "isn't the answer you hoped for; if you have anything that might change the picture, just reply here.")


def unreviewed_answer(asked: str, done: str) -> str:
    """The answer when no one decided in time (`done`: what has not happened yet, "refunded")."""
    return (f"I asked our team to approve {asked}, but it couldn't be reviewed in time, so nothing has been {done} "
            "yet. A member of our team will follow up with you here.")


def new_id(prefix: str, length: int = 24) -> str:
    return prefix + secrets.token_urlsafe(length)[:length].replace("-", "x").replace("_", "y")


def estimate_tokens(chars: int) -> int:
    # Roughly four characters a token, like OpenAI's rule of thumb for English.
    return max(1, chars // 4)


IMAGE_TOKENS = 765  # what OpenAI counts for a 1024 x 1024 image at "auto" detail: 85 + 4 tiles of 170


def images_in(messages) -> int:
    """How many image parts the request's messages carry."""
    return sum(1 for m in messages if isinstance(m, dict) and isinstance(m.get("content"), list)
               for p in m["content"] if isinstance(p, dict) and p.get("type") == "image_url")


def without_images(messages: list) -> list:
    return [{**m, "content": [p for p in m["content"] if not (isinstance(p, dict) and p.get("type") == "image_url")]}
            if isinstance(m, dict) and isinstance(m.get("content"), list) else m for m in messages]


def prompt_tokens(body: dict) -> int:
    # An image costs its tiles, not the length of its base64 text.
    messages = body.get("messages") or []
    chars = len(json.dumps(without_images(messages), ensure_ascii=False))
    chars += 4 * IMAGE_TOKENS * images_in(messages)
    if body.get("tools"):
        chars += len(json.dumps(body["tools"], ensure_ascii=False))
    return estimate_tokens(chars)


def completion_tokens(reply: Reply) -> int:
    chars = len(reply.content or "") + sum(len(c.name) + len(c.arguments) for c in reply.calls)
    return estimate_tokens(chars)


def usage(reply: Reply, prompt: int, cached: int = 0) -> dict:
    """As OpenAI reports it, with the prompt's tokens served from the prompt cache (standin/cache.py)."""
    done = completion_tokens(reply)
    return {"prompt_tokens": prompt, "completion_tokens": done, "total_tokens": prompt + done,
            "prompt_tokens_details": {"cached_tokens": min(cached, prompt), "audio_tokens": 0}}


def message(reply: Reply) -> dict:
    out: dict = {"role": "assistant", "content": reply.content, "refusal": None}
    if reply.calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in reply.calls
        ]
    return out


def completion(reply: Reply, model: str, prompt: int, cached: int = 0) -> dict:
    """The whole non-streaming response body."""
    return {
        "id": new_id("chatcmpl-", 29),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": FINGERPRINT,
        "choices": [{"index": 0, "message": message(reply), "logprobs": None, "finish_reason": reply.finish}],
        "usage": usage(reply, prompt, cached),
    }
