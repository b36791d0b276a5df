"""Every console page is accessible and fits a phone: axe-core finds no violation of impact "serious" or
"critical", and nothing scrolls sideways at 390 px. Each page is checked in a state a support agent meets:
the inbox with rows and one selected, a conversation with its transcript, the customer's context, the
trace, an approval card that needs a second look and a note, the approval queue with cards (some ticked
for a bulk decision, one waiting for a second approval), the audit page with rows, the login page and the
not-found page; and the customer's widget (closed, open with the rating form, its list); at 1280 and at 390 px
wide. Screenshots: var/screenshots/a11y-<page>-<width>.png.

axe-core is vendored (tests/browser/vendor/axe.min.js, pinned by version and digest) and evaluated through
Playwright, which runs it outside the page's Content-Security-Policy (script-src 'self', no inline script):
the pages themselves are checked under their real CSP, as staff see them, rather than with bypass_csp.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from support.desk import gate
from support.models import Approval, Customer
from tests.browser.conftest import ROOT, STAFF_LOGIN

AXE = Path(__file__).parent / "vendor" / "axe.min.js"
AXE_VERSION = "4.14.1"
AXE_SHA256 = "29348999450cdf2849a8e70b7912fc2da85a849da39c0d0d5394f51d4a9ed95c"
SCREENSHOTS = ROOT / "var" / "screenshots"
WIDTHS = ((1280, 900), (390, 844))
BLOCKING = ("serious", "critical")

_RUN_AXE = """async () => {
    const result = await axe.run(document, { resultTypes: ["violations"] });
    return result.violations.filter((v) => v.impact === "serious" || v.impact === "critical").map((v) => ({
        id: v.id, impact: v.impact, help: v.help, helpUrl: v.helpUrl,
        nodes: v.nodes.slice(0, 8).map((n) => `${n.target.join(" ")} (${(n.failureSummary || "").split("\\n").slice(1).join(" ").trim()})`),
        count: v.nodes.length,
    }));
}"""

# The elements that reach past the right edge of the screen, outermost first: what makes a page scroll sideways.
_OVERFLOWING = """() => {
    const limit = document.documentElement.clientWidth + 1;
    const out = [];
    for (const el of document.querySelectorAll("body *")) {
        const box = el.getBoundingClientRect();
        if (box.width === 0 || box.right <= limit) continue;
        if (out.some((o) => o.contains(el))) continue;
        out.push(el);
    }
    return out.slice(0, 8).map((el) => `${el.tagName.toLowerCase()}${el.dataset.testid ? `[data-testid=${el.dataset.testid}]` : ""}`
        + `${el.className && typeof el.className === "string" ? "." + el.className.trim().split(/\\s+/).join(".") : ""}`
        + ` right=${Math.round(el.getBoundingClientRect().right)}`);
}"""


def axe_source() -> str:
    source = AXE.read_bytes()
    assert hashlib.sha256(source).hexdigest() == AXE_SHA256, f"{AXE} is not the pinned axe-core {AXE_VERSION}"
    return source.decode()


def serious_violations(page) -> list[dict]:
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.evaluate(axe_source())  # evaluated by the browser's debugging protocol: no script tag the CSP would block
        assert page.evaluate("() => axe.version") == AXE_VERSION
    return page.evaluate(_RUN_AXE)


# Every animation that ends (a panel sliding or fading in after the resize), finished: axe reads colours as they are
# drawn, and a header half faded in over the page reads lighter than it is. Endless ones (a spinner) are left.
_SETTLED = """() => Promise.all(document.getAnimations()
    .filter(a => a.effect && a.effect.getComputedTiming().endTime !== Infinity)
    .map(a => a.finished.catch(() => null)))"""


def settled(page) -> None:
    page.evaluate(_SETTLED)


def audit(page, name: str, *, ready=None) -> list[str]:
    """At 1280 and 390 px: screenshots, axe's serious and critical violations, and (at 390) sideways scroll.
    Returns what is wrong, in words a person can act on; `ready(page)` waits for the state after a resize."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    problems = []
    for width, height in WIDTHS:
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(250)
        if ready:
            ready(page)
        settled(page)
        for v in serious_violations(page):
            problems.append(f"{name} at {width} px: {v['impact']} {v['id']}: {v['help']} ({v['helpUrl']}); "
                            f"{v['count']} element(s):\n    " + "\n    ".join(v["nodes"]))
        scroll = page.evaluate("() => document.scrollingElement.scrollWidth")
        if width == 390 and scroll > width + 1:
            problems.append(f"{name} at 390 px scrolls sideways (scrollWidth {scroll}); too wide: "
                            + "; ".join(page.evaluate(_OVERFLOWING)))
        page.screenshot(path=str(SCREENSHOTS / f"a11y-{name}-{width}.png"), full_page=True)
    return problems


