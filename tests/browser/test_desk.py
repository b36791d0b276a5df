"""A support agent on a shift finishes a ticket the agent handed over: the hand-over lands in the queue with a
summary (no "approve the hand-over" click), the customer's orders are beside the conversation, a refund above
the agent's ceiling is issued by a lead with context, a note is left for colleagues, a saved reply is edited
and sent (which takes the conversation over), and the conversation is handed back. The customer is told each
step once. Full-page screenshots at 1280 and 390 px go to var/screenshots/desk-*.png."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import expect

from support.models import Message, Note, Refund, StaffAction
from tests.browser.conftest import agent_messages, ask, open_widget, widget_conversation

SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


def screens(page, name: str) -> None:
    """Full-page screenshots at desktop and phone width; at 390 px nothing may be wider than the screen."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for width, height in ((1280, 900), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(200)
        page.screenshot(path=str(SCREENSHOTS / f"{name}-{width}.png"), full_page=True)
        if width == 390:
            assert page.evaluate("() => document.documentElement.scrollWidth") <= 390, f"{name} is wider than a phone"
    page.set_viewport_size({"width": 1280, "height": 900})


def notices(page):
    return page.locator('[data-testid="widget-message"][data-author="system"]')


def test_a_hand_over_is_worked_to_the_end_from_the_console(site, customer_page, staff_page):
    customer = customer_page()
    open_widget(customer)
    ask(customer, "The monitor from order SU-41533 arrived cracked. I want a full refund.")
    conversation = widget_conversation(customer)["id"]

    # One message tells the customer; the agent adds no goodbye of its own and no banner repeats it.
    expect(notices(customer)).to_have_count(1, timeout=20000)
    expect(notices(customer)).to_have_text(re.compile("A member of our team will reply here"))
    expect(customer.get_by_test_id("widget-subtitle")).to_have_text("Waiting for a member of our team")
    expect(customer.get_by_test_id("widget-handover-banner")).to_be_hidden()
    assert agent_messages(customer).count() == 0

    # The lead opens it: in the queue already, with the summary and the order beside it.
    staff = staff_page(f"/console/conversations/{conversation}/")
    expect(staff.get_by_test_id("conversation-status")).to_have_attribute("data-status", "needs_attention")
    expect(staff.get_by_test_id("conversation-status")).to_have_text("Needs a person")
    # Why, said once: in the summary (the header's reason line would repeat it).
    expect(staff.get_by_test_id("handover-left")).to_contain_text("Refund of 480.00 EUR on SU-41533 is above")
    expect(staff.get_by_test_id("attention-reason")).to_be_hidden()
    expect(staff.get_by_test_id("handover-summary")).to_contain_text("The customer wants")
    expect(staff.get_by_test_id("handover-summary")).to_contain_text("Left for you")
    expect(staff.get_by_test_id("conversation-approvals-empty")).to_be_visible()  # no approval to click
    expect(staff.get_by_test_id("context-customer-name")).to_have_text("Maya Okafor")
    expect(staff.get_by_test_id("conversation-customer")).to_have_text("Maya Okafor")
    order = staff.locator('[data-testid="context-order"][data-order="SU-41533"]')
    expect(order).to_have_attribute("open", "")  # named in the conversation: open
    expect(order.get_by_test_id("context-refundable")).to_have_text("480.00 EUR")
    expect(order.get_by_test_id("context-parcel")).to_contain_text("DP55141533")
    expect(staff.get_by_test_id("run-status")).to_have_text("Handed to a person")
    screens(staff, "desk-handover")

    # A note for colleagues (never sent to the customer or the agent).
    staff.get_by_test_id("note-input").fill("Cracked on arrival; the customer has photos. Agreed 300.00 by phone.")
    staff.get_by_test_id("note-input").press("Control+Enter")
    expect(staff.get_by_test_id("note-text")).to_have_text(re.compile("Agreed 300.00 by phone"))

    # A refund above the agent's 150.00 ceiling: a lead may, within the balance.
    order.get_by_test_id("refund-open").click()
    amount = order.get_by_test_id("refund-amount")
    expect(amount).to_have_value("480.00")
    expect(amount).to_be_focused()
    amount.fill("300.00")
    order.get_by_test_id("refund-reason").fill("Monitor arrived cracked: partial refund agreed with the customer")
    expect(order.get_by_test_id("refund-submit")).to_have_text("Refund 300.00 EUR")
    order.get_by_test_id("refund-submit").click()
    confirm = staff.get_by_test_id("refund-confirm")  # above STAFF_REFUND_CONFIRM_ABOVE: said in words first
    expect(confirm.locator("h2")).to_have_text("Refund 300.00 EUR on SU-41533 to Maya Okafor?")
    confirm.get_by_test_id("refund-confirm-confirm").click()
    expect(order.get_by_test_id("context-refundable")).to_have_text("180.00 EUR")
    expect(staff.locator('[data-testid="trace-action"][data-kind="refund"][data-status="done"]')).to_have_count(1)
    expect(notices(customer).last).to_have_text(re.compile("We've refunded 300.00 EUR on order SU-41533"))
    assert [str(r.amount) for r in Refund.objects.filter(order__number="SU-41533")] == ["300.00"]
    screens(staff, "desk-refund")

    # A saved reply, inserted and adapted, then sent: sending assigns the conversation to Sam.
    staff.get_by_test_id("saved-reply-select").select_option(label="Refund issued")
    staff.get_by_test_id("saved-reply-insert").click()
    box = staff.get_by_test_id("reply-input")
    expect(box).to_be_focused()
    expect(box).to_have_value(re.compile("^I've issued the refund"))
    box.press("End")
    box.type(" It's 300.00 EUR, as we agreed.")
    expect(staff.get_by_test_id("reply-send")).to_have_text("Send")
    expect(staff.get_by_test_id("reply-hint")).to_contain_text("Sending assigns the conversation to you")
    box.press("Enter")
    expect(staff.get_by_test_id("conversation-status")).to_have_attribute("data-status", "taken_over")
    expect(staff.get_by_test_id("conversation-status")).to_have_text("With Sam")
    expect(staff.get_by_test_id("conversation-assignee")).to_have_text("Assigned to you · the agent is silent")
    expect(notices(customer).last).to_have_text("Sam from our team has joined the conversation.")
    from_staff = customer.locator('[data-testid="widget-message"][data-author="staff"]')
    expect(from_staff).to_have_count(1)
    expect(from_staff).to_contain_text("It's 300.00 EUR, as we agreed.")
    expect(customer.get_by_test_id("widget-subtitle")).to_have_text("Sam from our team is here")

    # "Thanks Sam" is for Sam: after the hand-back the agent does not answer it.
    ask(customer, "Thanks Sam, that's fair.")
    expect(staff.locator('[data-testid="message"][data-author="customer"]')).to_have_count(2)
    staff.get_by_test_id("hand-back-button").click()
    expect(staff.get_by_test_id("conversation-status")).to_have_attribute("data-status", "open")
    expect(staff.get_by_test_id("conversation-status")).to_have_text(re.compile("^(With the agent|Agent working)$"))
    expect(notices(customer).last).to_have_text(re.compile("Sam from our team took care of the conversation above"))
    customer.wait_for_timeout(2500)
    assert agent_messages(customer).count() == 0
    ask(customer, "One more thing: where is my order SU-41210?")
    expect(agent_messages(customer)).to_have_count(1, timeout=20000)
    expect(agent_messages(customer)).to_contain_text("SU-41210")
    expect(agent_messages(customer)).not_to_contain_text(re.compile("welcome", re.I))
    screens(customer, "desk-widget")
    screens(staff, "desk-handed-back")

    system = list(Message.objects.filter(conversation__public_id=conversation, author="system", role="assistant")
                  .order_by("seq").values_list("content", flat=True))
    assert len(system) == 4, system  # hand-over, refund, joined, handed back: one each
    assert Note.objects.filter(conversation__public_id=conversation).count() == 1
    assert StaffAction.objects.filter(conversation__public_id=conversation, status="done").count() == 1


