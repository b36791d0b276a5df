"""A profile from a person's JSON (the console's draft): each field checked for its kind and size, then the
operator's caps, every problem said in plain words. What passes is a Profile."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from support.profiles import caps
from support.profiles.profile import Profile

TEXT_MAX = 200  # a name, a label, a tone
LONG_TEXT_MAX = 1000  # a footer, a greeting, a hand-over rule
RULE_MAX, GUIDANCE_MAX = 300, 30  # a rule of guidance is short, and there are few: the whole fits the API's body
TEXTS = {"shop_name": TEXT_MAX, "agent_name": TEXT_MAX, "time_zone": 64, "email_sender_name": TEXT_MAX,
         "email_footer": LONG_TEXT_MAX}
NESTED_TEXTS = {"voice": {"tone": TEXT_MAX},
                "appearance": {"colour": 32, "greeting": LONG_TEXT_MAX, "launcher_label": TEXT_MAX,
                               "logo_url": LONG_TEXT_MAX},
                "limits": {"handover_rule": LONG_TEXT_MAX}}
MONEY = ("refund_ceiling", "auto_approve_up_to", "second_approval_above")
FORMS = ("Sie", "du")
DAYS = {str(day) for day in range(7)}


class ProfileInvalid(ValueError):
    """What is wrong with a draft, one sentence per problem."""

    def __init__(self, problems: list[str]):
        super().__init__(" ".join(problems))
        self.problems = problems


def profile_from_json(data, *, known_tools: set[str] | None = None) -> Profile:
    """The profile `data` describes (missing fields: the defaults), or ProfileInvalid with every problem."""
    if not isinstance(data, dict):
        raise ProfileInvalid(["The profile must be a JSON object."])
    found = _shape_problems(data)
    if not found:
        profile = Profile.from_data(data)
        found = caps.problems(profile.limits) + _tool_problems(profile, known_tools)
    if found:
        raise ProfileInvalid(found)
    return profile


def _shape_problems(data: dict) -> list[str]:
    found = [_text(name, data[name], most) for name, most in TEXTS.items() if name in data]
    for part, texts in NESTED_TEXTS.items():
        inner = data.get(part, {})
        if not isinstance(inner, dict):
            found.append(f"{part} must be an object.")
            continue
        found += [_text(f"{part}.{name}", inner[name], most) for name, most in texts.items() if name in inner]
    found += _list_problems(data)
    found += _limit_problems(data.get("limits") if isinstance(data.get("limits"), dict) else {})
    formality = (data.get("voice") or {}).get("formality", {}) if isinstance(data.get("voice"), dict) else {}
    if not isinstance(formality, dict) or any(v not in FORMS for v in formality.values()):
        found.append('voice.formality gives each language "Sie" or "du", e.g. {"de": "du"}.')
    hours = data.get("opening_hours", {})
    if not isinstance(hours, dict) or any(str(k) not in DAYS or not isinstance(v, str) for k, v in hours.items()):
        found.append('opening_hours gives weekdays 0 (Monday) to 6 their hours as text, e.g. {"0": "09:00-17:00"}.')
    return [f for f in found if f]


def _text(name: str, value, most: int) -> str | None:
    if not isinstance(value, str) or len(value) > most:
        return f"{name} must be text of at most {most} characters."
    return None


def _strings(value, most_items: int, most_chars: int) -> bool:
    return (isinstance(value, list) and len(value) <= most_items
            and all(isinstance(v, str) and 0 < len(v.strip()) <= most_chars for v in value))


def _list_problems(data: dict) -> list[str]:
    found = []
    if "guidance" in data and not _strings(data["guidance"], GUIDANCE_MAX, RULE_MAX):
        found.append(f"guidance is a list of at most {GUIDANCE_MAX} rules, each text of 1 to {RULE_MAX} characters.")
    if "languages" in data and not _strings(data["languages"], 20, 8):
        found.append('languages is a list of language codes, e.g. ["en", "de"].')
    return found


def _limit_problems(limits: dict) -> list[str]:
    found = []
    for name in MONEY:
        value = limits.get(name)
        if value is not None and not _is_amount(value):
            found.append(f'limits.{name} is an amount like "25.00", or null for the operator\'s default.')
    cost = limits.get("max_cost_usd_per_conversation")
    if cost is not None and (isinstance(cost, bool) or not isinstance(cost, (int, float))):
        found.append("limits.max_cost_usd_per_conversation is a number of US dollars, or null.")
    steps = limits.get("max_steps")
    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int)):
        found.append("limits.max_steps is a whole number, or null.")
    if limits.get("offered_tools") is not None and not _strings(limits["offered_tools"], 100, 64):
        found.append("limits.offered_tools is a list of tool names, or null for every tool.")
    if "gated_tools" in limits and not _strings(limits["gated_tools"], 100, 64):
        found.append("limits.gated_tools is a list of tool names.")
    return found


def _is_amount(value) -> bool:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return False
    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        return False
    return amount.is_finite()


def _tool_problems(profile: Profile, known_tools: set[str] | None) -> list[str]:
    if known_tools is None:
        return []
    named = {*(profile.limits.offered_tools or ()), *profile.limits.gated_tools}
    unknown = sorted(named - known_tools)
    if unknown:
        return [f"No tool is called {', '.join(unknown)}; the tools are: {', '.join(sorted(known_tools))}."]
    return []
