"""The copilot in the console, the whole way through: the real worker runs it with the model stand-in's copilot
scripts (standin/copilot.py) on the demo's hand-over of SU-41533, a full refund of 480.00 EUR, above the agent's
ceiling. Sam (the demo lead) assigns the conversation to himself and:
- drafts a reply: it streams into the reply box, the customer's widget shows nothing of it until he sends it, its
  sources show as chips, and the sent reply records the draft and how much he changed it;
- summarizes the conversation: the summary on top, with who asked and when;
- asks for the next step: the suggested refund fills the refund form, which still asks for the confirmation and,
  on a desk with four eyes above 100.00, for a second person (a daphne of its own, as tests/browser/test_four_eyes.py);
- asks a question and reads the answer with its sources.
Each at 1280 and 390 px: screenshots in tests/artifacts/copilot-*.png, no serious axe violation, no sideways scroll.
"""

from __future__ import annotations

import re

from playwright.sync_api import expect

from support.models import Approval, CopilotRun, Message, Refund, StaffAction
from tests.browser.conftest import agent_messages, api_conversation, ask, open_widget, refundable_again, shot
from tests.browser.inbox_helpers import login
from tests.browser.test_a11y import expire, serious_violations
from tests.browser.test_conversation_page import handed_over
from tests.browser.test_four_eyes import four_eyes_site  # noqa: F401  (fixture: a daphne with four eyes above 100.00)

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
# The reply box while the copilot writes into it: read-only, busy, and already holding its first words.
STREAMING = """() => {
    const box = document.querySelector('[data-testid="reply-input"]');
    return box.readOnly && box.getAttribute("aria-busy") === "true" && box.value.length > 0;
}"""


ERRORS: dict = {}  # page -> the script errors it threw


def watched(page) -> None:
    """Records the page's script errors (a `before` hook): a handler that throws leaves the page half drawn."""
    ERRORS[page] = []
    page.on("pageerror", lambda error: ERRORS[page].append(str(error)))


def snap(page, name: str, show=None) -> None:
    """At 1280 and 390 px: a screenshot (tests/artifacts/copilot-<name>-<width>.png) with `show` (a locator) in
    view, no serious axe violation, and nothing wider than a phone."""
    for size in (DESKTOP, PHONE):
        page.set_viewport_size(size)
        page.wait_for_timeout(200)
        if show is not None:
            show.scroll_into_view_if_needed()
        shot(page, f"copilot-{name}-{size['width']}")
        assert serious_violations(page) == [], f"{name} at {size['width']} px"
        if size is PHONE:
            assert page.evaluate("() => document.scrollingElement.scrollWidth") <= PHONE["width"] + 1
    page.set_viewport_size(DESKTOP)
    assert ERRORS.get(page) == [], f"{name}: the page threw {ERRORS.get(page)}"


def assigned_to_me(page):
    """Sam assigns the opened conversation to himself: the copilot drafts and suggests for whoever has it."""
    page.get_by_test_id("take-over-button").click()
    expect(page.get_by_test_id("conversation-assignee")).to_contain_text("Assigned to you")
    expect(page.get_by_test_id("copilot-draft")).to_be_enabled()


def staff_messages(page, testid="message"):
    return page.locator(f'[data-testid="{testid}"][data-author="staff"]')


