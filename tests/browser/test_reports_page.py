"""The Reports page in a browser: the week of tests/reports_dataset.py as cards and uPlot charts, under the
site's real CSP, a number opening the conversations behind it; accessible and readable at 1280 and 390 px."""

from datetime import timedelta

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import shot
from tests.browser.test_a11y import assert_accessible

# Also run on PostgreSQL in CI: what two people, two sockets or the database's own SQL decide here
# (docs/testing.md#on-postgresql-and-the-scale-out-test).
pytestmark = pytest.mark.every_database

WEEK = "/console/reports/?start=2026-11-23&end=2026-11-29"


def test_a_lead_reads_the_week_clicks_a_number_and_sees_the_conversations(site, staff_page):
    from support.models import Customer
    from tests.reports_dataset import Week

    if not Customer.objects.filter(email="report-1@example.com").exists():
        Week()
    refused = []
    page = staff_page("/console/reports/", before=lambda p: p.on("console", lambda m: refused.append(m.text)
                                                                 if "Content Security Policy" in m.text else None))
    page.goto(site + WEEK)
    expect(page.locator('[data-figure="new_conversations"] .report-value')).to_have_text("12: list them")
    expect(page.locator('[data-figure="resolved_by_agent"] .report-value')).to_contain_text("5")
    expect(page.get_by_test_id("report-chart")).to_have_count(4)
    expect(page.locator(".report-plot canvas")).to_have_count(4)  # drawn by uPlot, served by the site
    assert not refused, refused
    if page.get_by_test_id("reports-digest-toggle").text_content().strip() == "Turn off":
        page.get_by_test_id("reports-digest-toggle").click()  # an earlier run turned it on
    page.get_by_test_id("reports-digest-toggle").click()  # the lead turns the morning digest on
    expect(page.get_by_test_id("reports-digest")).to_contain_text("on, each day at")
    page.goto(site + WEEK)
    assert_accessible(page, "reports")
    page.set_viewport_size({"width": 1280, "height": 900})
    shot(page, "reports-1280")
    page.get_by_test_id("report-charts").scroll_into_view_if_needed()
    shot(page, "reports-charts-1280")
    page.set_viewport_size({"width": 390, "height": 844})
    page.evaluate("window.scrollTo(0, 0)")
    shot(page, "reports-390")
    page.get_by_test_id("report-charts").scroll_into_view_if_needed()
    shot(page, "reports-charts-390")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.locator('[data-figure="abandoned"] a').click()
    expect(page.get_by_test_id("drill-row")).to_have_count(1)
    expect(page.get_by_test_id("drill-total")).to_contain_text("1 conversation")
    assert_accessible(page, "report-drill")
    shot(page, "report-drill-390")
    page.get_by_test_id("drill-row").get_by_role("link", name="Open the conversation").click()
    expect(page.get_by_test_id("connection-status")).to_have_attribute("data-state", "live")


def test_the_page_says_as_of_when_yesterdays_figures_were_counted(site, staff_page):
    from django.conf import settings
    from django.utils import timezone

    from support.models import ProvisionalReportDay, ReportDay

    yesterday, now = timezone.localdate() - timedelta(days=1), timezone.now()
    row, _ = ProvisionalReportDay.objects.update_or_create(
        day=yesterday, time_zone=settings.TIME_ZONE, dimension=ReportDay.ALL, value="",
        defaults={"counts": {"new_conversations": 3}, "parts": {}, "as_of": now})
    try:
        page = staff_page("/console/reports/")
        as_of = page.get_by_test_id("reports-as-of")
        expect(as_of).to_contain_text(f"Figures for {yesterday:%-d %b} as of {timezone.localtime(now):%H:%M}")
        assert_accessible(page, "reports-as-of")
        page.set_viewport_size({"width": 1280, "height": 900})
        shot(page, "reports-as-of-1280")
        page.set_viewport_size({"width": 390, "height": 844})
        shot(page, "reports-as-of-390")
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
    finally:
        row.delete()
