"""pass^k: the chance that k tries of a scenario, drawn from the n made, all pass (τ-bench's reliability number).

With c passes in n trials, pass^k = C(c, k) / C(n, k): unbiased for "all of k independent tries pass", and
pass^1 is the plain pass rate. A scenario that passes once in a while has a good pass^1 and a poor pass^k;
that gap is what a shop needs to see before it trusts an agent with refunds. The suite's number is the mean
over its scenarios (each weighs the same, however many trials it had).
"""

from __future__ import annotations

from math import comb


def pass_hat(n: int, c: int, k: int) -> float | None:
    """C(c, k) / C(n, k); None when there are fewer than k trials (the number is not defined)."""
    if k < 1 or n < k or not 0 <= c <= n:
        return None
    return comb(c, k) / comb(n, k)


def per_scenario(n: int, c: int, k_max: int) -> dict[str, float | None]:
    """{"1": pass^1, ..., "k_max": pass^k_max} for one scenario (keys are strings: they go to JSON)."""
    return {str(k): _round(pass_hat(n, c, k)) for k in range(1, k_max + 1)}


def overall(counts: list[tuple[int, int]], k_max: int) -> dict[str, float | None]:
    """The mean over scenarios of pass^k, for k = 1..k_max; `counts` is (trials, passes) per scenario. A
    scenario with fewer than k trials is left out of that k's mean (None when none has enough)."""
    out = {}
    for k in range(1, k_max + 1):
        values = [v for v in (pass_hat(n, c, k) for n, c in counts) if v is not None]
        out[str(k)] = _round(sum(values) / len(values)) if values else None
    return out


def flaky(n: int, c: int) -> bool:
    """Passed some trials and failed others."""
    return 0 < c < n


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)
