"""The operator's caps and the limits the desk runs with.

Each limit of a profile has an environment setting that is both its default (the profile leaves it unset) and
its cap (the profile may tighten it, never loosen it). `problems()` says in plain words what a draft asks past
a cap; `effective_limits()` is what every enforcing part of the desk reads: the refund ceiling (the refund
tools), auto-approval and two-person approval (the approval gate), the steps of a run and the spend of a
conversation per day (the run's limits).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.conf import settings

from support.profiles.profile import Limits, Profile


@dataclass(frozen=True)
class Cap:
    field: str  # the Limits field
    setting: str  # the environment setting that caps it and is its default
    words: str  # what it is, for a person
    unit: str  # " EUR", " USD", " steps"
    zero_is_off: bool = False  # 0 turns the limit off (the loosest value), rather than being the tightest

    def value(self):
        raw = getattr(settings, self.setting)
        if self.field == "max_steps":
            return int(raw)
        if self.field == "max_cost_usd_per_conversation":
            return float(raw or 0)
        return Decimal(str(raw or 0))  # a test or a shell may set it as text

    def shown(self, value) -> str:
        if self.unit == " steps":
            return f"{int(value)}{self.unit}"
        return f"{Decimal(str(value)):.2f}{self.unit}"

    def problem(self, value) -> str | None:
        """Why a profile may not set `value`, in plain words naming the cap; None when it may."""
        cap = self.value()
        floor = 1 if self.field == "max_steps" else 0
        if value < floor:
            return f"{self.words.capitalize()} must be at least {self.shown(floor)}."
        if self.zero_is_off and value == 0 and cap > 0:
            return (f"{self.words.capitalize()} may not be turned off: the operator's cap is {self.shown(cap)} "
                    f"({self.setting}); set {self.shown(cap)} or less.")
        if self.zero_is_off and cap == 0:
            return None  # the operator set no such limit: any is tighter
        if value > cap:
            return (f"{self.words.capitalize()} may be at most {self.shown(cap)}, the operator's cap "
                    f"({self.setting}); {self.shown(value)} was asked.")
        return None

    def effective(self, value):
        """The profile's value where it set one and it is within the cap, else the cap itself."""
        if value is None or self.problem(value) is not None:
            return self.value()  # a value past the cap (the cap lowered since it was published) yields to it
        return value


CAPS = (
    Cap("refund_ceiling", "REFUND_CEILING", "the most the agent may refund at once", " EUR"),
    Cap("auto_approve_up_to", "AUTO_APPROVE_REFUNDS_UP_TO", "refunds approved without a person up to", " EUR"),
    Cap("second_approval_above", "SECOND_APPROVAL_ABOVE", "two people's approval for refunds above", " EUR",
        zero_is_off=True),
    Cap("max_cost_usd_per_conversation", "CONVERSATION_MAX_COST_USD_PER_DAY",
        "the model spend per conversation and day", " USD", zero_is_off=True),
    Cap("max_steps", "AGENT_MAX_STEPS", "the steps of one run", " steps"),
)


@dataclass(frozen=True)
class EffectiveLimits:
    """The limits the desk enforces now: the profile's within the operator's caps, else the caps."""

    refund_ceiling: Decimal
    auto_approve_up_to: Decimal  # 0: every refund waits for a person
    second_approval_above: Decimal  # 0: one person's approval is enough
    max_cost_usd_per_conversation: float  # per day; 0: no budget
    max_steps: int
    offered_tools: tuple[str, ...] | None  # None: every tool
    gated_tools: tuple[str, ...]  # gated beyond the ones always gated
    handover_rule: str


def problems(limits: Limits) -> list[str]:
    """What the limits ask past the operator's caps, one sentence each (empty: none)."""
    found = []
    for cap in CAPS:
        value = getattr(limits, cap.field)
        if value is not None:
            why = cap.problem(value)
            if why:
                found.append(why)
    return found


def limits_of(profile: Profile) -> EffectiveLimits:
    values = {cap.field: cap.effective(getattr(profile.limits, cap.field)) for cap in CAPS}
    return EffectiveLimits(**values, offered_tools=profile.limits.offered_tools,
                           gated_tools=tuple(profile.limits.gated_tools), handover_rule=profile.limits.handover_rule)


def caps_json() -> list[dict]:
    """The operator's caps, for the console to show next to each limit."""
    return [{"field": cap.field, "setting": cap.setting, "cap": str(cap.value()), "what": cap.words,
             "zero_is_off": cap.zero_is_off} for cap in CAPS]
