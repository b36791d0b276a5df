"""Gated refunds across two browsers: the customer in the shop's widget, a staff member in the console.
Neither page is reloaded: every change reaches them over their websockets."""

import re
from decimal import Decimal

import pytest
from playwright.sync_api import expect

from support.models import Approval, Refund
from tests.browser.conftest import (
    STAFF_NAME,
    agent_messages,
    api_conversation,
    ask,
    open_widget,
    refundable_again,
    shot,
    widget_conversation,
)
from tests.browser.test_approval_cards import snap

# Also run on PostgreSQL in CI: what two people, two sockets or the database's own SQL decide here
# (docs/testing.md#on-postgresql-and-the-scale-out-test).
pytestmark = pytest.mark.every_database

SAME_DOCUMENT = "window.__sameDocument = true"  # gone if the page reloads or navigates


def test_the_refund_flow_across_two_browsers(site, customer_page, staff_page):
    refundable_again("SU-41310")  # whatever ran before in this session
    staff = staff_page("/console/")
    staff.evaluate(SAME_DOCUMENT)
    customer = customer_page()
    open_widget(customer)
    customer.evaluate(SAME_DOCUMENT)

    ask(customer, "My parcel SU-41310 never came.")
    conversation = widget_conversation(customer)["id"]  # created by that first message
    banner = customer.get_by_test_id("widget-approval-banner")
    expect(banner).to_be_visible(timeout=20000)
    expect(banner).to_contain_text("Our team is reviewing your request")
    # The agent says a person decides, and promises nothing before they have.
    expect(agent_messages(customer)).to_have_count(1)
    expect(agent_messages(customer)).to_contain_text("asked our team to approve a refund of 64.00 EUR")
    expect(agent_messages(customer)).not_to_contain_text("I've refunded")
    shot(customer, "refund-customer-waiting")

    # The staff member's queue shows the request as it is made.
    card = staff.get_by_test_id("approval-queue").get_by_test_id("approval-card").filter(has_text="SU-41310")
    expect(card).to_have_count(1, timeout=10000)
    expect(card).to_have_attribute("data-status", "pending")
    # No code tag in the title row: the tool's name only in the title's tooltip.
    expect(card.get_by_test_id("approval-tool")).to_have_count(0)
    expect(card.get_by_test_id("approval-summary")).to_have_attribute("title", "The agent's call: issue_refund")
    expect(card.get_by_test_id("approval-summary")).to_have_text(
        "Refund 64.00 EUR on SU-41310 — parcel not received, marked delivered 5 days ago")
    expect(card.get_by_test_id("approve-button")).to_have_text("Approve 64.00 EUR")
    row = staff.locator(f'[data-testid="conversation-row"][data-conversation="{conversation}"]')
    expect(row).to_be_visible()
    assert int(staff.get_by_test_id("approvals-badge").get_attribute("data-count")) >= 1
    shot(staff, "refund-console-pending")

    card.get_by_test_id("approve-button").click()
    expect(card).to_have_attribute("data-status", "approved")
    expect(card.get_by_test_id("approval-decision")).to_have_text("Approved as requested")
    expect(card.get_by_test_id("approval-decided-by")).to_have_text(STAFF_NAME)

    # The customer's panel follows: the banner goes, the agent says what was done.
    expect(agent_messages(customer)).to_have_count(2, timeout=20000)
    answer = agent_messages(customer).last
    expect(answer).to_contain_text("refunded 64.00 EUR")
    expect(banner).to_be_hidden()
    expect(customer.get_by_test_id("widget-panel")).to_have_attribute("data-conversation", "open")
    shot(customer, "refund-customer-refunded")
    shot(staff, "refund-console-approved")
    assert customer.evaluate("window.__sameDocument") and staff.evaluate("window.__sameDocument")

    refunds = list(Refund.objects.filter(order__number="SU-41310"))
    assert [r.amount for r in refunds] == [Decimal("64.00")]
    approval = Approval.objects.get(run__conversation__public_id=conversation)
    assert approval.decision == Approval.APPROVED and approval.decided_by.first_name == STAFF_NAME


