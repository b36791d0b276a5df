"""Measuring the agent: scenario files with success criteria, played through the real desk against any model.

scenario.py reads evaluation/scenarios/*.toml; driver.py plays one on the current database; criteria.py
checks what happened; report.py prints the table and writes the JSON and HTML reports; customer.py is the
simulated customer. `manage.py evaluate` runs them all on a throwaway database.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone

from .driver import ScenarioRun, run_scenario
from .scenario import Scenario


@dataclass
class Evaluation:
    """Every attempt of every scenario, and what was measured with what."""

    scenarios: list[Scenario]
    runs: dict[str, list[ScenarioRun]] = field(default_factory=dict)
    model: dict = field(default_factory=dict)  # name, endpoint, customer model
    prompt: dict = field(default_factory=dict)  # version, fingerprint
    repeat: int = 1
    min_pass_rate: float = 1.0
    started_at: str = ""
    seconds: float = 0.0

    @property
    def attempts(self) -> list[ScenarioRun]:
        return [r for runs in self.runs.values() for r in runs if not r.skipped]

    @property
    def pass_rate(self) -> float:
        attempts = self.attempts
        return sum(r.passed for r in attempts) / len(attempts) if attempts else 0.0

    @property
    def ok(self) -> bool:
        return bool(self.attempts) and self.pass_rate >= self.min_pass_rate


def evaluate(scenarios: list[Scenario], *, repeat: int = 1, customer_model=None, progress=None, **info) -> Evaluation:
    """Play each scenario `repeat` times on the current database. `progress(run)` is told of each attempt."""
    import time

    result = Evaluation(scenarios=scenarios, repeat=repeat, started_at=datetime.now(timezone.utc).isoformat(
        timespec="seconds"), **info)
    t0 = time.monotonic()
    for scenario in scenarios:
        tries = 1 if scenario.skip else repeat
        result.runs[scenario.name] = []
        for attempt in range(1, tries + 1):
            run = run_scenario(scenario, attempt=attempt, customer_model=customer_model)
            result.runs[scenario.name].append(run)
            if progress is not None:
                progress(run)
    result.seconds = time.monotonic() - t0
    return result
