"""The conversation page as a support lead works it: the customer's conversation first (the agent's steps in
plain words, the raw trace behind a toggle that is remembered), the summary of why it needs a person, live,
the run's details in their own tab, the latest message, the reply box and the order in one screen, and
closing the conversation, which the customer is told before being asked for a rating.
Screenshots: var/screenshots/conversation-*.png at 1280 and 390 px.
"""

from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.browser.conftest import STAFF_NAME, agent_messages, ask, open_widget, refundable_again, widget_conversation
from tests.browser.inbox_helpers import ALEX, SCREENSHOTS, alex_user

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
GERMAN = {"locale": "de-DE", "timezone_id": "Europe/Berlin"}

# Written into the widget's shadow root: what its header said, and whether the closing line was there, at the
# moment the rating first showed.
WATCH_THE_RATING = """() => {
    const root = document.querySelector('[data-testid="widget-host"]').shadowRoot;
    window.__atRating = null;
    new MutationObserver(() => {
        const rating = root.querySelector('[data-testid="widget-rating"]');
        if (window.__atRating || !rating || rating.hidden) return;
        const notices = [...root.querySelectorAll('[data-testid="widget-message"][data-author="system"]')];
        window.__atRating = {subtitle: root.querySelector('[data-testid="widget-subtitle"]').textContent,
                             lastNotice: notices.length ? notices[notices.length - 1].textContent : ""};
    }).observe(root, {subtree: true, childList: true, attributes: true, characterData: true});
}"""


