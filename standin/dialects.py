"""Server dialects: how OpenAI-compatible servers other than OpenAI shape their streams and what their
request validators refuse, one named combination per server family.

Each dialect combines behaviours its family is documented or reported to show (sources in docs/agent-loop.md's
"Dialects" section); the default, `openai`, is OpenAI itself. A dialect changes how a reply is written
(ids, chunks, finish reason, usage, reasoning) and adds refusals on top of OpenAI's own rules.
"""

from __future__ import annotations

import json
import re
import secrets
import string
from dataclasses import dataclass, replace

from .reply import Call, Reply
from .rules import error_body

THINKING = "The customer wants help with their order. I should look it up before answering anything."


@dataclass(frozen=True)
class Dialect:
    name: str
    ids: str = "openai"  # openai | numbered | short | empty | mistral: how tool-call ids are made
    index: str = "each"  # each | zero | missing: `index` of the tool-call deltas
    whole_calls: bool = False  # a call's name and arguments in one chunk instead of argument pieces
    args_object: bool = False  # `arguments` as a JSON object instead of a string
    finish_with_calls: str = "tool_calls"  # the finish reason of a reply that makes calls
    usage: str = "asked"  # asked (stream_options.include_usage) | always (in the finish chunk) | never
    reasoning: str = ""  # the delta field thinking streams in before the answer, if any
    keepalive: bool = False  # a chunk with no choices before the reply
    null_content: str = "ok"  # ok | with_calls (null only beside tool_calls) | never
    empty_assistant: bool = True  # accepts an assistant message with neither text nor calls
    id_pattern: str = ""  # a pattern every tool-call id in the history must match
    args_json: bool = False  # refuses history calls whose arguments are not a JSON object
    error_type: str = "invalid_request_error"


DIALECTS = {d.name: d for d in (
    Dialect("openai"),
    # vLLM: Kimi-K2's tool parser numbers ids per reply (functions.<name>:<n>), so they repeat across
    # replies; reasoning parsers stream `reasoning_content`; usage only when asked.
    Dialect("vllm", ids="numbered", reasoning="reasoning_content", error_type="BadRequestError"),
    # vLLM serving a Mistral model (tokenizer mode mistral): mistral_common's validator wants 9-character
    # alphanumeric ids and an assistant message with content or calls.
    Dialect("mistral", ids="mistral", empty_assistant=False, id_pattern=r"[a-zA-Z0-9]{9}",
            error_type="BadRequestError"),
    # Ollama's /v1: whole calls in one chunk, index 0 for every call, finish "stop" with calls (before
    # ollama#7963), no usage in streams (before stream_options), thinking in `reasoning`; refuses null
    # content without calls and arguments that are not JSON.
    Dialect("ollama", ids="short", index="zero", whole_calls=True, finish_with_calls="stop", usage="never",
            reasoning="reasoning", null_content="with_calls", args_json=True),
    # llama.cpp's llama-server: empty ids (before llama.cpp#11992), arguments as an object (llama.cpp#20198),
    # usage always in the last chunk, `reasoning_content`; older builds refuse null content.
    Dialect("llamacpp", ids="empty", index="missing", whole_calls=True, args_object=True, usage="always",
            reasoning="reasoning_content", null_content="never"),
    # Azure OpenAI: a first chunk with no choices (the prompt's content-filter results).
    Dialect("azure", keepalive=True),
)}
OPENAI = DIALECTS["openai"]


def restyle(dialect: Dialect, reply: Reply) -> Reply:
    """The reply with tool-call ids made the way this dialect's server makes them."""
    if dialect.ids == "openai" or not reply.calls:
        return reply
    return replace(reply, calls=tuple(replace(c, id=_id(dialect, c, n)) for n, c in enumerate(reply.calls)))


def _id(dialect: Dialect, call: Call, n: int) -> str:
    if dialect.ids == "numbered":
        return f"functions.{call.name}:{n}"
    if dialect.ids == "short":
        return "call_" + _random(string.ascii_lowercase + string.digits, 8)
    if dialect.ids == "mistral":
        return _random(string.ascii_letters + string.digits, 9)
    return ""


def _random(alphabet: str, n: int) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


def arguments(dialect: Dialect, call: Call):
    """A call's arguments as this dialect sends them: the JSON text, or the object when it parses."""
    if dialect.args_object:
        try:
            return json.loads(call.arguments)
        except ValueError:
            return call.arguments
    return call.arguments


def call_deltas(dialect: Dialect, calls: tuple[Call, ...], piece: int) -> list[list[dict]]:
    """The `tool_calls` lists of the deltas that carry `calls`, in order."""
    if dialect.whole_calls:
        return [[_numbered(dialect, n, {"id": c.id, "type": "function",
                                        "function": {"name": c.name, "arguments": arguments(dialect, c)}})
                 for n, c in enumerate(calls)]]
    out = []
    for n, c in enumerate(calls):
        out.append([_numbered(dialect, n, {"id": c.id, "type": "function",
                                           "function": {"name": c.name, "arguments": ""}})])
        for start in range(0, len(c.arguments), piece):
            out.append([_numbered(dialect, n, {"function": {"arguments": c.arguments[start:start + piece]}})])
    return out


def _numbered(dialect: Dialect, n: int, delta: dict) -> dict:
    if dialect.index == "missing":
        return delta
    return {"index": n if dialect.index == "each" else 0, **delta}


def finish(dialect: Dialect, reply: Reply) -> str:
    return dialect.finish_with_calls if reply.calls and reply.finish == "tool_calls" else reply.finish


def validate(dialect: Dialect, body) -> None | tuple[int, dict]:
    """This dialect's own refusals, in its server's words; checked before OpenAI's rules, which every
    dialect also applies (so only the shapes those rules let through need care here)."""
    messages = body.get("messages") if isinstance(body, dict) else None
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        problem = _assistant_problem(dialect, message)
        if problem:
            return 400, error_body(problem, None, None, dialect.error_type)
    return None


def _assistant_problem(dialect: Dialect, message: dict) -> str | None:
    content, calls = message.get("content"), message.get("tool_calls") or []
    calls = [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []
    if content is None and (dialect.null_content == "never" or (dialect.null_content == "with_calls" and not calls)):
        if dialect.name == "ollama":
            return "invalid message content type: <nil>"
        return "Expected 'content' to be a string or an array"
    text = content if isinstance(content, str) else ("parts" if content else "")
    if not dialect.empty_assistant and not calls and not text.strip():
        return "Assistant message must have either content or tool_calls, but not none."
    for call in calls:
        call_id = call.get("id")
        if dialect.id_pattern and not re.fullmatch(dialect.id_pattern, call_id if isinstance(call_id, str) else ""):
            return f"Tool call id was {call_id} but must be a-z, A-Z, 0-9, with a length of 9."
        if dialect.args_json:
            fn = call.get("function")
            try:
                ok = isinstance(json.loads(fn.get("arguments")), dict)
            except (ValueError, TypeError, AttributeError):
                ok = False
            if not ok:
                return "invalid tool call arguments"
    return None


def bend_completion(dialect: Dialect, reply: Reply, body: dict) -> dict:
    """A non-streaming `chat.completion` body as this dialect's server writes it."""
    choice = body["choices"][0]
    choice["finish_reason"] = finish(dialect, reply)
    if dialect.reasoning:
        choice["message"][dialect.reasoning] = THINKING
    for wire, call in zip(choice["message"].get("tool_calls") or [], reply.calls):
        wire["function"]["arguments"] = arguments(dialect, call)
    if dialect.usage == "never":
        body.pop("usage", None)
    return body
