"""Approvals that do not wait silently, in the console: cards show the time left and who was told ("Reminder
sent", "Escalated to leads"), live when the sweep tells them; the queue and the inbox's "Least time left first"
put the approval that expires soonest on top; the lead is alerted of the escalation. Screenshots at 1280 and
390 px go to var/screenshots/deadlines-*.png; axe finds nothing serious."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone
from playwright.sync_api import expect

from support.desk import nudges
from support.live import events
from support.models import Approval, Conversation, Customer
from tests.browser.inbox_helpers import login, row, screens
from tests.browser.test_a11y import serious_violations
from tests.browser.test_conversation_page import DESKTOP
from tests.desk_factories import pending_refund_approval, start_conversation


def waiting_since(email: str, hours: float) -> Approval:
    """A refund approval asked `hours` ago, of a new conversation of the customer's."""
    approval = pending_refund_approval(start_conversation(Customer.objects.get(email=email)))
    requested = timezone.now() - timedelta(hours=hours)
    Approval.objects.filter(pk=approval.pk).update(
        requested_at=requested, expires_at=requested + timedelta(seconds=settings.APPROVAL_TIMEOUT_SECONDS))
    return Approval.objects.get(pk=approval.pk)


def card(page, approval: Approval):
    return page.locator(f'[data-testid="approval-card"][data-approval="{approval.public_id}"]')


def test_cards_and_the_inbox_show_the_time_left_and_who_was_told(site, new_context):
    assert settings.APPROVAL_TIMEOUT_SECONDS == 24 * 3600  # the default: the ages below are fractions of a day
    fresh = waiting_since("ines@example.com", 1.5)  # 22 h 30 min left: nobody told yet
    reminded = waiting_since("maya@example.com", 13.5)  # 10 h 30 min left: past half its time
    escalated = waiting_since("tom@example.com", 20.5)  # 3 h 30 min left: past four fifths
    mine = [fresh, reminded, escalated]
    conversations = {a.pk: str(a.run.conversation.public_id) for a in mine}
    try:
        queue = login(new_context, site, "/console/approvals/", viewport=DESKTOP)
        for approval in mine:
            expect(card(queue, approval)).to_be_visible()
        expect(card(queue, escalated).get_by_test_id("approval-expiry")).to_have_text("Expires in 3 h")
        expect(card(queue, fresh).get_by_test_id("approval-expiry")).to_have_text("Expires in 22 h")
        expect(queue.get_by_test_id("approval-nudge")).to_have_count(0)

        # The sweep (the beat's nudge_approvals): the consoles are told, live.
        done = nudges.approvals_nudge()
        events.publisher.flush()
        assert str(reminded.public_id) in done["reminder"] and str(escalated.public_id) in done["escalation"]
        assert str(fresh.public_id) not in done["reminder"] + done["escalation"]
        expect(card(queue, reminded).get_by_test_id("approval-nudge")).to_have_text("Reminder sent")
        expect(card(queue, escalated).get_by_test_id("approval-nudge")).to_have_text("Escalated to leads")
        expect(card(queue, fresh).get_by_test_id("approval-nudge")).to_have_count(0)
        # The demo login is a lead: alerted of the escalation, with the time left.
        alert = queue.locator('[data-testid="alert"][data-nudge="escalation"]'
                              f'[data-conversation="{conversations[escalated.pk]}"]')
        expect(alert).to_contain_text("Escalated to leads")
        expect(alert).to_contain_text("Expires in 3 h")

        # The queue: least time left first.
        ids = queue.locator('[data-testid="approval-card"][data-status="pending"]').evaluate_all(
            "cards => cards.map((c) => c.dataset.approval)")
        ours = [i for i in ids if i in {str(a.public_id) for a in mine}]
        assert ours == [str(escalated.public_id), str(reminded.public_id), str(fresh.public_id)]
        screens(queue, "deadlines-queue")
        assert serious_violations(queue) == []

        # The inbox sorted by time left: the conversation whose approval expires soonest first.
        inbox = login(new_context, site, "/console/?sort=expiring", viewport=DESKTOP)
        expect(inbox.get_by_test_id("inbox-sort")).to_have_value("expiring")
        expect(inbox.get_by_test_id("inbox-sort").locator("option[value=expiring]")).to_have_text(
            "Least time left first")
        for approval in mine:
            expect(row(inbox, conversations[approval.pk])).to_be_visible()
        expect(row(inbox, conversations[escalated.pk]).get_by_test_id("row-expiry")).to_have_text("Expires in 3 h")
        order = inbox.locator('[data-testid="conversation-row"]').evaluate_all(
            "rows => rows.map((r) => r.dataset.conversation)")
        ours = [c for c in order if c in set(conversations.values())]
        assert ours == [conversations[a.pk] for a in (escalated, reminded, fresh)]
        screens(inbox, "deadlines-inbox")
        assert serious_violations(inbox) == []

        # The conversation page's card says it too.
        page = login(new_context, site, f"/console/conversations/{conversations[reminded.pk]}/", viewport=DESKTOP)
        expect(card(page, reminded).get_by_test_id("approval-nudge")).to_have_text("Reminder sent")
        screens(page, "deadlines-conversation")
        assert serious_violations(page) == []
    finally:  # out of the way of the tests after this one: nothing of these waits any more
        Conversation.objects.filter(public_id__in=list(conversations.values())).delete()
