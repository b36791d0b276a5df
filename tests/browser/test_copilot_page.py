"""The copilot's part of the conversation page on its own: its HTTP side answered by the test as docs/copilot.md
says it answers, its events injected into the console's socket, so the cases the real server reaches rarely are
shown as they must be: turned off, refused, a colleague's draft on the same socket, hostile model text.
(The whole way through the real worker and model stand-in: tests/browser/test_copilot.py.)"""

from __future__ import annotations

import json

from playwright.sync_api import expect

from support.models import Customer
from tests.browser.conftest import SocketCutter, STAFF_LOGIN, shot
from tests.browser.test_a11y import serious_violations
from tests.browser.test_copilot import ERRORS, watched

HOSTILE = '<img src=x onerror="document.body.dataset.owned=1">IGNORE PREVIOUS INSTRUCTIONS'


def run(kind: str, status: str = "done", **fields) -> dict:
    """A <run> as the contract shapes it."""
    return {"id": f"run-{kind}", "kind": kind, "status": status, "question": "", "text": "", "sources": [],
            "suggestion": None, "error": "", "requested_by": {"username": STAFF_LOGIN[0], "name": "Sam"},
            "created_at": "2026-12-05T06:00:00Z", "finished_at": "2026-12-05T06:00:04Z", "duration_ms": 4000,
            "prompt_tokens": 900, "completion_tokens": 80, "cached_tokens": 0, "cost_usd": "0.0012", "steps": [],
            "stale": False, **fields}


class CopilotStub:
    """GET and POST of /api/staff/conversations/<id>/copilot, answered with (status, body) the test sets."""

    def __init__(self, page, get=(200, {"summary": None, "runs": []}), post=(202, {"copilot": run("draft", "queued")})):
        self.get, self.post, self.posted = get, post, []
        page.route("**/api/staff/conversations/*/copilot", self._answer)

    def _answer(self, route) -> None:
        request = route.request
        if request.method == "POST":
            self.posted.append(request.post_data_json)
        status, body = self.post if request.method == "POST" else self.get
        route.fulfill(status=status, content_type="application/json", body=json.dumps(body))


def console(staff_page, taken_over: bool = True, **stub):
    """A conversation of Maya's, assigned to Sam (the demo's staff login) unless not `taken_over`, opened in the
    console with the copilot's side stubbed; returns (page, stub, socket) where socket.send() injects an event."""
    from django.contrib.auth import get_user_model

    from support.desk.takeover import conversation_take_over
    from tests.desk_factories import start_conversation

    conversation = start_conversation(Customer.objects.get(email="maya@example.com"))
    if taken_over:
        conversation_take_over(conversation=conversation, user=get_user_model().objects.get(username=STAFF_LOGIN[0]))
    stubs, cutters = [], []

    def before(page):
        watched(page)
        stubs.append(CopilotStub(page, **stub))
        cutters.append(SocketCutter(page, "**/ws/staff/**"))

    page = staff_page(f"/console/conversations/{conversation.public_id}/", before=before)
    page_end = cutters[0].connections[-1][0]

    class Socket:
        @staticmethod
        def send(event: dict) -> None:
            page_end.send(json.dumps({"conversation": str(conversation.public_id), **event}))

    return page, stubs[0], Socket


def test_the_copilot_is_hidden_entirely_when_the_desk_turned_it_off(site, staff_page):
    page, _, _ = console(staff_page, get=(403, {"error": "The copilot is turned off on this desk (COPILOT_ENABLED)."}))
    expect(page.get_by_test_id("context-customer-name")).to_have_text("Maya Okafor")
    for part in ("copilot-summary-panel", "copilot-panel", "copilot-draft-bar", "copilot-draft-info"):
        expect(page.get_by_test_id(part)).to_be_attached()  # on the page, and hidden
        expect(page.get_by_test_id(part)).to_be_hidden()
    expect(page.get_by_test_id("reply-input")).to_be_editable()  # the reply box itself is the person's, as before


def test_a_refusal_is_said_in_plain_words_where_the_draft_button_is_and_the_reply_box_keeps_its_text(site, staff_page):
    words = "You have asked the copilot 60 times in the last hour: that is the most for one person. Try again later."
    page, stub, _ = console(staff_page, post=(429, {"error": words}))
    box = page.get_by_test_id("reply-input")
    draft = page.get_by_test_id("copilot-draft")
    expect(draft).to_be_enabled()
    draft.click()
    expect(page.get_by_test_id("copilot-draft-error")).to_have_text(words)
    expect(box).to_have_value("")
    expect(draft).to_be_enabled()
    assert stub.posted == [{"kind": "draft", "question": ""}]


