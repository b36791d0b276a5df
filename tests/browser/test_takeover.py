"""A staff member takes a conversation over from the console, talks with the customer, and hands it back.
Each of the two is one notice in both transcripts; after the hand-back the agent answers what is new only."""

import json
import re

import pytest
from playwright.sync_api import expect

from support.models import Message, Run
from tests.browser.conftest import STAFF_NAME, agent_messages, ask, open_widget, shot, widget_conversation

# Also run on PostgreSQL in CI: what two people, two sockets or the database's own SQL decide here
# (docs/testing.md#on-postgresql-and-the-scale-out-test).
pytestmark = pytest.mark.every_database

SAME_DOCUMENT = "window.__sameDocument = true"


def test_takeover_and_hand_back(site, customer_page, staff_page):
    customer = customer_page("ines@example.com")
    open_widget(customer)
    customer.evaluate(SAME_DOCUMENT)
    ask(customer, "Where is my order SU-41620?")
    conversation = widget_conversation(customer)["id"]
    expect(agent_messages(customer)).to_have_count(1, timeout=20000)
    expect(agent_messages(customer)).to_contain_text("SU-41620")

    # The staff member finds the conversation in the list and opens it.
    frames: list[dict] = []  # what the console's socket received, to know when it has heard of something
    staff = staff_page("/console/", before=lambda p: p.on(
        "websocket", lambda ws: ws.on("framereceived", lambda data: frames.append(json.loads(data)))))
    row = staff.locator(f'[data-testid="conversation-row"][data-conversation="{conversation}"]')
    expect(row.get_by_test_id("conversation-link")).to_have_text("Ines Duarte")
    row.get_by_test_id("conversation-link").click()
    staff.wait_for_url(f"**/console/conversations/{conversation}/")
    expect(staff.get_by_test_id("connection-status")).to_have_attribute("data-state", "live")
    staff.evaluate(SAME_DOCUMENT)
    # The reply box is there; sending from it would assign the conversation (tests/browser/test_desk.py).
    expect(staff.get_by_test_id("reply-hint")).to_contain_text("Sending assigns the conversation to you")

    expect(staff.get_by_test_id("take-over-button")).to_have_text("Assign to me")
    staff.get_by_test_id("take-over-button").click()
    expect(staff.get_by_test_id("conversation-status")).to_have_attribute("data-status", "taken_over")
    expect(staff.get_by_test_id("conversation-status")).to_have_text(f"With {STAFF_NAME}")
    expect(staff.get_by_test_id("conversation-assignee")).to_have_text("Assigned to you · the agent is silent")
    expect(staff.get_by_test_id("reply-form")).to_be_visible()
    expect(staff.get_by_test_id("take-over-button")).to_be_hidden()

    panel, banner = customer.get_by_test_id("widget-panel"), customer.get_by_test_id("widget-handover-banner")
    notices = customer.locator('[data-testid="widget-message"][data-author="system"]')
    expect(panel).to_have_attribute("data-conversation", "taken_over")
    expect(notices).to_have_count(1)  # told once, in the transcript; no banner repeats it
    expect(notices).to_have_text(f"{STAFF_NAME} from our team has joined the conversation.")
    expect(banner).to_be_hidden()
    expect(customer.get_by_test_id("widget-subtitle")).to_have_text(f"{STAFF_NAME} from our team is here")
    expect(staff.get_by_test_id("reply-send")).to_have_text("Send")

    staff_says = "Hi Ines, I'm Sam from the Sundry team. I can ask the courier to hold it at the depot for you."
    staff.get_by_test_id("reply-input").fill(staff_says)
    staff.get_by_test_id("reply-send").click()
    from_staff = customer.locator('[data-testid="widget-message"][data-author="staff"]')
    expect(from_staff).to_have_count(1)
    expect(from_staff.locator(".sw-bubble")).to_have_text(staff_says)
    expect(from_staff.locator(".sw-name")).to_have_text(f"{STAFF_NAME} · Sundry team")
    expect(staff.locator('[data-testid="message"][data-author="staff"] [data-testid="message-text"]')) \
        .to_have_text(staff_says)

    runs_before = Run.objects.filter(conversation__public_id=conversation).count()
    customer_says = "Yes please, hold it at the depot. I can collect it on Saturday."
    ask(customer, customer_says)
    in_console = staff.locator('[data-testid="message"][data-author="customer"] [data-testid="message-text"]')
    expect(in_console).to_have_count(2)
    expect(in_console.last).to_have_text(customer_says)
    # The list-level update that follows the customer's message has reached the console ...
    seq = Message.objects.get(conversation__public_id=conversation, content=customer_says).seq
    for _ in range(100):
        if any(f.get("type") == "conversation.updated" and f.get("conversation") == conversation
               and f.get("seq", 0) >= seq for f in frames):
            break
        staff.wait_for_timeout(50)
    else:
        raise AssertionError("the console heard of no conversation.updated after the customer's message")
    # ... and the conversation is still taken over by this staff member, who can answer again.
    expect(staff.get_by_test_id("conversation-status")).to_have_attribute("data-status", "taken_over")
    expect(staff.get_by_test_id("reply-form")).to_be_visible()
    expect(staff.get_by_test_id("hand-back-button")).to_be_visible()
    # The agent keeps out of it while a person has the conversation.
    assert Run.objects.filter(conversation__public_id=conversation).count() == runs_before
    expect(agent_messages(customer)).to_have_count(1)
    shot(customer, "takeover-widget")
    shot(staff, "takeover-console")

    staff.get_by_test_id("hand-back-button").click()
    expect(staff.get_by_test_id("conversation-status")).to_have_attribute("data-status", "open")
    expect(staff.get_by_test_id("reply-hint")).to_contain_text("Sending assigns the conversation to you")  # no longer theirs
    expect(staff.get_by_test_id("conversation-assignee")).to_have_text("")
    expect(panel).to_have_attribute("data-conversation", "open")
    expect(banner).to_be_hidden()
    expect(notices).to_have_count(2)
    expect(notices.last).to_contain_text(f"{STAFF_NAME} from our team took care of the conversation above")
    # What the customer wrote to Sam was for Sam: the agent answers from the customer's next message on.
    customer.wait_for_timeout(1500)
    expect(agent_messages(customer)).to_have_count(1)
    ask(customer, "And where is my order SU-41620 now?")
    expect(agent_messages(customer)).to_have_count(2, timeout=20000)
    expect(agent_messages(customer).last).to_contain_text("SU-41620")
    expect(staff.locator('[data-testid="message"][data-author="agent"][data-role="assistant"] '
                         '[data-testid="message-text"]').last).to_contain_text("SU-41620")
    shot(customer, "takeover-widget-handed-back")
    shot(staff, "takeover-console-handed-back")
    assert customer.evaluate("window.__sameDocument") and staff.evaluate("window.__sameDocument")

    authors = list(Message.objects.filter(conversation__public_id=conversation, role__in=("user", "assistant"))
                   .exclude(content="").exclude(content__isnull=True).order_by("seq").values_list("author", flat=True))
    assert authors == ["customer", "agent", "system", "staff", "customer", "system", "customer", "agent"], authors


