"""A customer writes by e-mail: the provider posts the mail to the live site's webhook, the agent answers in
the worker, and staff see the conversation with each message's channel ("By e-mail" on the customer's mail
and on the answer, which goes back by e-mail), "Show original", and the note that the conversation sees no
order yet. Screenshots at 1280 and 390 px go to var/screenshots/inbound-email-*.png; axe finds nothing
serious."""

from __future__ import annotations

import base64
import json
import urllib.request

from playwright.sync_api import expect

from support.models import InboundEmail
from tests.browser.conftest import ENV
from tests.browser.inbox_helpers import login, screens
from tests.browser.test_a11y import serious_violations
from tests.browser.test_conversation_page import DESKTOP
from tests.mail_factories import mail


def post_to_webhook(site: str, raw: bytes) -> int:
    request = urllib.request.Request(site + "/email/inbound/postmark/", method="POST",
                                     data=json.dumps({"RawEmail": raw.decode(), "Headers": []}).encode(),
                                     headers={"Content-Type": "application/json", "Authorization": "Basic " +
                                              base64.b64encode(ENV["INBOUND_WEBHOOK_SECRET"].encode()).decode()})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status


def test_a_conversation_that_came_by_email_shows_its_channel_and_its_original(site, new_context):
    raw = mail(sender="Nina Park <nina.park@elsewhere.example>", to="support@sundry.example",
               subject="Do you ship to Norway?",
               text="Hello, do you ship to Oslo, and how long does it take?\n\nThanks,\nNina\n\n"
                    "On Monday, Sundry wrote:\n> Our autumn sale starts today.")
    assert post_to_webhook(site, raw) == 200
    record = InboundEmail.objects.select_related("conversation").get(sender="nina.park@elsewhere.example")
    assert record.outcome == InboundEmail.STARTED
    page = login(new_context, site, f"/console/conversations/{record.conversation.public_id}/", viewport=DESKTOP)

    customer = page.locator('[data-testid=message][data-author=customer]')
    expect(customer).to_have_count(1)
    expect(customer.get_by_test_id("message-text")).to_have_text("Hello, do you ship to Oslo, and how long does it take?")
    expect(customer.get_by_test_id("message-channel")).to_contain_text("By e-mail")
    original = customer.get_by_test_id("message-original")
    expect(original).to_have_text("Show original")
    expect(page.get_by_test_id("context-unverified")).to_contain_text("has not given an order number")

    # The agent answers (the real worker and the model stand-in); the answer goes back by e-mail.
    answer = page.locator('[data-testid=message][data-author=agent]').filter(has=page.get_by_test_id("message-text"))
    expect(answer.first).to_be_visible(timeout=30000)
    expect(answer.first.get_by_test_id("message-channel")).to_have_text("By e-mail")

    screens(page, "inbound-email-conversation")
    assert serious_violations(page) == []
    page.set_viewport_size({"width": 390, "height": 844})
    assert serious_violations(page) == []

    # "Show original": the mail as it came, quote and signature included, as plain text.
    with page.context.expect_page() as opened:
        original.click()
    shown = opened.value
    shown.wait_for_load_state()
    body = shown.locator("body").inner_text()
    assert "> Our autumn sale starts today." in body and "Subject: Do you ship to Norway?" in body
