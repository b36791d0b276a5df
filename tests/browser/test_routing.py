"""Routing seen by two staff members with a console open each: a hand-over goes into one online person's queue,
whose alert says "Routed to you" (the other's names them) and whose inbox row says so, without assigning it; a
lead's Team page lists both as online with the conversation in the routed person's queue. Screenshots at 1280
and 390 px go to var/screenshots/routing-*.png; axe finds nothing serious."""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import expect

from support.live import presence
from support.models import Conversation
from tests.browser.conftest import STAFF_NAME
from tests.browser.inbox_helpers import ALEX, alex_user, login, page_width, row, screens
from tests.browser.test_a11y import serious_violations
from tests.browser.test_conversation_page import DESKTOP, handed_over

# Also run on PostgreSQL in CI: what two people, two sockets or the database's own SQL decide here
# (docs/testing.md#on-postgresql-and-the-scale-out-test).
pytestmark = pytest.mark.every_database


def test_a_hand_over_is_routed_to_one_online_person_and_a_lead_sees_the_team(site, customer_page, new_context):
    alex_user()
    sam = login(new_context, site, "/console/", viewport=DESKTOP)
    alex = login(new_context, site, "/console/", username=ALEX[0], password=ALEX[1], viewport=DESKTOP)

    _, conversation = handed_over(customer_page)
    fresh = Conversation.objects.select_related("routed_to").get(public_id=conversation)
    assert fresh.routed_to is not None and fresh.routed_to.username in ("staff", ALEX[0])
    assert fresh.assignee is None and fresh.status == Conversation.NEEDS_ATTENTION  # routed, not assigned
    routed, other = (sam, alex) if fresh.routed_to.username == "staff" else (alex, sam)
    routed_name = STAFF_NAME if routed is sam else "Alex"

    def alert(page):
        return page.locator(f'[data-testid="alert"][data-kind="handover"][data-conversation="{conversation}"]')

    expect(alert(routed).get_by_test_id("alert-status")).to_have_text("Routed to you.")
    expect(alert(other).get_by_test_id("alert-status")).to_have_text(f"Routed to {routed_name}.")
    expect(alert(other).get_by_test_id("alert-take")).to_be_visible()  # anyone may still take it
    expect(row(routed, conversation).get_by_test_id("row-assignee")).to_have_text("Routed to you")
    expect(row(other, conversation).get_by_test_id("row-assignee")).to_have_text(f"Routed to {routed_name}")
    screens(routed, "routing-routed-to-you")
    screens(other, "routing-routed-to-colleague")
    assert serious_violations(routed) == []

    # The "Routed to me" filter shows it to the routed person only.
    routed.get_by_test_id("filter-routed_to_me").click()
    expect(row(routed, conversation)).to_be_visible()
    other.get_by_test_id("filter-routed_to_me").click()
    expect(other.get_by_test_id("inbox-filter").locator('[aria-pressed="true"]')).to_have_text("Routed to me")
    expect(row(other, conversation)).to_have_count(0)

    # Sam is a Support lead: the Team page lists both, online, and the conversation in the routed person's queue.
    expect(sam.get_by_test_id("nav-team")).to_be_visible()
    expect(alex.get_by_test_id("nav-team")).to_have_count(0)
    sam.get_by_test_id("nav-team").click()
    expect(sam.get_by_test_id("team-table")).to_be_visible()
    for username in ("staff", ALEX[0]):
        expect(sam.locator(f'[data-testid="team-row"][data-username="{username}"]')).to_have_attribute(
            "data-online", "true")
    queue = sam.locator(f'[data-testid="team-row"][data-username="{fresh.routed_to.username}"]')
    expect(queue.get_by_test_id("team-open")).to_contain_text("routed, not taken yet")
    expect(queue.get_by_test_id("team-oldest")).not_to_have_text("Nothing waiting")
    screens(sam, "routing-team")
    assert serious_violations(sam) == []
    sam.set_viewport_size({"width": 390, "height": 844})
    assert page_width(sam) <= 390  # the lead's longer nav wraps: no sideways scroll on a phone
    assert serious_violations(sam) == []
    sam.set_viewport_size({"width": DESKTOP["width"], "height": DESKTOP["height"]})

    # Alex closes the console: once the site has taken his socket's mark away (it learns of the close when the
    # connection ends, which a busy machine may take a moment to deliver), the Team page, read again, shows him
    # offline. The page is read when it loads, so the test waits for the site's own state, not for a time.
    alex_id = alex_user().pk
    alex.context.close()
    deadline = time.monotonic() + 20
    while alex_id in presence.online_user_ids():
        assert time.monotonic() < deadline, "the site still has Alex online 20 s after his console closed"
        time.sleep(0.05)
    sam.reload()
    expect(sam.locator(f'[data-testid="team-row"][data-username="{ALEX[0]}"]')).to_have_attribute(
        "data-online", "false")
