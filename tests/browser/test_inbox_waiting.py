"""The inbox row of a case that waits: "Waiting for the seller" with its deadline, the "Waiting" filter, and the
marks every row carries: the channel (widget / e-mail), the language, and an e-mail's subject (also in the
conversation's header). Screenshots at 1280 and 390 px go to var/screenshots/inbox-waiting-*.png; axe finds
nothing serious."""

from __future__ import annotations

import uuid
from datetime import timedelta

from django.utils import timezone
from playwright.sync_api import expect

from support.desk import services
from support.models import Conversation, Customer, InboundEmail, Message
from tests.browser.inbox_helpers import login, row, screens
from tests.browser.test_a11y import serious_violations
from tests.browser.test_conversation_page import DESKTOP, PHONE

SUBJECT = "Paket nicht angekommen <b>SU-41207</b>"


def waiting_email_case() -> Conversation:
    """Maya wrote by e-mail, in German; the seller was asked and has until two days from now."""
    conversation = services.conversation_start(customer=Customer.objects.get(email="maya@example.com"))
    message = services.message_append(conversation=conversation, author=Message.CUSTOMER, channel=Message.EMAIL,
                                      wire={"role": "user", "content": "Mein Paket ist nicht angekommen."})
    InboundEmail.objects.create(mail_id=f"{uuid.uuid4()}@mail.example", source="imap", sender="maya@example.com",
                                subject=SUBJECT, raw=b"", outcome=InboundEmail.STARTED, conversation=conversation,
                                message=message)
    Conversation.objects.filter(pk=conversation.pk).update(
        language="de", email_subject=SUBJECT, waiting_for="seller", waiting_until=timezone.now() + timedelta(hours=40))
    return Conversation.objects.get(pk=conversation.pk)


def widget_case() -> Conversation:
    conversation = services.conversation_start(customer=Customer.objects.get(email="tom@example.com"))
    services.message_append(conversation=conversation, author=Message.CUSTOMER,
                            wire={"role": "user", "content": "Where is my order?"})
    return conversation


def test_the_inbox_row_shows_the_wait_its_deadline_the_channel_language_and_subject(site, new_context):
    waiting, widget = waiting_email_case(), widget_case()
    inbox = login(new_context, site, "/console/", viewport=DESKTOP)
    mine = row(inbox, str(waiting.public_id))
    expect(mine.get_by_test_id("inbox-status")).to_have_text("Waiting for the seller")
    expect(mine.get_by_test_id("row-waiting-until")).to_contain_text("until ")
    expect(mine.get_by_test_id("row-channel")).to_have_text("E-mail")
    expect(mine.get_by_test_id("row-language")).to_have_text("Language: DE")
    expect(mine.get_by_test_id("row-subject")).to_have_text(f"Subject: {SUBJECT}")  # shown as text, escaped
    other = row(inbox, str(widget.public_id))
    expect(other.get_by_test_id("row-channel")).to_have_text("Widget")
    expect(other.get_by_test_id("row-subject")).to_have_count(0)
    expect(other.get_by_test_id("row-waiting-until")).to_have_count(0)

    inbox.get_by_test_id("filter-waiting").click()
    expect(row(inbox, str(widget.public_id))).to_have_count(0)
    expect(mine).to_be_visible()
    screens(inbox, "inbox-waiting")
    assert serious_violations(inbox) == []

    phone = login(new_context, site, "/console/?filter=waiting", viewport=PHONE)
    expect(row(phone, str(waiting.public_id)).get_by_test_id("row-waiting-until")).to_be_visible()
    assert phone.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]
    assert serious_violations(phone) == []

    page = login(new_context, site, f"/console/conversations/{waiting.public_id}/", viewport=DESKTOP)
    expect(page.get_by_test_id("conversation-subject")).to_have_text(f"Subject: {SUBJECT}")
    expect(page.get_by_test_id("conversation-status")).to_contain_text("Waiting for the seller until")
    screens(page, "conversation-waiting")
    found = serious_violations(page)
    assert found == [], [v["nodes"] for v in found]
