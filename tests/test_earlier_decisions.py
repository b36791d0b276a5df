"""Earlier decisions on the card: every approval card (the console's list and card, the page an e-mailed link
opens, the Slack message, the approval e-mail) shows the decisions made before on the same order (who, when,
what, why), newest first, a few with "and N more". Approving against an earlier rejection of the same kind
needs a confirmation the server checks (`confirm_over_rejection`); bulk decisions refuse such a card; Slack
refuses it and sends the person to the console.

Who: Sam and Kim are support leads, both linked to Slack; Sam rejected a refund on Maya's SU-41310, and the
agent asks again on another conversation.
"""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from support import tasks
from support.desk import approval_links, gate, selectors_earlier, serializers, slack
from support.models import Approval, ApprovalEmailOptIn, DecisionLink, SlackAccount
from tests.desk_factories import (  # noqa: F401
    REFUND_ARGUMENTS,
    make_user,
    pending_refund_approval,
    queued,
    start_conversation,
)
from tests.slack_fixture import announced, button, slack_api, slack_post  # noqa: F401  (fixtures)
from tests.smtp_fixture import smtp_inbox  # noqa: F401  (fixture)

HOSTILE = "Refunded by the bank already <script>alert(1)</script>"


@pytest.fixture
def staff(db, settings):
    settings.DESK_PUBLIC_URL = "https://desk.example"
    sam = make_user("sam", staff=True, group="leads", first_name="Sam")
    kim = make_user("kim", staff=True, group="leads", first_name="Kim")
    for user, slack_id in ((sam, "U0SAM"), (kim, "U0KIM")):
        user.email = f"{user.username}@sundry.example"
        user.save()
        SlackAccount.objects.create(user=user, slack_user_id=slack_id)
    return {"sam": sam, "kim": kim}


@pytest.fixture
def rejected(demo, queued, staff):
    """Sam rejected a refund on SU-41310, with a reason."""
    first = pending_refund_approval(start_conversation(demo.maya))
    gate.approval_decide(approval=first, user=staff["sam"], approve=False, reason=HOSTILE, channel=Approval.CONSOLE)
    return first


@pytest.fixture
def asked_again(rejected, demo):
    """A minute later the agent asks for 30.00 on the same order, on another conversation."""
    return pending_refund_approval(start_conversation(demo.maya), {**REFUND_ARGUMENTS, "amount": "30.00"})


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def card(client, approval) -> dict:
    cards = client.get("/api/staff/approvals").json()["approvals"]
    return next(c for c in cards if c["id"] == str(approval.public_id))


def approve(client, approval, **body):
    return client.post(f"/api/staff/approvals/{approval.public_id}/approve", json.dumps(body),
                       content_type="application/json")


# -- what the card shows ------------------------------------------------------------------------------------

def test_the_card_shows_the_earlier_rejection_on_the_order_who_when_what_and_why(asked_again, rejected, staff):
    earlier = card(client_of(staff["kim"]), asked_again)["earlier_decisions"]
    [shown] = earlier["shown"]
    assert (shown["by"], shown["decision"], shown["reason"], shown["tool"]) == ("Sam", "rejected", HOSTILE,
                                                                              "issue_refund")
    assert shown["at"] == rejected.decided_at.isoformat().replace("+00:00", "Z")
    assert earlier["more"] == 0 and earlier["rejection"]["id"] == str(rejected.public_id)


def test_an_approval_with_another_amount_is_shown_as_edited_and_newest_first(demo, queued, staff, asked_again):
    edited = pending_refund_approval(start_conversation(demo.maya), {**REFUND_ARGUMENTS, "amount": "50.00"})
    gate.approval_decide(approval=edited, user=staff["kim"], approve=True, arguments={**REFUND_ARGUMENTS,
                         "amount": "20.00"}, channel=Approval.CONSOLE)
    shown = card(client_of(staff["sam"]), asked_again)["earlier_decisions"]["shown"]
    assert [(s["by"], s["decision"], s["asked"], s["amount"]) for s in shown] == [
        ("Kim", "edited", "50.00", "20.00"), ("Sam", "rejected", "64.00", None)]


def test_a_card_on_another_order_shows_none(demo, queued, staff, rejected):
    other = pending_refund_approval(start_conversation(demo.maya), {**REFUND_ARGUMENTS, "order_id": "SU-41207"})
    earlier = card(client_of(staff["sam"]), other)["earlier_decisions"]
    assert earlier == {"shown": [], "more": 0, "rejection": None}


def test_a_few_are_shown_and_the_rest_counted(demo, queued, staff, asked_again):
    for _ in range(selectors_earlier.SHOWN + 2):
        approval = pending_refund_approval(start_conversation(demo.tom))
        gate.approval_decide(approval=approval, user=staff["kim"], approve=False, reason="no", channel="console")
    earlier = card(client_of(staff["sam"]), asked_again)["earlier_decisions"]
    assert len(earlier["shown"]) == selectors_earlier.SHOWN and earlier["more"] == 3


def test_a_page_of_cards_reads_its_earlier_decisions_in_one_query(demo, queued, staff, rejected):
    def reads_of_earlier(count: int) -> int:
        Approval.objects.filter(decided_at__isnull=True).delete()
        for _ in range(count):
            pending_refund_approval(start_conversation(demo.maya))
        with CaptureQueriesContext(connection) as queries:
            assert len(client_of(staff["kim"]).get("/api/staff/approvals").json()["approvals"]) == count
        # the JSON key read, as SQLite ('$."order_id"') and PostgreSQL (-> 'order_id') write it
        return sum(""""order_id"'""" in q["sql"] or "'order_id'" in q["sql"] for q in queries.captured_queries)

    assert reads_of_earlier(1) == reads_of_earlier(6) == 1


