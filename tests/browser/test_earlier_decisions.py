"""Earlier decisions on the card, in the browser: the card lists who decided what on the same order and why (the
reason as text), and Approve over an earlier rejection asks "Approve anyway?" first, Cancel focused, so Enter
approves nothing; the page an e-mailed link opens shows them and asks for the tick. Also: the reject reason's
error goes once a reason is typed, and at 1280 x 800 the alerts cover none of the side card's buttons.
Screenshots at 1280 and 390 px go to tests/artifacts/earlier-*.png; axe finds nothing serious."""

from __future__ import annotations

import uuid

from django.contrib.auth import get_user_model
from django.db import transaction
from playwright.sync_api import expect

from support.desk import approval_links, gate, services
from support.live import events
from support.models import Approval, Customer, DecisionLink, Message
from tests.browser.conftest import STAFF_LOGIN, refundable_again, shot
from tests.browser.test_a11y import serious_violations
from tests.desk_factories import REFUND_ARGUMENTS, make_user, pending_refund_approval, start_conversation

HOSTILE = "Refunded by the bank <img src=x onerror=alert(1)>"
WIDTHS = ((1280, 800), (390, 844))


def rejected_then_asked_again():
    """Robin rejected a refund on SU-41310; the agent asks again on another conversation. The new approval."""
    refundable_again("SU-41310")  # and no earlier test's decisions on it
    maya = Customer.objects.get(email="maya@example.com")
    robin = make_user(f"robin-{uuid.uuid4().hex[:6]}", staff=True, group="leads", first_name="Robin")
    first = pending_refund_approval(start_conversation(maya))
    gate.approval_decide(approval=first, user=robin, approve=False, reason=HOSTILE, channel=Approval.CONSOLE)
    return pending_refund_approval(start_conversation(maya), {**REFUND_ARGUMENTS, "amount": "30.00"})


def at_each_width(page, name: str, ready=None) -> None:
    for width, height in WIDTHS:
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(250)
        if ready:
            ready()
        assert serious_violations(page) == []
        assert page.evaluate("document.scrollingElement.scrollWidth") <= width + 1
        shot(page, f"{name}-{width}")
    page.set_viewport_size({"width": 1280, "height": 800})


def test_the_card_shows_the_earlier_rejection_and_approving_asks_first(site, staff_page):
    asked = rejected_then_asked_again()
    page = staff_page(f"/console/conversations/{asked.run.conversation.public_id}/")
    card = page.get_by_test_id("approval-card").first
    earlier = card.get_by_test_id("approval-earlier")
    expect(earlier).to_contain_text("Earlier decisions on this order")
    [item] = earlier.get_by_test_id("approval-earlier-item").all()
    expect(item).to_contain_text("Rejected a refund · Robin")
    expect(item.locator("q")).to_have_text(HOSTILE)  # as text, never markup
    assert page.locator("img[src=x]").count() == 0
    at_each_width(page, "earlier-card", ready=card.scroll_into_view_if_needed)

    # The reject reason's error goes once a reason is typed.
    card.get_by_test_id("reject-button").click()
    card.get_by_test_id("reject-confirm-button").click()
    error = card.get_by_test_id("approval-error")
    expect(error).to_be_visible()
    card.get_by_test_id("reason-input").fill("Not")
    expect(error).to_be_hidden()
    card.get_by_test_id("reject-cancel-button").click()

    card.get_by_test_id("approve-button").click()
    dialog = page.get_by_test_id("over-rejection-confirm")
    expect(dialog).to_be_visible()
    expect(page.get_by_role("dialog", name="Approve anyway?")).to_be_visible()
    expect(dialog).to_contain_text("Robin rejected a refund on this order")
    expect(dialog).to_contain_text(HOSTILE)
    expect(dialog.get_by_test_id("over-rejection-confirm-cancel")).to_be_focused()
    at_each_width(page, "earlier-confirm")
    page.keyboard.press("Enter")  # Cancel: nothing approved
    expect(dialog).to_have_count(0)
    assert Approval.objects.get(pk=asked.pk).pending

    card.get_by_test_id("approve-button").click()
    dialog.get_by_test_id("over-rejection-confirm-confirm").click()
    expect(card).to_have_attribute("data-status", "approved")
    assert Approval.objects.get(pk=asked.pk).decision == Approval.APPROVED


def test_the_decide_page_shows_them_and_asks_for_the_tick(site, staff_page):
    asked = rejected_then_asked_again()
    staff = get_user_model().objects.get(username=STAFF_LOGIN[0])
    link = DecisionLink.objects.create(approval=asked, user=staff, kind=DecisionLink.APPROVE)
    page = staff_page(f"/console/decide/{approval_links.link_token(link)}/")
    expect(page.get_by_test_id("decide-earlier")).to_contain_text(HOSTILE)
    tick = page.get_by_test_id("decide-over-rejection")
    expect(tick).to_be_visible()
    at_each_width(page, "earlier-decide")
    tick.check()
    page.get_by_test_id("decide-submit").click()
    expect(page.get_by_role("heading", name="Approved")).to_be_visible()


def test_at_1280_by_800_the_alerts_cover_none_of_the_side_cards_buttons(site, staff_page):
    maya = Customer.objects.get(email="maya@example.com")
    conversation = start_conversation(maya)
    page = staff_page(f"/console/conversations/{conversation.public_id}/")
    page.set_viewport_size({"width": 1280, "height": 800})
    # The console's first count is in: what needs a person from then on is news, and raises an alert.
    expect(page.locator("[data-count-value]").first).not_to_have_text("…")
    tom = Customer.objects.get(email="tom@example.com")
    for n in range(3):  # hand-overs elsewhere raise alerts
        other = start_conversation(tom)
        services.message_append(conversation=other, author=Message.CUSTOMER,
                                wire={"role": "user", "content": f"I want a person {n}"})
        with transaction.atomic():
            services.conversation_flag(conversation_id=other.pk, reason="asked")
        events.publisher.flush()
    alerts = page.get_by_test_id("alerts")
    # Two at least (the live path may fold events; the count is not what is tested): the stack is tall
    expect(alerts.get_by_test_id("alert").nth(1)).to_be_visible(timeout=10000)
    page.wait_for_timeout(300)
    side = page.get_by_test_id("conversation-side").bounding_box()
    top_of_alerts = alerts.bounding_box()["y"]
    assert side["y"] + side["height"] <= top_of_alerts + 1
    covered = page.evaluate("""() => [...document.querySelectorAll('[data-testid="conversation-side"] button')]
      .filter((b) => { const r = b.getBoundingClientRect(); const side = b.closest('.side').getBoundingClientRect();
        return r.height > 0 && r.top >= side.top && r.bottom <= side.bottom; })
      .filter((b) => { const r = b.getBoundingClientRect(); const at = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);
        return !b.contains(at); }).map((b) => b.textContent)""")
    assert covered == []
    shot(page, "earlier-alerts-1280")
