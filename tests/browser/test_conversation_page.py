"""The conversation page as a support lead works it: the customer's conversation first (the agent's steps in
plain words, the raw trace behind a toggle that is remembered), the summary of why it needs a person, live,
the run's details in their own tab, the latest message, the reply box and the order in one screen, and
closing the conversation, which the customer is told before being asked for a rating.
Screenshots: var/screenshots/conversation-*.png at 1280 and 390 px.
"""

from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.browser.conftest import STAFF_NAME, ask, open_widget, refundable_again, widget_conversation
from tests.browser.inbox_helpers import SCREENSHOTS

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
GERMAN = {"locale": "de-DE", "timezone_id": "Europe/Berlin"}

# Written into the widget's shadow root: what its header said, and whether the closing line was there, at the
# moment the rating first showed.
WATCH_THE_RATING = """() => {
    const root = document.querySelector('[data-testid="widget-host"]').shadowRoot;
    window.__atRating = null;
    new MutationObserver(() => {
        const rating = root.querySelector('[data-testid="widget-rating"]');
        if (window.__atRating || !rating || rating.hidden) return;
        const notices = [...root.querySelectorAll('[data-testid="widget-message"][data-author="system"]')];
        window.__atRating = {subtitle: root.querySelector('[data-testid="widget-subtitle"]').textContent,
                             lastNotice: notices.length ? notices[notices.length - 1].textContent : ""};
    }).observe(root, {subtree: true, childList: true, attributes: true, characterData: true});
}"""


