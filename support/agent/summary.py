"""The short summary a person gets when a run stops without an answer: built from the history, no model call."""

from __future__ import annotations

import json

REASON_TEXT = {
    "turn_limit": "it reached the turn limit",
    "over_budget": "it used up its budget",
    "escalated": "the agent handed it to a person",
    "spinning": "the agent kept repeating the same call",
    "model_error": "the model could not be reached or gave an unusable reply",
    "taken_over": "a staff member took it over",
    "empty_reply": "the model twice replied with nothing",
    "quota_exceeded": "the model provider's quota for this account is used up",
    "internal_error": "the desk failed unexpectedly while working on it",
    "stalled": "the agent's worker kept stopping",
}


def _clip(text: str, n: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def handoff_summary(messages: list[dict], reason: str, detail: str, max_steps_listed: int = 8) -> str:
    """Who asked what, what the agent did and found, and why it stopped: enough to pick the ticket up."""
    asked = next((m.get("content") for m in reversed(messages) if m.get("role") == "user"), "") or ""
    results = {m.get("tool_call_id"): str(m.get("content", "")) for m in messages if m.get("role") == "tool"}
    steps = []
    for m in messages:
        for call in m.get("tool_calls") or []:
            fn = call.get("function") or {}
            try:
                args = ", ".join(f"{v}" for v in json.loads(fn.get("arguments") or "{}").values())
            except (ValueError, AttributeError):
                args = "malformed arguments"
            result = results.get(call.get("id"), "no result")
            status = "error" if result.startswith("ERROR") else "ok" if result != "no result" else "no result"
            steps.append(f"{fn.get('name')}({_clip(args, 60)}) {status}")
    lines = [f"Stopped because {REASON_TEXT.get(reason, reason)}: {detail}."]
    if asked:
        lines.append(f"Customer asked: “{_clip(asked, 200)}”")
    if steps:
        shown = steps[-max_steps_listed:]
        more = f" (+{len(steps) - len(shown)} earlier)" if len(steps) > len(shown) else ""
        lines.append("Agent did: " + "; ".join(shown) + more + ".")
    last_text = next((m.get("content") for m in reversed(messages)
                      if m.get("role") == "assistant" and m.get("content")), "")
    if last_text:
        lines.append(f"Agent last said: “{_clip(last_text, 200)}”")
    return "\n".join(lines)
