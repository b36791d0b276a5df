"""Measuring the agent: scenario files with success criteria, played through the real desk against any model.

scenario.py reads evaluation/scenarios/*.toml; driver.py plays one on the current database; criteria.py
checks what happened; report.py prints the table and writes the JSON and HTML reports; passk.py turns k
trials into pass^1..pass^k; compare.py sets two reports side by side; customer.py is the simulated
customer. `manage.py evaluate` runs them all on a throwaway database.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone

from support import profiles

from . import passk
from .driver import ScenarioRun, run_scenario
from .scenario import Scenario


@dataclass
class Evaluation:
    """Every trial of every scenario, and what was measured with what."""

    scenarios: list[Scenario]
    runs: dict[str, list[ScenarioRun]] = field(default_factory=dict)
    model: dict = field(default_factory=dict)  # name, endpoint, customer model
    prompt: dict = field(default_factory=dict)  # version, fingerprint
    trials: int = 1
    min_pass_rate: float = 1.0
    min_pass_hat_k: float | None = None  # the gate on pass^trials, when given
    started_at: str = ""
    seconds: float = 0.0
    desk: dict = field(default_factory=dict)  # the desk's version
    customer: dict = field(default_factory=dict)  # the simulated customer's model, temperature, prompt

    @property
    def repeat(self) -> int:  # the older name of trials
        return self.trials

    def counts(self) -> list[tuple[int, int]]:
        """(trials, passes) of each scenario that ran."""
        out = []
        for runs in self.runs.values():
            counted = [r for r in runs if not r.skipped]
            if counted:
                out.append((len(counted), sum(r.passed for r in counted)))
        return out

    def pass_hat(self) -> dict[str, float | None]:
        """pass^1..pass^trials over the suite (the mean over scenarios)."""
        return passk.overall(self.counts(), self.trials)

    @property
    def attempts(self) -> list[ScenarioRun]:
        return [r for runs in self.runs.values() for r in runs if not r.skipped]

    @property
    def pass_rate(self) -> float:
        attempts = self.attempts
        return sum(r.passed for r in attempts) / len(attempts) if attempts else 0.0

    @property
    def ok(self) -> bool:
        if not self.attempts or self.pass_rate < self.min_pass_rate:
            return False
        if self.min_pass_hat_k is not None:
            hat = self.pass_hat().get(str(self.trials))
            return hat is not None and hat >= self.min_pass_hat_k
        return True


def evaluate(scenarios: list[Scenario], *, trials: int = 1, repeat: int | None = None, customer_model=None,
             progress=None, **info) -> Evaluation:
    """Play each scenario `trials` times on the current database, each trial on a freshly seeded shop, with the
    live profile (a scenario for other profiles' guidance is skipped).
    `progress(run)` is told of each trial. (`repeat` is the older name of `trials`.)"""
    import time

    trials = repeat if repeat is not None else trials
    guidance = profiles.live().guidance  # a scenario for other profiles is skipped, saying which it is for
    scenarios = [s.for_profile(guidance) for s in scenarios]
    result = Evaluation(scenarios=scenarios, trials=trials, started_at=datetime.now(timezone.utc).isoformat(
        timespec="seconds"), **info)
    t0 = time.monotonic()
    for scenario in scenarios:
        tries = 1 if scenario.skip else trials
        result.runs[scenario.name] = []
        for attempt in range(1, tries + 1):
            run = run_scenario(scenario, attempt=attempt, customer_model=customer_model)
            result.runs[scenario.name].append(run)
            if progress is not None:
                progress(run)
    result.seconds = time.monotonic() - t0
    return result
