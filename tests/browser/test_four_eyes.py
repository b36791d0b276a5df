"""Four eyes in two staff browsers: a refund above SECOND_APPROVAL_ABOVE needs two different people.

Sam (the demo lead) and Lee (a second lead) each have a browser. The agent's 112.00 refund: Sam's approval is
the first, his card waits "1 of 2 approvals" and offers him no second approval, Lee's card shows it live and
Lee's approval runs the refund once. Sam's own 300.00 refund from the conversation page waits in the queue
for Lee; Sam's card offers him only to withdraw it. Both names on the cards and in the trace.

The site's other tests run without four eyes, so this module serves the same database, Redis and worker
through a daphne of its own started with SECOND_APPROVAL_ABOVE=100. Screenshots at 1280x800 and 390x844
go to tests/artifacts/four-eyes-*.png.
"""

from __future__ import annotations

import sys

import pytest
from playwright.sync_api import expect

from support.models import Approval, Customer, Refund, StaffAction
from tests.browser.conftest import (
    ARTIFACTS,
    ENV,
    Process,
    _free_port,
    _http_ok,
    _wait,
    refundable_again,
)

# Also run on PostgreSQL in CI: what two people, two sockets or the database's own SQL decide here
# (docs/testing.md#on-postgresql-and-the-scale-out-test).
pytestmark = pytest.mark.every_database

LEE = ("lee", "lee-lead-pw-1")
SIZES = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}


@pytest.fixture(scope="module")
def four_eyes_site(site, tmp_path_factory):
    """A second daphne over the same database, Redis and worker, with four eyes above 100.00."""
    port = _free_port()
    daphne = Process("daphne-four-eyes", [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                                          "agentsite.asgi:application"], tmp_path_factory.mktemp("four-eyes"),
                     env={**ENV, "SECOND_APPROVAL_ABOVE": "100"})
    base = f"http://127.0.0.1:{port}"
    try:
        _wait(lambda: _http_ok(base + "/accounts/login/"), "the four-eyes daphne", [daphne])
        yield base
    finally:
        daphne.stop()


@pytest.fixture(scope="module")
def lee(four_eyes_site):
    from django.contrib.auth import get_user_model

    from support.desk import permissions

    get_user_model().objects.filter(username=LEE[0]).delete()
    user = get_user_model().objects.create_user(LEE[0], password=LEE[1], first_name="Lee", is_staff=True)
    user.groups.add(permissions.ensure_groups()[permissions.LEADS])
    return user


@pytest.fixture
def console(new_context, four_eyes_site):
    """console(username, password, path, size) -> a logged-in console page in a browser of its own."""

    def make(username: str, password: str, path: str, size: str = "desktop"):
        page = new_context(viewport=SIZES[size]).new_page()
        page.goto(four_eyes_site + "/accounts/login/?next=" + path)
        page.locator("input[name=username]").fill(username)
        page.locator("input[name=password]").fill(password)
        page.get_by_test_id("login-button").click()
        page.wait_for_url("**" + path)
        expect(page.get_by_test_id("connection-status")).to_have_attribute("data-state", "live")
        return page

    return make