def test_a_draft_streams_into_the_reply_box_and_reaches_the_customer_only_when_the_person_sends_it(
        site, customer_page, staff_page, model_settings):
    customer, conversation = handed_over(customer_page)
    page = staff_page(f"/console/conversations/{conversation}/", viewport=DESKTOP, before=watched)
    assigned_to_me(page)
    model_settings("/config", {"token_delay_ms": 25})  # slow enough to see it arrive
    box = page.get_by_test_id("reply-input")
    page.get_by_test_id("copilot-draft").click()
    page.wait_for_function(STREAMING, polling="raf", timeout=20000)
    expect(page.get_by_test_id("copilot-draft-stop")).to_be_visible()
    expect(page.get_by_test_id("copilot-draft-status")).to_have_text(
        "The copilot is drafting into the reply box. Nothing is sent until you send it.")
    expect(box).to_be_editable(timeout=30000)  # the run ended: the box is the person's again
    draft = CopilotRun.objects.get(conversation__public_id=conversation, kind=CopilotRun.DRAFT)
    assert draft.status == CopilotRun.DONE and "SU-41533" in draft.text
    expect(box).to_have_value(draft.text)
    expect(box).to_be_focused()
    expect(page.get_by_test_id("copilot-draft-status")).to_have_text(
        "A draft from the copilot: read it, edit it, then send. Nothing has been sent.")
    chips = page.get_by_test_id("copilot-draft-sources").get_by_test_id("copilot-source")
    expect(chips.and_(page.locator('[data-kind="order"]'))).to_have_attribute("data-id", "SU-41533")
    policy = chips.and_(page.locator('[data-kind="policy"]')).first
    expect(policy).to_have_attribute("href", re.compile(r"^/console/policies/[^/]+/versions/\d+/$"))
    snap(page, "draft", show=page.get_by_test_id("copilot-draft-info"))

    # Nothing reached the customer: no message holds the draft, and the widget shows no staff reply.
    assert not Message.objects.filter(conversation__public_id=conversation, content__contains=draft.text[:40]).exists()
    expect(staff_messages(customer, "widget-message")).to_have_count(0)

    box.press("End")
    box.press_sequentially(" Sam")
    box.press("Enter")
    expect(staff_messages(customer, "widget-message")).to_have_count(1, timeout=20000)
    expect(staff_messages(customer, "widget-message")).to_contain_text(f"{draft.text} Sam")
    expect(page.get_by_test_id("copilot-draft-sources")).to_be_empty()
    draft.refresh_from_db()
    assert draft.sent_message is not None and draft.sent_message.content == f"{draft.text} Sam"
    assert (draft.edit_distance, draft.sent_unchanged) == (4, False)


def test_the_summary_is_shown_on_top_with_who_asked_and_when(site, customer_page, staff_page):
    customer, conversation = handed_over(customer_page)
    page = staff_page(f"/console/conversations/{conversation}/", viewport=DESKTOP, before=watched)
    panel = page.get_by_test_id("copilot-summary-panel")
    expect(panel).to_be_visible()
    button = page.get_by_test_id("copilot-summarize")
    expect(button).to_have_text("Summarize")
    button.click()
    summary = page.get_by_test_id("copilot-summary")
    expect(summary).to_contain_text("Wants:", timeout=30000)
    expect(summary).to_contain_text("Done: The agent handed over a refund")
    expect(summary).to_contain_text("Open: a person decides on order SU-41533")
    expect(page.get_by_test_id("copilot-summary-meta")).to_contain_text("asked by Sam")
    expect(button).to_have_text("Summarize again")
    expect(page.get_by_test_id("copilot-summary-stale")).to_have_count(0)
    snap(page, "summary", show=panel)

    # Anyone who opens the conversation later reads it on top; a message after it marks it out of date, live.
    later = staff_page(f"/console/conversations/{conversation}/", viewport=PHONE)
    expect(later.get_by_test_id("copilot-summary")).to_contain_text("Open: a person decides on order SU-41533")
    expect(later.get_by_test_id("copilot-summary-stale")).to_have_count(0)
    ask(customer, "Is anyone there?")
    expect(later.get_by_test_id("copilot-summary-stale")).to_have_text("Out of date: messages came after it")
    expect(page.get_by_test_id("copilot-summary-stale")).to_be_visible()


def test_asking_the_copilot_answers_with_its_sources(site, customer_page, staff_page):
    _, conversation = handed_over(customer_page)
    page = staff_page(f"/console/conversations/{conversation}/", viewport=DESKTOP, before=watched)
    page.get_by_test_id("copilot-question").fill("What is this seller's return window?")
    page.get_by_test_id("copilot-question").press("Enter")  # Enter asks, as it sends in the reply box
    answer = page.get_by_test_id("copilot-answer").first
    expect(answer).to_have_attribute("data-status", "done", timeout=30000)
    expect(answer).to_contain_text("What is this seller's return window?")
    expect(answer).to_contain_text("According to")
    expect(answer.locator('[data-testid="copilot-source"][data-kind="policy"]').first).to_be_visible()
    expect(page.get_by_test_id("copilot-question")).to_have_value("")
    snap(page, "ask", show=page.get_by_test_id("copilot-answers"))


