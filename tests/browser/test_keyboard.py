"""A staff member works the desk with the keyboard alone: moves through the inbox (j/k, the arrows, / and Esc),
opens a conversation with Enter, approves its refund after ticking the second-look box (Tab, Space, Enter),
goes on to the next conversation with n and rejects that one's refund with a reason; on the approvals page,
a card that needs a second look sends the focus to its tick box, and a decision moves on to the next card."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from playwright.sync_api import expect

from support.desk import gate, services
from support.models import Approval, Customer, Message
from tests.browser.conftest import ROOT

SCREENSHOTS = ROOT / "var" / "screenshots"

FOCUSED = """() => {
    const el = document.activeElement;
    return el ? (el.dataset.testid || el.tagName.toLowerCase()) : null;
}"""


def seen(page, name: str) -> None:
    """What the screen shows at this step, focus ring included (var/screenshots/keyboard-<name>.png)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"keyboard-{name}.png"))


def nothing_else_waiting() -> None:
    """Earlier tests' approvals out of the queue, so the keyboard meets only this test's cards."""
    Approval.objects.filter(decided_at__isnull=True).update(expires_at=timezone.now() - timedelta(seconds=1))
    gate.approvals_expire()


def waiting_refund(email: str, order: str, amount: str, *, written_since: str = "") -> Approval:
    """A conversation whose run waits on a refund; with `written_since`, the customer wrote after the request."""
    from tests.desk_factories import pending_refund_approval, start_conversation

    conversation = start_conversation(Customer.objects.get(email=email))
    services.message_append(conversation=conversation, author=Message.CUSTOMER,
                            wire={"role": "user", "content": f"Please refund {amount} EUR on {order}."})
    approval = pending_refund_approval(conversation, {"order_id": order, "amount": amount, "reason": "goodwill"})
    if written_since:
        services.message_append(conversation=conversation, author=Message.CUSTOMER,
                                wire={"role": "user", "content": written_since})
    return approval


def tab_to(page, testid: str, *, within=None, limit: int = 120) -> list[str]:
    """Tab until the element with `testid` (inside `within`, a locator, when given) has the focus; returns
    the test ids passed on the way. Fails if Tab never gets there: the control is not reachable."""
    passed = []
    for _ in range(limit):
        page.keyboard.press("Tab")
        passed.append(page.evaluate(FOCUSED))
        if passed[-1] == testid and (within is None or within.evaluate("(el) => el.contains(document.activeElement)")):
            return passed
    raise AssertionError(f"Tab never reached {testid}; passed: {passed}")


