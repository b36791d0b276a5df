"""The second language: a customer whose browser speaks German gets the widget in German (its own words, the
step labels, the server's refusals by code, the hours), and the desk's fixed texts (the hand-over notice) in
German, written by the server in the language the widget told it; the shop's data-lang wins over the browser.
Screenshots: var/screenshots/language-*.png at 1280 and 390 px.
"""

from __future__ import annotations

import re

from playwright.sync_api import expect

from support.models import Conversation
from tests.browser.conftest import agent_messages, ask, open_widget, widget_conversation
from tests.browser.inbox_helpers import SCREENSHOTS

GERMAN = {"locale": "de-DE", "timezone_id": "Europe/Berlin"}


def snap(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"language-{name}.png"))


def test_a_german_browser_gets_the_widget_and_the_desks_notices_in_german(customer_page):
    customer = customer_page(viewport={"width": 1280, "height": 800}, **GERMAN)
    launcher = customer.get_by_test_id("widget-button")
    expect(launcher.locator(".sw-launcher-label")).to_have_text("Chatten Sie mit uns")
    expect(launcher).to_have_accessible_name("Chatten Sie mit uns")  # its visible label
    open_widget(customer)
    expect(customer.get_by_test_id("widget-subtitle")).to_have_text("Unser Assistent antwortet in Sekunden")
    expect(customer.get_by_test_id("widget-input")).to_have_attribute("placeholder", "Nachricht schreiben…")
    expect(customer.get_by_test_id("widget-suggestion").first).to_have_text("Wo ist meine Bestellung?")
    expect(customer.get_by_test_id("widget-hours")).to_contain_text("Zeiten: Mo–Fr 08:00–20:00")

    ask(customer, "I want a full refund for order SU-41533.")  # above the agent's ceiling: handed to a person
    conversation = widget_conversation(customer)["id"]  # created with that message, in German from the start
    notice = customer.locator('[data-testid="widget-message"][data-author="system"]')
    expect(notice).to_have_text("Ich habe Ihr Anliegen an unser Support-Team weitergegeben. Jemand aus unserem "
                                "Team antwortet Ihnen hier.", timeout=20000)
    expect(customer.get_by_test_id("widget-subtitle")).to_have_text("Wartet auf jemanden aus unserem Team")
    assert Conversation.objects.get(public_id=conversation).language == "de"
    snap(customer, "de-1280")

    customer.get_by_test_id("widget-input").fill("x" * 5000)  # refused by the server, explained in German
    customer.get_by_test_id("widget-send").click()
    expect(customer.get_by_test_id("widget-error")).to_have_text(
        "Ihre Nachricht ist zu lang – bitte bleiben Sie unter 4.000 Zeichen.")
    customer.set_viewport_size({"width": 390, "height": 844})
    customer.wait_for_timeout(400)  # the panel settles from the dock into the sheet
    expect(customer.get_by_test_id("widget-close")).to_have_text("Zurück zum Shop")
    snap(customer, "de-390")


def test_the_shops_data_lang_wins_over_the_browser(customer_page, site):
    customer = customer_page(**GERMAN)
    customer.goto(site + "/?lang=en")
    expect(customer.locator(".sw-launcher-label")).to_have_text("Chat with us")
    customer.goto(site + "/?lang=fr")  # a language the widget does not speak: the browser's next
    expect(customer.locator(".sw-launcher-label")).to_have_text("Chatten Sie mit uns")


PHONE = {"width": 390, "height": 844}
GERMAN_DAYS = ("Mo.", "Di.", "Mi.", "Do.", "Fr.", "Sa.", "So.")


def test_a_german_customer_reads_their_list_dates_and_times_in_german_and_the_title_whole(customer_page):
    customer = customer_page("ines@example.com", viewport=PHONE, has_touch=True, is_mobile=True, **GERMAN)
    open_widget(customer)
    title = customer.locator("#sw-title")
    expect(title).to_have_text("Sundry-Support")
    snap(customer, "de-open-390")
    assert title.evaluate("e => e.scrollWidth <= e.clientWidth"), "the title is cut on a phone"
    expect(customer.get_by_test_id("widget-hours")).to_contain_text("Mo–Fr 08:00–20:00")
    ask(customer, "Wo ist meine Bestellung SU-41620?")
    expect(agent_messages(customer)).to_have_count(1, timeout=20000)
    expect(agent_messages(customer).first).to_contain_text("Ihre Bestellung SU-41620 ist mit")  # told: German
    times = customer.locator(".sw-time").all_inner_texts()
    assert times and all(re.fullmatch(r"[0-2]\d:[0-5]\d", t) for t in times), times  # 24-hour, no AM/PM

    history = customer.get_by_test_id("widget-history-button")
    expect(history).to_have_accessible_name("Ihre Gespräche")
    history.click()
    view = customer.get_by_test_id("widget-history")
    expect(view.locator(".sw-history-title")).to_have_text("Ihre Gespräche")
    expect(customer.get_by_test_id("widget-new-conversation")).to_have_text("Neues Gespräch beginnen")
    current = view.locator(".sw-history-row--current")
    expect(current.locator(".sw-history-status")).to_have_text("Dieses Gespräch")
    when = current.locator(".sw-history-when").inner_text()
    assert when.startswith(GERMAN_DAYS) and not re.search(r"AM|PM", when), when
    snap(customer, "de-history-390")
    from tests.browser.test_a11y import serious_violations

    assert serious_violations(customer) == []
