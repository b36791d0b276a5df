"""Percentiles over a bounded list, as PostgreSQL's percentile_cont computes them (linear interpolation), so a
figure reads the same on SQLite and PostgreSQL."""

from __future__ import annotations


def percentile(values: list[float], fraction: float) -> float | None:
    """The value below which `fraction` of the values lie, interpolated; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    at = fraction * (len(ordered) - 1)
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def counted_percentile(pairs: list[tuple[float, int]], fraction: float) -> float | None:
    """percentile() over a distribution given as ascending (value, how many times) pairs: the same number as
    percentile() over the values written out, without writing them out."""
    total = sum(n for _, n in pairs)
    if not total:
        return None
    at = fraction * (total - 1)
    low = int(at)
    low_value, high_value = _nth(pairs, low), _nth(pairs, min(low + 1, total - 1))
    return low_value + (high_value - low_value) * (at - low)


def _nth(pairs: list[tuple[float, int]], index: int) -> float:
    for value, n in pairs:
        if index < n:
            return value
        index -= n
    raise IndexError(index)


def counted_p50_p90(pairs: list[tuple[float, int]]) -> dict:
    return {"count": sum(n for _, n in pairs), "p50": _round(counted_percentile(pairs, 0.5)),
            "p90": _round(counted_percentile(pairs, 0.9))}


def p50_p90(values: list[float]) -> dict:
    return {"count": len(values), "p50": _round(percentile(values, 0.5)), "p90": _round(percentile(values, 0.9))}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def ratio(part, whole) -> float | None:
    """part / whole, None when there is no whole."""
    return None if not whole else round(float(part) / float(whole), 4)
