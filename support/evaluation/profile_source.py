"""Which agent profile an evaluation plays its scenarios with (`manage.py evaluate --profile`): the live version,
the draft, or a JSON file (a second shop's profile in CI). Read from the site's database before the evaluation
moves to its throwaway one, where the profile is then published as that database's only version."""

from __future__ import annotations

import json
from pathlib import Path

from django.db import DatabaseError, connections

from support import profiles
from support.profiles import Profile
from support.profiles.reading import ProfileInvalid, profile_from_json
from support.profiles.selectors import draft

PROFILES_DIR = Path(__file__).resolve().parent / "profiles"  # profiles kept for evaluations (Hearth & Loom's)


class ProfileSourceError(ValueError):
    """A profile that cannot be evaluated, in plain words."""


def profile_under_test(which: str) -> tuple[Profile, dict]:
    """The profile `which` names ("live", "draft" or a JSON file's path) and how the report names it:
    {"shop", "version" (the published number, None for a draft or a file), "label"}."""
    if which == "live":
        profile = profiles.SUNDRY  # a checkout whose own database was never made or migrated has published nothing
        if _site_database_exists():
            try:
                profile = profiles.live()
            except DatabaseError:
                pass
        label = f"version {profile.version}" if profile.version else "the built-in defaults (none published)"
        return profile, {"shop": profile.shop_name, "version": profile.version or None, "label": label}
    if which == "draft":
        row = draft()
        if row is None:
            raise ProfileSourceError("there is no draft of the agent profile to evaluate")
        return _checked(row.data, "the draft"), draft_info(row)
    path = Path(which)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ProfileSourceError(f"{which}: cannot be read ({e.strerror or e}); --profile is live, draft or a "
                                 "profile's JSON file") from e
    except ValueError as e:
        raise ProfileSourceError(f"{which}: not JSON ({e})") from e
    profile = _checked(data, path.name)
    return profile, {"shop": profile.shop_name, "version": None, "label": f"file {path.name}"}


def _site_database_exists() -> bool:
    """Whether the site's database is there to read (SQLite would make an empty file just by being opened)."""
    connection = connections["default"]
    return connection.vendor != "sqlite" or Path(str(connection.settings_dict["NAME"])).exists()


def draft_info(row) -> dict:
    """How a report names a draft: "draft of 2025-05-01 14:02 UTC" (its last save), and its revision."""
    return {"shop": (row.data or {}).get("shop_name", ""), "version": None, "revision": row.revision,
            "label": f"draft of {row.updated_at:%Y-%m-%d %H:%M} UTC"}


def _checked(data, what: str) -> Profile:
    if isinstance(data, dict):
        data = {k: v for k, v in data.items() if k != "version"}  # a number belongs to a published row
    try:
        return profile_from_json(data)
    except ProfileInvalid as invalid:
        raise ProfileSourceError(f"{what} is not a profile the desk would run: {invalid}") from None
