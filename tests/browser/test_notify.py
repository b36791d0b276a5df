"""Alerts for staff with the console open, in two staff browsers: an approval request and a hand-over reach
both (an alert with "Assign to me", the count in the title and the tabs, a sound unless turned off, a desktop
notification after the opt-in); the first to assign it to themself has it, and the other sees who, live."""

from __future__ import annotations

import re

import pytest
from django.db import transaction
from playwright.sync_api import expect

from support.desk import services
from support.live import events
from support.models import Conversation
from tests.browser.conftest import agent_messages, ask, open_widget, refundable_again, widget_conversation
from tests.browser.inbox_helpers import ALEX, alex_user, login, row, screens

# Also run on PostgreSQL in CI: what two people, two sockets or the database's own SQL decide here
# (docs/testing.md#on-postgresql-and-the-scale-out-test).
pytestmark = pytest.mark.every_database

# Desktop notifications shown by the page are recorded (Chromium headless shows none).
RECORD_NOTIFICATIONS = """
window.__notes = [];
window.__closed = [];
const Real = window.Notification;
class Recorded extends Real {
  constructor(title, options) { super(title, options); window.__notes.push({ title, body: options && options.body }); }
  close() { window.__closed.push(this.title); super.close(); }
}
window.Notification = Recorded;
"""


def staff_with_alerts(new_context, site, **login_as):
    context_options = {"permissions": ["notifications"]}
    page = login(new_context, site, **login_as, **context_options)
    page.context.add_init_script(RECORD_NOTIFICATIONS)
    page.reload()
    expect(page.get_by_test_id("connection-status")).to_have_attribute("data-state", "live")
    return page


def sam_opted_in_and_alex(new_context, site):
    """Two staff consoles with SU-41310 refundable again: Sam's with desktop alerts on, Alex's as it comes."""
    refundable_again("SU-41310")
    alex_user()
    sam = staff_with_alerts(new_context, site)
    alex = staff_with_alerts(new_context, site, username=ALEX[0], password=ALEX[1])
    sam.get_by_test_id("notify-optin").click()
    expect(sam.get_by_test_id("notify-optin")).to_have_attribute("aria-pressed", "true")
    return sam, alex


def answered_conversation(customer_page, email: str, text: str) -> str:
    """A customer's conversation in which the agent has answered once; its id."""
    customer = customer_page(email)
    open_widget(customer)
    ask(customer, text)
    conversation_id = widget_conversation(customer)["id"]
    expect(agent_messages(customer)).to_have_count(1, timeout=20000)
    return conversation_id


def hand_over(conversation_id: str, reason: str) -> None:
    """What the desk does when the agent hands a conversation to a person (services.conversation_flag)."""
    conversation = Conversation.objects.get(public_id=conversation_id)
    with transaction.atomic():
        services.conversation_flag(conversation_id=conversation.pk, reason=reason)
    events.publisher.flush()


