"""One verb for ownership, seen by two staff members at once: "Assign to me" gives a person the conversation
and silences the agent ("With Sam" in the header and the inbox, "Assigned to you" for Sam), a colleague who
assigns it to themself is asked first and both pages follow live, "Hand back to the agent" undoes it, and a
closed conversation says "Closed" in the customer's other conversations too. Screenshots at 1280 and 390 px
go to var/screenshots/ownership-*.png; axe finds nothing serious."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from support.models import Conversation, Run
from tests.browser.conftest import STAFF_NAME
from tests.browser.inbox_helpers import ALEX, alex_user, login, row, screens
from tests.browser.test_a11y import serious_violations
from tests.browser.test_conversation_page import DESKTOP, handed_over

# Also run on PostgreSQL in CI: what two people, two sockets or the database's own SQL decide here
# (docs/testing.md#on-postgresql-and-the-scale-out-test).
pytestmark = pytest.mark.every_database

AGENT = re.compile("^(With the agent|Agent working)$")


def test_assign_to_me_silences_the_agent_and_a_colleague_sees_it_live(site, customer_page, new_context):
    alex_user()
    _, conversation = handed_over(customer_page)
    path = f"/console/conversations/{conversation}/"
    sam = login(new_context, site, path, viewport=DESKTOP)
    alex = login(new_context, site, path, username=ALEX[0], password=ALEX[1], viewport=DESKTOP)
    inbox = login(new_context, site, "/console/", username=ALEX[0], password=ALEX[1], viewport=DESKTOP)
    status, assigned = sam.get_by_test_id("conversation-status"), sam.get_by_test_id("conversation-assignee")
    expect(status).to_have_text("Needs a person")
    expect(sam.get_by_test_id("take-over-button")).to_have_text("Assign to me")
    expect(sam.get_by_test_id("hand-back-button")).to_have_text("Hand back to the agent")

    sam.get_by_test_id("take-over-button").click()
    expect(status).to_have_text(f"With {STAFF_NAME}")
    expect(assigned).to_have_text("Assigned to you · the agent is silent")
    expect(sam.get_by_test_id("take-over-button")).to_be_hidden()
    expect(sam.get_by_test_id("reply-input")).to_be_focused()
    fresh = Conversation.objects.get(public_id=conversation)
    assert (fresh.status, fresh.assignee.username) == (Conversation.TAKEN_OVER, "staff")
    assert not Run.objects.filter(conversation=fresh, status__in=Run.ACTIVE).exists()  # the agent is silent

    # Alex's page and inbox say so, live: Alex cannot reply over Sam, only assign it to themself.
    expect(alex.get_by_test_id("conversation-status")).to_have_text(f"With {STAFF_NAME}")
    expect(alex.get_by_test_id("conversation-assignee")).to_have_text(f"Assigned to {STAFF_NAME} · the agent is silent")
    expect(alex.get_by_test_id("reply-form")).to_be_hidden()
    expect(alex.get_by_test_id("reply-closed-note")).to_have_text(
        f"{STAFF_NAME} has this conversation. Assign it to yourself to reply.")
    expect(alex.get_by_test_id("take-over-button")).to_be_visible()
    inbox_row = row(inbox, conversation)
    expect(inbox_row.get_by_test_id("inbox-status")).to_have_text(f"With {STAFF_NAME}")
    expect(inbox_row.get_by_test_id("row-assignee")).to_have_text(f"Assigned to {STAFF_NAME}")
    screens(sam, "ownership-assigned-to-me")
    screens(alex, "ownership-colleague-has-it")
    screens(inbox, "ownership-inbox")
    assert serious_violations(alex) == []

    # Alex assigns it to themself: asked first (Sam has it); declining changes nothing.
    alex.once("dialog", lambda d: d.dismiss())
    alex.get_by_test_id("take-over-button").click()
    expect(alex.get_by_test_id("conversation-status")).to_have_text(f"With {STAFF_NAME}")
    asked = []
    alex.once("dialog", lambda d: (asked.append(d.message), d.accept()))
    alex.get_by_test_id("take-over-button").click()
    expect(alex.get_by_test_id("conversation-status")).to_have_text("With Alex")
    assert asked == [f"{STAFF_NAME} has this conversation. Assign it to you instead?"]
    expect(alex.get_by_test_id("conversation-assignee")).to_have_text("Assigned to you · the agent is silent")
    expect(status).to_have_text("With Alex")  # Sam's page, live
    expect(sam.get_by_test_id("reply-form")).to_be_hidden()
    expect(inbox_row.get_by_test_id("inbox-status")).to_have_text("With Alex")

    # Alex hands it back: the agent has it again, on both pages and in the inbox.
    alex.get_by_test_id("hand-back-button").click()
    expect(alex.get_by_test_id("conversation-status")).to_have_text(AGENT)
    expect(status).to_have_text(AGENT)
    expect(assigned).to_have_text("")
    expect(sam.get_by_test_id("reply-form")).to_be_visible()
    expect(inbox_row.get_by_test_id("inbox-status")).to_have_text(AGENT)
    expect(inbox_row.get_by_test_id("row-assignee")).to_have_text("Unassigned")
    assert Conversation.objects.get(public_id=conversation).assignee is None
    assert serious_violations(sam) == []


def test_a_closed_conversation_is_closed_everywhere(site, customer_page, new_context):
    from django.contrib.auth import get_user_model

    from support.desk import inbox, services
    from support.models import Customer, Message

    first = services.conversation_start(customer=Customer.objects.get(email="maya@example.com"))
    services.message_append(conversation=first, author=Message.CUSTOMER,
                            wire={"role": "user", "content": "Can I change the delivery address of SU-41310?"})
    inbox.conversation_close(conversation=first, actor=get_user_model().objects.get(username="staff"))
    earlier = str(first.public_id)
    _, later = handed_over(customer_page)  # Maya again, in a new conversation
    staff = login(new_context, site, f"/console/conversations/{later}/", viewport=DESKTOP)
    other = staff.locator('[data-testid="context-conversations"] li').filter(
        has=staff.locator(f'a[href*="{earlier}"]'))
    expect(other.get_by_test_id("context-conversation-status")).to_have_attribute("data-status", "closed")
    expect(other.get_by_test_id("context-conversation-status")).to_contain_text("Closed")
    screens(staff, "ownership-other-conversations")
    staff.goto(site + "/console/?filter=closed")
    expect(row(staff, earlier).get_by_test_id("inbox-status")).to_have_text("Closed")
    assert serious_violations(staff) == []


def test_assigning_a_conversation_waiting_for_an_approval_asks_first(site, new_context):
    from support.desk import services
    from support.models import Approval, Customer, Message
    from tests.desk_factories import pending_refund_approval

    conversation = services.conversation_start(customer=Customer.objects.get(email="tom@example.com"))
    services.message_append(conversation=conversation, author=Message.CUSTOMER,
                            wire={"role": "user", "content": "My parcel SU-41310 never came."})
    approval = pending_refund_approval(conversation)
    staff = login(new_context, site, "/console/?filter=waiting_approval", viewport=DESKTOP)
    take = row(staff, str(conversation.public_id)).get_by_test_id("take-button")
    asked = []
    staff.once("dialog", lambda d: (asked.append(d.message), d.dismiss()))
    take.click()
    expect(take).to_be_enabled()
    staff.wait_for_timeout(500)  # a request, had one gone, would have been answered by now
    assert asked and "ends that request" in asked[0]
    assert Approval.objects.get(pk=approval.pk).decided_at is None  # declined: nothing changed
    assert Conversation.objects.get(pk=conversation.pk).assignee is None
