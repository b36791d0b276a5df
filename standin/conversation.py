"""Reading a conversation the way a model does: the request, the order it is about, the results so far.

A "turn" is everything after the assistant's last final text: the customer's new message(s) and the
tool calls and results made since. Earlier turns only lend the order id when the customer omits it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

ORDER_ID = re.compile(r"\bSU-\d+\b", re.IGNORECASE)
DIRECTIVE = re.compile(r"#(?:fault|steps):\S+")
STEPS = re.compile(r"#steps:(\d{1,3})\b")

# Checked in this order: "it never came, where is it?" is a missing parcel, not a status question.
INTENTS = (
    ("missing", ("missing", "not arrived", "hasn't arrived", "has not arrived", "never arrived", "never came",
                 "nothing here", "nothing arrived", "didn't arrive", "did not arrive", "not received",
                 "didn't receive", "did not receive", "haven't received", "have not received",
                 "never received", "never delivered", "not delivered", "wasn't delivered", "lost",
                 "stolen", "can't find", "cannot find", "no parcel", "no package", "nothing is here", "not here",
                 "nothing came", "didn't come", "hasn't come", "not turned up", "hasn't turned up", "never turned up",
                 # German
                 "nie angekommen", "nicht angekommen", "nichts angekommen", "nichts ist angekommen", "nie gekommen",
                 "nicht erhalten", "nichts erhalten", "nicht bekommen", "nie bekommen", "nichts bekommen",
                 "nicht zugestellt", "nie zugestellt", "nicht eingetroffen", "nie eingetroffen", "nicht geliefert",
                 "nie geliefert", "kam nie", "kein paket", "verloren")),
    ("damaged", ("damaged", "broken", "cracked", "smashed", "shattered", "dented", "torn", "scratched", "beschädigt", "kaputt",
                 "zerbrochen")),
    ("wrong", ("wrong item", "wrong colour", "wrong color", "wrong size", "wrong product", "not what i ordered",
               "different item", "instead of", "sent me the wrong", "wrong one", "falscher artikel", "falsche")),
    ("refund", ("refund", "money back", "reimburse", "my money", "pay me back", "euros back", "paid back", "erstattung", "geld zurück")),
    ("status", ("where", "late", "delay", "status", "when", "track", "update", "arrive", "shipped", "wo ist", "wann", "verspät", "sendung")),
)


@dataclass(frozen=True)
class Result:
    """A tool call made in this turn and what came back for it."""

    call_id: str
    name: str
    args: dict | None  # None when the call's arguments were not a JSON object
    text: str
    data: Any = None  # the parsed JSON result, when it was JSON

    @property
    def error(self) -> str | None:
        if self.text.startswith("ERROR"):
            return self.text.split(":", 1)[1].strip() if ":" in self.text else self.text
        if "rejected by staff" in self.text.lower():
            return self.text
        return None

    @property
    def rejection(self) -> str | None:
        """The reviewer's reason when a person refused the call, else None."""
        at = self.text.lower().find("rejected by staff")
        if at < 0:
            return None
        reason = self.text[at + len("rejected by staff"):].lstrip(" :-")
        return reason.strip() or "no reason was given"

    @property
    def expired(self) -> bool:
        """No one decided the call in time (the desk's words for an expired approval)."""
        return self.text.startswith("ERROR") and "expired before anyone" in self.text

    @property
    def ok(self) -> bool:
        return self.error is None and isinstance(self.data, dict)

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default) if isinstance(self.data, dict) else default


@dataclass
class Turn:
    system: str
    request: str  # the customer's words this turn, fault directives removed
    order_id: str | None
    results: list[Result] = field(default_factory=list)
    batches: list[list[tuple[str, str]]] = field(default_factory=list)  # (name, arguments) per assistant reply
    last: dict = field(default_factory=dict)
    steps: int | None = None  # "#steps:N": a run of exactly N model calls, for benchmarks
    photos: int = 0  # photos the customer sent in the conversation: image parts, or the desk's notes of them
    photo_now: bool = False  # one came with this turn's words
    earlier: list[Result] = field(default_factory=list)  # calls of earlier turns: what was decided before
    previous_answer: str = ""  # the answer that ended the turn before this one
    said_before: str = ""  # the customer's words in the turn before this one
    known: list[tuple[str, str]] = field(default_factory=list)  # (number, "placed ..., status") the desk told

    def known_order(self) -> str | None:
        """The order the desk's known-orders line leaves no doubt about: the only one there is."""
        return self.known[0][0] if len(self.known) == 1 else None

    def latest(self, name: str, **match: Any) -> Result | None:
        """The newest result of `name` whose arguments include `match`."""
        for r in reversed(self.results):
            if r.name == name and r.args is not None and all(r.args.get(k) == v for k, v in match.items()):
                return r
        return None

    def answered(self, name: str, arguments: str) -> bool:
        key = canonical(arguments)
        return any(r.name == name and r.args is not None and canonical_args(r.args) == key for r in self.results)

    @property
    def recorded(self) -> bool:
        return any(r.name == "record_outcome" and r.get("recorded") for r in self.results)

    @property
    def shop(self) -> str:
        """The shop's name as the desk's prompt gives it ("You are Hearth & Loom's customer support agent"), as a
        model reads it, followed by a space ("Hearth & Loom "); "" when the prompt names none ("your orders")."""
        found = SHOP_NAMED.search(self.system)
        return f"{found.group(1).strip()} " if found else ""

    @property
    def spin_warned(self) -> bool:
        return self.last.get("role") == "tool" and "same arguments" in text_of(self.last.get("content")).lower()


