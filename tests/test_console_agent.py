"""The agent profile in the console (/console/agent/) and the setup checklist (/console/setup/).

Who may do what: Lee and Kim are support leads (support.change_agent_profile): they save the draft, publish
(with PROFILE_PUBLISH_NEEDS_TWO one asks and the other confirms) and roll back. Sam, a support agent, sees the
live version read only, with the reason, and every POST of theirs is refused with a 403 (logged on
support.security). Hostile text a lead typed is shown as text on every page.
"""

from __future__ import annotations

import html
import logging
import socket
from types import SimpleNamespace

import pytest

from support import profiles
from support.desk import permissions
from support.models import DraftTest, LiveProfile, ProfileRelease, ProfileVersion
from support.profiles import setup
from support.shop.conformance import NO_ANSWER
from tests.shop_fixture import KEY
from tests.shop_fixture import reference_shop, reference_shop_server  # noqa: F401
from tests.test_inbox_admin import client_for as signed_in
from tests.test_policy_editor import as_lee, lee  # noqa: F401  (a support lead, signed in)
from tests.test_staff_permissions import member

PAGE, PUBLISH, SETUP = "/console/agent/", "/console/agent/publish/", "/console/setup/"
HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


@pytest.fixture
def others(demo):
    """Kim, a second support lead, and Sam, a support agent: each signed in."""
    return SimpleNamespace(kim=signed_in(member("kim", permissions.LEADS)),
                           sam=signed_in(member("sam", permissions.AGENTS)))


@pytest.fixture
def http_backend(settings, reference_shop):  # noqa: F811
    """The desk on the reference shop over HTTP, as a shop's own API would connect it."""
    settings.SHOP_BACKEND, settings.SHOP_URL, settings.SHOP_API_KEY = "http", reference_shop.base_url, KEY
    return reference_shop


def form(**changes) -> dict:
    """The editor's fields as a browser posts them for the live profile, with `changes`."""
    live = profiles.live()
    values = {"shop_name": live.shop_name, "agent_name": live.agent_name, "tone": live.voice.tone,
              "formality_de": "Sie", "languages": "en, de", "time_zone": live.time_zone,
              "colour": live.appearance.colour, "greeting": "", "launcher_label": "", "logo_url": "",
              "email_sender_name": live.email_sender_name, "email_footer": "", "guidance": "",
              "handover_rule": "", "refund_ceiling": "", "auto_approve_up_to": "", "second_approval_above": "",
              "max_cost_usd_per_conversation": "", "max_steps": "",
              "offered": ["get_order", "track_parcel", "search_policy", "message_seller", "issue_refund"]}
    values.update({f"hours_{day}": "" for day in range(7)})
    return {**values, **changes}


def draft() -> ProfileVersion | None:
    return ProfileVersion.objects.filter(state=ProfileVersion.DRAFT).first()


def test_it_shows_every_section_the_live_version_and_each_cap_beside_its_limit(as_lee, settings):
    settings.REFUND_CEILING = "500.00"
    page = as_lee.get(PAGE)
    text = page.content.decode()
    assert page.status_code == 200
    for section in ("Who", "Voice", "Languages and opening hours", "Widget", "E-mail", "Guidance", "Limits"):
        assert f">{section}</h2>" in text
    assert "Live: version 1" in text and 'data-testid="agent-no-draft"' in text
    assert "Up to 500.00 EUR, set by the operator as REFUND_CEILING. Empty: 500.00 EUR." in text
    assert "At most 30 rules of up to 300 characters each" in text
    assert 'data-testid="offer-get_order"' in text and 'data-testid="gate-issue_refund"' in text
    assert 'href="/console/agent/test/"' not in text  # no draft yet, nothing to test
    assert 'data-testid="nav-agent"' in text


