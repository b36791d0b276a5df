"""A staff member's own refund above STAFF_REFUND_CONFIRM_ABOVE (100.00) is said in a dialog first: the amount,
the order and the customer. Cancel or Esc sends nothing; confirming makes the refund once; a smaller refund
asks nothing. (Above SECOND_APPROVAL_ABOVE the dialog says it waits for a colleague: tests/browser/test_four_eyes.py.)
Screenshots at 1280x800 and 390x844 go to tests/artifacts/refund-confirm-*.png."""

from __future__ import annotations

from playwright.sync_api import expect

from support.models import Customer, Refund, StaffAction
from tests.browser.conftest import SocketCutter, refundable_again, shot
from tests.browser.test_a11y import serious_violations

PHONE = {"width": 390, "height": 844}


def refund_form(staff_page, conversation, amount: str, **context_options):
    page = staff_page(f"/console/conversations/{conversation.public_id}/", **context_options)
    order = page.locator('[data-testid="context-order"][data-order="SU-41533"]')
    if order.get_attribute("open") is None:
        order.locator("summary").first.click()
    order.get_by_test_id("refund-open").click()
    order.get_by_test_id("refund-amount").fill(amount)
    order.get_by_test_id("refund-reason").fill("Monitor arrived cracked: partial refund agreed with the customer")
    return page, order


def refunds():
    return [str(r.amount) for r in Refund.objects.filter(order__number="SU-41533")]


def test_a_large_refund_is_confirmed_in_a_dialog_and_cancel_sends_nothing(site, staff_page):
    from tests.desk_factories import start_conversation

    refundable_again("SU-41533")
    conversation = start_conversation(Customer.objects.get(email="maya@example.com"))
    page, order = refund_form(staff_page, conversation, "300.00")
    submit = order.get_by_test_id("refund-submit")
    submit.click()
    dialog = page.get_by_test_id("refund-confirm")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_role("heading")).to_have_text("Refund 300.00 EUR on SU-41533 to Maya Okafor?")
    expect(page.get_by_role("dialog", name="Refund 300.00 EUR on SU-41533 to Maya Okafor?")).to_be_visible()
    expect(dialog).to_contain_text("The money goes back to the customer now, and they are told.")
    expect(dialog).not_to_contain_text("colleague")  # four eyes are off on this site
    yes, no = dialog.get_by_test_id("refund-confirm-confirm"), dialog.get_by_test_id("refund-confirm-cancel")
    expect(yes).to_have_text("Refund 300.00 EUR")
    expect(no).to_be_focused()  # the safe answer first: Enter on the opened dialog never pays
    page.keyboard.press("Tab")  # round again, never behind the dialog
    expect(yes).to_be_focused()
    page.keyboard.press("Tab")
    expect(no).to_be_focused()
    page.keyboard.press("Shift+Tab")
    expect(yes).to_be_focused()
    page.keyboard.press("Shift+Tab")
    expect(no).to_be_focused()
    shot(page, "refund-confirm-1280")
    assert serious_violations(page) == []

    no.click()
    expect(dialog).to_have_count(0)
    expect(submit).to_be_focused()  # back where the person was, the form as they left it
    expect(order.get_by_test_id("refund-amount")).to_have_value("300.00")
    assert refunds() == [] and not StaffAction.objects.filter(conversation=conversation).exists()

    submit.click()
    expect(dialog).to_be_visible()
    page.keyboard.press("Escape")
    expect(dialog).to_have_count(0)
    expect(order.get_by_test_id("context-refundable")).to_have_text("480.00 EUR")
    assert refunds() == [] and not StaffAction.objects.filter(conversation=conversation).exists()

    submit.click()  # Enter, pressed at once, answers Cancel: nothing is paid
    expect(dialog).to_be_visible()
    page.keyboard.press("Enter")
    expect(dialog).to_have_count(0)
    assert refunds() == [] and not StaffAction.objects.filter(conversation=conversation).exists()

    # Up to the limit: no question, the refund is made.
    order.get_by_test_id("refund-amount").fill("100.00")
    submit.click()
    expect(order.get_by_test_id("context-refundable")).to_have_text("380.00 EUR")
    expect(dialog).to_have_count(0)
    assert refunds() == ["100.00"]

    # Confirmed: made once.
    order.get_by_test_id("refund-open").click()
    order.get_by_test_id("refund-amount").fill("250.00")
    order.get_by_test_id("refund-reason").fill("The rest of the agreed amount")
    order.get_by_test_id("refund-submit").click()
    expect(dialog.get_by_role("heading")).to_have_text("Refund 250.00 EUR on SU-41533 to Maya Okafor?")
    dialog.get_by_test_id("refund-confirm-confirm").click()
    expect(order.get_by_test_id("context-refundable")).to_have_text("130.00 EUR")
    assert sorted(refunds()) == ["100.00", "250.00"]


