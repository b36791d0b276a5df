"""Success criteria checked against what was observed: each check is named, passed or not, and says what
it saw. No Django: the driver turns database rows into an Observed value first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .scenario import CallRule, Expect


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

    def as_dict(self) -> dict:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


def check(expect: Expect, seen: Observed, scope: str) -> list[Check]:
    out: list[Check] = []

    def add(name: str, ok: bool, detail: str = "") -> None:
        out.append(Check(f"{scope}: {name}", bool(ok), detail))

    for key in ("status", "stop_reason", "outcome", "conversation_status"):
        want = getattr(expect, key)
        if want is not None:
            got = getattr(seen, key)
            add(f"{key} is {want}", got == want, f"was {got or '-'}")
    made = ", ".join(_call_text(n, a) for n, a in seen.calls) or "no calls"
    for rule in expect.calls:
        add(f"calls {rule.describe()}", any(_matches(rule, n, a) for n, a in seen.calls), f"calls made: {made}")
    for rule in expect.no_calls:
        bad = [_call_text(n, a) for n, a in seen.calls if _matches(rule, n, a)]
        add(f"never calls {rule.describe()}", not bad, f"called: {', '.join(bad)}" if bad else "")
    if expect.call_order:
        names = [n for n, _ in seen.calls]
        add(f"calls in order {' > '.join(expect.call_order)}", _in_order(expect.call_order, names),
            f"order was: {' > '.join(names) or 'no calls'}")
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
        add(f"refunds issued: {_pairs(want)}", sorted(seen.refunds) == want, f"issued: {_pairs(sorted(seen.refunds))}")
    if expect.seller_messages is not None:
        ok = len(seen.seller_messages) == len(expect.seller_messages) and all(
            any(o == order and part.lower() in m.lower() for o, m in seen.seller_messages)
            for order, part in expect.seller_messages)
        wanted = ", ".join(f"{o} ({p!r})" if p else o for o, p in expect.seller_messages) or "none"
        add(f"seller messages: {wanted}", ok,
            f"sent: {', '.join(f'{o}: {_clip(m, 80)}' for o, m in seen.seller_messages) or 'none'}")
    if expect.approvals is not None:
        ok = len(seen.approvals) == len(expect.approvals) and all(
            (t, d) in seen.approvals or (not d and any(s == t for s, _ in seen.approvals))
            for t, d in expect.approvals)
        add(f"approvals: {_pairs(list(expect.approvals))}", ok, f"requested: {_pairs(seen.approvals)}")
    if expect.store_credits is not None:
        want = sorted(expect.store_credits)
        add(f"store credits recorded by the warranty service: {_pairs(want)}", sorted(seen.store_credits) == want,
            f"recorded: {_pairs(sorted(seen.store_credits))}")
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