def test_a_conversation_is_found_opened_and_decided_from_the_keyboard_then_the_next_one(site, staff_page):
    nothing_else_waiting()
    later = waiting_refund("ines@example.com", "SU-41620", "4.99")
    first = waiting_refund("maya@example.com", "SU-41207", "1.00",
                           written_since="Actually the cushion cover is fine, never mind.")
    ids = [str(a.run.conversation.public_id) for a in (first, later)]
    page = staff_page("/console/?filter=waiting_approval")  # the inbox as a person working the approvals has it
    rows = page.get_by_test_id("conversation-row")
    expect(rows).to_have_count(2)
    order = rows.evaluate_all("(rows) => rows.map((r) => r.dataset.conversation)")
    assert order == ids, "newest first"

    # / searches, Esc comes back to the rows; j / k and the arrows move the focus from row to row.
    page.keyboard.press("/")
    expect(page.get_by_test_id("inbox-search")).to_be_focused()
    page.keyboard.press("Escape")
    expect(rows.nth(0).get_by_test_id("conversation-link")).to_be_focused()
    page.keyboard.press("j")
    expect(rows.nth(1).get_by_test_id("conversation-link")).to_be_focused()
    page.keyboard.press("ArrowUp")
    expect(rows.nth(0).get_by_test_id("conversation-link")).to_be_focused()
    for _ in range(order.index(ids[0])):
        page.keyboard.press("ArrowDown")
    target = page.locator(f'[data-testid="conversation-row"][data-conversation="{ids[0]}"]')
    expect(target.get_by_test_id("conversation-link")).to_be_focused()
    seen(page, "inbox-row")

    # Enter opens it; Tab reaches the card's tick box, then its Approve button.
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/console/conversations/{ids[0]}/")
    card = page.locator(f'[data-approval="{first.public_id}"]')
    expect(card.get_by_test_id("confirm-seen")).to_be_visible()
    tab_to(page, "confirm-seen", within=card)
    page.keyboard.press("Space")
    expect(card.get_by_test_id("confirm-seen")).to_be_checked()
    seen(page, "conversation-tick-box")
    page.keyboard.press("Tab")
    expect(card.get_by_test_id("approve-button")).to_be_focused()
    page.keyboard.press("Enter")
    expect(card).to_have_attribute("data-status", "approved")
    expect(card.get_by_test_id("approval-summary")).to_be_focused()  # the focus stays on the decided card
    assert Approval.objects.get(pk=first.pk).decision == Approval.APPROVED

    # n: the next conversation of the inbox as it was shown.
    page.keyboard.press("n")
    page.wait_for_url(f"**/console/conversations/{ids[1]}/")
    card = page.locator(f'[data-approval="{later.public_id}"]')
    expect(card.get_by_test_id("reject-button")).to_be_visible()
    passed = tab_to(page, "reject-button", within=card)
    assert passed[-3:-1] == ["approve-button", "edit-button"], passed  # Approve, Change amount, Reject
    page.keyboard.press("Enter")
    expect(card.get_by_test_id("reason-input")).to_be_focused()
    page.keyboard.type("the parcel is still on its way; we refund the fee if it is late.")
    seen(page, "conversation-reject-reason")
    page.keyboard.press("Enter")
    expect(card).to_have_attribute("data-status", "rejected")
    decided = Approval.objects.get(pk=later.pk)
    assert (decided.decision, decided.reason) == (Approval.REJECTED,
                                                  "the parcel is still on its way; we refund the fee if it is late.")


def test_the_queue_asks_for_the_tick_box_from_the_keyboard_and_moves_on(site, staff_page):
    nothing_else_waiting()
    looked = waiting_refund("maya@example.com", "SU-41419", "1.00", written_since="Is the refund still coming?")
    then = waiting_refund("tom@example.com", "SU-41444", "2.00")
    page = staff_page("/console/approvals/")
    one, two = (page.locator(f'[data-approval="{a.public_id}"]') for a in (looked, then))
    expect(one.get_by_test_id("confirm-seen")).to_be_visible()
    expect(two.get_by_test_id("approve-button")).to_be_visible()

    page.keyboard.press("j")
    expect(one.get_by_test_id("approval-summary")).to_be_focused()
    page.keyboard.press("a")  # not yet: the customer wrote after the request
    expect(one.get_by_test_id("approval-error")).to_contain_text("tick the box")
    expect(one.get_by_test_id("confirm-seen")).to_be_focused()
    seen(page, "queue-tick-box")
    assert Approval.objects.get(pk=looked.pk).decided_at is None
    page.keyboard.press("Space")
    page.keyboard.press("Tab")
    expect(one.get_by_test_id("approve-button")).to_be_focused()
    page.keyboard.press("Enter")
    expect(one).to_have_attribute("data-status", "approved")
    expect(two.get_by_test_id("approval-summary")).to_be_focused()  # on to the next card waiting

    page.keyboard.press("r")
    expect(two.get_by_test_id("reason-input")).to_be_focused()
    page.keyboard.type("Tom asked for a replacement instead.")
    page.keyboard.press("Enter")
    expect(two).to_have_attribute("data-status", "rejected")
    expect(page.locator("#announcer")).to_contain_text("Nothing else is waiting")
    assert Approval.objects.get(pk=looked.pk).decision == Approval.APPROVED
    assert Approval.objects.get(pk=then.pk).reason == "Tom asked for a replacement instead."
