"""Conversations that outlive the tab, in Chromium against the running system: a customer who leaves gets one
e-mail with the replies they missed (caught by the session's SMTP server), follows its link in a second
browser and sees the whole conversation, and writes on from there; a signed-in customer picks an earlier
conversation from the widget's list. Screenshots at 1280 and 390 px go to var/screenshots/."""

from __future__ import annotations

import re
import time
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone
from playwright.sync_api import expect

from support.customers import notify
from support.desk import services, takeover
from support.live import events
from support.models import Conversation, FollowUp, Message
from tests.browser.conftest import agent_messages, ask, open_widget, widget_conversation
from tests.browser.inbox_helpers import screens


def staff_reply(conversation_id: str, text: str) -> None:
    """What the console does when Sam answers: take the conversation over, write to the customer."""
    conversation = Conversation.objects.get(public_id=conversation_id)
    sam = get_user_model().objects.get(username="staff")
    if conversation.status != Conversation.TAKEN_OVER:
        with transaction.atomic():
            takeover.conversation_take_over(conversation=conversation, user=sam)
    takeover.conversation_staff_reply(conversation=conversation, user=sam, text=text)
    events.publisher.flush()


def widget(page):
    return page.get_by_test_id("widget-host")


def messages(page):
    return page.get_by_test_id("widget-message")


