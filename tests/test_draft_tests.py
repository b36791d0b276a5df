"""Testing a draft of the agent profile: `manage.py evaluate --profile`, scenarios for profiles with a given
guidance, the stand-in following a shop's rule to offer store credit first, and "Test this draft": started by a
lead (a second test of the same draft refused, the configured model only after its estimate is confirmed), played
in child processes with progress, the two reports kept and compared, and the console's pages.

Who may do what: Lee is a support lead (support.change_agent_profile): starts tests. Sam is a support agent
(staff): reads the tests, may not start one. Pat is not staff: no page at all."""

import json
import os
import subprocess
import sys
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.utils import timezone

from support import profiles, trials
from support.desk import permissions
from support.evaluation.profile_source import PROFILES_DIR, profile_under_test
from support.evaluation.scenario import SCENARIO_DIR, load
from support.models import DraftTest
from tests.desk_factories import make_user
from tests.test_approval_deadlines import signed_in
from tests.test_staff_permissions import member

STORE_CREDIT_RULE = "Offer store credit before a refund under 100 EUR."
PAGE = "/console/agent/test/"


@pytest.fixture
def lee(demo):
    return member("lee", permissions.LEADS)


@pytest.fixture
def sam(demo):
    return member("sam", permissions.AGENTS)


@pytest.fixture
def var(settings, tmp_path):
    settings.VAR_DIR = tmp_path / "var"
    settings.VAR_DIR.mkdir()
    return settings.VAR_DIR


def draft_with(lee, **changes):
    return profiles.draft_save(data=replace(profiles.live(), **changes).as_data(), by=lee)


def evaluate_command(tmp_path, *args):
    env = {**os.environ, "VAR_DIR": str(tmp_path / "var"), "MODEL_BASE_URL": ""}
    env.pop("DATABASE_URL", None)
    return subprocess.run([sys.executable, "manage.py", "evaluate", *args], env=env, capture_output=True, text=True,
                          timeout=300, cwd=django_settings.BASE_DIR)


# --- the command and the scenarios -------------------------------------------------------------------------------

def test_evaluate_with_a_profile_file_plays_that_profiles_guidance_and_names_it_in_the_report(tmp_path):
    done = evaluate_command(tmp_path, "--profile", str(PROFILES_DIR / "hearth-and-loom.json"), "--scenario",
                            "guidance-*", "--report", str(tmp_path / "out" / "r.json"), "--progress", "lines")
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads((tmp_path / "out" / "r.json").read_text())
    assert data["prompt"]["profile"] == {"shop": "Hearth & Loom", "version": None, "label": "file hearth-and-loom.json"}
    assert "profile Hearth & Loom file hearth-and-loom.json" in done.stdout
    verdicts = {s["name"]: (s["passes"], s["skipped"]) for s in data["scenarios"]}
    assert verdicts["guidance-store-credit-before-a-small-refund"] == (1, "")
    assert verdicts["guidance-none-small-refund-at-once"][1].startswith("for profiles whose guidance does not say")
    assert "progress 1/2 guidance-none-small-refund-at-once skipped" in done.stdout


def test_evaluate_refuses_a_profile_file_past_the_operators_caps_in_plain_words(tmp_path):
    path = tmp_path / "loose.json"
    path.write_text(json.dumps({"shop_name": "Loose", "limits": {"refund_ceiling": "99999.00"}}))
    done = evaluate_command(tmp_path, "--profile", str(path), "--scenario", "su-41210-*")
    assert done.returncode == 1 and "loose.json is not a profile the desk would run" in done.stderr


def test_the_draft_is_named_by_the_time_of_its_last_save(lee):
    draft = draft_with(lee, guidance=(STORE_CREDIT_RULE,))
    profile, info = profile_under_test("draft")
    assert profile.guidance == (STORE_CREDIT_RULE,)
    assert info["label"] == f"draft of {draft.updated_at:%Y-%m-%d %H:%M} UTC" and info["version"] is None