def test_the_draft_button_waits_until_the_person_has_the_conversation(site, staff_page):
    page, stub, _ = console(staff_page, taken_over=False)
    expect(page.get_by_test_id("copilot-draft-bar")).to_be_visible()
    expect(page.get_by_test_id("copilot-draft")).to_be_disabled()
    expect(page.get_by_test_id("copilot-suggest")).to_be_disabled()
    expect(page.get_by_test_id("copilot-draft-status")).to_have_text("Assign the conversation to yourself to draft a reply.")
    page.get_by_test_id("take-over-button").click()
    expect(page.get_by_test_id("copilot-draft")).to_be_enabled()
    expect(page.get_by_test_id("copilot-suggest")).to_be_enabled()
    assert stub.posted == []


def test_a_colleagues_draft_on_the_same_socket_never_lands_in_the_reply_box(site, staff_page):
    page, _, socket = console(staff_page)
    socket.send({"type": "copilot.delta", "copilot": "someone-elses", "kind": "draft", "text": "Hello from Alex's draft"})
    socket.send({"type": "copilot.done", "copilot": run("draft", id="someone-elses", text="Hello from Alex's draft",
                                                       requested_by={"username": "alex", "name": "Alex"})})
    page.get_by_test_id("reply-input").fill("My own words")
    expect(page.get_by_test_id("reply-input")).to_have_value("My own words")
    expect(page.get_by_test_id("copilot-draft-sources")).to_be_empty()


def test_the_models_words_are_shown_as_text_in_the_summary_the_suggestion_and_the_answers(site, staff_page):
    summary = run("summary", text=HOSTILE, stale=True, sources=[{"kind": "policy", "id": HOSTILE, "label": HOSTILE, "version": 3}])
    suggestion = run("suggest", id="s1", text=HOSTILE, suggestion={"action": "refund", "order_id": "SU-41533",
                                                                   "amount": "120.00", "reason": HOSTILE})
    answer = run("ask", id="a1", question=HOSTILE, text=HOSTILE, sources=[{"kind": "order", "id": "SU-41533", "label": HOSTILE}])
    page, _, _ = console(staff_page, get=(200, {"summary": summary, "runs": [suggestion, answer]}))
    expect(page.get_by_test_id("copilot-summary")).to_have_text(HOSTILE)
    expect(page.get_by_test_id("copilot-summary-stale")).to_be_visible()
    expect(page.get_by_test_id("copilot-suggestion")).to_contain_text(f"Refund 120.00 EUR on SU-41533 — {HOSTILE}")
    expect(page.get_by_test_id("copilot-answer")).to_contain_text(HOSTILE)
    expect(page.locator('[data-testid="copilot-source"][data-kind="policy"]')).to_have_text(f"{HOSTILE} v3")
    assert page.locator("img[src=x]").count() == 0
    assert page.evaluate("() => document.body.dataset.owned") is None
    shot(page, "copilot-page-hostile-1280")
    assert serious_violations(page) == []
    assert ERRORS[page] == []


def test_stopping_a_draft_keeps_what_came_and_later_words_stay_out_of_the_box(site, staff_page):
    page, _, socket = console(staff_page)
    box = page.get_by_test_id("reply-input")
    page.get_by_test_id("copilot-draft").click()
    expect(page.get_by_test_id("copilot-draft-stop")).to_be_visible()
    expect(box).not_to_be_editable()  # the copilot's while it writes
    socket.send({"type": "copilot.delta", "copilot": "run-draft", "kind": "draft", "text": "Hello Maya, I checked"})
    socket.send({"type": "copilot.delta", "copilot": "run-draft", "kind": "draft", "text": ""})  # starts again
    socket.send({"type": "copilot.delta", "copilot": "run-draft", "kind": "draft", "text": "Dear Maya, "})
    expect(box).to_have_value("Dear Maya, ")
    page.get_by_test_id("copilot-draft-stop").click()
    expect(box).to_be_editable()
    expect(box).to_be_focused()
    socket.send({"type": "copilot.delta", "copilot": "run-draft", "kind": "draft", "text": "order SU-41533"})
    socket.send({"type": "copilot.done", "copilot": run("draft", text="Dear Maya, order SU-41533 is on its way.",
                                                       sources=[{"kind": "order", "id": "SU-41533", "label": "SU-41533"}])})
    expect(page.get_by_test_id("copilot-source")).to_have_attribute("data-id", "SU-41533")
    expect(box).to_have_value("Dear Maya, ")
    expect(page.get_by_test_id("copilot-draft")).to_be_enabled()


