"""A desk set up as another shop: Hearth & Loom, single-brand, German only. `hearth_and_loom` makes it the live
profile for a test (support.profiles.selectors.live, which every reader asks); `UNWANTED` is what no string a
customer of that shop sees may contain."""

from __future__ import annotations

import re

import pytest

from support.profiles import Appearance, Profile, Voice

LOGO_URL = "https://assets.hearth-loom.example/logo.svg"
HEARTH_AND_LOOM = Profile(
    shop_name="Hearth & Loom",
    agent_name="Hearth & Loom Assistent",
    voice=Voice(tone="warm und klar", formality={"de": "Sie"}),
    languages=("de",),
    opening_hours={0: "09:00-18:00", 1: "09:00-18:00", 2: "09:00-18:00", 3: "09:00-18:00", 4: "09:00-18:00",
                   5: "10:00-14:00"},
    time_zone="Europe/Vienna",
    appearance=Appearance(colour="#8a3b12", launcher_label="Fragen Sie uns", logo_url=LOGO_URL),
    email_sender_name="Hearth & Loom Kundenservice",
    email_footer="Hearth & Loom GmbH · Webergasse 4 · 1060 Wien",
)
UNWANTED = re.compile(r"sundry|marketplace", re.IGNORECASE)


@pytest.fixture
def hearth_and_loom(monkeypatch, settings):
    """The live profile is Hearth & Loom's; the operator's address is the shop's own."""
    monkeypatch.setattr("support.profiles.selectors.live", lambda: HEARTH_AND_LOOM)
    settings.DEFAULT_FROM_EMAIL = "support@hearth-loom.example"
    return HEARTH_AND_LOOM
