"""The agent profile's staff API (docs/api.md): read the live version and the draft, save the draft (checked
against the operator's caps), publish, roll back, compare.

Who may do what: Lee is a support lead (support.change_agent_profile) and may do all of it. Sam (a support
agent) and Robin (staff, no group) are refused every endpoint with a 403, logged on support.security; Pat is
not staff and an anonymous visitor is not logged in: both are refused too. Every write needs the CSRF token.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace

import pytest
from django.test import Client

from support import profiles
from support.desk import permissions
from support.models import ProfileRelease, ProfileVersion
from tests.desk_factories import make_user
from tests.test_inbox_admin import client_for as signed_in
from tests.test_policy_editor import as_lee, lee  # noqa: F401  (fixtures: a support lead, signed in)
from tests.test_staff_permissions import member

PROFILE, DRAFT, PUBLISH = "/api/staff/profile", "/api/staff/profile/draft", "/api/staff/profile/publish"
ROLLBACK, DIFF = "/api/staff/profile/rollback/1", "/api/staff/profile/diff?a=1&b=draft"


def put(client, body: dict):
    return client.put(DRAFT, json.dumps(body), content_type="application/json")


def post(client, url: str, body: dict | None = None):
    return client.post(url, json.dumps(body or {}), content_type="application/json")


def changed(**fields) -> dict:
    return {"profile": replace(profiles.live(), **fields).as_data()}


def test_a_lead_reads_the_live_version_the_caps_and_no_draft(as_lee):
    body = as_lee.get(PROFILE).json()
    assert body["live"]["number"] == 1 and body["live"]["profile"]["shop_name"] == "Sundry"
    assert body["draft"] is None and body["versions"] == [
        {"number": 1, "published_by": None, "published_at": body["live"]["published_at"], "live": True}]
    assert {c["setting"] for c in body["caps"]} == {"REFUND_CEILING", "AUTO_APPROVE_REFUNDS_UP_TO",
                                                    "SECOND_APPROVAL_ABOVE", "CONVERSATION_MAX_COST_USD_PER_DAY",
                                                    "AGENT_MAX_STEPS"}
    assert body["publish_needs_two"] is False


def test_a_lead_saves_publishes_compares_and_rolls_back(as_lee):
    saved = put(as_lee, changed(agent_name="Mila"))
    assert saved.status_code == 200 and saved.json()["draft"]["revision"] == 1
    assert as_lee.get(DIFF).json()["changes"] == [{"field": "agent_name", "a": "Sundry's assistant", "b": "Mila"}]
    published = post(as_lee, PUBLISH, {"revision": 1})
    assert published.status_code == 200 and published.json()["outcome"] == "published"
    assert published.json()["version"]["number"] == 2 and profiles.live().agent_name == "Mila"
    back = post(as_lee, ROLLBACK)
    assert back.status_code == 200 and back.json()["version"]["number"] == 1
    assert profiles.live().agent_name == "Sundry's assistant"


def test_a_limit_past_the_operators_cap_is_refused_naming_the_cap(as_lee):
    refused = put(as_lee, {"profile": {**changed()["profile"], "limits": {"refund_ceiling": "500.00"}}})
    assert refused.status_code == 400 and "REFUND_CEILING" in refused.json()["error"]
    assert not ProfileVersion.objects.filter(state="draft").exists()


def test_a_tool_the_desk_does_not_have_is_refused(as_lee):
    refused = put(as_lee, {"profile": {**changed()["profile"], "limits": {"gated_tools": ["rm_rf"]}}})
    assert refused.status_code == 400 and "No tool is called rm_rf" in refused.json()["error"]


def test_a_stale_revision_and_a_missing_version_are_answered_plainly(as_lee):
    put(as_lee, changed(agent_name="Mila"))
    put(as_lee, changed(agent_name="Mira"))
    stale = post(as_lee, PUBLISH, {"revision": 1})
    assert stale.status_code == 409 and stale.json()["code"] == "conflict"
    assert as_lee.post("/api/staff/profile/rollback/7").status_code == 404
    assert as_lee.get("/api/staff/profile/diff?a=1&b=x").status_code == 400
    assert post(as_lee, PUBLISH, {"revision": "1"}).status_code == 400


def test_with_four_eyes_the_api_says_a_second_person_must_confirm(as_lee, demo, settings):
    settings.PROFILE_PUBLISH_NEEDS_TWO = True
    put(as_lee, changed(agent_name="Mila"))
    asked = post(as_lee, PUBLISH)
    assert asked.status_code == 200 and asked.json()["outcome"] == "awaiting_second_person"
    again = post(as_lee, PUBLISH)
    assert again.status_code == 409 and again.json()["code"] == "same_person"
    assert "another person" in again.json()["error"]
    kim = signed_in(member("kim", permissions.LEADS))
    assert post(kim, PUBLISH).json()["outcome"] == "published" and profiles.live().agent_name == "Mila"


# -- you may not ------------------------------------------------------------------------------------------------

CALLS = [("get", PROFILE), ("put", DRAFT), ("post", PUBLISH), ("post", ROLLBACK), ("get", DIFF)]


def call(client, verb: str, url: str):
    if verb == "get":
        return client.get(url)
    body = json.dumps(changed(agent_name="Evil") if verb == "put" else {})
    return getattr(client, verb)(url, body, content_type="application/json")


@pytest.mark.parametrize(("verb", "url"), CALLS)
def test_staff_without_the_permission_may_not_use_any_endpoint(lee, verb, url, caplog):
    signed_in(lee).put(DRAFT, json.dumps(changed(agent_name="Mila")), content_type="application/json")
    before = list(ProfileVersion.objects.values_list("pk", "state", "revision", "data"))
    for who in (member("sam", permissions.AGENTS), member("robin", None)):
        with caplog.at_level(logging.WARNING, logger="support.security"):
            refused = call(signed_in(who), verb, url)
        assert refused.status_code == 403 and "support.change_agent_profile" in refused.json()["error"]
        assert who.username in caplog.text
    assert list(ProfileVersion.objects.values_list("pk", "state", "revision", "data")) == before
    assert not ProfileRelease.objects.exists() and profiles.live().version == 1


@pytest.mark.parametrize(("verb", "url"), CALLS)
def test_customers_and_visitors_may_not_use_any_endpoint(demo, verb, url):
    pat = make_user("pat", staff=False)
    for client in (signed_in(pat), Client()):
        assert call(client, verb, url).status_code == 403
    assert profiles.live().version == 1 and not ProfileVersion.objects.filter(state="draft").exists()


@pytest.mark.parametrize(("verb", "url"), [c for c in CALLS if c[0] != "get"])
def test_every_write_needs_the_csrf_token(lee, verb, url):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(lee)
    assert browser.get(PROFILE).status_code == 200  # hands out the CSRF cookie
    refused = call(browser, verb, url)
    assert refused.status_code == 403 and refused.json()["error"].startswith("CSRF check failed")
    assert profiles.live().version == 1 and not ProfileRelease.objects.exists()


def test_a_draft_with_all_the_guidance_allowed_fits_the_api_and_one_rule_more_is_refused(as_lee):
    rules = tuple(f"Rule {n}: " + "x" * 290 for n in range(30))
    saved = put(as_lee, changed(guidance=rules, email_footer="f" * 1000,
                                limits=profiles.Limits(handover_rule="h" * 1000)))
    assert saved.status_code == 200 and len(saved.json()["draft"]["profile"]["guidance"]) == 30
    refused = put(as_lee, changed(guidance=(*rules, "one more")))
    assert refused.status_code == 400 and "at most 30 rules" in refused.json()["error"]
