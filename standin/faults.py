"""Faults on request: their grammar, how one is chosen for a request, and what each does to a reply.

Grammar of one fault: `name[:key=value[,key=value...]][xN]`, e.g. `429:retry_after=2x3`, `stall`,
`delay:ms=300`. Faults come from the control queue (POST /_standin/faults) or from `#fault:<spec>`
directives in the conversation's latest user message; a directive's faults go, in order, to the model
requests made after that message (retries included).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field

from .conversation import Turn, canonical, latest_user_index, text_of
from .reply import Call, Reply

DEFAULTS: dict[str, dict[str, float]] = {
    "429": {"retry_after": 1},
    "500": {},
    "503": {},
    "delay": {"ms": 1000},
    "stall": {"after_chunks": 2, "seconds": 30},
    "stream_error": {"after_chunks": 2},
    "malformed_args": {},
    "unknown_tool": {},
    "repeat": {},
    "length": {},
    "empty": {},
    "quota": {},
    "parallel": {},
}
HTTP_ERRORS = {"429": 429, "500": 500, "503": 503, "quota": 429}  # fault -> the status it answers with
SPEC = re.compile(r"(?P<name>[a-z0-9_]+?)(?::(?P<params>[a-z_]+=[0-9.]+(?:,[a-z_]+=[0-9.]+)*))?(?:x(?P<count>\d+))?")
DIRECTIVE = re.compile(r"#fault:(\S+)")
MAX_COUNT = 1000


@dataclass(frozen=True)
class Fault:
    name: str
    params: dict = field(default_factory=dict, compare=False)

    def get(self, key: str) -> float:
        return self.params.get(key, DEFAULTS[self.name][key])

    @property
    def spec(self) -> str:
        args = ",".join(f"{k}={_num(v)}" for k, v in self.params.items())
        return f"{self.name}:{args}" if args else self.name


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def parse(spec: str) -> list[Fault]:
    """One spec (`429x2`) as the faults it stands for; ValueError naming what is wrong."""
    found = SPEC.fullmatch(spec.strip().lower())
    if not found or found.group("name") not in DEFAULTS:
        raise ValueError(f"unknown fault {spec!r}; known: {', '.join(DEFAULTS)}")
    name = found.group("name")
    params: dict[str, float] = {}
    for pair in filter(None, (found.group("params") or "").split(",")):
        key, value = pair.split("=")
        if key not in DEFAULTS[name]:
            raise ValueError(f"fault {name!r} takes no {key!r}; it takes: {', '.join(DEFAULTS[name]) or 'nothing'}")
        params[key] = float(value)
    count = int(found.group("count") or 1)
    if not 1 <= count <= MAX_COUNT:
        raise ValueError(f"fault count must be 1..{MAX_COUNT}, got {count}")
    return [Fault(name, params)] * count


def parse_all(specs: list[str] | str) -> list[Fault]:
    specs = [specs] if isinstance(specs, str) else specs
    if not isinstance(specs, list) or not all(isinstance(s, str) for s in specs):
        raise ValueError('"faults" must be a list of strings like "429:retry_after=1"')
    return [f for s in specs for f in parse(s)]


def directives(text: str) -> list[Fault]:
    """The faults a customer message asks for. A typo in a chat message is ignored, not an error."""
    out: list[Fault] = []
    for spec in DIRECTIVE.findall(text):
        try:
            out += parse(spec.rstrip(".,;:!?)"))
        except ValueError:
            continue
    return out


def pick(state, messages: list[dict], turn: Turn) -> tuple[Fault | None, bool]:
    """This request's fault (queue first, then directives), and whether a directive asked for `repeat`."""
    queued = state.take(lambda: json.dumps(messages, ensure_ascii=False),
                        lambda f: f.name != "repeat" or bool(turn.batches))  # nothing to repeat yet: wait
    at = latest_user_index(messages)
    asked = directives(text_of(messages[at].get("content"))) if at is not None else []
    if not asked:
        return queued, False
    # Retries of a failed request add no assistant message, so the server also counts what it saw.
    key = hashlib.sha1(json.dumps(messages[: at + 1], sort_keys=True).encode()).hexdigest()
    made = sum(1 for m in messages[at + 1:] if m.get("role") == "assistant")
    k = max(state.count_directive_request(key), made)
    chosen = asked[k] if k < len(asked) and asked[k].name != "repeat" else None
    return queued or chosen, any(f.name == "repeat" for f in asked)


def repeating(turn: Turn) -> bool:
    """The last two replies made the same calls: a repeat is under way and keeps going."""
    if len(turn.batches) < 2:
        return False
    a, b = turn.batches[-2:]
    return [(n, canonical(x)) for n, x in a] == [(n, canonical(x)) for n, x in b]


def repeat(turn: Turn) -> Reply | None:
    """The previous reply's calls again, same names and arguments, fresh ids."""
    if not turn.batches:
        return None
    return Reply(calls=tuple(Call(name, arguments) for name, arguments in turn.batches[-1]))


def apply(fault: Fault | None, reply: Reply, turn: Turn) -> Reply:
    """`reply` as changed by a content fault (HTTP errors and timing are the app's business)."""
    if fault is None:
        return reply
    if fault.name == "malformed_args":
        call = reply.calls[0] if reply.calls else Call.of("get_order", order_id=turn.order_id or "SU-00000")
        # Cut the closing brace: the classic truncated generation that json.loads rejects.
        return Reply(calls=(Call(call.name, call.arguments[:-1].rstrip()),))
    if fault.name == "unknown_tool":
        args = {"order_id": turn.order_id} if turn.order_id else {}
        return Reply(calls=(Call.of("cancel_everything", **args),))
    if fault.name == "repeat":
        return repeat(turn) or reply
    if fault.name == "empty":  # a finished reply with nothing in it, as some servers send now and then
        return Reply(content="")
    if fault.name == "parallel" and reply.calls:
        # Two calls in one reply: the planned one and a look at the refund policy beside it.
        return Reply(content=reply.content, calls=(*reply.calls, Call.of("search_policy", query="refunds")))
    if fault.name == "length":
        return truncated(reply.content or "Let me look into this for you and check the details of your order.")
    return reply


def truncated(text: str, keep: int | None = None) -> Reply:
    """A text reply cut off mid-way, the way max_tokens ends one."""
    if keep is None:
        words = text.split(" ")
        return Reply(content=" ".join(words[: max(1, len(words) // 2)]), finish_reason="length")
    return Reply(content=text[:keep], finish_reason="length")
