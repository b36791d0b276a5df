"""What a trial did, read from its report's evidence (the transcript's tool calls, the trace, the stop reasons):
the tools called, the refunds issued, store credit offered or issued, how its runs ended. compare.py sets two
sides' outcomes against each other, so a scenario that passed on both sides but acted otherwise is seen."""

from __future__ import annotations

import re
from collections import Counter

from support.agent.loop import OUTCOME_TOOL

ISSUED_AMOUNT = re.compile(r'"amount":\s*"([0-9.]+)"')
CREDIT_WORDS = re.compile(r"store credit|gutschrift|guthaben", re.IGNORECASE)


def of_trial(run: dict) -> tuple | None:
    """(tools called, in the order first called, the agent's own record_outcome left out; refunds issued; store credit: none, offered or issued; stop
    reasons): None for a trial whose report kept no evidence (a report of an older format, a skipped trial)."""
    if run.get("skipped") or "transcript" not in run:
        return None
    tools = list(dict.fromkeys(call.get("name", "") for m in run["transcript"] if m.get("role") == "assistant"
                               for call in m.get("tool_calls") or [] if call.get("name") != OUTCOME_TOOL.name))
    ran = [s for s in run.get("trace") or [] if s.get("kind") == "tool" and not s.get("error")]
    refunds = tuple(m.group(1) for s in ran if s.get("tool") == "issue_refund" and '"issued"' in s.get("result", "")
                    for m in [ISSUED_AMOUNT.search(s.get("result", ""))] if m)
    said = " ".join(m.get("content") or "" for m in run["transcript"] if m.get("role") == "assistant")
    credit = ("issued" if any("store_credit" in s.get("tool", "") for s in ran)
              else "offered" if CREDIT_WORDS.search(said) else "not offered")
    return tuple(tools), refunds, credit, tuple(run.get("stop_reasons") or ())


def of_side(runs: list[dict]) -> tuple | None:
    """A scenario's outcome on one side: the one most of its trials had (the first of those equally common)."""
    seen = [o for o in (of_trial(r) for r in runs) if o is not None]
    return Counter(seen).most_common(1)[0][0] if seen else None


def differences(before: tuple | None, after: tuple | None) -> list[str]:
    """Each way the two outcomes differ, in words ("Refund: issued 12.00 → none")."""
    if before is None or after is None:
        return []
    shown = (("Tools called", lambda v: ", ".join(v) or "none"),
             ("Refund", lambda v: ", ".join(f"issued {a}" for a in v) or "none"),
             ("Store credit", str),
             ("Ended as", lambda v: ", ".join(v) or "not stopped"))
    return [f"{label}: {words(x)} → {words(y)}" for (label, words), x, y in zip(shown, before, after) if x != y]