def test_the_reject_flow(site, customer_page, staff_page):
    refundable_again("SU-41402")
    customer = customer_page()
    conversation = api_conversation(customer)["id"]  # the conversation's page watches before the customer writes
    open_widget(customer)
    customer.evaluate(SAME_DOCUMENT)
    staff = staff_page(f"/console/conversations/{conversation}/")
    staff.evaluate(SAME_DOCUMENT)

    ask(customer, "My order SU-41402 arrived cracked.")
    banner = customer.get_by_test_id("widget-approval-banner")
    expect(banner).to_be_visible(timeout=20000)

    card = staff.get_by_test_id("conversation-approvals").get_by_test_id("approval-card")
    expect(card).to_have_count(1, timeout=10000)
    expect(card).to_have_attribute("data-status", "pending")
    expect(card.get_by_test_id("approval-summary")).to_contain_text("Refund 129.00 EUR on SU-41402")
    expect(staff.get_by_test_id("run-status")).to_have_attribute("data-status", "awaiting_approval")

    reason = "we need a photo of the cracked item and its packaging first"
    card.get_by_test_id("reject-button").click()
    card.get_by_test_id("reason-input").fill(reason)
    shot(staff, "reject-console-reason")
    snap(staff, "approval-card-conversation-page")
    card.get_by_test_id("reject-confirm-button").click()

    expect(card).to_have_attribute("data-status", "rejected")
    expect(card.get_by_test_id("approval-decision")).to_have_text("Rejected")
    expect(card.get_by_test_id("approval-decided-by")).to_have_text(STAFF_NAME)
    expect(card.get_by_test_id("approval-reason")).to_have_text(reason)
    expect(card.get_by_test_id("approve-button")).to_have_count(0)

    expect(agent_messages(customer)).to_have_count(2, timeout=20000)
    answer = agent_messages(customer).last
    expect(answer).to_contain_text(reason)
    expect(answer).not_to_contain_text("I've refunded")
    expect(banner).to_be_hidden()
    shot(customer, "reject-customer-told")
    # The console's transcript has the same answer, and the run ended.
    expect(staff.locator('[data-testid="message"][data-author="agent"] [data-testid="message-text"]').last) \
        .to_contain_text(reason, timeout=10000)
    expect(staff.get_by_test_id("run-status")).to_have_attribute("data-status", "stopped")
    shot(staff, "reject-console-decided")
    assert customer.evaluate("window.__sameDocument") and staff.evaluate("window.__sameDocument")

    assert not Refund.objects.filter(order__number="SU-41402").exists()
    approval = Approval.objects.get(run__conversation__public_id=conversation)
    assert (approval.decision, approval.reason, approval.decided_by.first_name) == (
        Approval.REJECTED, reason, STAFF_NAME)


def test_a_customer_who_writes_while_the_refund_waits_is_shown_on_the_card_before_anyone_approves(
        site, customer_page, staff_page):
    refundable_again("SU-41402")
    staff = staff_page("/console/approvals/")
    staff.evaluate(SAME_DOCUMENT)
    customer = customer_page()
    open_widget(customer)
    ask(customer, "My order SU-41402 arrived cracked.")  # 129.00: the demo login is a lead
    conversation = widget_conversation(customer)["id"]
    expect(customer.get_by_test_id("widget-approval-banner")).to_be_visible(timeout=20000)

    card = staff.get_by_test_id("approval-queue").locator(
        f'[data-testid="approval-card"]:has(a[href*="{conversation}"])')
    expect(card).to_have_count(1, timeout=10000)
    expect(card).to_have_attribute("data-status", "pending")
    expect(card.get_by_test_id("approve-button")).to_be_visible()
    expect(card.get_by_test_id("approval-second-look")).to_have_count(0)

    # The customer changes their mind while the card is on screen: it updates without a reload.
    cancel = "cancel, I don't want the refund <b>after all</b>"
    ask(customer, cancel)
    look = card.get_by_test_id("approval-second-look")
    expect(look).to_be_visible(timeout=10000)
    expect(look.get_by_test_id("approval-customer-message")).to_have_text(re.compile(re.escape(cancel)))
    expect(look.locator("b")).to_have_count(0)  # the customer's text is text, never markup
    shot(staff, "second-look-console")
    staff.set_viewport_size({"width": 390, "height": 844})
    card.scroll_into_view_if_needed()
    shot(staff, "second-look-console-narrow")
    staff.set_viewport_size({"width": 1280, "height": 800})

    # Approving needs the tick: without it nothing is decided.
    card.get_by_test_id("approve-button").click()
    expect(card.get_by_test_id("approval-error")).to_contain_text("tick the box")
    expect(card).to_have_attribute("data-status", "pending")
    assert Approval.objects.get(run__conversation__public_id=conversation).decided_at is None

    # The person reads it and rejects instead; the refund is never issued.
    card.get_by_test_id("reject-button").click()
    card.get_by_test_id("reason-input").fill("you asked us to cancel it")
    card.get_by_test_id("reject-confirm-button").click()
    expect(card).to_have_attribute("data-status", "rejected")
    expect(card.get_by_test_id("approval-second-look")).to_contain_text("while this waited")
    assert staff.evaluate("window.__sameDocument")
    assert not Refund.objects.filter(order__number="SU-41402").exists()


def test_staff_without_the_permission_see_the_card_but_no_buttons(site, new_context):
    from django.contrib.auth import get_user_model

    from support.models import Customer
    from tests.desk_factories import pending_refund_approval, start_conversation

    get_user_model().objects.filter(username="robin").delete()
    get_user_model().objects.create_user("robin", password="read-only-pw", first_name="Robin", is_staff=True)
    approval = pending_refund_approval(start_conversation(Customer.objects.get(email="tom@example.com")))
    page = new_context().new_page()
    page.goto(site + "/accounts/login/?next=/console/approvals/")
    page.locator("input[name=username]").fill("robin")
    page.locator("input[name=password]").fill("read-only-pw")
    page.get_by_test_id("login-button").click()
    expect(page.get_by_test_id("connection-status")).to_have_attribute("data-state", "live")
    card = page.locator(f'[data-testid="approval-card"][data-approval="{approval.public_id}"]')
    expect(card.get_by_test_id("approval-read-only")).to_be_visible(timeout=10000)
    expect(card.get_by_test_id("approval-summary")).to_have_text("Refund 64.00 EUR on SU-41310 — parcel not received")
    expect(page.get_by_test_id("approve-button")).to_have_count(0)
    expect(page.get_by_test_id("reject-button")).to_have_count(0)
    shot(page, "approval-read-only")
