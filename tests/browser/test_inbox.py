"""The inbox as a support agent on a shift uses it: who wrote, about which order, what they said last, how long
they have waited, what is unread; filters, search, sort, the keyboard; take, assign to a colleague (two staff
browsers, live), close and reopen; the page at phone width; an unknown conversation is a 404 page."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from support.models import Conversation
from tests.browser.conftest import agent_messages, ask, open_widget, refundable_again, widget_conversation
from tests.browser.inbox_helpers import ALEX, alex_user, login, page_width, row, screens


def chat(customer_page, email, text, answers=1):
    page = customer_page(email)
    open_widget(page)
    ask(page, text)
    conversation = widget_conversation(page)["id"]
    expect(agent_messages(page)).to_have_count(answers, timeout=20000)
    return page, conversation


def test_inbox_rows_filters_search_sort_and_keyboard(site, customer_page, new_context):
    refundable_again("SU-41310")
    maya, maya_conv = chat(customer_page, None, "My parcel SU-41310 never came.")  # a refund waits for approval
    ines, ines_conv = chat(customer_page, "ines@example.com", "Where is my order SU-41620?")

    staff = login(new_context, site)
    maya_row, ines_row = row(staff, maya_conv), row(staff, ines_conv)
    expect(maya_row.get_by_test_id("conversation-link")).to_have_text("Maya Okafor")
    expect(maya_row.get_by_test_id("row-email")).to_have_text("maya@example.com")
    expect(maya_row.get_by_test_id("row-orders")).to_have_text("SU-41310")
    expect(maya_row.get_by_test_id("inbox-status")).to_have_attribute("data-status", "waiting_approval")
    expect(maya_row.get_by_test_id("inbox-status")).to_have_text("Waiting for approval")
    expect(maya_row.get_by_test_id("unread-count")).to_have_attribute("data-count", "1")
    expect(maya_row.get_by_test_id("last-message")).to_contain_text("Agent:")
    expect(maya_row.get_by_test_id("row-assignee")).to_have_text("Unassigned")
    expect(ines_row.get_by_test_id("conversation-link")).to_have_text("Ines Duarte")
    expect(ines_row.get_by_test_id("row-orders")).to_have_text("SU-41620")

    # Live: the customer writes again; the row moves up, its preview and unread count follow.
    ask(ines, "Could you also tell me when it arrives? Thanks")
    expect(ines_row.get_by_test_id("unread-count")).to_have_attribute("data-count", re.compile("[23]"), timeout=10000)
    expect(staff.get_by_test_id("conversation-row").first).to_have_attribute("data-conversation", ines_conv)
    screens(staff, "inbox")

    # Filters.
    staff.get_by_test_id("filter-waiting_approval").click()
    expect(maya_row).to_be_visible()
    expect(ines_row).to_have_count(0)
    staff.get_by_test_id("filter-open").click()
    expect(ines_row).to_be_visible()

    # Search: an order number, an e-mail, words the customer wrote.
    search = staff.get_by_test_id("inbox-search")
    search.fill("SU-41620")
    expect(ines_row).to_be_visible()
    expect(maya_row).to_have_count(0)
    search.fill("maya@exa")
    expect(maya_row).to_be_visible()
    expect(ines_row).to_have_count(0)
    search.fill("when it arrives")
    expect(ines_row).to_be_visible()
    expect(maya_row).to_have_count(0)
    screens(staff, "inbox-search")
    search.fill("")
    expect(maya_row).to_be_visible()

    # Sort by waiting time: waiting customers first, longest first.
    staff.get_by_test_id("inbox-sort").select_option("waiting")
    # The list asks the server again in the new order: wait for it (a timeout fails the test) rather than
    # read the rows of the order before.
    staff.wait_for_function("""() => {
        const waits = [...document.querySelectorAll("[data-testid=conversation-row]")]
            .map((r) => (r.querySelector("[data-testid=waiting]") ? 1 : 0));
        return waits.length > 1 && waits.every((w, i) => i === 0 || waits[i - 1] >= w);
    }""", timeout=10000)
    waits = staff.get_by_test_id("conversation-row").evaluate_all(
        "(rows) => rows.map((r) => r.querySelector('[data-testid=waiting]') ? 1 : 0)")
    assert waits == sorted(waits, reverse=True), waits
    staff.get_by_test_id("inbox-sort").select_option("updated")
    # The server's answer may add rows the other order did not list: the first row is known once it is in.
    expect(staff.get_by_test_id("conversation-list")).to_have_attribute("aria-busy", "false")

    # The keyboard: "/" searches, Escape goes to the first row, j/k move, Enter opens.
    staff.locator("body").click(position={"x": 5, "y": 300})
    staff.keyboard.press("/")
    expect(search).to_be_focused()
    staff.keyboard.press("Escape")
    first = staff.get_by_test_id("conversation-link").first
    expect(first).to_be_focused()
    staff.keyboard.press("j")
    expect(staff.get_by_test_id("conversation-link").nth(1)).to_be_focused()
    staff.keyboard.press("k")
    expect(first).to_be_focused()
    assert staff.get_by_test_id("conversation-row").first.get_attribute("data-conversation") == ines_conv
    staff.keyboard.press("Enter")
    staff.wait_for_url(f"**/console/conversations/{ines_conv}/")
    expect(staff.get_by_test_id("connection-status")).to_have_attribute("data-state", "live")

    # Opening it read it: back in the inbox, no unread count for this staff member.
    staff.wait_for_timeout(1500)
    # "n": the next conversation of the inbox as last shown.
    staff.locator("body").click(position={"x": 5, "y": 5})
    staff.keyboard.press("n")
    staff.wait_for_url(re.compile(r"/console/conversations/(?!%s)" % ines_conv))
    staff.goto(site + "/console/")
    expect(ines_row.get_by_test_id("conversation-link")).to_be_visible()
    expect(ines_row.get_by_test_id("unread-count")).to_have_count(0)
    assert page_width(staff) <= 1280


def test_take_assign_and_see_it_live_in_a_colleagues_inbox(site, customer_page, new_context):
    alex_user()
    _, conversation = chat(customer_page, "tom@example.com", "Hello, where is my order SU-41444?")
    sam = login(new_context, site)
    alex = login(new_context, site, username=ALEX[0], password=ALEX[1])
    sam_row, alex_row = row(sam, conversation), row(alex, conversation)
    expect(alex_row.get_by_test_id("row-assignee")).to_have_text("Unassigned")

    expect(sam_row.get_by_test_id("take-button")).to_have_text("Assign to me")
    sam_row.get_by_test_id("take-button").click()
    expect(sam_row.get_by_test_id("row-assignee")).to_have_text("Assigned to you")
    expect(alex_row.get_by_test_id("row-assignee")).to_have_text("Assigned to Sam")  # live, no reload
    expect(alex_row.get_by_test_id("inbox-status")).to_have_text("With Sam")  # the agent is silent
    expect(alex_row.get_by_test_id("take-button")).to_have_count(0)

    # Sam gives it to Alex; Alex finds it under "Mine".
    sam_row.get_by_test_id("assign-select").select_option(ALEX[0])
    expect(alex_row.get_by_test_id("row-assignee")).to_have_text("Assigned to you")
    expect(sam_row.get_by_test_id("row-assignee")).to_have_text("Assigned to Alex")
    expect(sam_row.get_by_test_id("inbox-status")).to_have_text("With Alex")
    alex.get_by_test_id("filter-mine").click()
    expect(alex_row).to_be_visible()
    # Only Alex's (other tests may have given Alex some), once the list has been read again for the filter:
    # a snapshot taken at the click could hold the rows of the filter before.
    expect(alex.get_by_test_id("row-assignee").filter(has_not_text="Assigned to you")).to_have_count(0)
    expect(alex.get_by_test_id("row-assignee").first).to_have_text("Assigned to you")
    screens(alex, "inbox-assigned-to-me")
    assert Conversation.objects.get(public_id=conversation).assignee.username == ALEX[0]

    # Unassigning hands it back to the agent, with nobody, in both inboxes.
    alex_row.get_by_test_id("assign-select").select_option("")
    expect(alex_row).to_have_count(0)  # no longer "mine"
    expect(sam_row.get_by_test_id("row-assignee")).to_have_text("Unassigned")
    expect(sam_row.get_by_test_id("inbox-status")).to_have_text(re.compile("^(With the agent|Agent working|Resolved)$"))


def test_close_and_reopen_and_a_customer_who_writes_reopens_it(site, customer_page, new_context):
    customer, conversation = chat(customer_page, "ines@example.com", "Where is my order SU-41620?")
    staff = login(new_context, site)
    r = row(staff, conversation)
    r.get_by_test_id("close-button").click()
    expect(r).to_have_count(0)  # out of the open ones
    staff.get_by_test_id("filter-closed").click()
    expect(r.get_by_test_id("inbox-status")).to_have_attribute("data-status", "closed")
    expect(r.get_by_test_id("closed-by")).to_have_text("closed by Sam")
    screens(staff, "inbox-closed")
    r.get_by_test_id("reopen-button").click()
    expect(r).to_have_count(0)
    staff.get_by_test_id("filter-open").click()
    expect(r).to_be_visible()

    r.get_by_test_id("close-button").click()
    expect(r).to_have_count(0)
    ask(customer, "Sorry, one more question about SU-41620")
    expect(r).to_be_visible(timeout=10000)  # back among the open ones, live
    expect(r.get_by_test_id("inbox-status")).not_to_have_attribute("data-status", "closed")


def test_the_inbox_fits_a_phone(site, customer_page, new_context):
    chat(customer_page, "ines@example.com", "Where is my order SU-41620?")
    staff = login(new_context, site, viewport={"width": 390, "height": 844})
    expect(staff.get_by_test_id("conversation-row").first).to_be_visible()
    assert page_width(staff) <= 390, page_width(staff)
    expect(staff.get_by_test_id("take-button").first).to_be_visible()
    screens(staff, "inbox-phone")


def test_an_unknown_conversation_is_a_404_page(site, new_context):
    staff = login(new_context, site)
    response = staff.goto(site + "/console/conversations/00000000-0000-0000-0000-000000000000/")
    assert response.status == 404
    expect(staff.get_by_test_id("not-found")).to_contain_text("There is no such conversation")
    screens(staff, "console-404")
    staff.get_by_test_id("back-to-inbox").click()
    staff.wait_for_url("**/console/")


def test_the_demo_staff_user_sees_the_shop_in_the_admin(site, new_context):
    staff = login(new_context, site)
    staff.goto(site + "/admin/")
    expect(staff.locator("body")).not_to_contain_text("permission to view or edit anything")
    expect(staff.locator("#content")).to_contain_text("Orders")
    staff.goto(site + "/admin/support/order/?q=SU-41310")
    expect(staff.locator("#result_list")).to_contain_text("SU-41310")
    screens(staff, "admin-orders")


def test_a_list_read_before_a_close_does_not_bring_the_closed_row_back(site, customer_page, new_context):
    """A row is read again when an event names its conversation. When such an answer, read before the close,
    arrives after the row has gone (closed, so no longer among the open ones), it does not put the row back."""
    customer, conversation = chat(customer_page, "ines@example.com", "Where is my order SU-41620?")
    staff = login(new_context, site)
    r = row(staff, conversation)
    expect(r.get_by_test_id("close-button")).to_be_visible()
    held = []  # (route, the server's answer when it was asked)
    one_row = re.compile(r"/api/staff/inbox\?.*ids=")
    staff.route(one_row, lambda route: held.append((route, route.fetch())) if not held else route.continue_())
    ask(customer, "And when does SU-41620 arrive?")  # its events read the row again: held, as it was then
    expect(agent_messages(customer)).to_have_count(2, timeout=20000)  # the run is over: it may be closed
    for _ in range(200):  # the route's handler runs while Playwright waits
        if held:
            break
        staff.wait_for_timeout(25)
    assert held, "the customer's message made the inbox read the row again"

    r.get_by_test_id("close-button").click()
    expect(r).to_have_count(0)  # closed: out of the open ones
    route, answer = held[0]
    route.fulfill(response=answer)  # the row as it was before the close
    staff.wait_for_timeout(300)  # the late answer has been read
    expect(r).to_have_count(0)
