"""Approval cards a person decides in seconds: the sentence, the order's money, what the customer asked, the
policies the agent read, the time left, an amount field with its limits; the customer told a partial refund
in plain words; the queue worked from the keyboard; a phone-width screen. Full-page screenshots of each flow
at 1280 and 390 px go to var/screenshots/."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta
from decimal import Decimal

from django.utils import timezone
from playwright.sync_api import expect

from support.desk import gate
from support.models import Approval, Customer, Order, Refund
from tests.browser.conftest import (
    ROOT,
    agent_messages,
    ask,
    no_earlier_decisions,
    open_widget,
    refundable_again,
    widget_conversation,
)

SCREENSHOTS = ROOT / "var" / "screenshots"
SAME_DOCUMENT = "window.__sameDocument = true"


def snap(page, name: str, folder=SCREENSHOTS) -> None:
    """Full-page screenshots of the page as it is, at desktop and phone width (<folder>/<name>-<w>.png)."""
    folder.mkdir(parents=True, exist_ok=True)
    size = page.viewport_size
    for width, height in ((1280, 800), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(200)
        page.screenshot(path=str(folder / f"{name}-{width}.png"), full_page=True)
    page.set_viewport_size(size)


def fits_the_screen(page) -> None:
    page.set_viewport_size({"width": 390, "height": 844})
    page.wait_for_timeout(200)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.set_viewport_size({"width": 1280, "height": 800})


def nothing_else_waiting() -> None:
    """Earlier tests' approvals out of the queue, so the keyboard walks only this test's cards."""
    from support.desk import services

    Approval.objects.filter(decided_at__isnull=True).update(expires_at=timezone.now() - timedelta(seconds=1))
    gate.approvals_expire()


def test_a_partial_refund_decided_from_the_card_is_told_to_the_customer(site, customer_page, staff_page,
                                                                         model_settings):
    staff = staff_page("/console/approvals/")
    staff.evaluate(SAME_DOCUMENT)
    customer = customer_page()
    open_widget(customer)
    ticket = uuid.uuid4().hex[:8]
    ask(customer, f"Can I have the rest of my money back for SU-41290? (ref {ticket})")
    conversation = widget_conversation(customer)["id"]  # created by that first message
    banner = customer.get_by_test_id("widget-approval-banner")
    expect(banner).to_contain_text("Our team is reviewing your request", timeout=20000)

    card = staff.locator(f'[data-testid="approval-card"]:has(a[href*="{conversation}"])')
    expect(card).to_have_attribute("data-status", "pending", timeout=10000)
    # One sentence, the money, the customer's words, the policies, the time left.
    expect(card.get_by_test_id("approval-summary")).to_have_text("Refund 80.00 EUR on SU-41290 — parcel marked delivered")
    expect(card.get_by_test_id("approval-why")).to_contain_text("remaining balance")
    expect(card.get_by_test_id("order-total")).to_have_text("120.00 EUR")
    expect(card.get_by_test_id("order-refunded")).to_have_text("40.00 EUR")
    expect(card.get_by_test_id("order-refundable")).to_have_text("80.00 EUR")
    expect(card.get_by_test_id("approval-customer-request")).to_contain_text(f"rest of my money back for SU-41290? (ref {ticket})")
    policies = card.get_by_test_id("approval-policies")
    expect(policies).to_contain_text("Policies the agent read: Refunds")  # the titles in view, passages folded
    expect(card.get_by_test_id("approval-policy").first).to_be_hidden()
    expect(card.get_by_test_id("approval-expiry")).to_have_text(re.compile(r"^Expires in 2[34] h$"))
    expect(card.get_by_test_id("approve-button")).to_have_text("Approve 80.00 EUR")
    snap(staff, "approval-card-refund")
    policies.locator(":scope > summary").click()
    expect(card.locator('[data-doc="POL-REFUND"]')).to_contain_text("150.00")
    # The search's other hits folded apart: the titles above are the ones the agent relied on.
    more = card.get_by_test_id("approval-policies-more")
    expect(more.locator("summary")).to_have_text(re.compile(r"^\d+ more searched$"))
    expect(card.get_by_test_id("approval-policy-more").first).to_be_hidden()
    snap(staff, "approval-card-refund-policies")
    policies.locator(":scope > summary").click()

    # The amount field, not JSON: its limits in words, refusals next to it, nothing sent until it is right.
    # The form takes the buttons' place (one Approve at a time); a reason is asked only for another amount.
    card.get_by_test_id("edit-button").click()
    amount = card.get_by_test_id("amount-input")
    expect(amount).to_be_focused()
    expect(amount).to_have_value("80.00")
    expect(card.get_by_test_id("approval-actions")).to_be_hidden()
    expect(card.get_by_test_id("approve-button")).to_be_hidden()
    expect(card.get_by_role("button", name=re.compile(r"^Approve"))).to_have_count(1)
    expect(card.get_by_test_id("field-reason")).to_be_hidden()
    expect(card.get_by_test_id("field-amount")).to_contain_text("Between 0.01 and 80.00 EUR: what is left to refund on SU-41290.")
    amount.fill("95")
    card.get_by_test_id("approve-edited-button").click()
    expect(card.get_by_test_id("field-error-amount")).to_have_text("Only 80.00 EUR is left to refund on SU-41290.")
    expect(amount).to_have_attribute("aria-invalid", "true")
    amount.fill("12,345")
    amount.press("Control+Enter")
    expect(card.get_by_test_id("field-error-amount")).to_have_text(
        "Write the amount in euros with at most two decimals, like 40.00.")
    snap(staff, "approval-card-amount-refused")
    assert Approval.objects.get(run__conversation__public_id=conversation).decided_at is None

    amount.fill("50")
    expect(card.get_by_test_id("field-error-amount")).to_be_hidden()
    expect(card.get_by_test_id("approve-edited-button")).to_have_text("Approve 50.00 EUR")
    reason = card.get_by_test_id("field-reason")
    expect(reason).to_be_visible()
    expect(reason).to_contain_text("Why a different amount?")
    card.get_by_test_id("approve-edited-button").click()
    expect(card.get_by_test_id("field-error-reason")).to_have_text("Say why the amount is different: it is kept with the refund.")
    expect(card.get_by_test_id("field-input-reason")).to_be_focused()
    snap(staff, "approval-card-edit-reason")
    assert Approval.objects.get(run__conversation__public_id=conversation).decided_at is None
    amount.fill("80")  # back to the amount asked: no reason needed, the agent's stands
    expect(reason).to_be_hidden()
    card.get_by_test_id("edit-cancel-button").click()
    expect(card.get_by_test_id("approve-button")).to_be_visible()
    expect(card.get_by_test_id("edit-button")).to_be_focused()
    card.get_by_test_id("edit-button").click()
    amount.fill("50")
    card.get_by_test_id("field-input-reason").fill("The customer kept the second item.")
    # The agent's next model call waits a little, so the customer's banner can be seen saying the decision.
    model_settings("/faults", {"faults": ["delay:ms=5000"], "match": ticket})
    card.get_by_test_id("approve-edited-button").click()
    expect(card).to_have_attribute("data-status", "approved")
    expect(card.get_by_test_id("approval-decision")).to_have_text("Approved 50.00 EUR instead of 80.00 EUR")
    assert Approval.objects.get(run__conversation__public_id=conversation).executed_arguments["reason"] == \
        "The customer kept the second item."
    expect(banner).to_contain_text("Our team has approved it")
    expect(banner).to_have_attribute("data-state", "approved")
    customer.screenshot(path=str(SCREENSHOTS / "partial-refund-customer-banner-1280.png"))

    # The customer is told the amount actually refunded, and that it differs from what was asked.
    expect(agent_messages(customer)).to_have_count(2, timeout=20000)
    told = agent_messages(customer).last
    expect(told).to_contain_text("I asked our team to approve a refund of 80.00 EUR")
    expect(told).to_contain_text("they approved 50.00 EUR, so I've refunded 50.00 EUR")
    expect(banner).to_be_hidden()
    snap(customer, "partial-refund-customer-told")
    snap(staff, "approval-card-partial-approved")
    assert staff.evaluate("window.__sameDocument")
    refunds = Refund.objects.filter(order__number="SU-41290").order_by("created_at")
    assert [r.amount for r in refunds] == [Decimal("40.00"), Decimal("50.00")]


def test_the_queue_is_worked_from_the_keyboard(site, staff_page):
    from tests.desk_factories import pending_refund_approval, start_conversation

    nothing_else_waiting()
    no_earlier_decisions("SU-41620", "SU-41210")  # an earlier test's rejection would make A ask first
    ines = Customer.objects.get(email="ines@example.com")
    maya = Customer.objects.get(email="maya@example.com")
    first = pending_refund_approval(start_conversation(ines), {"order_id": "SU-41620", "amount": "4.99",
                                                               "reason": "shipping fee: parcel late"})
    second = pending_refund_approval(start_conversation(maya), {"order_id": "SU-41210", "amount": "4.99",
                                                                "reason": "shipping fee: parcel late"})
    page = staff_page("/console/approvals/")
    cards = page.get_by_test_id("approval-queue").get_by_test_id("approval-card")
    expect(cards).to_have_count(2)
    one, two = (page.locator(f'[data-approval="{a.public_id}"]') for a in (first, second))
    expect(page.get_by_test_id("approval-keys")).to_contain_text("J / K next or previous card")
    expect(page.get_by_test_id("approve-button")).to_have_count(2)  # the page knows what Sam may decide

    page.keyboard.press("j")
    expect(one.get_by_test_id("approval-summary")).to_be_focused()
    page.keyboard.press("j")
    expect(two.get_by_test_id("approval-summary")).to_be_focused()
    page.keyboard.press("k")
    expect(one.get_by_test_id("approval-summary")).to_be_focused()

    # E opens the amount, Esc closes it and gives the focus back; A approves and moves on to the next card.
    page.keyboard.press("e")
    expect(one.get_by_test_id("amount-input")).to_be_focused()
    page.keyboard.press("Escape")
    expect(one.get_by_test_id("edit-button")).to_be_focused()
    page.keyboard.press("a")
    expect(one).to_have_attribute("data-status", "approved")
    expect(two.get_by_test_id("approval-summary")).to_be_focused()
    expect(page.locator("#announcer")).to_contain_text("Next: Refund 4.99 EUR on SU-41210")

    # R opens the reason; Ctrl+Enter rejects.
    page.keyboard.press("r")
    expect(two.get_by_test_id("reason-input")).to_be_focused()
    page.keyboard.type("the shipping fee was already waived.")
    snap(page, "approval-queue-keyboard")
    page.keyboard.press("Control+Enter")
    expect(two).to_have_attribute("data-status", "rejected")
    expect(two.get_by_test_id("approval-summary")).to_be_focused()
    expect(page.locator("#announcer")).to_contain_text("Nothing else is waiting")
    assert Approval.objects.get(pk=first.pk).decision == "approved"
    assert Approval.objects.get(pk=second.pk).reason == "the shipping fee was already waived."


def test_a_support_agent_may_approve_up_to_the_large_refund_threshold(site, new_context):
    from django.contrib.auth import get_user_model

    from support.desk import permissions
    from tests.desk_factories import pending_refund_approval, start_conversation

    refundable_again("SU-41444")  # the refundable balance is checked below
    get_user_model().objects.filter(username="casey").delete()
    casey = get_user_model().objects.create_user("casey", password="agent-pw-1", first_name="Casey", is_staff=True)
    casey.groups.add(permissions.ensure_groups()[permissions.AGENTS])
    # Tom's merino blanket (112.00): more than a support agent may approve, less than the refund ceiling.
    approval = pending_refund_approval(start_conversation(Customer.objects.get(email="tom@example.com")),
                                       {"order_id": "SU-41444", "amount": "112.00", "reason": "never arrived"})
    page = new_context().new_page()
    page.goto(site + "/accounts/login/?next=/console/approvals/")
    page.locator("input[name=username]").fill("casey")
    page.locator("input[name=password]").fill("agent-pw-1")
    page.get_by_test_id("login-button").click()
    card = page.locator(f'[data-approval="{approval.public_id}"]')
    expect(card.get_by_test_id("approval-needs-lead")).to_be_visible(timeout=10000)
    expect(card.get_by_test_id("approve-button")).to_have_count(0)
    expect(card.get_by_test_id("order-refundable")).to_have_text("112.00 EUR")

    card.get_by_test_id("edit-button").click()
    expect(card.get_by_test_id("field-amount")).to_contain_text("Between 0.01 and 100.00 EUR. Above 100.00 EUR a support lead approves")
    expect(card.get_by_test_id("approve-edited-button")).to_have_text("Approve this amount")  # not 112.00
    card.get_by_test_id("approve-edited-button").click()
    expect(card.get_by_test_id("field-error-amount")).to_have_text(
        "Refunds above 100.00 EUR need a support lead to approve. Lower the amount, or ask a lead.")
    snap(page, "approval-card-needs-lead")
    fits_the_screen(page)
    card.get_by_test_id("amount-input").fill("90.00")
    expect(card.get_by_test_id("approve-edited-button")).to_have_text("Approve 90.00 EUR")
    card.get_by_test_id("field-input-reason").fill("Above 100.00 EUR a lead approves; the rest follows.")
    card.get_by_test_id("approve-edited-button").click()
    expect(card).to_have_attribute("data-status", "approved")
    expect(card.get_by_test_id("approval-decision")).to_have_text("Approved 90.00 EUR instead of 112.00 EUR")
    expect(card.get_by_test_id("approval-decided-by")).to_have_text("Casey")
    decided = Approval.objects.get(pk=approval.pk)
    assert decided.executed_arguments["amount"] == "90.00" and decided.decided_by == casey
    assert Order.objects.get(number="SU-41444").refundable() >= Decimal("22.00")  # at most 90.00 refunded


def test_the_card_counts_down_and_says_how_it_expired(site, staff_page):
    from support.desk import services
    from tests.desk_factories import pending_refund_approval, start_conversation

    approval = pending_refund_approval(start_conversation(Customer.objects.get(email="ines@example.com")),
                                       {"order_id": "SU-41620", "amount": "4.99", "reason": "shipping fee"})
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() + timedelta(minutes=30, seconds=30))
    page = staff_page("/console/approvals/")
    card = page.locator(f'[data-approval="{approval.public_id}"]')
    expiry = card.get_by_test_id("approval-expiry")
    expect(expiry).to_have_text(re.compile(r"^Expires in (29|30) min$"))
    expect(expiry).to_have_class(re.compile(r"\bis-urgent\b"))  # under an hour: it stands out

    # The sweeper expires it while the card is on screen: the card says so, live, and who decided (no one).
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    gate.approvals_expire()
    expect(card).to_have_attribute("data-status", "expired", timeout=10000)
    expect(card.get_by_test_id("approval-decision")).to_have_text("Expired: no one decided in time, so it did not run")
    expect(card.get_by_test_id("approval-reason")).to_contain_text("no one decided within")
    expect(card.get_by_test_id("approval-decided-by")).to_have_text("the system")
    expect(card.get_by_test_id("approve-button")).to_have_count(0)
    snap(page, "approval-card-expired")