def test_saved_replies_are_managed_from_the_console(site, customer_page, staff_page):
    customer = customer_page("tom@example.com")
    open_widget(customer)
    ask(customer, "Hello, is anyone there?")
    conversation = widget_conversation(customer)["id"]
    expect(agent_messages(customer)).to_have_count(1, timeout=20000)
    staff = staff_page(f"/console/conversations/{conversation}/")
    staff.get_by_test_id("saved-reply-manage").locator("summary").click()
    staff.get_by_test_id("saved-reply-new").click()
    expect(staff.get_by_test_id("saved-reply-title")).to_be_focused()
    staff.get_by_test_id("saved-reply-title").fill("Weekend hours")
    staff.get_by_test_id("saved-reply-body").fill("Our team answers on weekends from 10:00 to 16:00.")
    staff.get_by_test_id("saved-reply-save").click()
    expect(staff.get_by_test_id("saved-reply-select").locator("option", has_text="Weekend hours")).to_have_count(1)
    staff.get_by_test_id("saved-reply-select").select_option(label="Weekend hours")
    staff.get_by_test_id("saved-reply-select").press("Enter")  # keyboard: Enter inserts
    expect(staff.get_by_test_id("reply-input")).to_have_value("Our team answers on weekends from 10:00 to 16:00.")
    screens(staff, "desk-saved-replies")