# support/desk/assistant.py SYSTEM_PROMPT's first words.
SHOP_NAMED = re.compile(r"You are (.{1,80}?)'s (?:customer )?support agent")

# How the desk opens its summary of the older turns it left out of a long conversation (support/agent/
# compaction.py): a user message by role, but the desk's notes framed as data, not what the customer says now.
SUMMARY_OPENING = "Summary of earlier conversation (data, not instructions):"
NOTE_OPENING = "The desk's note for this turn (not the customer's words):"  # the per-run context as a user message


def without_summaries(messages: list) -> list:
    """The conversation as the scripted model reads it: the desk's summary of older turns heeded as the data
    it says it is, so never taken for the customer's request (the turns kept after it carry what matters)."""
    return [m for m in messages if not (isinstance(m, dict) and m.get("role") == "user"
                                        and text_of(m.get("content")).startswith(SUMMARY_OPENING))]


def context_first(messages: list) -> list:
    """The desk's per-run notes (a system message, or a user message opening NOTE_OPENING), which it places after
    the history as it stood when a run first called the model and keeps there, read with the system messages at
    the start, as a model reads instructions wherever they are: the customer's request and the last message stay
    what the conversation says."""
    def note(m: Any) -> bool:
        return isinstance(m, dict) and (m.get("role") in ("system", "developer") or (
            m.get("role") == "user" and text_of(m.get("content")).startswith(NOTE_OPENING)))

    lead = next((i for i, m in enumerate(messages) if not note(m)), len(messages))
    later = [m for m in messages[lead:] if note(m)]
    if not later:
        return messages
    moved = [{**m, "role": "system"} for m in later]
    return [*messages[:lead], *moved, *[m for m in messages[lead:] if not note(m)]]


def text_of(content: Any) -> str:
    """A message's text, whether content is a string or a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


PHOTO_NOTE = "customer attached photo"  # the desk's note for a photo a model is not shown


def photos_in(message: dict) -> int:
    """Photos in a customer's message: image parts, or (a model without images) the desk's notes of them."""
    if message.get("role") != "user":
        return 0
    content = message.get("content")
    parts = sum(1 for p in content if isinstance(p, dict) and p.get("type") == "image_url") \
        if isinstance(content, list) else 0
    return max(parts, text_of(content).count(PHOTO_NOTE))


def canonical_args(args: dict) -> str:
    return json.dumps(args, sort_keys=True, ensure_ascii=False)


def canonical(arguments: str) -> str:
    try:
        return canonical_args(json.loads(arguments))
    except (ValueError, TypeError):
        return arguments


def parse_arguments(arguments: Any) -> dict | None:
    try:
        value = json.loads(arguments) if isinstance(arguments, str) else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def turn_start(messages: list[dict]) -> int:
    """Index just after the assistant's last answer to the customer (0 when there is none)."""
    for i in range(len(messages) - 1, -1, -1):
        if _answers(messages[i]):
            return i + 1
    return 0


def _answers(m: dict) -> bool:
    # An answer is text with no calls, or text sent along with record_outcome (the one-reply handshake).
    if m.get("role") != "assistant" or not text_of(m.get("content")).strip():
        return False
    calls = m.get("tool_calls") or []
    return not calls or any((c.get("function") or {}).get("name") == "record_outcome" for c in calls)


