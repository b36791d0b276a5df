"""A person typing: while a staff member writes in the console's reply box, the customer's widget says
"Sam is typing…"; it goes when the reply arrives (or a few seconds after the last keystroke).
Screenshots: var/screenshots/typing-*.png."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.browser.conftest import STAFF_NAME, agent_messages, ask, open_widget, widget_conversation
from tests.browser.inbox_helpers import SCREENSHOTS

DESKTOP = {"width": 1280, "height": 800}


def test_the_customer_sees_a_person_typing_and_then_their_reply(site, customer_page, staff_page):
    customer = customer_page("ines@example.com", viewport={"width": 390, "height": 844})
    open_widget(customer)
    ask(customer, "Where is my order SU-41620?")
    conversation = widget_conversation(customer)["id"]
    expect(agent_messages(customer)).to_have_count(1, timeout=20000)

    staff = staff_page(f"/console/conversations/{conversation}/", viewport=DESKTOP)
    typing = customer.get_by_test_id("widget-staff-typing")
    expect(typing).to_be_hidden()
    staff.get_by_test_id("reply-input").press_sequentially("Hi Ines, Sam here", delay=30)
    expect(typing).to_be_visible()
    expect(typing).to_have_text(f"{STAFF_NAME} is typing…")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    customer.screenshot(path=str(SCREENSHOTS / "typing-390.png"))
    staff.get_by_test_id("reply-send").click()
    expect(customer.locator('[data-testid="widget-message"][data-author="staff"]')).to_have_count(1)
    expect(typing).to_be_hidden()  # the reply itself ends it
