"""Bidirectional controls in text the console shows (an agent's answer, text saved before the edge cleaned
it) never turn the text around: they are shown as visible marks, and each text sets its own direction."""

from playwright.sync_api import expect

from support.desk import services
from support.models import Conversation, Message
from tests.browser.conftest import api_conversation, open_widget, shot

REVERSED = "Refund of \u202e12345 EUR\u202c approved"  # shown by a browser as "Refund of RUE 54321 approved"


def test_a_right_to_left_override_is_shown_as_a_mark_not_obeyed(customer_page, staff_page):
    customer = customer_page()
    public_id = api_conversation(customer)["id"]  # an agent answer is saved in it before the customer writes
    open_widget(customer)
    services.message_append(conversation=Conversation.objects.get(public_id=public_id), author=Message.AGENT,
                            wire={"role": "assistant", "content": REVERSED})
    staff = staff_page(f"/console/conversations/{public_id}/")
    text = staff.get_by_test_id("message-text").filter(has_text="Refund of")
    expect(text).to_have_text("Refund of [U+202E]12345 EUR[U+202C] approved")
    assert text.evaluate("el => getComputedStyle(el).unicodeBidi") == "plaintext"
    shot(staff, "console-bidi-controls-visible")