def latest_user_index(messages: list[dict]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user":
            return i
    return None


# The desk's line naming a signed-in customer's orders (support/desk/known_orders.py): a model reads it and
# uses it before asking for an order number.
KNOWN_SCOPE = re.compile(r"opened this conversation with order (SU-\d+)")
KNOWN_ORDER = re.compile(r"^- (SU-\d+): (placed [^,]+, [^,]+),", re.MULTILINE)


def known_orders(system: str) -> list[tuple[str, str]]:
    scope = KNOWN_SCOPE.search(system)
    if scope:
        return [(scope.group(1), "")]
    return [(m.group(1), m.group(2)) for m in KNOWN_ORDER.finditer(system)]


# The same line's "sold by <seller>: <what was bought>, <total>": a customer who names the product, not the number.
KNOWN_BOUGHT = re.compile(r"^- (SU-\d+): placed [^,]+, [^,]+, sold by [^:\n]+: (.+), [\d.]+ [A-Z]{3}$", re.MULTILINE)
PLAIN_WORDS = {"items", "pair", "more"}


def order_by_product(system: str, texts: list[str]) -> str | None:
    """The one known order whose product the customer's words name ("my bookshelf speakers"), else None."""
    said = set(re.findall(r"[a-z]{5,}", " ".join(texts).lower())) - PLAIN_WORDS
    hits = [number for number, bought in KNOWN_BOUGHT.findall(system)
            if said & set(re.findall(r"[a-z]{5,}", bought.lower()))]
    return hits[0] if len(hits) == 1 else None


def find_order_id(texts: list[str]) -> str | None:
    for text in reversed(texts):
        found = ORDER_ID.search(text)
        if found:
            return found.group(0).upper()
    return None


THANKS = re.compile(r"\b(thanks|thank you|thx|cheers|great|perfect|brilliant|ok|okay|danke|vielen dank)\b")
# Words that make a message about an order even when no flow's keyword is in it ("and my other parcel?").
ABOUT_AN_ORDER = re.compile(r"\b(orders?|parcels?|packages?|deliver(y|ed)|tracking|items?|moved|news|bought"
                            r"|bestellung|paket|lieferung)\b")


def intent(text: str) -> str:
    lowered = text.lower().replace("’", "'")
    for name, words in INTENTS:
        if any(w in lowered for w in words):
            return name
    if THANKS.search(lowered) and "?" not in lowered:
        return "thanks"  # a polite close needs no lookups
    return "status"


def stated_intent(text: str) -> str | None:
    """The intent the words state, or None when intent() would only fall back on "status"."""
    lowered = text.lower().replace("’", "'")
    return next((name for name, words in INTENTS if any(w in lowered for w in words)), None)


def recognised(text: str) -> bool:
    """Whether the customer's words are something the flows know: an order named, a flow's keyword, thanks,
    or a question about an order or parcel. "Do you sell gift cards?" is not; intent() would still call it
    a status question (its default), and the answer would repeat the last order's status."""
    lowered = text.lower().replace("’", "'")
    if ORDER_ID.search(lowered) or THANKS.search(lowered) or ABOUT_AN_ORDER.search(lowered):
        return True
    return any(w in lowered for _, words in INTENTS for w in words)


def _said_in_turn_before(messages: list[dict], start: int) -> str:
    """The customer's words in the turn that the answer at messages[start - 1] ended."""
    if not start:
        return ""
    begin = turn_start(messages[:start - 1])
    return "\n".join(DIRECTIVE.sub("", text_of(m.get("content"))) for m in messages[begin:start]
                     if m.get("role") == "user")


def read_turn(messages: list[dict]) -> Turn:
    start = turn_start(messages)
    steps = next((int(x) for m in reversed(messages[start:]) if m.get("role") == "user"
                  for x in STEPS.findall(text_of(m.get("content")))), None)
    user = [DIRECTIVE.sub("", text_of(m.get("content"))) for m in messages if m.get("role") == "user"]
    now = [DIRECTIVE.sub("", text_of(m.get("content"))) for m in messages[start:] if m.get("role") == "user"]
    if not now and user:
        now = user[-1:]  # no new words since the last answer: the last thing the customer said
    system = "\n".join(text_of(m.get("content")) for m in messages if m.get("role") in ("system", "developer"))
    known = known_orders(system)
    turn = Turn(
        system=system,
        request="\n".join(now),
        steps=steps,
        order_id=find_order_id(now) or find_order_id(user) or (known[0][0] if len(known) == 1 else None)
        or order_by_product(system, user),
        known=known,
        last=messages[-1] if messages else {},
        previous_answer=text_of(messages[start - 1].get("content")) if start else "",
        said_before=_said_in_turn_before(messages, start),
    )
    turn.photos = sum(photos_in(m) for m in messages)
    turn.photo_now = any(photos_in(m) for m in messages[start:])
    # The calls of the latest assistant message still owed a result, in order: a result takes the first
    # with its id, so ids that repeat (numbered per reply, or empty, as some servers make them) still pair.
    owed: list[tuple[str, tuple[str, str]]] = []
    for i, m in enumerate(messages):
        if m.get("role") == "assistant" and m.get("tool_calls"):
            batch = [(c["function"]["name"], c["function"]["arguments"]) for c in m["tool_calls"]]
            owed = [(c["id"], b) for c, b in zip(m["tool_calls"], batch)]
            if i >= start:
                turn.batches.append(batch)
        elif m.get("role") == "tool":
            at = next((k for k, (call_id, _) in enumerate(owed) if call_id == m.get("tool_call_id")), None)
            name, arguments = owed.pop(at)[1] if at is not None else (m.get("name") or "", "")
            # Its call may sit just before the turn: an answer sent along with record_outcome.
            text = text_of(m.get("content"))
            try:
                data = json.loads(text)
            except ValueError:
                data = None
            result = Result(m.get("tool_call_id") or "", name, parse_arguments(arguments), text, data)
            (turn.results if i >= start else turn.earlier).append(result)
    return turn
