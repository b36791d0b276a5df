"""Words and numbers for people: how long to wait, as a person says it. Plain functions, no Django."""

from __future__ import annotations


def wait_words(seconds: float) -> str:
    """"a few seconds", "40 seconds", "about a minute", "3 minutes": how long, as a person says it."""
    seconds = max(0, int(round(seconds)))
    if seconds < 10:
        return "a few seconds"
    if seconds < 60:
        return f"{seconds} seconds"
    if seconds < 90:
        return "about a minute"
    minutes = -(-seconds // 60)  # rounded up: telling someone to wait less than they must only fails again
    return f"{minutes} minutes"


def staff_name(user) -> str | None:
    """How a staff member is named everywhere: first name, else username."""
    return (user.get_short_name() or user.get_username()) if user is not None else None