def assert_accessible(page, name: str, **kwargs) -> None:
    problems = audit(page, name, **kwargs)
    assert not problems, "\n".join(problems)


def expire(approvals) -> None:
    """This module's cards out of the queue again (as the sweeper would), so later tests see only theirs."""
    Approval.objects.filter(pk__in=[a.pk for a in approvals], decided_at__isnull=True).update(
        expires_at=timezone.now() - timedelta(seconds=1))
    gate.approvals_expire()


@pytest.fixture(scope="module")
def desk(site):
    """A conversation worked by the real agent (worker and model stand-in) up to a refund waiting for a
    person, where the customer wrote again after the request (so the card asks for a second look), with a
    note; and a second card in the queue. Written as the customer API does, through the desk's services."""
    from django.contrib.auth import get_user_model

    from support.desk import services
    from support.live import events
    from support.models import Note
    from tests.desk_factories import pending_refund_approval, start_conversation

    def say(text: str) -> None:
        services.conversation_post_message(conversation=conversation, text=text)  # the run is queued on commit
        events.publisher.flush()

    conversation = start_conversation(Customer.objects.get(email="maya@example.com"))
    say("My order SU-41402 arrived cracked.")  # 129.00: above the agent's own limit, a person decides
    deadline = time.monotonic() + 30
    while not Approval.objects.filter(run__conversation=conversation).exists():
        assert time.monotonic() < deadline, "the agent asked for no approval"
        time.sleep(0.2)
    say("Actually, could you send a replacement instead of the refund?")
    approval = Approval.objects.get(run__conversation=conversation)
    staff = get_user_model().objects.get(username=STAFF_LOGIN[0])
    Note.objects.create(conversation=conversation, author=staff,
                        text="Called the customer: the speakers' casing is split. Photo on file.")
    other = pending_refund_approval(start_conversation(Customer.objects.get(email="ines@example.com")),
                                    {"order_id": "SU-41620", "amount": "4.99", "reason": "shipping fee: parcel late"})
    yield {"conversation": str(conversation.public_id), "approval": approval, "other": other}
    expire([approval, other])


def test_the_login_page_is_accessible_and_fits_a_phone(site, new_context):
    page = new_context().new_page()
    page.goto(site + "/accounts/login/?next=/console/")
    expect(page.get_by_test_id("login-button")).to_be_visible()
    assert_accessible(page, "login")


def test_a_failed_login_is_accessible_and_fits_a_phone(site, new_context):
    page = new_context().new_page()
    page.goto(site + "/accounts/login/?next=/console/")
    page.locator("input[name=username]").fill("staff")
    page.locator("input[name=password]").fill("not the password")
    page.get_by_test_id("login-button").click()
    expect(page.get_by_role("alert")).to_be_visible()
    assert_accessible(page, "login-failed")


def test_the_inbox_with_a_row_selected_is_accessible_and_fits_a_phone(desk, staff_page):
    page = staff_page("/console/")
    rows = page.get_by_test_id("conversation-row")
    expect(rows.first).to_be_visible()
    expect(page.get_by_test_id("approval-queue").get_by_test_id("approval-card").first).to_be_visible()
    # A hand-over arrives while the inbox is open: its alert (with Assign to me) and its row are part of the page.
    from support.desk import services
    from support.models import Message
    from tests.browser.test_notify import hand_over
    from tests.desk_factories import start_conversation

    handed = start_conversation(Customer.objects.get(email="tom@example.com"))
    services.message_append(conversation=handed, author=Message.CUSTOMER,  # the inbox lists what someone wrote in
                            wire={"role": "user", "content": "My parcel never came. Can a person help?"})
    hand_over(str(handed.public_id), "The customer asks for a person about a missing parcel.")
    expect(page.get_by_test_id("alerts").locator(".alert").first).to_be_visible()
    expect(page.locator(f'[data-testid="conversation-row"][data-conversation="{handed.public_id}"]')).to_be_visible()
    page.keyboard.press("j")  # the first row selected, as a person working the inbox from the keyboard has it
    expect(rows.first.get_by_test_id("conversation-link")).to_be_focused()
    assert_accessible(page, "inbox")

    # The closed ones, as a person looking back at the day's work sees them.
    page.locator(f'[data-testid="conversation-row"][data-conversation="{handed.public_id}"]') \
        .get_by_test_id("close-button").click()
    page.get_by_test_id("filter-closed").click()
    expect(page.get_by_test_id("conversation-row").first).to_have_attribute("data-status", "closed")
    assert_accessible(page, "inbox-closed")


