"""A scripted model for loop tests: queued replies, a record of what it was sent, and assert_complete()."""

from __future__ import annotations

import copy
import itertools
import json

from support.agent.types import ModelError, ModelReply

_ids = itertools.count(1)


def call(name: str, args=None, raw: str | None = None, call_id: str | None = None) -> dict:
    """A tool call as the model sends it: arguments as a JSON string (raw lets a test send garbage)."""
    return {"id": call_id or f"call_{next(_ids)}", "type": "function",
            "function": {"name": name, "arguments": raw if raw is not None else json.dumps(args or {})}}


def reply(content: str | None = None, calls: list[dict] | None = None, finish: str | None = None,
          tokens: tuple[int, int] = (100, 20)) -> ModelReply:
    message = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return ModelReply(message=message, finish_reason=finish or ("tool_calls" if calls else "stop"),
                      prompt_tokens=tokens[0], completion_tokens=tokens[1], model="fake")


def answer(text: str, outcome: str = "resolved") -> list[ModelReply]:
    """The two replies of a proper ending: record the outcome, then say it."""
    return [reply(calls=[call("record_outcome", {"outcome": outcome, "summary": text[:60]})]), reply(text)]


class ScriptedModel:
    def __init__(self, *replies, price_per_reply: float = 0.001):
        self.replies = []
        for r in replies:
            self.replies.extend(r if isinstance(r, list) else [r])
        self.sent: list[list[dict]] = []
        self.price = price_per_reply

    def complete(self, transcript, tools, sink):
        self.sent.append(copy.deepcopy(transcript.messages))
        if not self.replies:
            raise AssertionError("the model was called more often than scripted")
        r = self.replies.pop(0)
        if isinstance(r, Exception):
            raise r
        if r.content:
            for word in r.content.split(" "):
                sink.token(word + " ")
        return copy.deepcopy(r)

    def cost(self, r):
        return self.price

    def assert_complete(self):
        assert not self.replies, f"{len(self.replies)} scripted replies were never requested"


class Forever:
    """A model that sends the same reply however often it is asked."""

    def __init__(self, make):
        self.make, self.calls = make, 0

    def complete(self, transcript, tools, sink):
        self.calls += 1
        return self.make()

    def cost(self, r):
        return 0.001


def failing(message="boom", status=503):
    return ModelError(message, status=status, attempts=4)