def test_a_detail_read_older_than_the_take_over_does_not_undo_it(site, customer_page, staff_page):
    """The conversation page reads the conversation again after its socket (re)connects. A read the server
    answered before the take over, arriving after it, must not show the conversation as open again (and take
    the reply box away from the person who just took it over)."""
    customer = customer_page("ines@example.com")
    open_widget(customer)
    ask(customer, "Where is my order SU-41620?")
    conversation = widget_conversation(customer)["id"]
    expect(agent_messages(customer)).to_have_count(1, timeout=20000)

    reads, late = [], []

    def second_read_late(route):  # the page's second read is made now and delivered when the test says
        reads.append(route.request.url)
        if len(reads) == 2:
            late.append((route, route.fetch()))
        else:
            route.continue_()

    staff = staff_page(f"/console/conversations/{conversation}/", before=lambda p: p.route(
        re.compile(rf"/api/staff/conversations/{conversation}$"), second_read_late))
    expect(staff.get_by_test_id("take-over-button")).to_be_visible()
    for _ in range(100):  # the read after replay.done
        if late:
            break
        staff.wait_for_timeout(50)
    assert late, reads
    staff.get_by_test_id("take-over-button").click()
    expect(staff.get_by_test_id("reply-form")).to_be_visible()
    expect(customer.get_by_test_id("widget-panel")).to_have_attribute("data-conversation", "taken_over")

    # The late read arrives ("open", as it was when it was read); the page is done with it when it has drawn
    # the run panel again (the end of every read; nothing else redraws it once the run has stopped).
    staff.get_by_test_id("run-panel-body").evaluate("(body) => { body.firstElementChild.dataset.before = '1'; }")
    route, response = late[0]
    route.fulfill(response=response)
    staff.wait_for_function("""() => !document.querySelector('[data-testid="run-panel-body"] > [data-before]')""")
    expect(staff.get_by_test_id("reply-form")).to_be_visible()  # still theirs to answer
    staff.get_by_test_id("reply-input").fill("Sam here: I'm looking into it now.")
    staff.get_by_test_id("reply-send").click()
    expect(customer.locator('[data-testid="widget-message"][data-author="staff"]')).to_have_text(
        re.compile("I'm looking into it now"))
    expect(staff.get_by_test_id("conversation-status")).to_have_attribute("data-status", "taken_over")
    expect(staff.get_by_test_id("hand-back-button")).to_be_visible()
    shot(staff, "takeover-console-after-late-read")