def test_staff_without_the_permission_read_the_live_version_and_may_change_nothing(others, caplog):
    page = others.sam.get(PAGE).content.decode()
    assert 'data-testid="agent-read-only"' in page and "support.change_agent_profile" in page
    assert "<fieldset class=\"agent-fieldset\" disabled>" in page and 'data-testid="agent-save"' not in page
    assert 'data-testid="nav-agent"' not in page
    with caplog.at_level(logging.WARNING, logger="support.security"):
        saved = others.sam.post(PAGE, form(agent_name="Mallory"))
        published = others.sam.post(PUBLISH, {"revision": "1"})
        rolled = others.sam.post("/console/agent/versions/1/rollback/")
    assert (saved.status_code, published.status_code, rolled.status_code) == (403, 403, 403)
    assert draft() is None and profiles.live().agent_name != "Mallory"
    assert sum("change_agent_profile" in r.getMessage() for r in caplog.records) == 3


def test_a_save_past_the_operators_cap_is_refused_by_the_field_with_every_value_kept(as_lee, settings):
    settings.REFUND_CEILING = "150.00"
    page = as_lee.post(PAGE, form(refund_ceiling="500.00", agent_name="Mila", guidance="Offer store credit first"))
    text = page.content.decode()
    assert page.status_code == 400 and draft() is None
    error = text.split('data-testid="agent-refund_ceiling-error">')[1].split("</p>")[0]
    assert "may be at most 150.00 EUR" in error and "REFUND_CEILING" in error
    assert 'value="500.00"' in text and 'value="Mila"' in text and "Offer store credit first</textarea>" in text


def test_malformed_hours_a_time_zone_and_a_logo_are_refused_in_plain_words_beside_them(as_lee):
    text = as_lee.post(PAGE, form(hours_0="9 to 5", time_zone="Mars/Olympus",
                                  logo_url="javascript:alert(1)", max_steps="many")).content.decode()
    assert "Monday: write the hours as 09:00-17:00" in text
    assert "Give a time zone by its name" in text and "A logo is an https:// address" in text
    assert 'data-testid="agent-max_steps-error">Give a whole number' in text and draft() is None


def test_a_save_writes_the_draft_and_the_page_lists_how_it_differs_from_the_live_version(as_lee):
    saved = as_lee.post(PAGE, form(agent_name="Mila", guidance="Offer store credit first\nNever promise a date",
                                   max_steps="6", hours_0="09:00-17:00"))
    assert saved.status_code == 302
    row = draft()
    assert row.data["agent_name"] == "Mila" and row.data["limits"]["max_steps"] == 6
    assert row.data["guidance"] == ["Offer store credit first", "Never promise a date"]
    assert row.data["opening_hours"] == {"0": "09:00-17:00"}
    assert row.data["limits"]["offered_tools"] is None  # every box ticked: every tool, new ones too
    text = as_lee.get(PAGE).content.decode()
    assert 'data-testid="agent-differs"' in text
    diff = text.split('data-testid="agent-diff">')[1].split("</dl>")[0]
    assert "The agent&#x27;s name" in diff and "Mila" in diff and "The steps of one run" in diff
    assert 'href="/console/agent/test/"' in text


def test_a_tool_left_unticked_is_not_offered_and_a_hand_over_always_is(as_lee):
    as_lee.post(PAGE, form(offered=["get_order", "search_policy"], gated=["get_order"]))
    limits = draft().data["limits"]
    assert limits["offered_tools"] == ["escalate_to_human", "get_order", "search_policy"]
    assert limits["gated_tools"] == ["get_order"]


def test_publish_makes_the_draft_live_as_the_next_version_and_the_audit_shows_it(as_lee):
    as_lee.post(PAGE, form(agent_name="Mila"))
    done = as_lee.post(PUBLISH, {"revision": str(draft().revision)})
    assert done.status_code == 302 and profiles.live().agent_name == "Mila" and profiles.live().version == 2
    text = as_lee.get(done["Location"]).content.decode()
    assert "Published" in text and "Live: version 2, published by lee" in text
    assert "Agent profile published" in as_lee.get("/console/audit/").content.decode()