def wait_until(check, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError("timed out")


def _text_of(mail) -> str:
    return "".join(p.get_payload(decode=True).decode(errors="replace") for p in mail.walk() if not p.is_multipart())


def test_a_customer_who_left_gets_one_email_and_its_link_opens_the_whole_conversation(site, customer_page, mailbox,
                                                                                     new_context):
    settings.DESK_PUBLIC_URL = site  # the beat's links point at this desk
    customer = customer_page("tom@example.com", timezone_id="Europe/Berlin")
    open_widget(customer)
    ask(customer, "Where is my order SU-41444?")
    expect(agent_messages(customer)).to_have_count(1, timeout=20000)
    conversation_id = widget_conversation(customer)["id"]

    def last_seen():
        return FollowUp.objects.filter(conversation__public_id=conversation_id).values_list("seen_at", flat=True).first()

    seen_while_open = last_seen()  # the socket may have marked him present already (on resume)
    customer.context.close()  # Tom leaves: his widget's socket closes, and the server records when
    wait_until(lambda: last_seen() is not None and last_seen() != seen_while_open)
    staff_reply(conversation_id, "Hello Tom, Sam here. I've asked the carrier to deliver it tomorrow morning.")
    staff_reply(conversation_id, "I'll check on it again tomorrow afternoon.")

    # The session's other conversations (Tom's included) may have replies waiting too: only this one counts.
    def to_tom(sent):
        return [s.to for s in sent if s.conversation == str(conversation_id)]

    assert to_tom(notify.send_reply_emails(now=timezone.now() + timedelta(minutes=5))) == []  # he may come back
    sent = notify.send_reply_emails(now=timezone.now() + timedelta(minutes=settings.REPLY_EMAIL_AFTER_MINUTES + 1))
    assert to_tom(sent) == ["tom@example.com"]
    assert to_tom(notify.send_reply_emails(now=timezone.now() + timedelta(minutes=60))) == []  # once
    wait_until(lambda: mailbox.to("tom@example.com"))
    mail = [m for m in mailbox.to("tom@example.com") if "replies from Sundry support" in m["Subject"]
            and "Hello Tom, Sam here" in _text_of(m)]  # this conversation's e-mail, not an earlier test's
    assert len(mail) == 1 and mail[0]["Subject"] == "2 new replies from Sundry support"
    parts = {p.get_content_type(): p.get_payload(decode=True).decode() for p in mail[0].walk()
             if not p.is_multipart()}
    text = parts["text/plain"]
    assert "Sam from Sundry support" in text and "deliver it tomorrow morning" in text and "(Europe/Berlin)" in text
    link = re.search(re.escape(site) + r"/c/\S+/", text).group(0)

    # The e-mail as the customer's mail program shows it.
    inbox_view = new_context().new_page()
    inbox_view.set_content(parts["text/html"])
    screens(inbox_view, "email-link-the-email")

    # Another device: a browser with nothing stored opens the link and sees the whole conversation.
    phone = new_context(timezone_id="Europe/Berlin").new_page()
    phone.goto(link)
    expect(phone.get_by_test_id("widget-panel")).to_have_attribute("data-connection", "open")
    expect(messages(phone)).to_have_count(5, timeout=10000)  # his question, the answer, "Sam has joined", two replies
    expect(messages(phone).first).to_have_text(re.compile("Where is my order SU-41444"))
    expect(phone.locator('[data-testid="widget-message"][data-author="staff"]')).to_have_count(2)
    expect(phone.get_by_test_id("widget-button")).to_be_hidden()  # the page is the conversation: nothing to close
    screens(phone, "email-link-conversation-page")

    # He writes on from there; the reply the staff member sees arrives in the same conversation.
    ask(phone, "Thank you, I'll be home.")
    expect(phone.locator('[data-testid="widget-message"][data-author="customer"]')).to_have_count(2)
    wait_until(lambda: Message.objects.filter(conversation__public_id=conversation_id, author=Message.CUSTOMER,
                                              content="Thank you, I'll be home.").exists())

    # The unsubscribe link asks first, then stops the e-mails.
    unsubscribe = re.search(re.escape(site) + r"/c/unsubscribe/\S+/", text).group(0)
    page = new_context().new_page()
    page.goto(unsubscribe)
    expect(page.get_by_test_id("unsubscribe")).to_have_attribute("data-state", "ask")
    page.get_by_test_id("unsubscribe-confirm").click()
    expect(page.get_by_test_id("unsubscribe")).to_have_attribute("data-state", "stopped")
    screens(page, "email-link-unsubscribed")
    page.get_by_test_id("unsubscribe-undo").click()  # the demo customer keeps getting them
    expect(page.get_by_test_id("unsubscribe")).to_have_attribute("data-state", "resumed")

    # A tampered link opens nothing, in plain words.
    broken = new_context().new_page()
    broken.goto(link[:-4] + "xyz/")
    expect(broken.get_by_test_id("link-invalid")).to_contain_text("This link no longer works")


def test_a_signed_in_customer_opens_an_earlier_conversation_from_the_widget(site, customer_page):
    first = customer_page("ines@example.com")
    open_widget(first)
    ask(first, "Where is my order SU-41620?")
    expect(agent_messages(first)).to_have_count(1, timeout=20000)
    earlier = widget_conversation(first)["id"]

    # Start a new one from the list; the earlier one stays there to go back to.
    first.get_by_test_id("widget-history-button").click()
    row = f'[data-testid="widget-history-row"][data-conversation="{earlier}"]'
    expect(first.locator(row)).to_have_count(1)
    first.get_by_test_id("widget-new-conversation").click()
    expect(messages(first)).to_have_count(0)
    ask(first, "Hello, a question about returns")
    expect(first.locator('[data-testid="widget-message"][data-author="customer"]')).to_have_count(1)
    wait_until(lambda: widget_conversation(first) and widget_conversation(first)["id"] != earlier)
    newer = widget_conversation(first)["id"]
    expect(agent_messages(first)).to_have_count(1, timeout=20000)

    # Another browser, signed in to the shop: both are listed, newest first; the earlier one opens whole.
    other = customer_page("ines@example.com")
    other.get_by_test_id("widget-button").click()
    other.get_by_test_id("widget-history-button").click()
    rows = other.get_by_test_id("widget-history-row")
    expect(rows.first).to_have_attribute("data-conversation", newer)
    expect(other.locator(row)).to_contain_text("SU-41620")
    screens(other, "email-link-past-conversations")
    other.locator(row).click()
    expect(other.get_by_test_id("widget-history")).to_have_count(0)
    expect(messages(other).first).to_have_text(re.compile("Where is my order SU-41620"))
    expect(agent_messages(other)).to_have_count(1)
    assert widget_conversation(other)["id"] == earlier
    screens(other, "email-link-past-conversation-opened")