def test_a_hand_over_and_an_approval_alert_both_staff_and_the_first_to_take_it_has_it(site, customer_page, new_context):
    sam, alex = sam_opted_in_and_alex(new_context, site)
    # Sam opted in to desktop alerts; Alex turns the sound off.
    expect(sam.get_by_test_id("notify-optin")).to_have_text("Desktop alerts: on")
    alex.get_by_test_id("sound-toggle").click()
    expect(alex.get_by_test_id("sound-toggle")).to_have_attribute("aria-pressed", "false")
    expect(alex.get_by_test_id("sound-toggle")).to_have_text("Sound: off")
    sam.wait_for_timeout(1000)  # both consoles have counted what waits already: that is not news

    # An approval request: a refund the agent may not issue alone.
    customer = customer_page()
    open_widget(customer)
    ask(customer, "My parcel SU-41310 never came.")
    refund_conv = widget_conversation(customer)["id"]
    for page in (sam, alex):
        alert = page.locator(f'[data-testid="alert"][data-conversation="{refund_conv}"]')
        expect(alert).to_have_attribute("data-kind", "approval", timeout=20000)
        expect(alert).to_contain_text("Refund 64.00 EUR on SU-41310 waits for approval")
        expect(alert).to_contain_text("Maya Okafor")
    expect(sam).to_have_title(re.compile(r"^\(\d+\) Inbox"))
    assert int(sam.get_by_test_id("approvals-badge").get_attribute("data-count")) >= 1
    expect(agent_messages(customer)).to_have_count(1, timeout=20000)

    # A hand-over: the conversation now needs a person.
    other = customer_page("ines@example.com")
    open_widget(other)
    ask(other, "Where is my order SU-41620?")
    handed = widget_conversation(other)["id"]
    expect(agent_messages(other)).to_have_count(1, timeout=20000)
    before = int(sam.get_by_test_id("inbox-badge").get_attribute("data-count") or 0)
    hand_over(handed, "The customer asked for a person")
    for page in (sam, alex):
        alert = page.locator(f'[data-testid="alert"][data-conversation="{handed}"]')
        expect(alert).to_have_attribute("data-kind", "handover", timeout=10000)
        expect(alert).to_contain_text("Ines Duarte needs a person · SU-41620")
        expect(alert).to_contain_text("The customer asked for a person")
        expect(page.get_by_test_id("inbox-badge")).to_have_attribute("data-count", str(before + 1))
        expect(row(page, handed).get_by_test_id("inbox-status")).to_have_attribute("data-status", "needs_person")
    # Sam hears both and gets desktop notifications; Alex turned the sound off and did not opt in.
    assert int(sam.evaluate("document.body.dataset.beeps")) >= 2
    assert alex.evaluate("document.body.dataset.beeps") == "0"
    titles = [n["title"] for n in sam.evaluate("window.__notes")]
    assert "Ines Duarte needs a person · SU-41620" in titles, titles
    assert any(t.startswith("Refund 64.00 EUR on SU-41310") for t in titles), titles
    assert alex.evaluate("window.__notes") == []
    # An approval is decided on its card: its alert opens the conversation, it does not assign it.
    refund_alert = sam.locator('[data-testid="alert"][data-kind="approval"]').first
    expect(refund_alert.get_by_test_id("alert-take")).to_be_hidden()
    expect(refund_alert.get_by_test_id("alert-open")).to_have_text("Open to decide")
    screens(sam, "notify-alerts")

    # Alex takes it first; Sam's alert says so, live, and Sam's inbox shows it assigned.
    alex.locator(f'[data-testid="alert"][data-conversation="{handed}"]').get_by_test_id("alert-take").click()
    alex_alert = alex.locator(f'[data-testid="alert"][data-conversation="{handed}"]')
    expect(alex_alert.get_by_test_id("alert-status")).to_have_text("Assigned to you.")
    sam_alert = sam.locator(f'[data-testid="alert"][data-conversation="{handed}"]')
    expect(sam_alert.get_by_test_id("alert-status")).to_have_text("Assigned to Alex.")
    expect(sam_alert.get_by_test_id("alert-take")).to_be_hidden()
    expect(row(sam, handed).get_by_test_id("row-assignee")).to_have_text("Assigned to Alex")
    expect(row(sam, handed).get_by_test_id("inbox-status")).to_have_text("With Alex")  # one model: Alex answers
    expect(sam.get_by_test_id("inbox-badge")).to_have_attribute("data-count", str(before))
    screens(sam, "notify-taken-by-colleague")
    assert Conversation.objects.get(public_id=handed).assignee.username == ALEX[0]