def test_with_four_eyes_the_one_who_asked_cannot_publish_and_another_lead_confirms(as_lee, others, settings):
    settings.PROFILE_PUBLISH_NEEDS_TWO = True
    as_lee.post(PAGE, form(agent_name="Mila"))
    revision = str(draft().revision)
    assert "Ask to publish" in as_lee.get(PAGE).content.decode()
    as_lee.post(PUBLISH, {"revision": revision})
    assert profiles.live().agent_name != "Mila"
    mine = as_lee.get(PAGE).content.decode()
    assert "asked to publish this draft" in mine and "Another person with the permission must confirm" in mine
    assert 'data-testid="agent-publish"' not in mine
    again = as_lee.post(PUBLISH, {"revision": revision})
    assert again.status_code == 409 and "another person" in again.content.decode()
    theirs = others.kim.get(PAGE).content.decode()
    assert "Confirm and publish" in theirs and "asked to publish this draft" in theirs
    assert others.kim.post(PUBLISH, {"revision": revision}).status_code == 302
    assert profiles.live().agent_name == "Mila"
    release = ProfileRelease.objects.get(kind=ProfileRelease.PUBLISH)
    assert (release.by.username, release.first_by.username) == ("kim", "lee")


def test_rollback_shows_what_would_change_then_makes_that_version_live_in_one_step(as_lee):
    as_lee.post(PAGE, form(agent_name="Mila"))
    as_lee.post(PUBLISH, {"revision": str(draft().revision)})
    confirm = as_lee.get("/console/agent/versions/1/rollback/").content.decode()
    assert "Roll back to version 1?" in confirm and "Mila" in confirm and profiles.live().version == 2
    done = as_lee.post("/console/agent/versions/1/rollback/")
    assert done.status_code == 302 and profiles.live().version == 1
    assert ProfileRelease.objects.filter(kind=ProfileRelease.ROLLBACK, by__username="lee").count() == 1
    assert "Agent profile rolled back" in as_lee.get("/console/audit/").content.decode()


def test_hostile_text_in_every_field_is_shown_as_text_on_every_page(as_lee, http_backend):
    texts = ("shop_name", "agent_name", "tone", "greeting", "launcher_label", "email_sender_name", "email_footer",
             "guidance", "handover_rule")
    as_lee.post(PAGE, form(**{name: f"{HOSTILE} {name}" for name in texts}, offered=[]))
    assert draft() is not None
    as_lee.post(PUBLISH, {"revision": str(draft().revision)})
    as_lee.post(PAGE, form(agent_name="Mila", offered=[]))  # a draft against the hostile live version
    pages = [as_lee.get(PAGE), as_lee.get("/console/agent/versions/1/rollback/"), as_lee.get(SETUP)]
    refused = as_lee.post(PAGE, form(**{name: f"{HOSTILE} {name}" for name in texts}, time_zone=HOSTILE, offered=[]))
    for page in [*pages, refused]:
        text = page.content.decode()
        assert "<script>alert" not in text and "<img src=x" not in text
        assert html.escape(HOSTILE) in text  # shown, as text


@pytest.mark.parametrize("backend, live, to_setup", [("demo", False, False), ("http", False, True),
                                                     ("shopify", False, True), ("http", True, False)])
def test_the_console_opens_on_the_setup_checklist_only_on_a_remote_shop_before_go_live(
        as_lee, settings, backend, live, to_setup):
    settings.SHOP_BACKEND = backend
    if not live:
        LiveProfile.objects.update(version=None)
    answer = as_lee.get("/console/")
    assert (answer.status_code == 302 and answer["Location"] == SETUP) is to_setup
    assert answer.status_code == (302 if to_setup else 200)