def test_a_scenario_declares_the_profiles_it_is_for_by_their_guidance():
    offered = load(SCENARIO_DIR / "guidance-store-credit-before-a-small-refund.toml")
    direct = load(SCENARIO_DIR / "guidance-none-small-refund-at-once.toml")
    assert offered.for_profile(()).skip and not direct.for_profile(()).skip
    assert not offered.for_profile((STORE_CREDIT_RULE,)).skip and direct.for_profile((STORE_CREDIT_RULE,)).skip


# --- starting a test ---------------------------------------------------------------------------------------------

def test_a_second_test_of_the_same_draft_is_refused_plainly(lee, var, django_capture_on_commit_callbacks,
                                                           monkeypatch):
    sent = []
    monkeypatch.setattr(trials.services.app, "send_task", lambda name, args: sent.append((name, args)))
    draft_with(lee, guidance=(STORE_CREDIT_RULE,))
    with django_capture_on_commit_callbacks(execute=True):
        first = trials.draft_test_start(by=lee)
    assert sent == [("support.tasks.test_draft", [first.pk])] and first.state == DraftTest.QUEUED
    with pytest.raises(trials.DraftTestRefused, match="being tested already") as refused:
        trials.draft_test_start(by=lee)
    assert refused.value.code == "already_testing"
    assert DraftTest.objects.count() == 1


def test_a_test_needs_the_permission_and_a_draft(sam, lee):
    with pytest.raises(trials.DraftTestRefused) as refused:
        trials.draft_test_start(by=sam)
    assert refused.value.status == 403
    with pytest.raises(trials.DraftTestRefused, match="no draft") as missing:
        trials.draft_test_start(by=lee)
    assert missing.value.status == 404


def test_the_configured_model_is_used_only_after_its_estimate_is_confirmed(lee, var, settings, monkeypatch):
    monkeypatch.setattr(trials.services.app, "send_task", lambda name, args: None)
    settings.MODEL_BASE_URL, settings.MODEL_NAME = "https://models.example/v1", "big-model"
    settings.MODEL_PRICES = {"big-model": (1.0, 4.0)}
    draft_with(lee, guidance=(STORE_CREDIT_RULE,))
    with pytest.raises(trials.DraftTestRefused) as refused:
        trials.draft_test_start(by=lee, use_model=True)
    assert refused.value.code == "confirm_estimate" and "no evaluation has run" in str(refused.value)
    (var / "evaluation").mkdir()
    (var / "evaluation" / "report.json").write_text(json.dumps({"scenarios": [
        {"runs": [{"prompt_tokens": 1000, "completion_tokens": 100}, {"prompt_tokens": 3000, "completion_tokens": 300}]},
        {"runs": [{"skipped": "why"}]}]}))
    estimate = trials.draft_test_estimate()
    # Two sides × (2000 prompt tokens at 1 USD/M + 200 completion tokens at 4 USD/M) = 0.0056 USD.
    assert estimate.usd == Decimal("0.0056") and "big-model" in estimate.why
    test = trials.draft_test_start(by=lee, use_model=True, confirmed=True)
    assert (test.model, test.uses_stand_in, test.estimate_usd) == ("big-model", False, Decimal("0.0056"))


def test_no_estimate_is_possible_for_a_model_without_a_price(settings, var):
    settings.MODEL_BASE_URL, settings.MODEL_NAME, settings.MODEL_DEFAULT_PRICE = "https://m.example/v1", "x", None
    estimate = trials.draft_test_estimate()
    assert estimate.usd is None and "x has no price" in estimate.why


# --- playing it --------------------------------------------------------------------------------------------------

