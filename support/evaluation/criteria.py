"""Success criteria checked against what was observed: each check is named, passed or not, and says what
it saw. No Django: the driver turns database rows into an Observed value first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .scenario import CallRule, EndState, Expect


@dataclass
class Observed:
    """One turn's (or the whole conversation's) evidence."""

    calls: list[tuple[str, dict | None]] = field(default_factory=list)  # what the model asked for, in order
    text: str = ""  # everything the customer was shown
    status: str = ""
    stop_reason: str = ""
    outcome: str = ""
    refunds: list[tuple[str, str]] = field(default_factory=list)  # (order, amount) issued
    seller_messages: list[tuple[str, str]] = field(default_factory=list)  # (order, text)
    approvals: list[tuple[str, str]] = field(default_factory=list)  # (tool, decision or "pending")
    store_credits: list[tuple[str, str]] = field(default_factory=list)  # (order, amount) the warranty service got
    policies_read: list[tuple[str, int | None]] = field(default_factory=list)  # (doc_id, version) searches returned
    conversation_status: str = ""
    model_calls: int = 0
    tokens: int = 0
    largest_prompt: int = 0  # the most prompt tokens one model call was sent
    cost_usd: float = 0.0


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str = ""
    tag: str = ""  # when it fails, what kind of failure it shows (a triage label, triage.py), "" for none

    def as_dict(self) -> dict:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


def check(expect: Expect, seen: Observed, scope: str) -> list[Check]:
    out: list[Check] = []

    def add(name: str, ok: bool, detail: str = "", tag: str = "") -> None:
        out.append(Check(f"{scope}: {name}", bool(ok), detail, tag))

    for key in ("status", "stop_reason", "outcome", "conversation_status"):
        want = getattr(expect, key)
        if want is not None:
            got = getattr(seen, key)
            add(f"{key} is {want}", got == want, f"was {got or '-'}")
    made = ", ".join(_call_text(n, a) for n, a in seen.calls) or "no calls"
    names = [n for n, _ in seen.calls]
    for rule in expect.calls:
        add(f"calls {rule.describe()}", any(_matches(rule, n, a) for n, a in seen.calls), f"calls made: {made}",
            "wrong_arguments" if rule.tool in names else "wrong_tool")
    for rule in expect.no_calls:
        bad = [_call_text(n, a) for n, a in seen.calls if _matches(rule, n, a)]
        add(f"never calls {rule.describe()}", not bad, f"called: {', '.join(bad)}" if bad else "",
            "wrong_arguments" if rule.args or rule.match else "wrong_tool")
    if expect.call_order:
        add(f"calls in order {' > '.join(expect.call_order)}", _in_order(expect.call_order, names),
            f"order was: {' > '.join(names) or 'no calls'}", "wrong_tool")
    text = seen.text.lower()
    for fact in expect.says:
        add(f"says {fact!r}", fact.lower() in text, "" if fact.lower() in text else f"not in: {_clip(seen.text)}")
    for pattern in expect.says_match:
        found = re.search(pattern, seen.text, re.IGNORECASE)
        add(f"says /{pattern}/", found, "" if found else f"not in: {_clip(seen.text)}")
    for fact in expect.never_says:
        at = text.find(fact.lower())
        add(f"never says {fact!r}", at < 0, "" if at < 0 else f"said: …{seen.text[max(0, at - 60):at + 60]}…")
    if expect.refunds is not None:
        want = sorted(expect.refunds)
        add(f"refunds issued: {_pairs(want)}", sorted(seen.refunds) == want, f"issued: {_pairs(sorted(seen.refunds))}",
            _write_tag(want, seen.refunds))
    if expect.seller_messages is not None:
        ok = len(seen.seller_messages) == len(expect.seller_messages) and all(
            any(o == order and part.lower() in m.lower() for o, m in seen.seller_messages)
            for order, part in expect.seller_messages)
        wanted = ", ".join(f"{o} ({p!r})" if p else o for o, p in expect.seller_messages) or "none"
        add(f"seller messages: {wanted}", ok,
            f"sent: {', '.join(f'{o}: {_clip(m, 80)}' for o, m in seen.seller_messages) or 'none'}",
            _count_tag(len(expect.seller_messages), len(seen.seller_messages)))
    if expect.approvals is not None:
        ok = len(seen.approvals) == len(expect.approvals) and all(
            (t, d) in seen.approvals or (not d and any(s == t for s, _ in seen.approvals))
            for t, d in expect.approvals)
        asked = {t for t, _ in seen.approvals}
        add(f"approvals: {_pairs(list(expect.approvals))}", ok, f"requested: {_pairs(seen.approvals)}",
            "missing_approval_request" if any(t not in asked for t, _ in expect.approvals) else "")
    if expect.store_credits is not None:
        want = sorted(expect.store_credits)
        add(f"store credits recorded by the warranty service: {_pairs(want)}", sorted(seen.store_credits) == want,
            f"recorded: {_pairs(sorted(seen.store_credits))}", _write_tag(want, seen.store_credits))
    read = ", ".join(_policy(d, v) for d, v in seen.policies_read) or "none"
    for doc_id, version in expect.policies_read:
        found = any(d == doc_id and version in (None, v) for d, v in seen.policies_read)
        add(f"reads policy {_policy(doc_id, version)}", found, f"search results read: {read}")
    if expect.max_model_calls is not None:
        add(f"at most {expect.max_model_calls} model calls", seen.model_calls <= expect.max_model_calls,
            f"made {seen.model_calls}")
    if expect.max_tokens is not None:
        add(f"at most {expect.max_tokens} tokens", seen.tokens <= expect.max_tokens, f"used {seen.tokens}")
    if expect.max_prompt_tokens_per_call is not None:
        add(f"at most {expect.max_prompt_tokens_per_call} prompt tokens in any model call",
            seen.largest_prompt <= expect.max_prompt_tokens_per_call, f"largest {seen.largest_prompt}")
    if expect.max_cost_usd is not None:
        add(f"cost at most ${expect.max_cost_usd:.4f}", seen.cost_usd <= expect.max_cost_usd,
            f"cost ${seen.cost_usd:.5f}")
    return out


def _write_tag(want: list[tuple[str, str]], seen: list[tuple[str, str]]) -> str:
    """An extra write on an order that had one coming is the wrong amount; any other extra one is unintended."""
    extra, missing = _difference(want, seen), _difference(seen, want)
    if any(o in {m for m, _ in missing} for o, _ in extra):
        return "wrong_arguments"
    return "unintended_write" if extra else ""


def _count_tag(wanted: int, sent: int) -> str:
    """More sent than wanted: unintended; as many but not the ones wanted: wrong arguments; fewer: missing."""
    return "unintended_write" if sent > wanted else ("wrong_arguments" if sent == wanted else "")


def _difference(want: list, seen: list) -> list:
    """What `seen` holds beyond `want`, counting repeats."""
    left = list(want)
    out = []
    for item in seen:
        if item in left:
            left.remove(item)
        else:
            out.append(item)
    return out


# -- the end state: what the shop and the desk hold when the conversation is over -----------------------------

@dataclass
class EndSeen:
    refunds: list[tuple[str, str]] = field(default_factory=list)  # (order, amount) made during the scenario
    seller_messages: list[tuple[str, str, str]] = field(default_factory=list)  # (order, seller, text)
    approvals: list[tuple[str, str]] = field(default_factory=list)  # (tool, END_DECISIONS)
    escalations: list[str] = field(default_factory=list)  # each hand-over's reason and summary
    conversation_status: str = ""
    told: str = ""  # everything the customer was shown


def check_end_state(end: EndState, seen: EndSeen) -> list[Check]:
    """Every write expected is there, and nothing else: each missing and each unexpected one fails by name."""
    out: list[Check] = []

    def compare(kind: str, want: list, got: list, fits, show, extra_tag: str = "unintended_write",
                missing_tag=lambda w: "partial_goal") -> None:
        left = list(got)
        missing = []
        for w in want:
            found = next((g for g in left if fits(w, g)), None)
            if found is None:
                missing.append(w)
            else:
                left.remove(found)
                out.append(Check(f"end state: {kind} {show(w)}", True))
        for w in missing:
            out.append(Check(f"end state: {kind} {show(w)}", False,
                             f"not there; there: {', '.join(_show_any(g) for g in got) or 'none'}", missing_tag(w)))
        missed_orders = {w[0] if isinstance(w, tuple) else getattr(w, "order", None) for w in missing} \
            if extra_tag == "unintended_write" else set()
        for g in left:  # a write on an order that had another one coming is that write with the wrong arguments
            tag = "wrong_arguments" if isinstance(g, tuple) and g[0] in missed_orders else extra_tag
            out.append(Check(f"end state: unexpected {kind} {_show_any(g)}", False, "not in the expected end state",
                             tag))
        if not left:
            out.append(Check(f"end state: no other {kind}s", True))

    compare("refund", list(end.refunds), seen.refunds, lambda w, g: w == g, lambda w: f"{w[0]} {w[1]}")
    compare("seller message", list(end.seller_messages), seen.seller_messages,
            lambda w, g: w.order == g[0] and (not w.seller or w.seller == g[1])
            and _norm(w.contains) in _norm(g[2]),
            lambda w: f"{w.order}" + (f" to {w.seller}" if w.seller else "") + (f" ({w.contains!r})" if w.contains
                                                                                else ""))
    asked = {t for t, _ in seen.approvals}  # a gated call expected but never put to staff is its own failure
    compare("approval", list(end.approvals), seen.approvals, lambda w, g: w == g, lambda w: f"{w[0]} {w[1]}",
            extra_tag="", missing_tag=lambda w: "partial_goal" if w[0] in asked else "missing_approval_request")
    compare("hand-over", list(end.escalations), [(e,) for e in seen.escalations],
            lambda w, g: _norm(w) in _norm(g[0]), lambda w: f"({w!r})" if w else "(any)")
    if end.conversation_status is not None:
        out.append(Check(f"end state: conversation is {end.conversation_status}",
                         seen.conversation_status == end.conversation_status, f"was {seen.conversation_status or '-'}",
                         "partial_goal"))
    for fact in end.must_tell:
        ok = told(fact, seen.told)
        out.append(Check(f"end state: the customer was told {fact!r}", ok,
                         "" if ok else f"not in what they were shown: {_clip(seen.told)}", "partial_goal"))
    return out


_CURRENCY = r"[€$£]|EUR|USD|GBP"
AMOUNT_FACT = re.compile(rf"^\s*(?P<c1>{_CURRENCY})?\s*(?P<n>\d+)(?:[.,](?P<d>\d{{2}}))?\s*(?P<c2>{_CURRENCY}|euros?)?\s*$",
                         re.IGNORECASE)
AMOUNT_IN_TEXT = re.compile(rf"(?:(?P<c1>{_CURRENCY})\s?)?(?<![\d.,])(?P<n>\d+)(?:[.,](?P<d>\d{{2}}))?(?!\d|[.,]\d)"
                            rf"(?:\s?(?P<c2>{_CURRENCY}|euros?\b))?", re.IGNORECASE)


def told(fact: str, text: str) -> bool:
    """Whether `fact` is in `text`: an amount (two decimals or a currency: "30.00", "€30", "30,00 EUR") matches
    the same amount written any of those ways; anything else is found as written, ignoring case and spacing."""
    amount = _amount(AMOUNT_FACT.match(fact))
    if amount is None:
        return _norm(fact) in _norm(text)
    return any(_amount(m) == amount for m in AMOUNT_IN_TEXT.finditer(text))


def _amount(m) -> str | None:
    """"30.00" from a match that is an amount: with cents or a currency beside it; a bare "30" is not one."""
    if m is None or not (m.group("d") or m.group("c1") or m.group("c2")):
        return None
    return f"{int(m.group('n'))}.{m.group('d') or '00'}"


def _norm(text: str) -> str:
    return " ".join(str(text).lower().split())


def _show_any(item) -> str:
    if isinstance(item, tuple):
        return " ".join(_clip(str(x), 60) for x in item if str(x)) or "(any)"
    return str(item)


def _matches(rule: CallRule, name: str, args: dict | None) -> bool:
    if name != rule.tool:
        return False
    if not rule.args and not rule.match:
        return True
    if args is None:
        return False
    for key, value in rule.args.items():
        if str(args.get(key)) != str(value):
            return False
    for key, pattern in rule.match.items():
        if not re.search(pattern, str(args.get(key, "")), re.IGNORECASE):
            return False
    return True


def _in_order(wanted: tuple[str, ...], names: list[str]) -> bool:
    """`wanted` appears in `names` as a subsequence: other calls may come between."""
    it = iter(names)
    return all(any(n == w for n in it) for w in wanted)


def _call_text(name: str, args: dict | None) -> str:
    if args is None:
        return f"{name}(<invalid arguments>)"
    short = ", ".join(f"{k}={_clip(str(v), 30)}" for k, v in args.items() if k in ("order_id", "amount", "tracking"))
    return f"{name}({short})"


def _policy(doc_id: str, version: int | None) -> str:
    return f"{doc_id} v{version}" if version is not None else doc_id


def _pairs(pairs) -> str:
    return ", ".join(f"{a} {b}".strip() for a, b in pairs) or "none"


def _clip(text: str, n: int = 160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"
