"""The Settings page (/console/settings/): every switch of the desk, grouped, with whether it is on, what it does,
its value and who may change it; secrets only as "set" or "not set".

Who may see it: Lee, a Support lead (support.view_desk_settings); Sam, a Support agent, is refused (403, logged);
a visitor goes to the login."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from support.team.desk_settings import GROUPS
from tests.desk_factories import make_user

SECRETS = {"INBOUND_IMAP_PASSWORD": "imap-pass-9f2", "INBOUND_WEBHOOK_SECRET": "hook:pw-77a",
           "INBOUND_MAILGUN_SIGNING_KEY": "mg-key-31c", "SLACK_BOT_TOKEN": "xoxb-secret-1",
           "SLACK_SIGNING_SECRET": "slack-sign-2", "SHOP_API_KEY": "shop-key-3", "SHOPIFY_ACCESS_TOKEN": "shpat-4",
           "MODEL_API_KEY": "sk-model-5"}


@pytest.fixture
def lee(db):
    client = Client()
    client.force_login(make_user("lee", staff=True, group="leads", first_name="Lee"))
    return client


def row(page: str, name: str) -> str:
    return re.search(rf'data-name="{name}">.*?</tr>', page, re.S).group(0)


def test_it_shows_every_switch_with_what_it_does_its_value_and_who_changes_it(lee, settings):
    settings.SECOND_APPROVAL_ABOVE = "40.00"
    settings.INBOUND_EMAIL_ADDRESS = ""
    page = lee.get("/console/settings/").content.decode()
    for group in GROUPS:
        for setting in group.settings:
            assert f'data-name="{setting.name}"' in page
    assert "40.00" in row(page, "SECOND_APPROVAL_ABOVE") and "agent profile" in row(page, "SECOND_APPROVAL_ABOVE")
    assert 'href="/console/agent/"' in row(page, "REFUND_CEILING")
    assert "environment variable" in row(page, "SHOP_BACKEND")
    four_eyes = re.search(r'data-group="four_eyes">.*?</h2>', page, re.S).group(0)
    inbound = re.search(r'data-group="inbound">.*?</h2>', page, re.S).group(0)
    assert ">On<" in four_eyes and ">Off<" in inbound
    for name in ("APPROVAL_TIMEOUT_SECONDS", "APPROVAL_REMIND_AT", "SLACK_APPROVALS_CHANNEL", "MESSAGES_PER_MINUTE",
                 "MODEL_NAME", "STAFF_PRESENCE_SECONDS", "PROFILE_PUBLISH_NEEDS_TWO"):
        assert name in page


def test_secrets_are_never_shown_only_whether_they_are_set(lee, settings):
    for name, value in SECRETS.items():
        setattr(settings, name, value)
    settings.INBOUND_MAILGUN_SIGNING_KEY = ""
    page = lee.get("/console/settings/").content.decode()
    for value in SECRETS.values():
        assert value not in page
    assert ">set<" in row(page, "SLACK_BOT_TOKEN") and ">not set<" in row(page, "INBOUND_MAILGUN_SIGNING_KEY")


def test_an_agent_is_refused_and_logged_and_a_visitor_goes_to_the_login(db, caplog):
    sam = Client()
    sam.force_login(make_user("sam", staff=True, first_name="Sam"))
    response = sam.get("/console/settings/")
    assert response.status_code == 403 and b"SHOP_BACKEND" not in response.content
    assert any("settings page needs" in r.getMessage() for r in caplog.records if r.name == "support.security")
    assert b'data-testid="nav-settings"' not in sam.get("/console/").content
    assert Client().get("/console/settings/").status_code == 302


def test_a_lead_finds_it_in_the_navigation(lee):
    assert b'data-testid="nav-settings"' in lee.get("/console/").content
