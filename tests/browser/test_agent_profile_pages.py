"""A support lead edits the agent profile in the console: the widget's preview follows what they type, a limit
past the operator's cap is refused beside its field with every value kept, a saved draft lists how it differs
from the live version; the setup checklist shows each step and each check of the shop. axe finds nothing
serious at 1280 and 390 px, no page scrolls sideways; screenshots go to tests/artifacts/agent-*.png.

Nothing is published here: the draft is removed afterwards, so other tests meet the live profile as seeded."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from support.models import ProfileVersion
from tests.browser.conftest import ARTIFACTS
from tests.browser.test_a11y import WIDTHS, serious_violations


@pytest.fixture
def no_draft(site):
    ProfileVersion.objects.filter(state=ProfileVersion.DRAFT).delete()
    yield
    ProfileVersion.objects.filter(state=ProfileVersion.DRAFT).delete()


def checked(page, name: str) -> None:
    """Screenshots at both widths; axe's serious findings and sideways scrolling fail the test."""
    problems = []
    for width, height in WIDTHS:
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(150)
        problems += [f"{width} px: {v['impact']} {v['id']}: {v['help']} {v['nodes']}" for v in serious_violations(page)]
        if page.evaluate("() => document.scrollingElement.scrollWidth") > width + 1:
            problems.append(f"{name} scrolls sideways at {width} px")
        page.screenshot(path=str(ARTIFACTS / f"agent-{name}-{width}.png"), full_page=True)
    page.set_viewport_size({"width": 1280, "height": 900})
    assert not problems, "\n".join(problems)


def test_a_lead_edits_the_profile_is_held_to_a_cap_and_sees_how_the_saved_draft_differs(staff_page, no_draft):
    page = staff_page("/console/")
    page.get_by_test_id("nav-agent").click()
    expect(page.get_by_test_id("nav-agent")).to_have_attribute("aria-current", "page")
    expect(page.get_by_test_id("agent-no-draft")).to_be_visible()
    checked(page, "editor")

    page.get_by_test_id("agent-agent_name").fill("Mila")
    page.get_by_test_id("agent-launcher_label").fill("Ask Mila")
    page.get_by_test_id("agent-colour").fill("#7a2e8c")
    preview = page.get_by_test_id("widget-preview")
    expect(preview.locator('[data-preview="agent"]')).to_have_text("Mila")
    expect(preview.locator('[data-preview="launcher"]')).to_have_text("Ask Mila")
    page.get_by_test_id("agent-refund_ceiling").fill("99999")
    page.get_by_test_id("agent-guidance").fill("Offer store credit before a refund under 10 EUR")
    page.get_by_test_id("agent-save").click()
    expect(page.get_by_test_id("agent-refund_ceiling-error")).to_contain_text("REFUND_CEILING")
    expect(page.get_by_test_id("agent-agent_name")).to_have_value("Mila")
    expect(page.get_by_test_id("agent-refund_ceiling")).to_have_value("99999")
    assert not ProfileVersion.objects.filter(state=ProfileVersion.DRAFT).exists()
    checked(page, "editor-refused")

    page.get_by_test_id("agent-refund_ceiling").fill("80.00")
    page.get_by_test_id("agent-save").click()
    expect(page.get_by_test_id("agent-notice")).to_contain_text("The draft is saved")
    diff = page.get_by_test_id("agent-diff")
    expect(diff).to_contain_text("Mila")
    expect(diff).to_contain_text("The most the agent may refund at once")
    expect(page.get_by_test_id("agent-publish")).to_be_visible()
    checked(page, "editor-draft")


def test_the_setup_checklist_shows_each_step_with_its_state_and_each_check(staff_page):
    page = staff_page("/console/setup/")
    expect(page.get_by_test_id("setup-step")).to_have_count(5)
    page.get_by_test_id("setup-email").fill("maya@example.com")
    page.get_by_test_id("setup-order").fill("SU-41207")
    page.get_by_test_id("setup-check").click()
    expect(page.locator('[data-step="connect"]')).to_have_attribute("data-state", "failed")  # the demo site: no SHOP_URL
    expect(page.get_by_test_id("setup-check-row").first).to_contain_text("SHOP_URL")
    expect(page.get_by_test_id("setup-live")).to_be_visible()
    page.get_by_test_id("setup-import-policies").click()  # the demo shop serves none: said plainly
    expect(page.get_by_test_id("setup-imported")).to_contain_text("This shop serves no policies the desk can read")
    checked(page, "setup")