# -- approving over a rejection --------------------------------------------------------------------------------

def test_approving_over_an_earlier_rejection_is_refused_without_the_confirmation(asked_again, staff):
    response = approve(client_of(staff["kim"]), asked_again)
    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "earlier_rejection"
    assert body["error"].startswith("Sam rejected a refund on SU-41310 at ") and HOSTILE in body["error"]
    assert Approval.objects.get(pk=asked_again.pk).pending


def test_with_the_confirmation_it_is_approved(asked_again, staff):
    response = approve(client_of(staff["kim"]), asked_again, confirm_over_rejection=True)
    assert response.status_code == 200 and response.json()["approval"]["status"] == "approved"


def test_the_confirmation_must_be_true_or_false(asked_again, staff):
    assert approve(client_of(staff["kim"]), asked_again, confirm_over_rejection="yes").status_code == 400


def test_rejecting_again_needs_no_confirmation(asked_again, staff):
    response = client_of(staff["kim"]).post(f"/api/staff/approvals/{asked_again.public_id}/reject",
                                           json.dumps({"reason": "Still no."}), content_type="application/json")
    assert response.status_code == 200


def test_an_earlier_approval_needs_no_confirmation(demo, queued, staff):
    first = pending_refund_approval(start_conversation(demo.maya), {**REFUND_ARGUMENTS, "amount": "10.00"})
    gate.approval_decide(approval=first, user=staff["sam"], approve=True, channel=Approval.CONSOLE)
    again = pending_refund_approval(start_conversation(demo.maya), {**REFUND_ARGUMENTS, "amount": "10.00"})
    assert approve(client_of(staff["kim"]), again).status_code == 200


def test_bulk_refuses_to_approve_a_card_over_an_earlier_rejection(asked_again, staff):
    response = client_of(staff["kim"]).post("/api/staff/approvals/bulk", json.dumps(
        {"approvals": [str(asked_again.public_id)], "decision": "approve", "reason": ""}),
        content_type="application/json")
    [result] = response.json()["results"]
    assert (result["outcome"], result["code"]) == ("refused", "earlier_rejection")
    assert "Open the card" in result["message"]
    assert Approval.objects.get(pk=asked_again.pk).pending


# -- away from the console ----------------------------------------------------------------------------------------

@pytest.fixture
def link(asked_again, staff):
    made = DecisionLink.objects.create(approval=asked_again, user=staff["kim"], kind=DecisionLink.APPROVE)
    return f"/console/decide/{approval_links.link_token(made)}/"


def test_the_decide_page_shows_the_earlier_decision_escaped_and_asks_for_the_confirmation(link, asked_again, staff):
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff["kim"])
    page = client.get(link)
    html = page.content.decode()
    assert 'data-testid="decide-earlier"' in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script>alert(1)" not in html
    assert 'name="confirm_over_rejection"' in html
    token = client.cookies["csrftoken"].value
    refused = client.post(link, {"csrfmiddlewaretoken": token})
    assert refused.status_code == 400 and Approval.objects.get(pk=asked_again.pk).pending
    done = client.post(link, {"csrfmiddlewaretoken": token, "confirm_over_rejection": "yes"})
    assert done.status_code == 200
    assert Approval.objects.get(pk=asked_again.pk).decision == Approval.APPROVED


def test_the_approval_email_lists_the_earlier_decisions(asked_again, smtp_inbox, staff):
    ApprovalEmailOptIn.objects.create(user=staff["kim"])
    assert tasks.email_approval_request(asked_again.pk) == 1
    [(_, message)] = smtp_inbox.messages
    parts = {p.get_content_type(): p.get_payload(decode=True).decode() for p in message.walk()
             if p.get_content_type().startswith("text/")}
    assert "Earlier decisions on this order" in parts["text/plain"]
    assert "Rejected a refund by Sam at " in parts["text/plain"] and HOSTILE in parts["text/plain"]
    assert "&lt;script&gt;" in parts["text/html"] and "<script>" not in parts["text/html"]


def test_the_slack_message_lists_them_and_slack_refuses_to_approve_over_the_rejection(
        asked_again, slack_api, staff):
    assert slack.approval_sync(asked_again.pk) == "posted"
    [posted] = slack_api.calls_to("chat.postMessage")
    earlier = next(b for b in posted["blocks"] if b.get("block_id") == "earlier")
    assert earlier["text"]["type"] == "plain_text" and HOSTILE in earlier["text"]["text"]
    slack_post(Client(), button("U0KIM", slack.APPROVE, str(asked_again.public_id)))
    assert Approval.objects.get(pk=asked_again.pk).pending
    [told] = slack_api.calls_to("chat.postEphemeral")
    assert told["text"].startswith("Sam rejected a refund on SU-41310")
    assert [e["action_id"] for b in told["blocks"] if b["type"] == "actions" for e in b["elements"]] == [slack.OPEN]


def test_the_serializer_reads_one_card_alone_too(asked_again):
    assert serializers.approval_json(asked_again)["earlier_decisions"]["rejection"] is not None
