"""A customer who signs in with e-mail and order number after too many failed guesses from their address is
asked for a code: the widget asks for it to be e-mailed (a worker sends it), and the chat opens with it (the
widget side of the sign-in rules). The first message asks for it and goes with the code, saved once. When no code
can be asked for from here, the widget says so."""

from __future__ import annotations

import json
import re
import urllib.request

import redis
from playwright.sync_api import expect

from tests.browser.conftest import PORTS, agent_messages, ask, shot

MAYA, ORDER = "maya@example.com", "SU-41207"

# The demo page's script tag as a shop without logins writes it: e-mail and order number, no signed token.
BY_ORDER = f"""new MutationObserver((_, observer) => {{
    const tag = document.querySelector('script[src*="widget.js"]');
    if (tag) {{ delete tag.dataset.customerToken; tag.dataset.email = "{MAYA}"; tag.dataset.order = "{ORDER}";
               observer.disconnect(); }}
}}).observe(document, {{childList: true, subtree: true}});"""


def guess(site: str, order: str) -> int:
    return post(site, {"email": MAYA, "order_number": order})


def post(site: str, fields: dict) -> int:
    body = json.dumps(fields).encode()
    request = urllib.request.Request(site + "/api/conversations", data=body, method="POST",
                                     headers={"Content-Type": "application/json", "Origin": site})
    try:
        with urllib.request.urlopen(request, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_after_failed_guesses_the_widget_asks_for_the_emailed_code_and_opens_the_chat(customer_page, site, mailbox):
    signins = redis.Redis(port=PORTS["redis"])
    try:
        assert {guess(site, "SU-99999") for _ in range(5)} == {403}  # wrong orders from this address
        page = customer_page(before=lambda p: p.add_init_script(BY_ORDER), viewport={"width": 390, "height": 780})
        page.get_by_test_id("widget-button").click()
        panel = page.get_by_test_id("widget-panel")
        expect(panel).to_have_attribute("data-connection", "new")  # the chat starts with the first message
        ask(page, "Where is my order SU-41210?")
        form = page.get_by_test_id("widget-code-form")
        expect(form).to_be_visible()
        expect(form).to_contain_text(MAYA)
        page.wait_for_timeout(500)  # the panel fades in
        shot(page, "widget-signin-code-390")
        code = None
        for _ in range(50):
            if mailbox.to(MAYA):
                code = re.search(r"\b([0-9]{8})\b", mailbox.to(MAYA)[-1].get_payload()).group(1)
                break
            page.wait_for_timeout(100)
        assert code, "no code was e-mailed"
        page.get_by_test_id("widget-code-input").fill(code)
        page.get_by_test_id("widget-code-send").click()
        expect(form).to_have_count(0)
        expect(panel).to_have_attribute("data-connection", "open")
        # The message that asked for the sign-in went with the code: saved once, and answered.
        mine = page.locator('[data-testid="widget-message"][data-author="customer"]')
        expect(mine).to_have_count(1)
        expect(mine).to_have_attribute("data-seq", re.compile(r"^\d+$"))
        expect(agent_messages(page).last).to_contain_text("SU-41210", timeout=20000)
    finally:
        for key in signins.scan_iter("limits:signin:*"):  # the other tests sign in from this address too
            signins.delete(key)


def test_when_no_more_codes_can_be_asked_for_from_here_the_widget_says_so(customer_page, site):
    signins = redis.Redis(port=PORTS["redis"])
    try:
        assert {guess(site, "SU-99999") for _ in range(5)} == {403}
        asked = {post(site, {"email": f"someone{n}@example.com", "send_code": True}) for n in range(10)}
        assert asked == {202}  # SIGNIN_CODE_REQUESTS_PER_ADDRESS (10 an hour) spent from this address
        page = customer_page(before=lambda p: p.add_init_script(BY_ORDER))
        page.get_by_test_id("widget-button").click()
        ask(page, "Hello?")
        expect(page.get_by_test_id("widget-code-form")).to_be_visible()
        expect(page.get_by_test_id("widget-error")).to_contain_text("Too many sign-in codes asked for from here")
    finally:
        for key in signins.scan_iter("limits:signin:*"):
            signins.delete(key)