def test_an_approval_decided_in_one_console_takes_its_alert_away_in_the_other(site, customer_page, new_context):
    sam, alex = sam_opted_in_and_alex(new_context, site)
    alex.goto(site + "/console/approvals/")
    expect(alex.get_by_test_id("connection-status")).to_have_attribute("data-state", "live")
    sam.wait_for_timeout(1000)  # both consoles have counted what waits already: that is not news

    customer = customer_page()
    open_widget(customer)
    ask(customer, "My parcel SU-41310 never came.")
    conversation = widget_conversation(customer)["id"]
    alert = sam.locator(f'[data-testid="alert"][data-conversation="{conversation}"]')
    expect(alert).to_have_attribute("data-kind", "approval", timeout=20000)
    expect(alert).to_have_attribute("data-approval", re.compile(r".+"))
    titles = [n["title"] for n in sam.evaluate("window.__notes")]
    assert any(t.startswith("Refund 64.00 EUR on SU-41310") for t in titles), titles
    assert sam.evaluate("window.__closed") == []

    screens(sam, "notify-approval-alert")

    # Alex approves it from the queue: Sam's alert and desktop notification go, without Sam doing anything.
    card = alex.locator(f'[data-testid="approval-card"]:has(a[href*="{conversation}"])')
    expect(card).to_have_attribute("data-status", "pending", timeout=10000)
    card.get_by_test_id("approve-button").click()
    expect(card).to_have_attribute("data-status", "approved")
    expect(alert).to_have_count(0, timeout=10000)
    closed = sam.evaluate("window.__closed")
    assert any(t.startswith("Refund 64.00 EUR on SU-41310") for t in closed), closed
    expect(alex.locator(f'[data-testid="alert"][data-conversation="{conversation}"]')).to_have_count(0)
    screens(sam, "notify-approval-decided-elsewhere")


def test_a_late_take_is_told_who_was_first(site, customer_page, new_context):
    """Both see the alert; Sam's click reaches the server after Alex has taken it: Sam is told Alex has it."""
    from support.desk import inbox

    alex_account = alex_user()
    sam = staff_with_alerts(new_context, site)
    alex = staff_with_alerts(new_context, site, username=ALEX[0], password=ALEX[1])
    sam.wait_for_timeout(1000)
    handed = answered_conversation(customer_page, "tom@example.com", "Where is my order SU-41444?")

    def alex_first(route):  # Sam's request waits until Alex's take has committed: the order is fixed
        inbox.conversation_take(conversation=Conversation.objects.get(public_id=handed), user=alex_account)
        route.continue_()

    sam.route(re.compile(r"/api/staff/conversations/.*/take$"), alex_first)
    hand_over(handed, "The customer asked for a person")
    for page in (sam, alex):
        expect(page.locator(f'[data-testid="alert"][data-conversation="{handed}"]')).to_be_visible(timeout=10000)
    sam.locator(f'[data-testid="alert"][data-conversation="{handed}"]').get_by_test_id("alert-take").click()
    status = sam.locator(f'[data-testid="alert"][data-conversation="{handed}"]').get_by_test_id("alert-status")
    expect(status).to_have_text(re.compile(r"Alex already has this conversation|Assigned to Alex\."))
    alex_status = alex.locator(f'[data-testid="alert"][data-conversation="{handed}"]').get_by_test_id("alert-status")
    expect(alex_status).to_have_text("Assigned to you.")  # told live, by the event of the assignment
    assert Conversation.objects.get(public_id=handed).assignee.username == ALEX[0]


def test_an_alert_for_a_conversation_someone_closes_stops_offering_take(site, customer_page, new_context):
    """Alex closes the handed-over conversation from elsewhere: Sam's alert says so at once, offers no "Assign to me",
    and goes away."""
    from support.desk import inbox

    alex = alex_user()
    sam = staff_with_alerts(new_context, site)
    sam.wait_for_timeout(1000)
    handed = answered_conversation(customer_page, "ines@example.com", "Where is my order SU-41620?")
    hand_over(handed, "The customer asked for a person")
    alert = sam.locator(f'[data-testid="alert"][data-conversation="{handed}"]')
    expect(alert.get_by_test_id("alert-take")).to_be_visible(timeout=10000)

    inbox.conversation_close(conversation=Conversation.objects.get(public_id=handed), actor=alex)
    events.publisher.flush()
    expect(alert.get_by_test_id("alert-status")).to_have_text("Alex closed it.")
    expect(alert.get_by_test_id("alert-take")).to_be_hidden()
    expect(row(sam, handed)).to_have_count(0)  # and the open inbox no longer lists it
    screens(sam, "notify-closed-elsewhere")
    expect(alert).to_have_count(0, timeout=15000)