def test_a_conversation_with_its_context_trace_card_and_note_is_accessible_and_fits_a_phone(desk, staff_page):
    page = staff_page(f"/console/conversations/{desk['conversation']}/")
    expect(page.locator('[data-testid="message"][data-author="customer"]').first).to_be_visible()
    expect(page.get_by_test_id("agent-step").first).to_be_visible()
    expect(page.get_by_test_id("context-body")).to_contain_text("SU-41402")
    card = page.get_by_test_id("conversation-approvals").get_by_test_id("approval-card")
    expect(card.get_by_test_id("approval-second-look")).to_be_visible()
    expect(card.get_by_test_id("confirm-seen")).to_be_visible()
    expect(page.get_by_test_id("notes").locator("li")).to_have_count(1)
    assert_accessible(page, "conversation")
    # The agent's steps shown: the system prompt, the exact calls and their results.
    page.get_by_test_id("show-steps").check()
    expect(page.get_by_test_id("tool-result").first).to_be_visible()
    assert_accessible(page, "conversation-steps")
    # The run's details: the trace and the chart, in their own tab.
    page.get_by_test_id("tab-run-details").click()
    expect(page.get_by_test_id("trace-table").locator("tbody tr").first).to_be_visible()
    assert_accessible(page, "conversation-run-details")


def test_a_conversation_with_its_forms_open_is_accessible_and_fits_a_phone(desk, staff_page):
    """What a person opens while working a case: the card's reason and amount (after approving without the
    tick), a refund and a message to the seller from the order, a new saved reply."""
    page = staff_page(f"/console/conversations/{desk['conversation']}/")
    card = page.get_by_test_id("conversation-approvals").get_by_test_id("approval-card")
    card.get_by_test_id("approve-button").click()  # without the tick: the card says what to do
    expect(card.get_by_test_id("approval-error")).to_contain_text("tick the box")
    card.get_by_test_id("reject-button").click()
    expect(card.get_by_test_id("reason-input")).to_be_focused()
    expect(card.get_by_test_id("edit-button")).to_be_hidden()  # an open form takes the buttons' place
    card.get_by_test_id("reject-cancel-button").click()
    card.get_by_test_id("edit-button").click()
    expect(card.get_by_test_id("amount-input")).to_be_focused()
    card.get_by_test_id("amount-input").fill("1.00")  # another amount: the reason for it is asked, and checked
    expect(card.get_by_test_id("field-reason")).to_be_visible()
    context = page.get_by_test_id("context-panel").locator(".order-card[open]")  # the order this case is about
    context.get_by_test_id("refund-open").first.click()
    expect(context.get_by_test_id("refund-form")).to_be_visible()
    page.get_by_test_id("saved-reply-manage").locator("summary").click()
    page.get_by_test_id("saved-reply-new").click()
    expect(page.get_by_test_id("saved-reply-form")).to_be_visible()
    assert_accessible(page, "conversation-forms")

    context.get_by_test_id("refund-cancel").click()  # one form at a time on an order
    context.get_by_test_id("seller-open").click()
    expect(context.get_by_test_id("seller-form")).to_be_visible()
    assert_accessible(page, "conversation-seller-form")


def test_the_approval_queue_is_accessible_and_fits_a_phone(desk, staff_page):
    page = staff_page("/console/approvals/")
    queue = page.get_by_test_id("approval-queue")
    mine = queue.locator(f'[data-approval="{desk["approval"].public_id}"]')
    expect(mine.get_by_test_id("approval-second-look")).to_be_visible()
    expect(queue.locator(f'[data-approval="{desk["other"].public_id}"]').get_by_test_id("approve-button")).to_be_visible()
    page.keyboard.press("j")
    expect(queue.get_by_test_id("approval-summary").first).to_be_focused()
    assert_accessible(page, "approvals")


