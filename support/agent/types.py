"""Plain values the loop works with: calls, replies, trace steps, limits, spending and the run's result."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from typing import Any, Protocol

# A closed set: every run that stops says why with exactly one of these.
ANSWERED = "answered"
TURN_LIMIT = "turn_limit"
OVER_BUDGET = "over_budget"
ESCALATED = "escalated"
SPINNING = "spinning"
MODEL_ERROR = "model_error"
TAKEN_OVER = "taken_over"
EMPTY_REPLY = "empty_reply"  # the model answered with neither text nor calls, again after one retry
QUOTA_EXCEEDED = "quota_exceeded"  # the endpoint says the account's quota is used up: not transient
INTERNAL_ERROR = "internal_error"  # our own code failed unexpectedly; logged with the run id
REJECTED_AGAIN = "rejected_again"  # the model kept asking for an action staff had rejected
CONVERSATION_BUDGET = "conversation_budget"  # the conversation's budget for the last 24 hours is used up
TOOL_UNAVAILABLE = "tool_unavailable"  # a tool's system (the shop) could not be reached or answered nonsense
STOP_REASONS = (ANSWERED, TURN_LIMIT, OVER_BUDGET, ESCALATED, SPINNING, MODEL_ERROR, TAKEN_OVER, EMPTY_REPLY,
                QUOTA_EXCEEDED, INTERNAL_ERROR, REJECTED_AGAIN, CONVERSATION_BUDGET, TOOL_UNAVAILABLE)

# A run that is not stopped but waits for a person to decide on its gated calls.
AWAITING_APPROVAL = "awaiting_approval"
STOPPED = "stopped"

# What the model says it achieved (through the record_outcome tool). UNSTATED: it answered without saying.
OUTCOMES = ("resolved", "waiting_on_customer", "not_resolved", "handed_to_person")
UNSTATED = "unstated"
# Set by the desk, never by the model: the answer leaves the case waiting on something with a time, which a
# tool of the desk's own said (support/desk/waiting.py).
WAITING = "waiting"
HANDED_TO_PERSON = "handed_to_person"

# A message's keys that start with "_" are the desk's notes about it, never sent: encode() leaves them out.
# (Servers refuse keys they do not know: Mistral's API and vLLM with Mistral's tokenizer refuse even
# OpenAI's optional `name`.) AUTHOR = STAFF marks what a person wrote or caused (a staff reply, a notice of
# what staff did): compaction never summarises it away, so what staff promised stands word for word.
AUTHOR = "_author"
STAFF = "staff"
# NOTE marks the desk's note for a run inside the history (Transcript.context, once placed): the customer's
# local time, the orders the desk knows; never the customer's words, whatever its role. NOTED, on the reply
# the model gave right after a note, carries that note (and the desk's facts behind it) to be saved with the
# reply, so that every later request sends the note again at the same place.
NOTE = "_note"
NOTED = "_noted"


def from_customer(message: dict) -> bool:
    """A message the customer wrote (a user message that is not one of the desk's notes)."""
    return message.get("role") == "user" and not message.get(NOTE)


def encode(message: dict) -> bytes:
    """One message as the JSON bytes that go over the wire, the desk's own notes ("_" keys) left out;
    computed once per message (see Transcript)."""
    if any(key.startswith("_") for key in message):
        message = {k: v for k, v in message.items() if not k.startswith("_")}
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()


class Transcript:
    """The message list of a run, append-only, with each message's wire encoding kept beside it.

    Every model call re-sends the whole history; encoding each message once makes the request body a
    join of ready bytes instead of a walk over every message on every call.

    `context`: what the desk tells the model for this run only (the customer's local time, the orders it
    knows). It is placed once, at the end of the history as it stands at the run's first model call
    (`place_context`), and stays there: every later call of the run, and every later run (the desk saves it
    with the reply that followed it, `NOTED`), sends the same bytes at the same place, so all before the newest
    message is the prefix the previous call sent, which a provider's prompt cache serves (docs/agent-loop.md,
    "Prompt caching"). `context_facts`: what the desk wants kept with it (opaque here).
    """

    def __init__(self, messages: list[dict] | None = None, *, context: list[dict] | None = None,
                 cache_key: str = "", context_facts: dict | None = None):
        self.messages: list[dict] = []
        self.cache_key = cache_key  # the conversation's prompt_cache_key, sent where the dialect takes it
        self.encoded: list[bytes] = []
        self.context: list[dict] = list(context or [])
        self.context_facts = dict(context_facts or {})
        self.placed: list[dict] = []  # the note placed and not yet saved with a reply
        for m in messages or []:
            self.append(m)

    def place_context(self) -> None:
        """Put this run's note at the end of the history, once (before the run's first model call)."""
        if not self.context:
            return
        self.placed, self.context = self.context, []
        for m in self.placed:
            self.append({**m, NOTE: True})

    def noted(self, reply: dict) -> dict:
        """The model's reply, carrying the note placed before it (once) for the desk to save with it."""
        if not self.placed:
            return reply
        note = {"messages": self.placed, **self.context_facts}
        self.placed = []
        return {**reply, NOTED: note}

    def sent(self) -> list[dict]:
        """The messages as a model call sends them: the history, then this run's note until it is placed."""
        return [*self.messages, *self.context]

    @property
    def context_encoded(self) -> list[bytes]:
        return [encode(m) for m in self.context]

    def append(self, message: dict) -> None:
        self.encoded.append(encode(message))
        self.messages.append(message)

    def __len__(self) -> int:
        return len(self.messages)

    def __iter__(self):
        return iter(self.messages)

    def __getitem__(self, i):
        return self.messages[i]


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # the model's generated text: a JSON string that may be malformed

    @classmethod
    def from_wire(cls, call: dict) -> "ToolCall":
        fn = call.get("function") or {}
        return cls(id=call.get("id", ""), name=fn.get("name", ""), arguments=fn.get("arguments", ""))


@dataclass
class ModelReply:
    message: dict  # the assistant message exactly as it goes back into the history
    finish_reason: str | None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model: str = ""
    attempts: int = 1
    duration_ms: float = 0.0
    cached_tokens: int = 0  # of prompt_tokens, those the endpoint served from its prompt cache

    @property
    def content(self) -> str:
        return self.message.get("content") or ""

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [ToolCall.from_wire(c) for c in self.message.get("tool_calls") or []]


class ModelError(Exception):
    """The model call failed for good: retries used up, or a request the endpoint will never accept.

    `code` names failures the loop stops on with a reason of their own (EMPTY_REPLY, QUOTA_EXCEEDED);
    the tokens are what the endpoint reported for the failed attempts, which still count and cost.
    """

    def __init__(self, message: str, *, status: int | None = None, attempts: int = 1, code: str = "",
                 prompt_tokens: int = 0, completion_tokens: int = 0, model: str = "", cached_tokens: int = 0):
        super().__init__(message)
        self.cached_tokens = cached_tokens
        self.status = status
        self.attempts = attempts
        self.code = code
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self.model = model


class Model(Protocol):
    def complete(self, transcript: Transcript, tools: list[dict], sink: "Observer") -> ModelReply: ...

    def cost(self, reply: ModelReply) -> float: ...


@dataclass
class Step:
    """One row of the trace: a model call or a tool call."""

    kind: str  # "model" | "tool"
    turn: int
    duration_ms: float = 0.0
    # model calls
    model: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # of prompt_tokens, read from the provider's prompt cache (priced as such)
    cost_usd: float = 0.0
    finish_reason: str | None = None
    attempts: int = 0
    # tool calls
    tool: str = ""
    call_id: str = ""
    arguments: str = ""
    result: str = ""  # an excerpt
    error: str = ""  # empty when the step succeeded
    label: str = ""
    read_only: bool = False  # a tool that only reads ran (Tool.read_only): nothing to count or undo


@dataclass(frozen=True)
class Limits:
    max_steps: int = 12  # model calls per run
    max_tokens: int = 200_000
    max_cost_usd: float = 0.50
    max_seconds: float = 300.0
    spin_max_repeats: int = 2
    tool_output_max_chars: int = 4000
    # What the model reads of a long conversation is compacted past this many estimated tokens (0: never);
    # the model's context window times the share that may be used (see compaction.py).
    compact_above_tokens: int = 0
    asks_after_rejection: int = 1  # re-asks for a rejected action told "no" before the run stops
    # Requests for a person's approval that may wait at once in one conversation, this reply's included (0: any).
    max_waiting: int = 3
    # The conversation's budget over the last 24 hours, all runs together (0: none).
    day_max_steps: int = 0
    day_max_tokens: int = 0
    day_max_cost_usd: float = 0.0


@dataclass
class Spent:
    """What a run has used so far; carried across a pause so limits hold for the whole run."""

    turns: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def over_day(self, limits: Limits, before: "Spent") -> str | None:
        """The conversation's 24-hour budget, counting `before` (its other runs in that time) and this run."""
        turns, tokens, cost = before.turns + self.turns, before.tokens + self.tokens, before.cost_usd + self.cost_usd
        if limits.day_max_steps and turns >= limits.day_max_steps:
            return f"the conversation's budget of {limits.day_max_steps} model calls a day is used up"
        if limits.day_max_tokens and tokens >= limits.day_max_tokens:
            return f"the conversation's budget of {limits.day_max_tokens} tokens a day is used up ({tokens} used)"
        if limits.day_max_cost_usd and cost >= limits.day_max_cost_usd:
            return f"the conversation's budget of ${limits.day_max_cost_usd:.2f} a day is used up (${cost:.4f} used)"
        return None

    def over(self, limits: Limits) -> str | None:
        if self.tokens >= limits.max_tokens:
            return f"token budget of {limits.max_tokens} reached ({self.tokens} used)"
        if limits.max_cost_usd and self.cost_usd >= limits.max_cost_usd:
            return f"cost budget of ${limits.max_cost_usd:.2f} reached (${self.cost_usd:.4f} used)"
        return None


@dataclass(frozen=True)
class Decision:
    """A person's decision on a gated call, keyed by call id when the run resumes."""

    approved: bool
    arguments: dict | None = None  # the arguments that execute, when staff edited them
    reason: str = ""
    by: str = "staff"  # who decided, as the model is told: "staff", or "the system" when it expired


@dataclass
class PendingCall:
    call: ToolCall
    arguments: dict  # validated


@dataclass
class RunResult:
    status: str  # STOPPED | AWAITING_APPROVAL
    stop_reason: str | None = None
    outcome: str | None = None
    outcome_summary: str = ""
    answer: str = ""  # the final text the customer reads
    summary: str = ""  # for a person, when the run did not end with an answer
    detail: str = ""
    pending: list[PendingCall] = field(default_factory=list)
    spent: Spent = field(default_factory=Spent)


class Observer:
    """Hooks the loop calls as it works. The caller persists and publishes; the loop only reports.

    `message` is called the moment a message is appended, before anything acts on it, so a crash
    after it loses nothing.
    """

    def message(self, message: dict) -> None: ...

    def step_started(self, step: Step) -> None: ...

    def step(self, step: Step) -> None: ...

    def token(self, delta: str) -> None: ...

    def tokens_reset(self) -> None:
        """The streamed reply failed part-way and is being retried: drop the deltas seen so far."""

    def heartbeat(self) -> None: ...

    def needs_person(self, reason: str) -> None:
        """A person should look at the conversation (the run itself goes on): called at most once a run."""

    def incoming(self) -> list[dict]:
        """Messages saved since the run started (the customer wrote again): seen at the next model call."""
        return []

    def parallel(self, thunks: list) -> list:
        """Run independent read-only tool calls at the same time; each thunk's value or exception, in
        order. A caller whose tools need per-thread resources (database connections) overrides it."""
        from concurrent.futures import ThreadPoolExecutor

        def outcome(thunk):
            try:
                return thunk()
            except BaseException as e:  # handed back as the value: the caller re-raises it in order
                return e

        with ThreadPoolExecutor(max_workers=min(len(thunks), 8), thread_name_prefix="tool-read") as pool:
            return list(pool.map(outcome, thunks))

    def atomic(self):
        """Writes that must commit together or not at all: a tool's effect, its result and its trace row; a
        model call's trace row and its reply. Nested, it undoes only its own part when it fails."""
        return contextlib.nullcontext()


def parse_arguments(raw: Any) -> dict:
    """The model's arguments string as an object; raises ValueError with a readable message."""
    if not isinstance(raw, str):
        raise ValueError(f"arguments must be a JSON string, got {type(raw).__name__}")
    value = json.loads(raw or "{}")
    if not isinstance(value, dict):
        raise ValueError(f"arguments must be a JSON object, got {type(value).__name__}")
    return value
