"""A figure's value as a person reads it, the same on the Reports page and in the morning digest, and a
hand-over reason in the words staff read (the code stays in the figure's key, the CSV and the API)."""

from __future__ import annotations

# Each hand-over reason (a run's stop reason, or outcomes.py's own two) as the console words it.
HANDOVER_REASONS = {
    "escalated": "The agent asked for a person",
    "handed_to_person": "The agent said a person would take over",
    "approval_expired": "An approval nobody decided in time",
    "turn_limit": "Step limit reached",
    "over_budget": "Over its budget for one message",
    "conversation_budget": "The conversation's daily budget used",
    "spinning": "Going in circles",
    "model_error": "Model unavailable",
    "empty_reply": "The model gave no reply",
    "quota_exceeded": "Model quota used up",
    "internal_error": "Desk error",
    "stalled": "The worker kept failing",
    "rejected_again": "Asked again after a no",
    "tool_unavailable": "The shop could not be reached",
}


def handover_reason(code: str) -> str:
    """A hand-over reason in plain words (an unknown code as itself, underscores as spaces)."""
    return HANDOVER_REASONS.get(code, code.replace("_", " "))


def shown(row: dict) -> str:
    """A figure's value as a person reads it."""
    value, unit = row["value"], row["unit"]
    if value is None:
        return "–"
    if unit == "rate":
        return f"{float(value) * 100:.1f}%"
    if unit == "seconds":
        return duration(float(value))
    if unit == "usd":
        return f"${float(value):.4f}"
    if unit == "eur":
        return f"€{value}"
    if unit == "score":
        return f"{value} / 5"
    return str(value)


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"