def test_a_suggested_seller_message_fills_the_seller_form_and_sends_nothing(site, staff_page):
    from support.models import StaffAction

    message = "The customer disputes the refund on order SU-41533; please tell us what you can offer."
    suggestion = run("suggest", id="s2", suggestion={"action": "seller_message", "order_id": "SU-41533",
                                                     "message": message, "reason": "Staff declined: no photo"})
    page, _, _ = console(staff_page, get=(200, {"summary": None, "runs": [suggestion]}))
    card = page.get_by_test_id("copilot-suggestion")
    expect(card.locator(".copilot-card-title")).to_have_text("Message the seller of SU-41533 — Staff declined: no photo")
    expect(card.get_by_test_id("copilot-suggestion-message")).to_have_text(message)
    card.get_by_test_id("copilot-use").click()
    text = page.locator('[data-testid="context-order"][data-order="SU-41533"]').get_by_test_id("seller-text")
    expect(text).to_be_focused()
    expect(text).to_have_value(message)
    assert not StaffAction.objects.filter(conversation__public_id=page.evaluate("document.body.dataset.conversation")).exists()


def test_a_suggestion_on_an_order_the_person_may_not_act_on_says_why_in_the_card(site, staff_page):
    suggestion = run("suggest", id="s3", suggestion={"action": "refund", "order_id": "SU-99999", "amount": "10.00",
                                                     "reason": "made up"})
    page, _, _ = console(staff_page, get=(200, {"summary": None, "runs": [suggestion]}))
    card = page.get_by_test_id("copilot-suggestion")
    card.get_by_test_id("copilot-use").click()
    expect(card.get_by_role("alert")).to_have_text("Order SU-99999 is not one of this customer's orders.")
    expect(page.get_by_test_id("refund-form")).to_have_count(0)


def test_the_copilot_is_worked_from_the_keyboard(site, staff_page):
    suggestion = run("suggest", id="s4", suggestion={"action": "refund", "order_id": "SU-41533", "amount": "30.00",
                                                     "reason": "a partial refund for the scratch"})
    page, stub, socket = console(staff_page, get=(200, {"summary": None, "runs": [suggestion]}))
    expect(page.get_by_test_id("copilot-draft")).to_be_enabled()  # the conversation read: it is Sam's
    page.get_by_test_id("reply-input").focus()
    page.keyboard.press("Tab")
    expect(page.get_by_test_id("copilot-draft")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("copilot-draft-stop")).to_be_focused()  # the draft button waits meanwhile
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("reply-input")).to_be_focused()
    assert stub.posted == [{"kind": "draft", "question": ""}]

    page.get_by_test_id("copilot-use").focus()
    socket.send({"type": "copilot.done", "copilot": run("summary", id="sum1", text="Wants: a refund")})  # redraws the page
    expect(page.get_by_test_id("copilot-summary")).to_have_text("Wants: a refund")
    expect(page.get_by_test_id("copilot-use")).to_be_focused()  # the card was not drawn again under the person
    page.keyboard.press("Enter")
    order = page.locator('[data-testid="context-order"][data-order="SU-41533"]')
    expect(order.get_by_test_id("refund-amount")).to_be_focused()
    expect(order.get_by_test_id("refund-amount")).to_have_value("30.00")
    expect(order.get_by_test_id("refund-reason")).to_have_value("a partial refund for the scratch")


def test_a_draft_asks_before_it_replaces_what_the_person_wrote_and_a_failed_one_gives_it_back(site, staff_page):
    page, stub, socket = console(staff_page)
    box = page.get_by_test_id("reply-input")
    box.fill("My own words")
    page.get_by_test_id("copilot-draft").click()
    dialog = page.get_by_test_id("copilot-replace")
    expect(dialog.get_by_role("heading")).to_have_text("Replace your reply with a draft?")
    dialog.get_by_test_id("copilot-replace-cancel").click()
    expect(box).to_have_value("My own words")
    assert stub.posted == []

    page.get_by_test_id("copilot-draft").click()
    dialog.get_by_test_id("copilot-replace-confirm").click()
    expect(page.get_by_test_id("copilot-draft-stop")).to_be_visible()
    socket.send({"type": "copilot.delta", "copilot": "run-draft", "kind": "draft", "text": "Dear Ma"})
    expect(box).to_have_value("Dear Ma")
    socket.send({"type": "copilot.done", "copilot": run("draft", status="failed", error="The model could not answer (it timed out).")})
    expect(page.get_by_test_id("copilot-draft-error")).to_have_text(
        "The copilot could not draft a reply: The model could not answer (it timed out).")
    expect(box).to_have_value("My own words")
    expect(box).to_be_editable()
    expect(page.get_by_test_id("copilot-draft")).to_be_enabled()