@pytest.mark.django_db(transaction=True)
def test_a_draft_whose_guidance_changes_an_outcome_is_played_side_by_side_and_the_change_shown(
        demo, var, settings, monkeypatch):
    lee = member("lee", permissions.LEADS)
    settings.DRAFT_TEST_SCENARIOS = ["su-41290-*", "su-41210-delivered-*"]
    monkeypatch.setattr(trials.services.app, "send_task", lambda name, args: None)
    draft_with(lee, guidance=(STORE_CREDIT_RULE,))
    test = trials.draft_test_start(by=lee)
    seen = []
    real = trials.services._progress
    monkeypatch.setattr(trials.services, "_progress", lambda t, line, offset: (real(t, line, offset), seen.append(
        DraftTest.objects.values_list("done", "total").get(pk=t.pk))))
    assert trials.draft_test_execute(test.pk) == DraftTest.FINISHED, DraftTest.objects.get(pk=test.pk).error
    assert trials.draft_test_execute(test.pk) == "not queued"  # a duplicate delivery plays nothing
    test.refresh_from_db()
    assert list(dict.fromkeys(s for s in seen if s[0])) == [(1, 4), (2, 4), (3, 4), (4, 4)]  # progress as it went
    assert (test.draft_pass_rate, test.live_pass_rate) == (0.5, 1.0)
    assert trials.draft_tested()
    page = signed_in(lee).get(f"{PAGE}{test.public_id}/").content.decode()
    rows = page.split('data-testid="agent-test-compare-row"')[1:]
    assert 'data-change="worse"' in rows[0] and "su-41290-rest-of-the-balance" in rows[0]  # the changed one first
    assert 'aria-busy="false"' in page and "Passed: draft 50%, live 100%" in page
    report = json.loads(trials.report_paths(test)["draft"].read_text())
    assert report["prompt"]["profile"]["label"].startswith("draft of ")
    assert signed_in(lee).get(f"{PAGE}{test.public_id}/draft.html").status_code == 200
    draft_with(lee, guidance=())
    assert not trials.draft_tested()  # a changed draft is untested again


@pytest.mark.django_db(transaction=True)
def test_a_failed_test_records_why(demo, var, monkeypatch):
    lee = member("lee", permissions.LEADS)
    monkeypatch.setattr(trials.services.app, "send_task", lambda name, args: None)
    draft_with(lee, guidance=(STORE_CREDIT_RULE,))
    test = trials.draft_test_start(by=lee)
    DraftTest.objects.filter(pk=test.pk).update(draft_data={"guidance": "not a list"})
    assert trials.draft_test_execute(test.pk) == DraftTest.FAILED
    test.refresh_from_db()
    assert test.state == DraftTest.FAILED and "The draft evaluation stopped" in test.error
    assert "not a profile the desk would run" in test.error


# --- a test whose worker died -------------------------------------------------------------------------------------

def test_a_test_running_past_its_time_is_failed_once_by_two_sweeps_and_the_draft_may_be_tested_again(
        lee, var, settings, monkeypatch):
    from support import tasks

    settings.DRAFT_TEST_MAX_SECONDS = 600
    monkeypatch.setattr(trials.services.app, "send_task", lambda name, args: None)
    draft_with(lee, guidance=(STORE_CREDIT_RULE,))
    stuck = trials.draft_test_start(by=lee)
    DraftTest.objects.filter(pk=stuck.pk).update(state=DraftTest.RUNNING,
                                                 started_at=timezone.now() - timedelta(seconds=590))
    assert tasks.sweep()["draft_tests_failed"] == 0  # still within its time
    DraftTest.objects.filter(pk=stuck.pk).update(started_at=timezone.now() - timedelta(seconds=610))
    assert [tasks.sweep()["draft_tests_failed"], tasks.sweep()["draft_tests_failed"]] == [1, 0]
    stuck.refresh_from_db()
    assert stuck.state == DraftTest.FAILED and stuck.finished_at is not None
    assert stuck.error == ("The test stopped answering: it was still running 10 minutes after it started "
                           "(DRAFT_TEST_MAX_SECONDS), so its worker most likely stopped. Test the draft again.")
    assert trials.draft_test_start(by=lee).state == DraftTest.QUEUED


def test_a_worker_that_comes_back_after_the_sweep_leaves_the_test_failed(lee, var, settings, monkeypatch):
    monkeypatch.setattr(trials.services.app, "send_task", lambda name, args: None)
    draft_with(lee, guidance=(STORE_CREDIT_RULE,))
    test = trials.draft_test_start(by=lee)

    def slow_side(test, side, offset):  # the beat sweeps while this worker is away
        settings.DRAFT_TEST_MAX_SECONDS = 0
        trials.draft_tests_sweep()
        return 1.0

    monkeypatch.setattr(trials.services, "_side", slow_side)
    assert trials.draft_test_execute(test.pk) == "swept"
    test.refresh_from_db()
    assert test.state == DraftTest.FAILED and test.draft_pass_rate is None


