"""The Team and Settings pages in a browser: a lead invites a colleague, the e-mail's link sets a password, and the
new person signs in; both pages are accessible (axe: nothing serious) and fit a phone at 1280 and 390 px."""

from __future__ import annotations

import re
import time

from playwright.sync_api import expect

from tests.browser.test_a11y import assert_accessible
from tests.browser.test_decide_by_email import text_part

NEW = "nia.team@example.com"


def invitation_link(mailbox) -> str:
    deadline = time.monotonic() + 20
    while not mailbox.to(NEW):
        assert time.monotonic() < deadline, f"no invitation e-mail reached {NEW}"
        time.sleep(0.1)
    return re.search(r"http://\S+/console/join/\S+?/", text_part(mailbox.to(NEW)[-1])).group(0)


def test_a_lead_invites_a_colleague_who_sets_a_password_and_signs_in(site, staff_page, new_context, mailbox):
    page = staff_page("/console/team/")
    page.get_by_test_id("invite-email").fill(NEW)
    page.get_by_test_id("invite-role").select_option("agent")
    page.get_by_test_id("invite-send").click()
    expect(page.get_by_test_id("team-notice")).to_contain_text(f"Invitation sent to {NEW}")
    assert_accessible(page, "team")
    link = invitation_link(mailbox)
    join = new_context().new_page()
    join.goto(link)
    join.get_by_test_id("join-name").fill("Nia")
    join.get_by_test_id("join-password").fill("a-long-Secret-42")
    join.get_by_test_id("join-password-again").fill("a-long-Secret-42")
    join.get_by_test_id("join-submit").click()
    expect(join.get_by_test_id("join-done")).to_contain_text(NEW)
    assert_accessible(join, "team-join")
    join.get_by_test_id("join-login").click()
    join.locator("input[name=username]").fill(NEW)
    join.locator("input[name=password]").fill("a-long-Secret-42")
    join.get_by_test_id("login-button").click()
    expect(join.get_by_test_id("connection-status")).to_have_attribute("data-state", "live")


def test_the_settings_page_is_accessible_and_fits_a_phone(site, staff_page):
    page = staff_page("/console/settings/")
    expect(page.get_by_test_id("settings-group").first).to_be_visible()
    assert_accessible(page, "settings")