def test_the_checklist_names_each_step_and_its_state(as_lee, http_backend):
    LiveProfile.objects.update(version=None)
    ProfileVersion.objects.all().delete()
    states = lambda: {s.key: s.state for s in setup.steps(checks=None)}  # noqa: E731
    assert states() == {"connect": "todo", "policies": "done", "profile": "todo", "test": "todo", "live": "todo"}
    as_lee.post(PAGE, form(shop_name="Hearth & Loom", offered=[]))
    assert states()["profile"] == "done"
    text = as_lee.get(SETUP).content.decode()
    assert 'data-testid="setup-publish"' in text and 'href="/console/agent/test/"' in text
    tested = draft()
    DraftTest.objects.create(draft=tested, draft_revision=tested.revision, model="stand-in",
                             state=DraftTest.RUNNING)
    assert states()["test"] == "todo"  # not finished yet
    DraftTest.objects.filter(draft=tested).update(state=DraftTest.FINISHED)
    assert states()["test"] == "done"
    as_lee.post(PUBLISH, {"revision": str(draft().revision), "next": "setup"})
    assert states()["live"] == "done" and 'data-testid="setup-live"' in as_lee.get(SETUP).content.decode()


def test_check_again_runs_check_shops_checks_and_shows_each_with_its_result(as_lee, http_backend):
    as_lee.post(SETUP, {"email": "maya@example.com", "order": "SU-41207"})
    text = as_lee.get(SETUP).content.decode()
    assert text.count('data-ok="true"') == 14 and 'data-ok="false"' not in text and "Check again" in text
    as_lee.post(SETUP, {"email": "maya@example.com", "order": "SU-00000"})
    text = as_lee.get(SETUP).content.decode()
    assert 'data-state="failed"' in text and "the order SU-00000 is as the contract shapes it" in text


def test_a_shop_that_does_not_answer_fails_its_first_check_and_the_rest_are_not_tried(as_lee, settings,
                                                                                     monkeypatch):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts connections, never answers
    settings.SHOP_BACKEND, settings.SHOP_API_KEY = "http", KEY
    settings.SHOP_URL = f"http://127.0.0.1:{silent.getsockname()[1]}"
    monkeypatch.setattr(setup, "CHECK_TIMEOUT", 0.3)
    try:
        checks = setup.shop_checks(email="maya@example.com", order_number="SU-41207")
    finally:
        silent.close()
    assert checks[0].problem == NO_ANSWER and len(checks) == 14
    assert all(c.problem.startswith("not tried") for c in checks[1:])


def test_only_leads_run_the_shops_checks_from_the_checklist(others, settings):
    settings.SHOP_BACKEND = "http"
    refused = others.sam.post(SETUP, {"email": "maya@example.com", "order": "SU-41207"})
    assert refused.status_code == 403 and "support.change_agent_profile" in refused.content.decode()



def test_a_hand_over_and_a_refund_show_their_wait_for_a_person_ticked_and_fixed(as_lee):
    text = as_lee.get(PAGE).content.decode()
    for tool in ("escalate_to_human", "issue_refund"):
        box = text.split(f'data-testid="gate-{tool}"')[1].split(">")[0]
        assert " checked" in box and " disabled" in box, tool
    box = text.split('data-testid="gate-get_order"')[1].split(">")[0]
    assert " disabled" not in box


def test_the_server_ignores_an_attempt_to_change_an_always_gated_tools_box(as_lee):
    from support.desk import assistant

    as_lee.post(PAGE, form(gated=["escalate_to_human", "get_order"]))  # a posted box the page shows fixed
    assert draft().data["limits"]["gated_tools"] == ["get_order"]
    as_lee.post(PUBLISH, {"revision": str(draft().revision)})
    gated = {t.name: t.gated for t in assistant.tools(profiles.live())}
    assert gated["issue_refund"] and gated["get_order"]  # no box posted for the refund: it waits all the same
    assert not gated["escalate_to_human"]  # a hand-over goes to a person's queue as the operator set it