def test_the_dialog_on_a_phone(site, staff_page):
    from tests.desk_factories import start_conversation

    refundable_again("SU-41533")
    conversation = start_conversation(Customer.objects.get(email="maya@example.com"))
    page, order = refund_form(staff_page, conversation, "300.00", viewport=PHONE, has_touch=True, is_mobile=True)
    order.get_by_test_id("refund-submit").click()
    dialog = page.get_by_test_id("refund-confirm")
    expect(dialog.get_by_role("heading")).to_have_text("Refund 300.00 EUR on SU-41533 to Maya Okafor?")
    box = dialog.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    shot(page, "refund-confirm-390")
    assert serious_violations(page) == []
    dialog.get_by_test_id("refund-confirm-cancel").tap()
    expect(dialog).to_have_count(0)
    assert refunds() == []


def test_a_redraw_while_typing_an_amount_keeps_the_caret_where_the_person_left_it(site, staff_page):
    """The context panel is read again and redrawn when the console's socket (re)connects. A redraw between two
    keys put the caret at the field's start: "30" then "0.00" became "0.0030" (and a form filled just after the
    page opened could read "300.00480.00")."""
    from tests.desk_factories import start_conversation

    refundable_again("SU-41533")
    conversation = start_conversation(Customer.objects.get(email="maya@example.com"))
    cutters = []
    page = staff_page(f"/console/conversations/{conversation.public_id}/",
                      before=lambda p: cutters.append(SocketCutter(p, "**/ws/**")))
    order = page.locator('[data-testid="context-order"][data-order="SU-41533"]')
    if order.get_attribute("open") is None:
        order.locator("summary").first.click()
    order.get_by_test_id("refund-open").click()
    amount = order.get_by_test_id("refund-amount")
    amount.fill("")
    amount.press_sequentially("30")
    amount.evaluate("el => { el.dataset.drawn = 'before'; }")
    cutters[0].drop()  # the socket comes back by itself, and its replay.done reads the context again
    # The redraw replaces the field: wait until the one on the page is a new one.
    page.wait_for_function("""() => {
        const field = document.querySelector('[data-testid="refund-amount"]');
        return field && field.dataset.drawn !== 'before';
    }""", timeout=20000)
    expect(order.get_by_test_id("refund-amount")).to_be_focused()
    order.get_by_test_id("refund-amount").press_sequentially("0.00")
    expect(order.get_by_test_id("refund-amount")).to_have_value("300.00")


def test_focus_goes_back_to_the_refund_button_drawn_again_while_the_dialog_was_open(site, staff_page):
    # A live event redraws the order's panel while the person answers: Cancel puts them back on the same button.
    from tests.desk_factories import start_conversation

    refundable_again("SU-41533")
    conversation = start_conversation(Customer.objects.get(email="maya@example.com"))
    page, order = refund_form(staff_page, conversation, "300.00")
    order.get_by_test_id("refund-submit").click()
    dialog = page.get_by_test_id("refund-confirm")
    expect(dialog).to_be_visible()
    page.evaluate("""() => {  // the panel's button drawn again, as a redraw does
        const old = document.querySelector('[data-order="SU-41533"] [data-testid="refund-submit"]');
        const again = old.cloneNode(true);
        again.dataset.drawnAgain = "yes";
        old.replaceWith(again);
    }""")
    dialog.get_by_test_id("refund-confirm-cancel").click()
    expect(dialog).to_have_count(0)
    # The button as drawn now: this one, or one a real redraw made since (the customer's other conversations,
    # written by other tests, change the panel's read): never the first one, gone from the page.
    expect(order.get_by_test_id("refund-submit")).to_be_focused()

