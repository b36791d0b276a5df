"""The profile as a value: plain, frozen data, built from a version's JSON and turned back into it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from decimal import Decimal


@dataclass(frozen=True)
class Voice:
    tone: str = "friendly and plain"
    # How the agent addresses customers per language code, e.g. {"de": "Sie"} or {"de": "du"}.
    formality: dict[str, str] = field(default_factory=lambda: {"de": "Sie"})


@dataclass(frozen=True)
class Appearance:
    """What the widget shows before anyone writes, read by the widget when it starts."""

    colour: str = "#0f5d57"  # the demo's accent (the widget's own default)
    greeting: str = ""  # "" : the widget's own greeting naming the agent and the shop
    launcher_label: str = ""  # "" : "Chat with us"
    logo_url: str = ""


@dataclass(frozen=True)
class Limits:
    """The agent's limits as the lead set them; None: the operator's default. Never looser than the caps."""

    refund_ceiling: Decimal | None = None
    auto_approve_up_to: Decimal | None = None
    second_approval_above: Decimal | None = None
    max_cost_usd_per_conversation: float | None = None
    max_steps: int | None = None
    offered_tools: tuple[str, ...] | None = None  # None: every tool the shop's capabilities allow
    gated_tools: tuple[str, ...] = ()  # gated beyond the ones always gated
    handover_rule: str = ""  # when to hand over, in plain words, read by the model with the guidance


@dataclass(frozen=True)
class Profile:
    shop_name: str = "Sundry"
    agent_name: str = "Sundry's assistant"
    voice: Voice = field(default_factory=Voice)
    languages: tuple[str, ...] = ("en", "de")
    # Opening hours per weekday (0 = Monday): "09:00-17:00", or "" closed; in `time_zone`.
    opening_hours: dict[int, str] = field(default_factory=dict)
    time_zone: str = "Europe/Berlin"
    appearance: Appearance = field(default_factory=Appearance)
    email_sender_name: str = "Sundry support"
    email_footer: str = ""
    guidance: tuple[str, ...] = ()  # the shop's rules in plain words, written by a lead
    limits: Limits = field(default_factory=Limits)
    version: int = 0  # the published version this is (0: none published yet, the built-in defaults)

    def as_data(self) -> dict:
        """JSON-ready: what a version row stores (Decimals as strings)."""
        return _jsonable(asdict(self))

    @classmethod
    def from_data(cls, data: dict, *, version: int = 0) -> Profile:
        """A profile from a version's JSON; keys it does not know are ignored, missing ones take the defaults."""
        data = dict(data or {})
        nested = {"voice": Voice, "appearance": Appearance, "limits": Limits}
        values = {}
        for f in fields(cls):
            if f.name not in data or f.name == "version":
                continue
            value = data[f.name]
            if f.name in nested:
                value = _build(nested[f.name], value)
            elif f.name in ("languages", "guidance"):
                value = tuple(value)
            elif f.name == "opening_hours":
                value = {int(day): hours for day, hours in value.items()}
            values[f.name] = value
        return cls(**values, version=version)


def _build(kind, value: dict):
    known = {f.name: f for f in fields(kind)}
    values = {}
    for name, item in (value or {}).items():
        if name not in known:
            continue
        if kind is Limits and item is not None:
            if name in ("refund_ceiling", "auto_approve_up_to", "second_approval_above"):
                item = Decimal(str(item))
            elif name in ("offered_tools", "gated_tools"):
                item = tuple(item)
        values[name] = item
    return kind(**values)


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Decimal):
        return str(value)
    return value


SUNDRY = Profile()  # the demo shop's profile, as seeded
# A shop's own desk (SHOP_BACKEND http or shopify) before its first publish: no shop's name in any customer
# string. Its widget says support is being set up and starts no run (selectors.being_set_up).
NEUTRAL = Profile(shop_name="Our shop", agent_name="the support assistant", email_sender_name="Customer support",
                  appearance=Appearance(colour="#3b4a5a"))