# --- the pages ---------------------------------------------------------------------------------------------------

def test_staff_read_the_page_and_only_a_lead_may_start_a_test(lee, sam, var, monkeypatch):
    monkeypatch.setattr(trials.services.app, "send_task", lambda name, args: None)
    draft_with(lee, guidance=(STORE_CREDIT_RULE,))
    as_sam = signed_in(sam)
    page = as_sam.get(PAGE)
    assert page.status_code == 200 and b"agent-test-read-only" in page.content
    assert as_sam.post(PAGE, {"model": "stand-in"}).status_code == 403 and not DraftTest.objects.exists()
    pat = make_user("pat", staff=False)
    assert signed_in(pat).get(PAGE).status_code == 302
    started = signed_in(lee).post(PAGE, {"model": "stand-in"})
    test = DraftTest.objects.get()
    assert started.status_code == 302 and started["Location"] == f"{PAGE}{test.public_id}/"
    again = signed_in(lee).post(PAGE, {"model": "stand-in"})
    assert again.status_code == 409 and b"being tested already" in again.content
    detail = as_sam.get(f"{PAGE}{test.public_id}/").content.decode()
    assert 'aria-busy="true"' in detail and "console-agent-test.js" in detail


def test_the_configured_model_asks_to_confirm_its_estimate_on_the_page(lee, var, settings, monkeypatch):
    monkeypatch.setattr(trials.services.app, "send_task", lambda name, args: None)
    settings.MODEL_BASE_URL, settings.MODEL_NAME, settings.MODEL_PRICES = "https://m.example/v1", "big", {}
    settings.MODEL_DEFAULT_PRICE = None
    draft_with(lee, guidance=(STORE_CREDIT_RULE,))
    shown = signed_in(lee).post(PAGE, {"model": "configured"})
    assert b"agent-test-confirm" in shown.content and b"big has no price" in shown.content
    assert not DraftTest.objects.exists()
    confirmed = signed_in(lee).post(PAGE, {"model": "configured", "confirm": "yes"})
    assert confirmed.status_code == 302 and DraftTest.objects.get().model == "big"


def test_every_text_on_the_pages_is_escaped(lee, var, monkeypatch):
    monkeypatch.setattr(trials.services.app, "send_task", lambda name, args: None)
    draft_with(lee, guidance=(STORE_CREDIT_RULE,))
    test = trials.draft_test_start(by=lee)
    DraftTest.objects.filter(pk=test.pk).update(state=DraftTest.FAILED, error="<script>alert(1)</script>",
                                                model="<b>model</b>")
    client = signed_in(lee)
    detail = client.get(f"{PAGE}{test.public_id}/").content.decode()
    listing = client.get(PAGE).content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in detail and "<script>alert" not in detail
    assert "&lt;b&gt;model&lt;/b&gt;" in listing and "<b>model</b>" not in listing


def test_the_page_says_in_words_how_a_scenario_that_passed_on_both_sides_acted_otherwise(lee, var, monkeypatch):
    from tests.test_evaluation_compare_outcomes import report, trial

    monkeypatch.setattr(trials.services.app, "send_task", lambda name, args: None)
    draft_with(lee, guidance=(STORE_CREDIT_RULE,))
    test = trials.draft_test_start(by=lee)
    DraftTest.objects.filter(pk=test.pk).update(state=DraftTest.FINISHED, draft_pass_rate=1.0, live_pass_rate=1.0)
    paths = trials.report_paths(test)
    paths["live"].parent.mkdir(parents=True)
    paths["live"].write_text(json.dumps(report(a_same=trial(), b_refund=trial(refund="12.00"))))
    paths["draft"].write_text(json.dumps(report(a_same=trial(), b_refund=trial(says="We can offer store credit."))))
    page = signed_in(lee).get(f"{PAGE}{test.public_id}/").content.decode()
    rows = page.split('data-testid="agent-test-compare-row"')[1:]
    assert 'data-change="different"' in rows[0] and "Passed on both sides, acted otherwise" in rows[0]
    assert "Refund: issued 12.00 → none" in rows[0] and "Store credit: not offered → offered" in rows[0]
    assert "1 scenario changed: 0 worse, 0 better, 1 acted otherwise" in page
