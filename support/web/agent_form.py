"""The profile editor's form: a draft as the console's fields, the fields back into a draft's JSON, and each
problem the profile's reader finds (support/profiles/reading.py) put next to the field it is about.

The form only parses: what a draft may hold, and the operator's caps, are checked by `draft_save` itself.
"""

from __future__ import annotations

import re
import zoneinfo

from support.customers import faces
from support.profiles import caps, reading
from support.profiles.profile import Profile

DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
HOURS = re.compile(r"^([01]\d|2[0-3]):[0-5]\d-([01]\d|2[0-4]):[0-5]\d$")
TEXTS = ("shop_name", "agent_name", "tone", "time_zone", "colour", "greeting", "launcher_label", "logo_url",
         "email_sender_name", "email_footer", "handover_rule", "languages", "guidance", "formality_de",
         *(f"hours_{day}" for day in range(7)), *(cap.field for cap in caps.CAPS))
# The reader's names for what the form calls otherwise; a problem starts with its field's name.
READER_NAMES = {"voice.tone": "tone", "voice.formality": "formality_de", "appearance.colour": "colour",
                "appearance.greeting": "greeting", "appearance.launcher_label": "launcher_label",
                "appearance.logo_url": "logo_url", "limits.handover_rule": "handover_rule",
                "limits.offered_tools": "offered", "limits.gated_tools": "gated", "opening_hours": "hours_0",
                **{f"limits.{cap.field}": cap.field for cap in caps.CAPS}}
LABELS = {"shop_name": "The shop's name", "agent_name": "The agent's name", "voice.tone": "Tone",
          "voice.formality": "German: Sie or du", "languages": "Languages", "opening_hours": "Opening hours",
          "time_zone": "Time zone", "appearance.colour": "Widget colour", "appearance.greeting": "Greeting",
          "appearance.launcher_label": "Launcher label", "appearance.logo_url": "Logo URL",
          "email_sender_name": "E-mail sender name", "email_footer": "E-mail footer", "guidance": "Guidance",
          "limits.offered_tools": "Tools offered", "limits.gated_tools": "Tools that wait for a person",
          "limits.handover_rule": "When to hand over",
          **{f"limits.{cap.field}": cap.words.capitalize() for cap in caps.CAPS}}


def values_of(profile: Profile) -> dict:
    """The form's values for a profile: text for every field, lists for the tool boxes."""
    limits = profile.limits
    values = {"shop_name": profile.shop_name, "agent_name": profile.agent_name, "tone": profile.voice.tone,
              "formality_de": profile.voice.formality.get("de", "Sie"), "languages": ", ".join(profile.languages),
              "time_zone": profile.time_zone, "colour": profile.appearance.colour,
              "greeting": profile.appearance.greeting, "launcher_label": profile.appearance.launcher_label,
              "logo_url": profile.appearance.logo_url, "email_sender_name": profile.email_sender_name,
              "email_footer": profile.email_footer, "guidance": "\n".join(profile.guidance),
              "handover_rule": limits.handover_rule, "offered": limits.offered_tools, "gated": list(limits.gated_tools)}
    values.update({f"hours_{day}": profile.opening_hours.get(day, "") for day in range(7)})
    values.update({cap.field: "" if getattr(limits, cap.field) is None else str(getattr(limits, cap.field))
                   for cap in caps.CAPS})
    return values


def posted_values(post) -> dict:
    values = {name: post.get(name, "").replace("\r\n", "\n").strip() for name in TEXTS}
    values["offered"] = post.getlist("offered")
    values["gated"] = post.getlist("gated")
    return values