def snap(page, name: str, viewport=None) -> None:
    """A screenshot of what is on screen, at the page's size or the one given (then back)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    before = page.viewport_size
    if viewport:
        page.set_viewport_size(viewport)
        page.wait_for_timeout(300)
    page.screenshot(path=str(SCREENSHOTS / f"conversation-{name}.png"))
    if viewport and before:
        page.set_viewport_size(before)
        page.wait_for_timeout(150)


def notices(page):
    return page.locator('[data-testid="widget-message"][data-author="system"]')


def handed_over(customer_page, *, email=None, **options):
    """A customer whose refund of SU-41533 (480.00, above the agent's ceiling) was handed to a person."""
    refundable_again("SU-41533")
    customer = customer_page(email, viewport=DESKTOP, **options)
    open_widget(customer)
    conversation = widget_conversation(customer)["id"]
    ask(customer, "The monitor from order SU-41533 arrived cracked. I want a full refund.")
    expect(notices(customer)).to_have_count(1, timeout=20000)
    return customer, conversation


def test_the_summary_says_why_once_with_policy_titles_and_follows_a_refund(customer_page, staff_page):
    customer, conversation = handed_over(customer_page)
    staff = staff_page(f"/console/conversations/{conversation}/", viewport=DESKTOP)
    summary = staff.get_by_test_id("handover-panel")
    expect(summary).to_be_visible()
    expect(staff.get_by_test_id("handover-wants")).to_have_text(
        "“The monitor from order SU-41533 arrived cracked. I want a full refund.”")
    found = staff.get_by_test_id("handover-found")
    expect(found).to_contain_text("SU-41533 (480.00 EUR, Brightside Electronics): delivered")
    expect(found).to_contain_text("nothing refunded yet")
    expect(found).to_contain_text("Policies: Damaged items; Brightside Electronics: damaged goods.")
    left = staff.get_by_test_id("handover-left")
    expect(left).to_have_text("Refund of 480.00 EUR on SU-41533 is above the 150.00 limit an agent may refund. "
                              "Reply to the customer here.")
    expect(staff.get_by_test_id("attention-reason")).to_be_hidden()  # said once, in the summary
    assert "POL-" not in summary.inner_text()
    assert summary.inner_text().count("150.00") == 1
    snap(staff, "summary-1280")
    snap(staff, "summary-390", PHONE)

    # A person refunds 300.00 of it: the summary follows, live.
    order = staff.locator('[data-testid="context-order"][data-order="SU-41533"]')
    order.get_by_test_id("refund-open").click()
    order.get_by_test_id("refund-amount").fill("300.00")
    order.get_by_test_id("refund-reason").fill("Cracked on arrival: partial refund agreed")
    order.get_by_test_id("refund-submit").click()
    expect(found).to_contain_text("300.00 EUR refunded, 180.00 EUR still refundable")
    expect(found).not_to_contain_text("nothing refunded")
    expect(staff.get_by_test_id("handover-done")).to_have_text(f"{STAFF_NAME} refunded 300.00 EUR on SU-41533.")
    expect(left).to_have_text(re.compile("^Nothing waits for an answer"))
    assert "480.00 EUR refundable" not in summary.inner_text() and "above the 150.00" not in summary.inner_text()

    # The customer writes: what is left says so; closed, nothing waits for a person and the panel goes.
    ask(customer, "Thanks, and the other 180.00?")
    expect(left).to_have_text(re.compile("^Answer the customer's latest message, “Thanks, and the other 180.00\\?”"))
    snap(staff, "summary-after-refund-1280")
    staff.get_by_test_id("close-conversation-button").click()
    expect(summary).to_be_hidden()


def test_closing_from_the_page_tells_the_customer_then_asks_for_the_rating(customer_page, staff_page):
    customer, conversation = handed_over(customer_page, **GERMAN)
    staff = staff_page(f"/console/conversations/{conversation}/", viewport=DESKTOP)
    staff.get_by_test_id("take-over-button").click()
    expect(staff.get_by_test_id("conversation-status")).to_have_attribute("data-status", "taken_over")
    staff.get_by_test_id("reply-input").fill("Hallo Maya, ich habe Ihnen 480.00 EUR erstattet.")
    staff.get_by_test_id("reply-send").click()
    subtitle = customer.get_by_test_id("widget-subtitle")
    expect(subtitle).to_have_text(f"{STAFF_NAME} aus unserem Team ist da")
    expect(customer.get_by_test_id("widget-rating")).to_be_hidden()  # nothing is done yet: no rating
    customer.evaluate(WATCH_THE_RATING)

    close = staff.get_by_test_id("close-conversation-button")
    expect(close).to_have_text("Close conversation")
    close.click()
    expect(staff.get_by_test_id("conversation-status")).to_have_attribute("data-status", "closed")
    expect(staff.get_by_test_id("conversation-status")).to_have_text("Closed")
    expect(staff.get_by_test_id("conversation-assignee")).to_have_text(re.compile(f"^Closed by {STAFF_NAME}"))
    expect(staff.get_by_test_id("reopen-conversation-button")).to_be_focused()
    expect(close).to_be_hidden()
    closing = (f"{STAFF_NAME} aus unserem Team hat dieses Gespräch abgeschlossen. Wenn Sie noch etwas brauchen, "
               "schreiben Sie einfach hier.")
    # The console's transcript shows the line the customer was sent.
    expect(staff.locator('[data-testid="message"][data-author="system"]').last).to_contain_text(closing)

    expect(notices(customer).last).to_have_text(closing)
    expect(subtitle).to_have_text("Dieses Gespräch ist abgeschlossen")
    rating = customer.get_by_test_id("widget-rating")
    expect(rating).to_be_visible()
    expect(rating).to_contain_text("Wie waren wir?")
    at_rating = customer.evaluate("window.__atRating")
    assert at_rating == {"subtitle": "Dieses Gespräch ist abgeschlossen", "lastNotice": closing}, at_rating
    snap(customer, "closed-widget-1280")
    snap(customer, "closed-widget-390", PHONE)
    snap(staff, "closed-1280")
    snap(staff, "closed-390", PHONE)

    # The customer writes again: reopened, for the customer and on the page.
    ask(customer, "Noch eine Frage zur Rechnung.")
    expect(subtitle).to_have_text(f"{STAFF_NAME} aus unserem Team ist da")
    expect(staff.get_by_test_id("conversation-status")).to_have_attribute("data-status", "taken_over")
    expect(staff.get_by_test_id("close-conversation-button")).to_be_visible()
    expect(staff.get_by_test_id("reopen-conversation-button")).to_be_hidden()


def test_a_conversation_the_agent_is_waiting_on_is_not_closed_and_the_page_says_why(customer_page, staff_page):
    refundable_again("SU-41310")
    customer = customer_page(viewport=DESKTOP)
    open_widget(customer)
    conversation = widget_conversation(customer)["id"]
    ask(customer, "My parcel SU-41310 never came.")  # a refund the agent asks a person to approve
    staff = staff_page(f"/console/conversations/{conversation}/", viewport=DESKTOP)
    expect(staff.get_by_test_id("conversation-approvals").get_by_test_id("approval-card")).to_have_count(
        1, timeout=20000)
    staff.get_by_test_id("close-conversation-button").click()
    error = staff.get_by_test_id("conversation-action-error")
    expect(error).to_be_visible()
    expect(error).to_contain_text("decide the approval or take the conversation over before closing it")
    expect(staff.get_by_test_id("close-conversation-button")).to_be_visible()
    assert notices(customer).count() == 0
