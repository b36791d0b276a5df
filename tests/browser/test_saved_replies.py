"""Saved replies by typing "/" in the reply box: the list filters as the person types, arrows move, Enter or
Tab put the reply in place of "/words", Esc closes, a click or a tap picks one; nothing is sent meanwhile.
The box is a combobox owning a listbox. Screenshots at 1280x800 and 390x844 go to
tests/artifacts/saved-replies-*.png; axe finds nothing serious with the list open."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from support.models import Customer, Message, SavedReply
from tests.browser.conftest import shot
from tests.browser.test_a11y import serious_violations

WINDOW = ("Refund window", "You can ask for a refund within 30 days of delivery; I've checked and your order is within it.")
DEPOT = ("Parcel held at the depot", "I've asked the courier to hold your parcel at their depot. You can collect it "
                                     "there with your order number and an ID.")
PHONE = {"width": 390, "height": 844}


@pytest.fixture
def conversation(site):
    from tests.desk_factories import start_conversation

    for title, body in (WINDOW, DEPOT):
        SavedReply.objects.update_or_create(title=title, defaults={"body": body})
    return start_conversation(Customer.objects.get(email="maya@example.com"))


def open_box(staff_page, conversation, **context_options):
    page = staff_page(f"/console/conversations/{conversation.public_id}/", **context_options)
    # The replies are read (the select holds them after its first option).
    expect(page.get_by_test_id("saved-reply-select").locator("option")).to_have_count(SavedReply.objects.count() + 1)
    box = page.get_by_test_id("reply-input")
    box.click()
    return page, box


def options(page):
    return page.get_by_test_id("slash-list").get_by_role("option")


def test_typing_a_slash_offers_saved_replies_filtered_and_put_in_by_keyboard(conversation, staff_page):
    page, box = open_box(staff_page, conversation)
    pop = page.get_by_test_id("slash-pop")
    expect(box).to_have_attribute("role", "combobox")
    expect(box).to_have_attribute("aria-expanded", "false")

    # A "/" inside a word (a link, a date) opens nothing; at the start or after a space it does.
    box.type("and/or ")
    expect(pop).to_be_hidden()
    box.fill("")
    box.type("Hello /")
    expect(pop).to_be_visible()
    expect(box).to_have_attribute("aria-expanded", "true")
    expect(options(page)).to_have_count(SavedReply.objects.count())
    first, second = options(page).nth(0), options(page).nth(1)
    expect(first).to_have_attribute("aria-selected", "true")
    expect(box).to_have_attribute("aria-activedescendant", first.get_attribute("id"))
    box.press("ArrowDown")
    expect(second).to_have_attribute("aria-selected", "true")
    expect(first).to_have_attribute("aria-selected", "false")
    expect(box).to_have_attribute("aria-activedescendant", second.get_attribute("id"))
    box.press("ArrowUp")
    box.press("ArrowUp")  # round to the last one
    expect(options(page).last).to_have_attribute("aria-selected", "true")

    # "/ref": the replies whose title or text has "ref", the titles first.
    box.type("ref")
    expect(options(page).filter(has_text=WINDOW[0])).to_have_count(1)
    expect(options(page).filter(has_text=DEPOT[0])).to_have_count(0)
    for text in options(page).all_inner_texts():
        assert "ref" in text.lower()
    expect(options(page).first).to_have_attribute("aria-selected", "true")  # filtering starts again at the top
    shot(page, "saved-replies-filtered-1280")
    assert serious_violations(page) == []

    # Only in a reply's text: "/collect" finds the depot reply; Enter puts it in place of "/collect", unsent.
    box.fill("Hello ")
    box.type("/collect")
    expect(options(page)).to_have_count(1)
    expect(options(page).first).to_contain_text(DEPOT[0])
    box.press("Enter")
    expect(box).to_have_value("Hello " + DEPOT[1])
    expect(pop).to_be_hidden()
    expect(box).to_have_attribute("aria-expanded", "false")
    expect(box).to_be_focused()
    assert not Message.objects.filter(conversation=conversation, author=Message.STAFF).exists()

    # Tab puts it in too, and the focus stays in the box.
    box.fill("")
    box.type("/window")
    box.press("Tab")
    expect(box).to_have_value(WINDOW[1])
    expect(box).to_be_focused()

    # Nothing matching: the list says so; Enter closes it and does not send "/qzx".
    box.fill("")
    box.type("/qzx")
    expect(page.get_by_test_id("slash-empty")).to_have_text("No saved reply matches “qzx”.")
    expect(options(page)).to_have_count(0)
    box.press("Enter")
    expect(pop).to_be_hidden()
    expect(box).to_have_value("/qzx")
    assert not Message.objects.filter(conversation=conversation, author=Message.STAFF).exists()


def test_esc_closes_the_list_and_a_click_picks_one(conversation, staff_page):
    page, box = open_box(staff_page, conversation)
    pop = page.get_by_test_id("slash-pop")
    box.type("Thanks /dep")
    expect(pop).to_be_visible()
    box.press("Escape")
    expect(pop).to_be_hidden()
    expect(box).to_have_value("Thanks /dep")  # the words stay as typed
    box.type("o")  # the same "/" stays closed while typing on
    expect(pop).to_be_hidden()
    box.type(" /")  # a new one opens the list again
    expect(pop).to_be_visible()

    box.fill("")
    box.type("/")
    options(page).filter(has_text=DEPOT[0]).click()
    expect(box).to_have_value(DEPOT[1])
    expect(pop).to_be_hidden()
    expect(box).to_be_focused()
    # Sending it sends the reply, not a "/" command.
    page.get_by_test_id("reply-send").click()
    expect(page.locator('[data-testid="message"][data-author="staff"] [data-testid="message-text"]')).to_have_text(DEPOT[1])


def test_on_a_phone_a_tap_picks_a_saved_reply(conversation, staff_page):
    page, box = open_box(staff_page, conversation, viewport=PHONE, has_touch=True, is_mobile=True)
    box.type("/ref")
    pop = page.get_by_test_id("slash-pop")
    expect(pop).to_be_visible()
    expect(box).to_have_value("/ref")
    expect(box).to_be_focused()
    expect(options(page).filter(has_text=WINDOW[0])).to_have_count(1)
    width = page.evaluate("() => document.scrollingElement.scrollWidth")
    assert width <= PHONE["width"], f"the page scrolls sideways with the list open ({width} px)"
    box_left = box.bounding_box()["x"]
    pop_box = pop.bounding_box()
    assert pop_box["x"] >= box_left - 1 and pop_box["x"] + pop_box["width"] <= PHONE["width"]
    shot(page, "saved-replies-filtered-390")
    assert serious_violations(page) == []
    options(page).filter(has_text=WINDOW[0]).tap()
    expect(box).to_have_value(WINDOW[1])
    expect(pop).to_be_hidden()


def test_a_list_opened_before_the_replies_arrive_shows_them_when_they_do(conversation, staff_page):
    held = []

    def hold(page):  # the page's request for its saved replies waits until the test lets it go
        page.route("**/saved-replies", lambda route: held.append(route))

    page = staff_page(f"/console/conversations/{conversation.public_id}/", before=hold)
    box = page.get_by_test_id("reply-input")
    box.click()
    box.type("/ref")
    expect(page.get_by_test_id("slash-empty")).to_have_text("No saved replies yet: add them under “Manage saved replies”.")
    assert len(held) == 1
    held[0].continue_()
    expect(options(page).filter(has_text=WINDOW[0])).to_have_count(1)  # the open list follows, no key pressed
    expect(page.get_by_test_id("slash-empty")).to_be_hidden()
    box.press("Enter")
    expect(box).to_have_value(re.compile(r"^(I've issued|You can ask)"))