def test_the_queue_with_cards_selected_and_one_waiting_for_a_second_approval_is_accessible(desk, staff_page):
    """Bulk decisions (cards ticked, the bar's count and buttons) and four eyes (a card approved first by a
    colleague: "1 of 2 approvals")."""
    from django.contrib.auth import get_user_model

    from tests.desk_factories import pending_refund_approval, start_conversation

    kim = get_user_model().objects.filter(username="kim-a11y").first() or get_user_model().objects.create_user(
        "kim-a11y", password="pw-kim-a11y", first_name="Kim", is_staff=True)
    half = pending_refund_approval(start_conversation(Customer.objects.get(email="tom@example.com")),
                                   {"order_id": "SU-41444", "amount": "112.00", "reason": "never arrived"})
    Approval.objects.filter(pk=half.pk).update(first_approved_by=kim, first_approved_at=timezone.now(),
                                               first_arguments=half.requested_arguments)
    try:
        page = staff_page("/console/approvals/")
        queue = page.get_by_test_id("approval-queue")
        card = queue.locator(f'[data-approval="{half.public_id}"]')
        expect(card.get_by_test_id("approval-four-eyes")).to_have_text("1 of 2 approvals")
        expect(card.get_by_test_id("approval-approvals")).to_contain_text("Approved first by Kim")
        page.get_by_test_id("bulk-select-all").check()
        expect(page.get_by_test_id("bulk-count")).not_to_have_text("None selected")
        assert_accessible(page, "approvals-selected")
    finally:
        expire([half])


def test_the_audit_page_with_rows_is_accessible_and_fits_a_phone(site, staff_page):
    from django.contrib.auth import get_user_model

    from tests.desk_factories import pending_refund_approval, start_conversation

    decided = pending_refund_approval(start_conversation(Customer.objects.get(email="ines@example.com")),
                                      {"order_id": "SU-41620", "amount": "4.99", "reason": "shipping fee: parcel late"})
    gate.approval_decide(approval=decided, user=get_user_model().objects.get(username=STAFF_LOGIN[0]),
                         approve=False, reason="=SUM(A1) is not a reason a customer reads")
    page = staff_page("/console/audit/")
    expect(page.get_by_test_id("audit-row").first).to_be_visible()
    expect(page.get_by_test_id("audit-preview")).to_contain_text("=SUM(A1) is not a reason")
    assert_accessible(page, "audit")


def test_the_decided_approvals_are_accessible(desk, staff_page):
    page = staff_page("/console/approvals/?status=decided")
    expect(page.get_by_test_id("filter-decided")).to_have_attribute("aria-pressed", "true")
    page.wait_for_timeout(500)
    violations = serious_violations(page)
    assert not violations, violations


def test_the_not_found_page_is_accessible_and_fits_a_phone(site, staff_page):
    page = staff_page("/console/")
    page.goto(site + f"/console/conversations/{uuid.uuid4()}/")
    expect(page.get_by_test_id("not-found")).to_be_visible()
    assert_accessible(page, "not-found")


@pytest.fixture
def evaluation_report():
    """A report where the site reads its latest one (written by `manage.py evaluate`), with scenarios wide
    enough to scroll on a phone; whatever was there before is put back."""
    import json

    from support.evaluation import report

    path = report.latest_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    kept = {p: p.read_bytes() for p in (path, path.with_suffix(".html")) if p.exists()}
    run = {"attempt": 1, "passed": False, "skipped": "", "checks": [], "model_calls": 5, "prompt_tokens": 1,
           "completion_tokens": 1, "cost_usd": 0.00123, "seconds": 1, "decisions": [], "trace": [], "transcript": []}
    scenarios = [{"name": f"lost-parcel-marketplace-seller-{i}", "title": "A parcel marked delivered that never "
                  "arrived, sold by a marketplace seller with its own waiting period", "skipped": "", "attempts": 1,
                  "passes": i % 2, "runs": [{**run, "passed": bool(i % 2),
                                             "failed": [] if i % 2 else ["turn 2: says 'refund_requested_with_reference'"]}]}
                 for i in range(6)]
    data = {"started_at": "2026-12-01T10:00:00+00:00", "seconds": 3, "model": {"name": "sundry-standin-1",
            "endpoint": "the built-in stand-in"}, "prompt": {"version": "13", "fingerprint": "abc123"}, "repeat": 1,
            "min_pass_rate": 1.0, "pass_rate": 0.5, "ok": False, "attempts": 6, "passed": 3, "skipped": [],
            "totals": {"model_calls": 30, "tokens": 100, "cost_usd": 0.01}, "scenarios": scenarios}
    path.write_text(json.dumps(data))
    path.with_suffix(".html").write_text(report.as_html(data))
    yield data
    for p in (path, path.with_suffix(".html")):
        if p in kept:
            p.write_bytes(kept[p])
        else:
            p.unlink(missing_ok=True)


def test_the_evaluation_page_is_accessible_and_fits_a_phone(site, staff_page, evaluation_report):
    page = staff_page("/console/")
    page.goto(site + "/console/evaluation/")
    expect(page.get_by_test_id("evaluation-row")).to_have_count(6)
    assert_accessible(page, "evaluation")