def snap(page, name: str) -> None:
    """Screenshots at desktop and phone size (tests/artifacts/four-eyes-<name>-<width>.png); nothing may be
    wider than the phone's screen."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    size = page.viewport_size
    for key in ("desktop", "phone"):
        page.set_viewport_size(SIZES[key])
        page.wait_for_timeout(250)
        page.screenshot(path=str(ARTIFACTS / f"four-eyes-{name}-{SIZES[key]['width']}.png"), full_page=False)
        if key == "phone":
            assert page.evaluate("document.documentElement.scrollWidth") <= 390, f"{name} is wider than a phone"
    page.set_viewport_size(size)


def only_these_waiting(*keep) -> None:
    """Earlier tests' approvals out of the queue, so each browser shows this test's cards."""
    from django.utils import timezone

    from support.desk import gate

    Approval.objects.filter(decided_at__isnull=True).exclude(pk__in=[a.pk for a in keep]).update(
        expires_at=timezone.now())
    gate.approvals_expire()


def card_of(page, approval):
    return page.locator(f'[data-approval="{approval.public_id}"]')


def test_the_agents_large_refund_needs_a_second_person_and_runs_once(console, lee):
    from tests.desk_factories import pending_refund_approval, start_conversation

    refundable_again("SU-41444")
    tom = Customer.objects.get(email="tom@example.com")
    approval = pending_refund_approval(start_conversation(tom), {"order_id": "SU-41444", "amount": "112.00",
                                                                 "reason": "never arrived"})
    only_these_waiting(approval)
    sam = console("staff", "sundry-demo", "/console/approvals/")
    other = console(*LEE, "/console/approvals/", size="phone")

    mine = card_of(sam, approval)
    expect(mine.get_by_test_id("approval-four-eyes")).to_have_text("Needs 2 approvals")
    expect(mine.get_by_test_id("approval-approvals")).to_contain_text("Refunds above 100.00 EUR need two people")
    mine.get_by_test_id("approve-button").click()
    expect(mine.get_by_test_id("approval-four-eyes")).to_have_text("1 of 2 approvals")
    expect(mine.get_by_test_id("approval-approvals")).to_contain_text("Approved first by you")
    expect(mine.get_by_test_id("approve-button")).to_have_count(0)  # no second approval for Sam
    expect(mine.get_by_test_id("reject-button")).to_be_visible()
    expect(mine).to_have_attribute("data-status", "pending")
    snap(sam, "first-approval")

    # Lee's card changed while he looked: the first approval by Sam, and his approval is the second.
    theirs = card_of(other, approval)
    expect(theirs.get_by_test_id("approval-four-eyes")).to_have_text("1 of 2 approvals")
    expect(theirs.get_by_test_id("approval-approvals")).to_contain_text("Approved first by Sam")
    expect(theirs.get_by_test_id("edit-button")).to_have_count(0)  # he approves what Sam approved, or rejects
    snap(other, "second-approver")
    assert Approval.objects.get(pk=approval.pk).decided_at is None
    assert not Refund.objects.filter(tool_call_id=approval.tool_call.idempotency_key).exists()

    theirs.get_by_test_id("approve-button").click()
    expect(theirs).to_have_attribute("data-status", "approved")
    expect(theirs.get_by_test_id("approval-first-by")).to_contain_text("Sam")
    expect(theirs.get_by_test_id("approval-decided-by")).to_have_text("Lee")
    expect(mine).to_have_attribute("data-status", "approved")  # live on Sam's screen too
    expect(mine.get_by_test_id("approval-decided-by")).to_have_text("Lee")
    snap(other, "decided")
    decided = Approval.objects.get(pk=approval.pk)
    assert (decided.first_approved_by.username, decided.decided_by.username) == ("staff", "lee")
    # The worker resumes the run and the refund is made once.
    refunds = Refund.objects.filter(tool_call_id=approval.tool_call.idempotency_key)
    _wait(lambda: refunds.exists(), "the approved refund", [])
    assert refunds.count() == 1 and str(refunds.get().amount) == "112.00"


def test_a_leads_own_large_refund_waits_for_a_colleague(console, lee):
    from tests.desk_factories import start_conversation

    refundable_again("SU-41533")
    only_these_waiting()
    conversation = start_conversation(Customer.objects.get(email="maya@example.com"))
    sam = console("staff", "sundry-demo", f"/console/conversations/{conversation.public_id}/")
    order = sam.locator('[data-testid="context-order"][data-order="SU-41533"]')
    if order.get_attribute("open") is None:
        order.locator("summary").first.click()
    order.get_by_test_id("refund-open").click()
    order.get_by_test_id("refund-amount").fill("300.00")
    order.get_by_test_id("refund-reason").fill("Monitor arrived cracked: partial refund agreed with the customer")
    order.get_by_test_id("refund-submit").click()
    confirm = sam.get_by_test_id("refund-confirm")  # the dialog says it will wait, before anything is sent
    expect(confirm.locator("h2")).to_have_text("Refund 300.00 EUR on SU-41533 to Maya Okafor?")
    expect(confirm).to_contain_text("It will wait for a colleague's approval")
    expect(confirm.get_by_test_id("refund-confirm-confirm")).to_have_text("Ask for 300.00 EUR")
    assert not StaffAction.objects.filter(conversation=conversation).exists()
    snap(sam, "staff-refund-confirm")
    confirm.get_by_test_id("refund-confirm-confirm").click()
    expect(order.get_by_test_id("refund-waiting")).to_contain_text("Your refund of 300.00 EUR waits for a colleague")
    expect(order.get_by_test_id("context-refundable")).to_have_text("480.00 EUR")  # nothing refunded yet
    action = StaffAction.objects.get(conversation=conversation)
    assert action.status == StaffAction.AWAITING_APPROVAL
    approval = Approval.objects.get(staff_action=action)
    snap(sam, "staff-refund-asked")

    # Lee sees it in the queue, says who asked, approves it: the refund is made, the customer told.
    other = console(*LEE, "/console/approvals/", size="phone")
    theirs = card_of(other, approval)
    expect(theirs.get_by_test_id("approval-summary")).to_have_text("Refund 300.00 EUR on SU-41533 — asked by Sam")
    expect(theirs.get_by_test_id("approval-four-eyes")).to_have_text("1 of 2 approvals")
    expect(theirs.get_by_test_id("approval-approvals")).to_contain_text("Asked by Sam")
    # Sam's own queue offers him no approval of it, only to withdraw it.
    sam_queue = console("staff", "sundry-demo", "/console/approvals/")
    mine = card_of(sam_queue, approval)
    expect(mine.get_by_test_id("approval-approvals")).to_contain_text("Asked by you")
    expect(mine.get_by_test_id("approve-button")).to_have_count(0)
    expect(mine.get_by_test_id("reject-button")).to_be_visible()
    snap(other, "staff-refund-second-approver")

    theirs.get_by_test_id("approve-button").click()
    expect(theirs).to_have_attribute("data-status", "approved")
    expect(theirs.get_by_test_id("approval-asked-by")).to_have_text("Sam")
    expect(theirs.get_by_test_id("approval-decided-by")).to_have_text("Lee")
    expect(theirs.get_by_test_id("approval-refund-made")).to_have_attribute("data-status", "done")
    snap(other, "staff-refund-made")
    assert [str(r.amount) for r in Refund.objects.filter(order__number="SU-41533")] == ["300.00"]
    # Sam's conversation page: the balance and the trace, naming both.
    expect(order.get_by_test_id("context-refundable")).to_have_text("180.00 EUR")
    row = sam.locator(f'[data-testid="trace-action"][data-id="{action.public_id}"]')
    expect(row).to_have_attribute("data-status", "done")
    expect(row.get_by_test_id("trace-action-people")).to_have_text(" · Sam, approved by Lee")
    refundable_again("SU-41533")


def test_a_first_approval_heard_while_the_queue_reloads_is_not_undone_by_the_reload(console, new_context,
                                                                                      four_eyes_site, lee):
    """Lee's console reloads the queue when its socket opens. Sam's first approval lands while that list is on
    its way, read before it: the card shows the event's "1 of 2 approvals", and the older list, arriving after,
    does not put "Needs 2 approvals" back."""
    import re

    from tests.desk_factories import pending_refund_approval, start_conversation

    refundable_again("SU-41444")
    approval = pending_refund_approval(start_conversation(Customer.objects.get(email="tom@example.com")),
                                       {"order_id": "SU-41444", "amount": "112.00", "reason": "never arrived"})
    only_these_waiting(approval)
    sam = console("staff", "sundry-demo", "/console/approvals/")
    expect(card_of(sam, approval).get_by_test_id("approval-four-eyes")).to_have_text("Needs 2 approvals")

    held = []  # (route, the server's answer when it was asked): the list, read before Sam approves
    page = new_context(viewport=SIZES["desktop"]).new_page()
    page.route(re.compile(r"/api/staff/approvals\?status=pending"), lambda route: held.append((route, route.fetch())))
    page.goto(four_eyes_site + "/accounts/login/?next=/console/approvals/")
    page.locator("input[name=username]").fill(LEE[0])
    page.locator("input[name=password]").fill(LEE[1])
    page.get_by_test_id("login-button").click()
    expect(page.get_by_test_id("connection-status")).to_have_attribute("data-state", "live")
    for _ in range(200):  # the route's handler runs while Playwright waits
        if held:
            break
        page.wait_for_timeout(25)
    assert held, "the queue asked for its list when the socket opened"
    expect(page.get_by_test_id("approvals-badge")).to_have_text("…")  # the list is still on its way

    card_of(sam, approval).get_by_test_id("approve-button").click()
    expect(card_of(sam, approval).get_by_test_id("approval-four-eyes")).to_have_text("1 of 2 approvals")
    theirs = card_of(page, approval)
    expect(theirs.get_by_test_id("approval-four-eyes")).to_have_text("1 of 2 approvals")  # the event

    for route, answer in held:
        route.fulfill(response=answer)  # the list as it was before Sam's approval
    expect(page.get_by_test_id("approvals-badge")).to_have_text("1")  # the list has arrived
    expect(theirs.get_by_test_id("approval-four-eyes")).to_have_text("1 of 2 approvals")
    expect(theirs.get_by_test_id("approve-button")).to_be_visible()  # Lee may give the second