def draft_data(values: dict, *, base: dict, tools: list[str]) -> tuple[dict, dict[str, str]]:
    """The draft's JSON from the form's values (`base`: the draft's JSON as it was, for what the form does not
    show) and the problems the form itself finds, by field."""
    problems: dict[str, str] = {}
    limits = {cap.field: _number(values, cap, problems) for cap in caps.CAPS}
    offered = sorted(set(values["offered"]) | {"escalate_to_human"})
    limits.update(offered_tools=None if set(tools) <= set(offered) else offered, gated_tools=values["gated"],
                  handover_rule=values["handover_rule"])
    data = {**base, "shop_name": values["shop_name"], "agent_name": values["agent_name"],
            "voice": {**base.get("voice", {}), "tone": values["tone"],
                      "formality": {**base.get("voice", {}).get("formality", {}), "de": values["formality_de"]}},
            "languages": [code.strip() for code in values["languages"].split(",") if code.strip()],
            "opening_hours": _hours(values, problems), "time_zone": values["time_zone"],
            "appearance": {"colour": values["colour"], "greeting": values["greeting"],
                           "launcher_label": values["launcher_label"], "logo_url": values["logo_url"]},
            "email_sender_name": values["email_sender_name"], "email_footer": values["email_footer"],
            "guidance": [rule.strip() for rule in values["guidance"].split("\n") if rule.strip()],
            "limits": {**base.get("limits", {}), **limits}}
    _check_face(values, problems)
    if values["time_zone"] not in zoneinfo.available_timezones():
        problems["time_zone"] = "Give a time zone by its name, e.g. Europe/Berlin or America/New_York."
    return data, problems


def _number(values: dict, cap: caps.Cap, problems: dict) -> str | int | float | None:
    raw = values[cap.field]
    if not raw:
        return None
    try:
        if cap.field == "max_steps":
            return int(raw)
        if cap.field == "max_cost_usd_per_conversation":
            return float(raw)
    except ValueError:
        kind = "a whole number" if cap.field == "max_steps" else "a number"
        problems[cap.field] = f"Give {kind}, or leave it empty for the operator's default."
        return None
    return raw  # an amount: the reader checks it


def _hours(values: dict, problems: dict) -> dict:
    hours = {}
    for day in range(7):
        text = values[f"hours_{day}"].replace(" ", "")
        if text and not HOURS.match(text):
            problems[f"hours_{day}"] = f"{DAYS[day]}: write the hours as 09:00-17:00, or leave it empty if closed."
        elif text:
            hours[str(day)] = text
    return hours


def _check_face(values: dict, problems: dict) -> None:
    if not faces.colour_ok(values["colour"]):
        problems["colour"] = "Give the colour as a hex value, e.g. #0f5d57."
    if values["logo_url"] and not faces.logo_url_ok(values["logo_url"]):
        problems["logo_url"] = "A logo is an https:// address or a path on the desk such as /static/logo.png."


def problems_by_field(problems: list[str]) -> dict[str, str]:
    """The reader's problems put next to their fields ("" for one that names none: shown at the top)."""
    found: dict[str, str] = {}
    names = sorted({**{n: n for n in (*reading.TEXTS, "guidance", "languages")}, **READER_NAMES}.items(),
                   key=lambda item: -len(item[0]))
    cap_words = {cap.words.capitalize(): cap.field for cap in caps.CAPS}
    for problem in problems:
        field = next((form for name, form in names if problem.startswith(f"{name} ")), None)
        field = field or next((form for words, form in cap_words.items() if problem.startswith(words)), None)
        if field is None and problem.startswith("No tool is called"):
            field = "gated"
        found[field or ""] = " ".join(filter(None, (found.get(field or ""), problem)))
    return found


def readable_diff(changes: list[dict]) -> list[dict]:
    """versions_diff's rows for people: the field in words, each value as text."""
    return [{"field": change["field"], "label": LABELS.get(change["field"], change["field"]),
             "a": _shown(change["a"]), "b": _shown(change["b"])} for change in changes]


def _shown(value) -> str:
    if value is None:
        return "the operator's default"
    if isinstance(value, list):
        return "; ".join(map(str, value)) or "none"
    if isinstance(value, dict):
        return ", ".join(f"{DAYS[int(k)] if k.isdigit() else k}: {v}" for k, v in value.items()) or "none"
    return str(value) if value != "" else "(empty)"
