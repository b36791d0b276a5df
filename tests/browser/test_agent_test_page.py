"""A support lead tests a draft of the agent profile: the "Test this draft" page, a test's page while it runs
(its progress, aria-busy), then its result: the pass rates of the draft and the live version, the scenarios whose
outcome changed first (a scenario that passed on both sides but acted otherwise says how, in words), links to both
reports. One real test runs through the site's worker (DRAFT_TEST_SCENARIOS is one scenario in the browser
site); the running and the many-sided finished states are rows and report files written here. axe finds nothing
serious at 1280 and 390 px, no page scrolls sideways; screenshots go to tests/artifacts/agent-test-*.png.

The draft and its tests are removed afterwards, so other tests meet the live profile as seeded."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from playwright.sync_api import expect

from support import profiles, trials
from support.models import DraftTest, ProfileVersion
from tests.browser.conftest import STAFF_LOGIN
from tests.browser.test_agent_profile_pages import checked
from tests.test_evaluation_compare_outcomes import report, trial

RULE = "Offer store credit before a refund under 100 EUR."
PAGE = "/console/agent/test/"
NO_POLLING = "**/support/console-agent-test.js*"  # a still page for axe and the screenshots


def _clean() -> None:
    for test in DraftTest.objects.all():
        shutil.rmtree(trials.services.folder(test), ignore_errors=True)
    DraftTest.objects.all().delete()
    ProfileVersion.objects.filter(state=ProfileVersion.DRAFT).delete()


@pytest.fixture
def draft(site):
    _clean()
    lead = get_user_model().objects.get(username=STAFF_LOGIN[0])
    row = profiles.draft_save(data=replace(profiles.live(), guidance=(RULE,)).as_data(), by=lead)
    yield row
    _clean()


def a_test(draft, **fields) -> DraftTest:
    return DraftTest.objects.create(asked_by=draft.created_by, draft=draft, draft_revision=draft.revision,
                                    draft_data=draft.data, model="sundry-standin-1", **fields)


def test_the_page_a_running_test_and_a_finished_one_read_well_at_both_widths(staff_page, draft):
    page = staff_page(PAGE)
    expect(page.get_by_test_id("agent-test-go")).to_be_visible()
    expect(page.get_by_test_id("agent-tests-empty")).to_be_visible()
    checked(page, "test")

    running = a_test(draft, state=DraftTest.RUNNING, started_at=timezone.now(), done=3, total=8)
    page.route(NO_POLLING, lambda route: route.fulfill(body="", content_type="text/javascript"))
    page.goto(page.url.split("/console/")[0] + f"{PAGE}{running.public_id}/")
    progress = page.get_by_test_id("agent-test-progress")
    expect(progress).to_have_attribute("aria-busy", "true")
    expect(progress).to_contain_text("3 of 8 trials played")
    checked(page, "test-running")

    DraftTest.objects.filter(pk=running.pk).update(state=DraftTest.FINISHED, finished_at=timezone.now(),
                                                   draft_pass_rate=2 / 3, live_pass_rate=1.0)
    paths = trials.report_paths(running)
    paths["live"].parent.mkdir(parents=True, exist_ok=True)
    paths["live"].write_text(json.dumps(report(**{
        "su-41207-damaged-mug": trial(), "su-41290-rest-of-the-balance": trial(refund="24.00"),
        "su-41210-delivered-status": trial(tools=("get_order", "track_parcel"))})))
    worse = {**trial(says="Before a refund, we can offer you store credit."), "passed": False}
    finished = report(**{"su-41207-damaged-mug": trial(), "su-41290-rest-of-the-balance": trial(refund="24.00"),
                         "su-41210-delivered-status": trial(tools=("get_order", "track_parcel"), stop="escalated")})
    finished["scenarios"][1].update(passes=0, runs=[worse])
    paths["draft"].write_text(json.dumps(finished))
    page.reload()
    expect(progress).to_have_attribute("aria-busy", "false")
    expect(page.get_by_test_id("agent-test-result")).to_contain_text("Passed: draft 67%, live 100%")
    rows = page.get_by_test_id("agent-test-compare-row")
    expect(rows).to_have_count(3)
    expect(rows.nth(0)).to_have_attribute("data-change", "worse")
    expect(rows.nth(1)).to_have_attribute("data-change", "different")
    expect(rows.nth(1)).to_contain_text("Ended as: answered → escalated")
    expect(rows.nth(2)).to_have_attribute("data-change", "same")
    checked(page, "test-finished")


def test_a_lead_starts_a_real_test_sees_it_run_and_reads_its_result_and_reports(staff_page, draft):
    page = staff_page(PAGE)
    page.get_by_test_id("agent-test-go").click()
    page.wait_for_url(f"**{PAGE}*-*-*-*-*/")
    test = DraftTest.objects.get()
    # The page reads itself again while the test runs, then shows the result (a test takes seconds here).
    expect(page.get_by_test_id("agent-test-result")).to_be_visible(timeout=90_000)
    test.refresh_from_db()
    assert test.state == DraftTest.FINISHED, test.error
    expect(page.get_by_test_id("agent-test-progress")).to_have_attribute("aria-busy", "false")
    row = page.get_by_test_id("agent-test-compare-row").first
    expect(row).to_contain_text("su-41290-rest-of-the-balance")
    expect(row).to_have_attribute("data-change", "worse")  # the draft offers store credit before the refund
    checked(page, "test-real")
    page.get_by_test_id("agent-test-report-draft").click()
    page.wait_for_url(f"**/{test.public_id}/draft.html")
    expect(page.locator("body")).to_contain_text("su-41290-rest-of-the-balance")
    page.go_back()
    page.get_by_test_id("agent-test-report-live").click()
    page.wait_for_url(f"**/{test.public_id}/live.html")
    expect(page.locator("body")).to_contain_text("su-41290-rest-of-the-balance")
    page.go_back()
    page.get_by_role("link", name="All tests").click()
    expect(page.get_by_test_id("agent-test-row")).to_have_count(1)
    expect(page.get_by_test_id("agent-test-row")).to_contain_text("finished")