def snap(page, name: str, viewport=None) -> None:
    """A screenshot of what is on screen, at the page's size or the one given (then back)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    before = page.viewport_size
    if viewport:
        page.set_viewport_size(viewport)
        page.wait_for_timeout(300)
    page.screenshot(path=str(SCREENSHOTS / f"conversation-{name}.png"))
    if viewport and before:
        page.set_viewport_size(before)
        page.wait_for_timeout(150)


def notices(page):
    return page.locator('[data-testid="widget-message"][data-author="system"]')


def handed_over(customer_page, *, email=None, **options):
    """A customer whose refund of SU-41533 (480.00, above the agent's ceiling) was handed to a person."""
    refundable_again("SU-41533")
    customer = customer_page(email, viewport=DESKTOP, **options)
    open_widget(customer)
    ask(customer, "The monitor from order SU-41533 arrived cracked. I want a full refund.")
    conversation = widget_conversation(customer)["id"]
    expect(notices(customer)).to_have_count(1, timeout=20000)
    return customer, conversation


# Where an element is, and whether all of it can be seen: inside the window and inside the box that scrolls it.
ON_SCREEN = """(el) => {
    const box = el.getBoundingClientRect();
    let inside = box.width > 0 && box.height > 0 && box.top >= 0 && box.left >= 0
        && box.bottom <= window.innerHeight && box.right <= window.innerWidth;
    for (let up = el.parentElement; up && inside; up = up.parentElement) {
        const style = getComputedStyle(up);
        if (!/(auto|scroll|hidden)/.test(style.overflowY)) continue;
        const clip = up.getBoundingClientRect();
        inside = box.top >= clip.top - 1 && box.bottom <= clip.bottom + 1;
    }
    return inside;
}"""


def on_screen(locator) -> bool:
    return locator.evaluate(ON_SCREEN)


def login_as(page, site, path, username, password):
    page.goto(site + "/accounts/login/?next=" + path)
    page.locator("input[name=username]").fill(username)
    page.locator("input[name=password]").fill(password)
    page.get_by_test_id("login-button").click()
    page.wait_for_url("**" + path)
    expect(page.get_by_test_id("connection-status")).to_have_attribute("data-state", "live")


def test_the_transcript_is_the_conversation_with_the_agents_steps_in_plain_words(site, customer_page, staff_page):
    _, conversation = handed_over(customer_page)
    path = f"/console/conversations/{conversation}/"
    staff = staff_page(path, viewport=DESKTOP)
    transcript = staff.get_by_test_id("transcript")
    toggle = staff.get_by_test_id("show-steps")
    expect(toggle).not_to_be_checked()
    steps = {tool: staff.locator(f'[data-testid="agent-step"][data-tool="{tool}"]')
             for tool in ("get_order", "search_policy", "track_parcel", "escalate_to_human")}
    expect(steps["get_order"].get_by_test_id("agent-step-line")).to_have_text(
        "Looked up SU-41533 · delivered · 480.00 EUR from Brightside Electronics")
    expect(steps["search_policy"].get_by_test_id("agent-step-line")).to_have_text(
        "Read the policies: Damaged items; Brightside Electronics: damaged goods")
    expect(steps["track_parcel"].get_by_test_id("agent-step-line")).to_have_text(
        re.compile(r"^Checked DPD tracking for DP55141533 · delivered \d{1,2} [A-Z][a-z]{2}, Leeds$"))
    expect(steps["escalate_to_human"].get_by_test_id("agent-step-line")).to_have_text(
        "Handed over to a person: Refund of 480.00 EUR on SU-41533 is above the 150.00 limit an agent may refund")
    # What the customer saw, and nothing of the machinery: no prompt, no calls, no results, no seqs.
    expect(staff.locator('[data-testid="message"][data-role="system"]')).to_be_hidden()
    expect(staff.get_by_test_id("tool-call").first).to_be_hidden()
    expect(staff.get_by_test_id("tool-result").first).to_be_hidden()
    shown = transcript.inner_text()
    for machinery in ("System prompt", "get_order", "escalate_to_human", "{", "Tool result", "#1"):
        assert machinery not in shown, (machinery, shown)
    assert "The monitor from order SU-41533 arrived cracked" in shown and "A member of our team will reply" in shown
    # A step opens on the facts behind it, in words.
    steps["get_order"].get_by_test_id("agent-step-line").click()
    expect(steps["get_order"].locator(".step-facts")).to_contain_text(
        "480.00 EUR total, 0.00 EUR refunded, 480.00 EUR refundable")
    expect(steps["get_order"].locator(".step-facts")).to_contain_text("1 × 27-inch 4K monitor")
    snap(staff, "steps-quiet-1280")
    snap(staff, "steps-quiet-390", PHONE)

    # The agent's steps shown: the prompt, the exact calls and results; remembered after a reload.
    toggle.check()
    expect(staff.locator('[data-testid="message"][data-role="system"]')).to_be_visible()
    expect(staff.locator('[data-testid="tool-call"][data-tool="get_order"]')).to_be_visible()
    expect(staff.locator('[data-testid="tool-call"][data-tool="get_order"]')).to_have_text(
        'get_order({"order_id":"SU-41533"})')
    expect(staff.get_by_test_id("tool-result").first).to_be_visible()
    snap(staff, "steps-shown-1280")
    snap(staff, "steps-shown-390", PHONE)
    staff.reload()
    expect(staff.get_by_test_id("show-steps")).to_be_checked()
    expect(staff.locator('[data-testid="tool-call"][data-tool="escalate_to_human"]')).to_be_visible()

    # Per person: Alex, in this same browser, has not asked for them.
    alex_user()
    staff.get_by_test_id("logout-button").click()
    staff.wait_for_url("**/accounts/login/**")
    login_as(staff, site, path, *ALEX)
    expect(staff.get_by_test_id("show-steps")).not_to_be_checked()
    expect(staff.get_by_test_id("tool-call").first).to_be_hidden()


def test_the_words_for_a_tool_of_another_service_name_the_service(staff_page):
    """A tool from an MCP server: the step JSON names its server (tests/test_api_staff.py), the line says it."""
    staff = staff_page("/console/", viewport=DESKTOP)
    said = staff.evaluate("""async () => {
        const { stepWords } = await import("/static/support/console-steps.js");
        const asked = { name: "lookup_warranty", args: '{"order_number": "SU-41533"}', server: "warranty" };
        return {
            running: stepWords({ ...asked, result: null }),
            done: stepWords({ ...asked, result: JSON.stringify({ untrusted_text_from: "mcp:warranty",
                                                                text: "2-year warranty, valid until 2027-05-01." }) }),
            renamed: stepWords({ ...asked, name: "warranty__get_order", result: "{}" }).line,
            failed: stepWords({ ...asked, result: "ERROR: the warranty service did not answer" }).line,
        };
    }""")
    assert said["running"]["line"] == "Asking the warranty service: lookup_warranty…"
    assert said["done"]["line"] == "Asked the warranty service: lookup_warranty"
    assert ["order number", "SU-41533"] in said["done"]["facts"]
    assert ["Answer", "2-year warranty, valid until 2027-05-01."] in said["done"]["facts"]
    assert said["renamed"] == "Asked the warranty service: get_order"
    assert said["failed"] == ("Could not ask the warranty service for lookup_warranty: the warranty service did not "
                              "answer")


def test_at_1280_by_800_the_latest_message_the_reply_box_and_the_order_are_on_screen(customer_page, staff_page):
    refundable_again("SU-41533")
    customer = customer_page(viewport=DESKTOP)
    open_widget(customer)
    ask(customer, "Where is my order SU-41210?")  # an earlier question, answered: a longer transcript
    conversation = widget_conversation(customer)["id"]
    expect(agent_messages(customer)).to_have_count(1, timeout=20000)
    ask(customer, "Thanks. Another thing: the monitor from order SU-41533 arrived cracked. I want a full refund.")
    expect(notices(customer)).to_have_count(1, timeout=20000)
    staff = staff_page(f"/console/conversations/{conversation}/", viewport=DESKTOP)
    latest = staff.locator('[data-testid="message"][data-author="customer"]').last
    expect(latest).to_contain_text("the monitor from order SU-41533 arrived cracked")
    order = staff.locator('[data-testid="context-order"][data-order="SU-41533"]')
    expect(order).to_have_attribute("open", "")
    expect(staff.get_by_test_id("handover-panel")).to_be_visible()
    staff.wait_for_timeout(300)  # laid out
    snap(staff, "at-1280x800")  # before the checks: a failed one shows what was on screen
    assert on_screen(latest), "the customer's latest message is not on screen"
    assert on_screen(staff.get_by_test_id("reply-input")) and on_screen(staff.get_by_test_id("reply-send"))
    assert on_screen(order), "the order being acted on is not on screen"
    assert on_screen(staff.get_by_test_id("handover-left"))
    assert staff.evaluate("() => document.scrollingElement.scrollHeight") <= 800  # the page itself does not scroll
    expect(staff.get_by_test_id("trace-table")).to_be_hidden()  # the run's details are in their own tab
    expect(staff.get_by_test_id("trace-chart")).to_be_hidden()

    # The transcript's box changes size without a scroll (here the window; the hand-over summary appearing above
    # it does the same): the latest message stays in view. A person who scrolled up stays where they are.
    scroller = staff.locator("[data-transcript-scroller]")
    staff.set_viewport_size({"width": 1280, "height": 1300})  # all of it fits: at its top
    staff.wait_for_timeout(200)
    staff.set_viewport_size(DESKTOP)
    staff.wait_for_timeout(300)
    assert on_screen(latest), "a smaller window hid the customer's latest message"
    scroller.evaluate("el => { el.scrollTop = 0; }")
    staff.wait_for_timeout(100)
    staff.set_viewport_size({"width": 1280, "height": 700})
    staff.wait_for_timeout(300)
    assert scroller.evaluate("el => el.scrollTop") == 0
    staff.set_viewport_size(DESKTOP)

    # Run details: a tab, by mouse or keyboard, kept across a reload; the conversation is one key away.
    tab, details = staff.get_by_test_id("tab-run-details"), staff.get_by_test_id("tabpanel-run-details")
    conversation_tab = staff.get_by_test_id("tab-conversation")
    expect(conversation_tab).to_have_attribute("aria-selected", "true")
    conversation_tab.focus()
    staff.keyboard.press("ArrowRight")
    expect(tab).to_be_focused()
    expect(tab).to_have_attribute("aria-selected", "true")
    expect(details).to_be_visible()
    expect(staff.get_by_test_id("tabpanel-conversation")).to_be_hidden()
    expect(staff.get_by_test_id("trace-table").locator("tbody tr").first).to_be_visible()
    expect(staff.get_by_test_id("chart-bar").first).to_be_visible()
    expect(staff.get_by_test_id("run-status")).to_have_text("Handed to a person")
    snap(staff, "run-details-1280")
    snap(staff, "run-details-390", PHONE)
    staff.reload()
    expect(staff.get_by_test_id("tab-run-details")).to_have_attribute("aria-selected", "true")
    expect(staff.get_by_test_id("trace-table").locator("tbody tr").first).to_be_visible()
    staff.get_by_test_id("tab-run-details").focus()
    staff.keyboard.press("ArrowLeft")
    expect(staff.get_by_test_id("tab-conversation")).to_have_attribute("aria-selected", "true")
    expect(staff.get_by_test_id("reply-input")).to_be_visible()

    # A phone: one column, nothing wider than the screen; the tabs, the summary, the reply box and the order.
    staff.set_viewport_size(PHONE)
    staff.wait_for_timeout(300)
    assert staff.evaluate("() => document.scrollingElement.scrollWidth") <= PHONE["width"]
    expect(staff.get_by_test_id("tab-run-details")).to_be_in_viewport()
    staff.get_by_test_id("reply-input").scroll_into_view_if_needed()
    expect(staff.get_by_test_id("reply-input")).to_be_in_viewport()
    staff.get_by_test_id("reply-input").fill("Hello Maya")
    expect(staff.get_by_test_id("reply-send")).to_be_in_viewport()
    snap(staff, "reply-390")
    order.scroll_into_view_if_needed()
    expect(order).to_be_in_viewport()
    snap(staff, "order-390")


def test_the_summary_says_why_once_with_policy_titles_and_follows_a_refund(site, customer_page, staff_page,
                                                                          new_context):
    customer, conversation = handed_over(customer_page)
    staff = staff_page(f"/console/conversations/{conversation}/", viewport=DESKTOP)
    alex_user()
    colleague = new_context(viewport=DESKTOP).new_page()  # Alex has the same conversation open
    login_as(colleague, site, f"/console/conversations/{conversation}/", *ALEX)
    expect(colleague.get_by_test_id("handover-found")).to_contain_text("nothing refunded yet")
    summary = staff.get_by_test_id("handover-panel")
    expect(summary).to_be_visible()
    expect(staff.get_by_test_id("handover-wants")).to_have_text(
        "“The monitor from order SU-41533 arrived cracked. I want a full refund.”")
    found = staff.get_by_test_id("handover-found")
    expect(found).to_contain_text("SU-41533 (480.00 EUR, Brightside Electronics): delivered")
    expect(found).to_contain_text("nothing refunded yet")
    expect(found).to_contain_text("Policies: Damaged items; Brightside Electronics: damaged goods.")
    left = staff.get_by_test_id("handover-left")
    expect(left).to_have_text("Refund of 480.00 EUR on SU-41533 is above the 150.00 limit an agent may refund. "
                              "Reply to the customer here.")
    expect(staff.get_by_test_id("attention-reason")).to_be_hidden()  # said once, in the summary
    assert "POL-" not in summary.inner_text()
    assert summary.inner_text().count("150.00") == 1
    snap(staff, "summary-1280")
    snap(staff, "summary-390", PHONE)

    # A person refunds 300.00 of it: the summary follows, live.
    order = staff.locator('[data-testid="context-order"][data-order="SU-41533"]')
    order.get_by_test_id("refund-open").click()
    order.get_by_test_id("refund-amount").fill("300.00")
    order.get_by_test_id("refund-reason").fill("Cracked on arrival: partial refund agreed")
    order.get_by_test_id("refund-submit").click()
    staff.get_by_test_id("refund-confirm-confirm").click()  # above STAFF_REFUND_CONFIRM_ABOVE
    expect(found).to_contain_text("300.00 EUR refunded, 180.00 EUR still refundable")
    expect(found).not_to_contain_text("nothing refunded")
    expect(staff.get_by_test_id("handover-done")).to_have_text(f"{STAFF_NAME} refunded 300.00 EUR on SU-41533.")
    expect(left).to_have_text(re.compile("^Nothing waits for an answer"))
    assert "480.00 EUR refundable" not in summary.inner_text() and "above the 150.00" not in summary.inner_text()
    # Live in a colleague's console too.
    expect(colleague.get_by_test_id("handover-found")).to_contain_text("300.00 EUR refunded, 180.00 EUR still refundable")
    expect(colleague.get_by_test_id("handover-done")).to_have_text(f"{STAFF_NAME} refunded 300.00 EUR on SU-41533.")

    # The customer writes: what is left says so; closed, nothing waits for a person and the panel goes.
    ask(customer, "Thanks, and the other 180.00?")
    expect(left).to_have_text(re.compile("^Answer the customer's latest message, “Thanks, and the other 180.00\\?”"))
    snap(staff, "summary-after-refund-1280")
    snap(staff, "summary-after-refund-390", PHONE)
    staff.get_by_test_id("close-conversation-button").click()
    expect(summary).to_be_hidden()
    expect(colleague.get_by_test_id("handover-panel")).to_be_hidden()
    expect(colleague.get_by_test_id("conversation-status")).to_have_attribute("data-status", "closed")
    expect(colleague.get_by_test_id("reopen-conversation-button")).to_be_visible()


def test_closing_from_the_page_tells_the_customer_then_asks_for_the_rating(customer_page, staff_page):
    customer, conversation = handed_over(customer_page, **GERMAN)
    staff = staff_page(f"/console/conversations/{conversation}/", viewport=DESKTOP)
    staff.get_by_test_id("take-over-button").click()
    expect(staff.get_by_test_id("conversation-status")).to_have_attribute("data-status", "taken_over")
    staff.get_by_test_id("reply-input").fill("Hallo Maya, ich habe Ihnen 480.00 EUR erstattet.")
    staff.get_by_test_id("reply-send").click()
    expect(staff.locator('[data-testid="message"][data-author="staff"]').last).to_contain_text("480.00 EUR")
    subtitle = customer.get_by_test_id("widget-subtitle")
    expect(subtitle).to_have_text(f"{STAFF_NAME} aus unserem Team ist da")
    expect(customer.get_by_test_id("widget-rating")).to_be_hidden()  # nothing is done yet: no rating
    customer.evaluate(WATCH_THE_RATING)

    close = staff.get_by_test_id("close-conversation-button")
    expect(close).to_have_text("Close conversation")
    close.click()
    expect(staff.get_by_test_id("conversation-status")).to_have_attribute("data-status", "closed")
    expect(staff.get_by_test_id("conversation-status")).to_have_text("Closed")
    expect(staff.get_by_test_id("conversation-assignee")).to_have_text(re.compile(f"^Closed by {STAFF_NAME}"))
    expect(staff.get_by_test_id("reopen-conversation-button")).to_be_focused()
    expect(close).to_be_hidden()
    expect(staff.get_by_test_id("hand-back-button")).to_be_hidden()  # closed: nothing to hand back
    expect(staff.get_by_test_id("reply-hint")).to_contain_text(
        "The conversation is closed: a reply still reaches the customer, and it opens again when they write.")
    expect(staff.get_by_test_id("reply-hint")).not_to_contain_text("hand back")
    expect(staff.get_by_test_id("conversation-id")).to_have_count(0)  # the customer's name, no hash beside it
    expect(staff.locator("h1")).to_have_text("Maya Okafor")
    closing = (f"{STAFF_NAME} aus unserem Team hat dieses Gespräch abgeschlossen. Wenn Sie noch etwas brauchen, "
               "schreiben Sie einfach hier.")
    # The console's transcript shows the line the customer was sent.
    expect(staff.locator('[data-testid="message"][data-author="system"]').last).to_contain_text(closing)

    expect(notices(customer).last).to_have_text(closing)
    expect(subtitle).to_have_text("Dieses Gespräch ist abgeschlossen")
    rating = customer.get_by_test_id("widget-rating")
    expect(rating).to_be_visible()
    expect(rating).to_contain_text("Wie waren wir?")
    at_rating = customer.evaluate("window.__atRating")
    assert at_rating == {"subtitle": "Dieses Gespräch ist abgeschlossen", "lastNotice": closing}, at_rating
    snap(customer, "closed-widget-1280")
    snap(customer, "closed-widget-390", PHONE)
    snap(staff, "closed-1280")
    snap(staff, "closed-390", PHONE)
    staff.set_viewport_size(PHONE)  # the phone's navigation leaves the screen to the conversation
    assert staff.locator(".topbar").bounding_box()["height"] <= 100, staff.locator(".topbar").bounding_box()
    staff.set_viewport_size(DESKTOP)

    # The customer writes again: reopened, for the customer and on the page.
    ask(customer, "Noch eine Frage zur Rechnung.")
    expect(subtitle).to_have_text(f"{STAFF_NAME} aus unserem Team ist da")
    expect(staff.get_by_test_id("conversation-status")).to_have_attribute("data-status", "taken_over")
    expect(staff.get_by_test_id("close-conversation-button")).to_be_visible()
    expect(staff.get_by_test_id("reopen-conversation-button")).to_be_hidden()
    expect(staff.get_by_test_id("hand-back-button")).to_be_visible()


def test_a_conversation_the_agent_is_waiting_on_is_not_closed_and_the_page_says_why(customer_page, staff_page):
    refundable_again("SU-41310")
    customer = customer_page(viewport=DESKTOP)
    open_widget(customer)
    ask(customer, "My parcel SU-41310 never came.")  # a refund the agent asks a person to approve
    conversation = widget_conversation(customer)["id"]
    staff = staff_page(f"/console/conversations/{conversation}/", viewport=DESKTOP)
    expect(staff.get_by_test_id("conversation-approvals").get_by_test_id("approval-card")).to_have_count(
        1, timeout=20000)
    staff.get_by_test_id("close-conversation-button").click()
    error = staff.get_by_test_id("conversation-action-error")
    expect(error).to_be_visible()
    expect(error).to_contain_text("decide the approval or take the conversation over before closing it")
    expect(staff.get_by_test_id("close-conversation-button")).to_be_visible()
    assert notices(customer).count() == 0
