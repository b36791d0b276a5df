"""The agent profile for the console: its JSON shapes, the tools a profile may name, and the staff's calls on
the profile's services (support/profiles/services.py), which check the permission and write the audit's rows
(ProfileRelease) themselves."""

from __future__ import annotations

from django.conf import settings

from support import profiles
from support.customers.words import staff_name
from support.desk.assistant import ALWAYS_OFFERED, GATE_FIXED
from support.models import ProfileVersion
from support.profiles import caps
from support.profiles import selectors as profile_selectors
from support.shop import shop
from support.tools import SHOP_TOOLS, mcp, shop_tools


def known_tools() -> set[str]:
    """Every tool a profile may offer or gate: the shop's and MCP_SERVERS' listed ones."""
    return {t.name for t in SHOP_TOOLS} | set(mcp.configured_names())


def tool_choices() -> list[dict]:
    """The tools the editor offers as boxes: the built-in ones this shop's capabilities allow, then MCP_SERVERS'
    listed ones. `always_gated`: waits for a person whatever the profile says (a hand-over goes to one);
    `always_offered`: the profile cannot take it away (a hand-over is always possible)."""
    built_in = [{"name": t.name, "always_gated": t.gated or t.name in GATE_FIXED,
                 "always_offered": t.name in ALWAYS_OFFERED, "source": "built in"}
                for t in shop_tools(shop().capabilities(), profiles.live().shop_name)]
    return built_in + [{"name": name, "always_gated": False, "always_offered": False, "source": "MCP"}
                       for name in mcp.configured_names()]


def version_json(version: ProfileVersion | None) -> dict | None:
    if version is None:
        return None
    return {"id": str(version.public_id), "state": version.state, "number": version.number,
            "revision": version.revision, "profile": version.data,
            "based_on": version.based_on.number if version.based_on_id else None,
            "created_by": _who(version.created_by), "created_at": _ts(version.created_at),
            "updated_by": _who(version.updated_by), "updated_at": _ts(version.updated_at),
            "publish_requested_by": _who(version.publish_requested_by),
            "publish_requested_at": _ts(version.publish_requested_at),
            "published_by": _who(version.published_by), "published_at": _ts(version.published_at)}


def profile_json() -> dict:
    """What the console's profile page reads: the live version, the draft, the published versions, the
    operator's caps and whether publishing needs two people."""
    live_id = profile_selectors.live_version_id()
    published = profile_selectors.versions()
    live = next((v for v in published if v.pk == live_id), None)
    return {"live": version_json(live), "draft": version_json(profile_selectors.draft()),
            "versions": [{"number": v.number, "published_by": _who(v.published_by),
                          "published_at": _ts(v.published_at), "live": v.pk == live_id} for v in published],
            "caps": caps.caps_json(), "publish_needs_two": settings.PROFILE_PUBLISH_NEEDS_TWO,
            "defaults": profile_selectors.built_in().as_data()}


def draft_save(*, data: dict, by) -> ProfileVersion:
    """Save the draft; a gate on a tool whose wait the desk fixes (always gated, or the hand-over) is dropped,
    whoever posted it: a box the editor shows fixed changes nothing."""
    limits = data.get("limits")
    if isinstance(limits, dict) and isinstance(limits.get("gated_tools"), list):
        fixed = {t["name"] for t in tool_choices() if t["always_gated"]}
        data = {**data, "limits": {**limits, "gated_tools": [n for n in limits["gated_tools"] if n not in fixed]}}
    return profiles.draft_save(data=data, by=by, known_tools=known_tools())


def _who(user) -> str | None:
    return staff_name(user) if user is not None else None


def _ts(value) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None
