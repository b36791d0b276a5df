"""Reading the live profile."""

from __future__ import annotations

from support.profiles.profile import SUNDRY, Profile


def live() -> Profile:
    """The published profile the desk runs with now (the built-in defaults until one is published)."""
    return SUNDRY