def test_the_check_finds_what_it_is_meant_to_find(site, staff_page):
    """The check itself: a button without a name and low-contrast text on a real console page are found."""
    page = staff_page("/console/approvals/")
    page.evaluate("""() => {
        const b = document.createElement("button"); b.id = "nameless"; document.querySelector("main").append(b);
        const p = document.createElement("p"); p.id = "faint"; p.textContent = "hard to read";
        p.style.color = "#cccccc"; document.querySelector("main").append(p);
    }""")
    found = {v["id"]: " ".join(v["nodes"]) for v in serious_violations(page)}
    assert "#nameless" in found.get("button-name", "") and "#faint" in found.get("color-contrast", ""), found


@pytest.fixture(scope="module")
def edited_policy(site):
    """A policy with three versions saved in the console (a table, a list, a changed sentence), gone after."""
    from support.desk import policy_edit
    from support.desk.demo import demo_staff_user
    from support.models import PolicyDocument

    lead = demo_staff_user()
    body = ("Gift cards are not refunded in cash.\n\n| Card | Credit restored |\n|---|---|\n| Expired | 30 days |\n\n"
            "- Ask for the card number.\n- Check the balance.")
    draft = policy_edit.PolicyDraft(f"Gift cards {uuid.uuid4().hex[:6]}", body, "", "First version")
    doc_id = policy_edit.policy_create(user=lead, draft=draft).doc_id
    for version, text in ((1, body.replace("30 days", "45 days")), (2, body.replace("in cash", "in cash or kind"))):
        changed = policy_edit.PolicyDraft(draft.title, text, "", f"Change {version}")
        policy_edit.policy_save(user=lead, doc_id=doc_id, draft=changed, based_on=version)
    yield doc_id
    PolicyDocument.objects.filter(doc_id=doc_id).delete()


def test_the_policy_list_is_accessible_and_fits_a_phone(edited_policy, staff_page):
    page = staff_page("/console/policies/")
    expect(page.locator(f'[data-testid="policy-row"][data-doc="{edited_policy}"]')).to_be_visible()
    assert_accessible(page, "policies")


def test_a_policy_with_its_history_is_accessible_and_fits_a_phone(edited_policy, staff_page):
    page = staff_page(f"/console/policies/{edited_policy}/")
    expect(page.get_by_test_id("policy-history-item")).to_have_count(3)
    expect(page.get_by_test_id("policy-text").locator("table")).to_be_visible()
    assert_accessible(page, "policy")


def test_the_policy_editor_with_a_preview_and_a_missing_note_is_accessible_and_fits_a_phone(edited_policy, staff_page):
    page = staff_page(f"/console/policies/{edited_policy}/edit/")
    page.get_by_test_id("policy-preview-button").click()
    expect(page.get_by_test_id("policy-preview-text").locator("li")).to_have_count(2)
    assert_accessible(page, "policy-editor-preview")
    page.get_by_test_id("policy-body").fill("Gift cards are never refunded.")
    page.get_by_test_id("policy-save").click()  # without a note: the field says what to do
    expect(page.get_by_test_id("policy-note")).to_have_attribute("aria-invalid", "true")
    assert_accessible(page, "policy-editor-note-missing")


def test_an_older_policy_version_with_its_differences_is_accessible_and_fits_a_phone(edited_policy, staff_page):
    page = staff_page(f"/console/policies/{edited_policy}/versions/1/")
    expect(page.get_by_test_id("policy-diff").get_by_test_id("diff-removed").first).to_be_visible()
    assert_accessible(page, "policy-version")


def test_the_widget_closed_open_with_its_rating_form_and_its_list_is_accessible_and_fits_a_phone(site, new_context):
    # The shop page as a signed-in customer sees it: the launcher (named by the words it shows), then the panel
    # with an answer and the rating form, then the list of their conversations.
    from tests.browser.conftest import agent_messages, ask, open_widget

    page = new_context().new_page()
    page.goto(site + "/")
    assert_accessible(page, "widget-closed")
    page.set_viewport_size({"width": 1280, "height": 900})
    open_widget(page)
    ask(page, "Where is my order SU-41210?")
    expect(agent_messages(page)).to_have_count(1, timeout=20000)
    expect(page.get_by_test_id("widget-rating")).to_be_visible()
    assert_accessible(page, "widget-rating", ready=lambda p: expect(p.get_by_test_id("widget-rating")).to_be_visible())
    page.get_by_test_id("widget-history-button").click()
    assert_accessible(page, "widget-list",
                      ready=lambda p: expect(p.get_by_test_id("widget-history-row").first).to_be_visible())
