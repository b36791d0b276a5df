"""Opening the widget creates nothing: the customer sees the greeting and the composer, the database has no new
conversation and no staff inbox shows one. The first send creates the conversation with that message, and the
agent answers. A photo as the first thing waits in the tray; sending it creates the conversation. Screenshots at
1280 and 390 px: tests/artifacts/widget-lazy-*.png; axe finds nothing serious."""

from __future__ import annotations

from playwright.sync_api import expect

from support.models import Conversation, Message
from tests.browser.conftest import agent_messages, ask, open_widget, shot, stored_conversation, widget_conversation
from tests.browser.test_a11y import serious_violations
from tests.browser.test_attachments import cracked_photo

DESKTOP, PHONE = {"width": 1280, "height": 900}, {"width": 390, "height": 844}


def newest_conversation() -> int:
    return Conversation.objects.order_by("-pk").values_list("pk", flat=True).first() or 0


def inbox_ids(staff, site) -> set[str]:
    """Every conversation the staff inbox lists (closed ones too), as the console reads them."""
    response = staff.request.get(site + "/api/staff/inbox?filter=all&limit=200")
    assert response.ok, response.text()
    return {row["id"] for row in response.json()["conversations"]}


def test_opening_the_widget_creates_nothing_and_the_first_send_creates_the_conversation(site, customer_page,
                                                                                        staff_page):
    before = newest_conversation()
    staff = staff_page("/console/", viewport=DESKTOP)
    listed = inbox_ids(staff, site)

    for label, viewport in (("390", PHONE), ("1280", DESKTOP)):  # the phone's page is left open, unused
        customer = customer_page(viewport=viewport)
        open_widget(customer)
        expect(customer.get_by_test_id("widget-panel")).to_have_attribute("data-connection", "new")
        expect(customer.locator(".sw-intro")).to_be_visible()  # the greeting
        expect(customer.get_by_test_id("widget-suggestion").first).to_be_visible()
        expect(customer.get_by_test_id("widget-input")).to_be_visible()
        expect(customer.get_by_test_id("widget-error")).to_be_hidden()
        shot(customer, f"widget-lazy-opened-{label}")
        problems = serious_violations(customer)
        assert problems == [], [p["nodes"] for p in problems]
        assert stored_conversation(customer) is None

    # Nothing in the database, nothing for staff: the open widget above is only a page.
    assert newest_conversation() == before
    staff.reload()
    expect(staff.get_by_test_id("connection-status")).to_have_attribute("data-state", "live")
    assert inbox_ids(staff, site) == listed

    question = "Where is my order SU-41210?"
    ask(customer, question)
    mine = customer.locator('[data-testid="widget-message"][data-author="customer"]')
    expect(mine).to_have_count(1)
    expect(mine).to_have_attribute("data-seq", "2", timeout=15000)  # saved with its conversation: seq 1 is the prompt
    answer = agent_messages(customer)
    expect(answer).to_have_count(1, timeout=20000)
    expect(answer).to_contain_text("SU-41210")

    conversation = widget_conversation(customer)["id"]
    created = Conversation.objects.filter(pk__gt=before)
    assert [str(c.public_id) for c in created] == [conversation]  # one conversation, this one
    said = Message.objects.filter(conversation__public_id=conversation, author=Message.CUSTOMER)
    assert [m.content for m in said] == [question]
    assert inbox_ids(staff, site) == listed | {conversation}
    expect(staff.locator(f'[data-testid="conversation-row"][data-conversation="{conversation}"]')).to_be_visible(
        timeout=10000)  # the console's live inbox shows it once there is something in it
    shot(customer, "widget-lazy-answered-1280")
    assert serious_violations(customer) == []
    customer.set_viewport_size(PHONE)
    customer.wait_for_timeout(250)
    shot(customer, "widget-lazy-answered-390")


def test_a_photo_as_the_first_thing_waits_in_the_tray_and_its_send_creates_the_conversation(site, customer_page,
                                                                                             tmp_path):
    before = newest_conversation()
    customer = customer_page(viewport=PHONE)
    open_widget(customer)
    customer.get_by_test_id("widget-file-input").set_input_files(cracked_photo(tmp_path / "speaker.jpg"))
    expect(customer.get_by_test_id("widget-chip")).to_have_count(1)
    assert newest_conversation() == before and stored_conversation(customer) is None  # chosen, not sent
    shot(customer, "widget-lazy-photo-chosen-390")

    customer.get_by_test_id("widget-input").fill("It arrived like this")
    customer.get_by_test_id("widget-send").click()
    tile = customer.locator('[data-testid="widget-message"][data-author="customer"]').get_by_test_id("widget-file")
    expect(tile).to_have_count(1, timeout=15000)
    conversation = widget_conversation(customer)["id"]
    assert [str(c.public_id) for c in Conversation.objects.filter(pk__gt=before)] == [conversation]
    (message,) = Message.objects.filter(conversation__public_id=conversation, author=Message.CUSTOMER)
    assert message.content == "It arrived like this" and message.attachments.count() == 1
    expect(customer.get_by_test_id("widget-panel")).to_have_attribute("data-connection", "open")
    shot(customer, "widget-lazy-photo-sent-390")


def test_a_first_send_whose_answer_is_lost_is_sent_again_and_saved_once(site, customer_page):
    before, lost = newest_conversation(), []

    def lose_the_first_answer(route):
        if route.request.method == "POST" and not lost:
            route.fetch()  # the desk saves the conversation and the message...
            lost.append(route.request.post_data_json)
            route.abort()  # ...and the answer never reaches the page, as when the network drops
        else:
            route.continue_()

    customer = customer_page(before=lambda p: p.route("**/api/conversations", lose_the_first_answer))
    open_widget(customer)
    ask(customer, "Where is my order SU-41210?")
    mine = customer.locator('[data-testid="widget-message"][data-author="customer"]')
    expect(mine).to_have_attribute("data-seq", "2", timeout=20000)  # sent again, then saved (once)
    expect(agent_messages(customer)).to_have_count(1, timeout=20000)
    expect(mine).to_have_count(1)
    conversation = widget_conversation(customer)["id"]
    assert len(lost) == 1
    assert [str(c.public_id) for c in Conversation.objects.filter(pk__gt=before)] == [conversation]
    (message,) = Message.objects.filter(conversation__public_id=conversation, author=Message.CUSTOMER)
    assert message.client_id == lost[0]["message"]["client_id"]  # the retry said the same client_id