def test_a_suggested_refund_fills_the_refund_form_which_still_asks_for_the_confirmation_and_a_second_person(
        site, four_eyes_site, customer_page, new_context):
    _, conversation = handed_over(customer_page)
    page = login(new_context, four_eyes_site, f"/console/conversations/{conversation}/", viewport=DESKTOP)
    watched(page)
    assigned_to_me(page)
    page.get_by_test_id("copilot-suggest").click()
    card = page.get_by_test_id("copilot-suggestion")
    expect(card).to_be_visible(timeout=30000)
    expect(card.locator(".copilot-card-title")).to_have_text(
        re.compile(r"^Refund 480\.00 EUR on SU-41533 — above the agent's limit, a person decides; per .+$"))
    snap(page, "suggestion", show=card)

    card.get_by_test_id("copilot-use").click()
    order = page.locator('[data-testid="context-order"][data-order="SU-41533"]')
    amount = order.get_by_test_id("refund-amount")
    expect(amount).to_be_focused()
    expect(amount).to_have_value("480.00")
    expect(order.get_by_test_id("refund-reason")).to_have_value(re.compile(r"^above the agent's limit"))
    assert not Refund.objects.filter(order__number="SU-41533").exists()  # filled in, never submitted

    order.get_by_test_id("refund-submit").click()
    dialog = page.get_by_test_id("refund-confirm")
    expect(dialog.get_by_role("heading")).to_have_text("Refund 480.00 EUR on SU-41533 to Maya Okafor?")
    expect(dialog).to_contain_text("It will wait for a colleague's approval")
    snap(page, "suggestion-confirm")
    dialog.get_by_test_id("refund-confirm-confirm").click()
    expect(order.get_by_test_id("refund-waiting")).to_contain_text("Your refund of 480.00 EUR waits for a colleague")
    expect(order.get_by_test_id("context-refundable")).to_have_text("480.00 EUR")  # nothing paid until a second person says yes
    action = StaffAction.objects.get(conversation__public_id=conversation)
    assert action.status == StaffAction.AWAITING_APPROVAL
    expire(Approval.objects.filter(staff_action=action))  # out of the queue for the tests after this one


def test_the_disputed_refund_is_finished_with_a_drafted_reply_and_the_suggested_refund(site, customer_page, staff_page):
    """The demo's second hand-over: staff declined the agent's refund of SU-41310 (64.00), the customer disputes it
    and the agent hands it over. Sam sends the drafted reply and makes the suggested refund himself."""
    refundable_again("SU-41310")
    customer = customer_page()
    conversation = api_conversation(customer)["id"]
    open_widget(customer)
    page = staff_page(f"/console/conversations/{conversation}/", viewport=DESKTOP, before=watched)
    ask(customer, "I'd like a refund for order SU-41310 please.")
    card = page.get_by_test_id("conversation-approvals").get_by_test_id("approval-card")
    expect(card).to_have_attribute("data-status", "pending", timeout=20000)
    card.get_by_test_id("reject-button").click()
    card.get_by_test_id("reason-input").fill("The tea towels were used.")
    card.get_by_test_id("reject-confirm-button").click()
    expect(agent_messages(customer)).to_have_count(2, timeout=20000)
    ask(customer, "That's not fair, I want my refund for SU-41310.")
    expect(page.get_by_test_id("conversation-status")).to_have_attribute("data-status", "needs_attention", timeout=20000)

    assigned_to_me(page)
    page.get_by_test_id("copilot-draft").click()
    box = page.get_by_test_id("reply-input")
    expect(box).to_have_value(re.compile(r"declined the refund of 64\.00 EUR because: The tea towels were used"),
                              timeout=30000)
    expect(box).to_be_editable()
    page.get_by_test_id("copilot-suggest").click()
    suggestion = page.get_by_test_id("copilot-suggestion")
    expect(suggestion.locator(".copilot-card-title")).to_contain_text("Refund 64.00 EUR on SU-41310", timeout=30000)
    snap(page, "disputed", show=suggestion)
    expect(staff_messages(customer, "widget-message")).to_have_count(0)  # the draft is still only in Sam's box

    box.press("Enter")
    expect(staff_messages(customer, "widget-message")).to_contain_text("The tea towels were used", timeout=20000)
    suggestion.get_by_test_id("copilot-use").click()
    order = page.locator('[data-testid="context-order"][data-order="SU-41310"]')
    expect(order.get_by_test_id("refund-amount")).to_have_value("64.00")
    order.get_by_test_id("refund-submit").click()  # under the confirmation's 100.00: made at once
    expect(order.get_by_test_id("context-refundable")).to_have_text("0.00 EUR")
    assert [str(r.amount) for r in Refund.objects.filter(order__number="SU-41310")] == ["64.00"]
    sent = CopilotRun.objects.get(conversation__public_id=conversation, kind=CopilotRun.DRAFT)
    assert (sent.edit_distance, sent.sent_unchanged) == (0, True)
