"""A figure's value as a person reads it, the same on the Reports page and in the morning digest."""

from __future__ import annotations


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
