"""A person works the ticket: refunds and messages to the seller from the console, under the agent's rules.

Who may do what: Robin is staff with no permission: Robin reads and messages sellers but issues no refund.
Sam is a support agent (support.decide_approval): Sam refunds up to the smaller of LARGE_REFUND_THRESHOLD
and REFUND_CEILING. Lee is a support lead (also support.approve_large_refund): Lee refunds up to the order's
refundable balance, above the agent's ceiling too. Chris is not staff: 403 everywhere, nothing done. Every
action acts only on the conversation customer's orders (within the conversation's order scope), and is on
record (who, when, what, result), refusals included.
"""

from __future__ import annotations

import json
import threading
from decimal import Decimal

import pytest
from django.db import connection
from django.test import Client

from support.desk import staff_actions
from support.models import Conversation, Message, Refund, ShopEffect, StaffAction
from support.shop import shop
from tests.desk_factories import (
    make_user,
    profile_limits_tightened,
    queued,  # noqa: F401  (fixture)
    record_events,
    start_conversation,
)


@pytest.fixture
def people(db):
    return {"robin": make_user("robin", staff=True, group=None), "sam": make_user("sam", staff=True),
            "lee": make_user("lee", staff=True, group="leads"), "chris": make_user("chris", staff=False)}


@pytest.fixture
def as_user(django_capture_on_commit_callbacks):
    def make(user):
        client = Client()
        client.force_login(user)

        def post(path, body=None):
            with django_capture_on_commit_callbacks(execute=True):
                return client.post(path, json.dumps(body or {}), content_type="application/json")

        client.post_json = post
        return client

    return make


@pytest.fixture
def conversation(demo):
    return start_conversation(demo.maya)


def made(shop) -> list[Decimal]:
    """Refunds made by the tests, as the shop holds them (the catalogue has one on SU-41290)."""
    return [amount for amount in shop.refunds() if amount != Decimal("40.00")]


def refund(client, conversation, **body):
    return client.post_json(f"/api/staff/conversations/{conversation.public_id}/refunds",
                            {"order_id": "SU-41310", "amount": "64.00", "reason": "parcel never arrived", **body})


def test_it_refunds_within_the_rules_and_tells_the_customer_once(as_user, people, conversation, monkeypatch,
                                                                   any_shop):
    sent = record_events(monkeypatch)
    response = refund(as_user(people["sam"]), conversation, key="k1")
    assert response.status_code == 201
    action = response.json()["action"]
    assert (action["kind"], action["status"], action["by"]) == ("refund", "done", "sam")
    assert action["result"]["amount"] == "64.00" and action["result"]["refundable_remaining"] == "0.00"
    assert any_shop.refunds("SU-41310") == [Decimal("64.00")]
    assert action["result"]["reference"] and action["result"]["refund_id"]
    notice = conversation.messages.order_by("seq").last()
    assert (notice.role, notice.author, notice.author_user) == ("assistant", Message.SYSTEM, people["sam"])
    assert "64.00 EUR on order SU-41310" in notice.content
    assert [e["type"] for _, e in sent if e["type"] == "staff.action"] == ["staff.action"]


def test_a_double_click_refunds_once(as_user, people, conversation, any_shop):
    client = as_user(people["sam"])
    first = refund(client, conversation, amount="20.00", key="same-click")
    again = refund(client, conversation, amount="20.00", key="same-click")
    assert first.status_code == again.status_code == 201
    assert first.json()["action"]["id"] == again.json()["action"]["id"]
    assert any_shop.refunds("SU-41310") == [Decimal("20.00")]
    assert conversation.messages.filter(author=Message.SYSTEM, content__contains="20.00").count() == 1


def test_a_key_names_one_action_on_one_conversation_only(as_user, people, conversation, demo, any_shop):
    """The same key sent on another conversation, or for another kind of action, is a new request: it never
    hands back (or stands for) the action it named elsewhere."""
    client = as_user(people["sam"])
    other = start_conversation(demo.maya)
    first = refund(client, conversation, amount="20.00", key="k-shared")
    second = refund(client, other, amount="15.00", key="k-shared")
    assert first.status_code == second.status_code == 201
    assert first.json()["action"]["id"] != second.json()["action"]["id"]
    assert sorted(any_shop.refunds("SU-41310")) == [Decimal("15.00"), Decimal("20.00")]
    assert StaffAction.objects.get(public_id=second.json()["action"]["id"]).conversation == other
    assert other.messages.filter(author=Message.SYSTEM, content__contains="15.00").count() == 1
    message = client.post_json(f"/api/staff/conversations/{conversation.public_id}/seller-messages",
                               {"order_id": "SU-41310", "message": "Please check the parcel.", "key": "k-shared"})
    assert message.status_code == 201 and message.json()["action"]["kind"] == StaffAction.SELLER_MESSAGE
    assert len(any_shop.seller_messages("SU-41310")) == 1


@pytest.mark.django_db(transaction=True)
def test_the_same_key_at_the_same_instant_refunds_once(demo, people):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite serialises writers: no race to lose")
    conversation = start_conversation(demo.maya)
    results, barrier = [], threading.Barrier(4)

    def go():
        barrier.wait()
        try:
            results.append(staff_actions.refund_issue(conversation=conversation, user=people["sam"],
                                                      order_id="SU-41310", amount="30.00", reason="r", key="k"))
        finally:
            connection.close()

    threads = [threading.Thread(target=go) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({a.pk for a in results}) == 1 and len(results) == 4
    assert Refund.objects.filter(order__number="SU-41310").count() == 1


def test_it_never_refunds_more_than_the_balance(as_user, people, conversation, any_shop):
    client = as_user(people["lee"])
    assert refund(client, conversation, amount="50.00", key="a").status_code == 201
    response = refund(client, conversation, amount="20.00", key="b")
    assert response.status_code == 409 and "14.00 EUR left to refund" in response.json()["error"]
    assert any_shop.refunds("SU-41310") == [Decimal("50.00")]
    refused = StaffAction.objects.filter(status=StaffAction.REFUSED).get()
    assert refused.user == people["lee"] and "left to refund" in refused.result["error"]


def test_an_agent_may_not_refund_above_the_threshold_and_a_lead_may_above_the_ceiling(as_user, people, demo,
                                                                                         any_shop):
    conversation = start_conversation(demo.maya)
    big = {"order_id": "SU-41533", "amount": "300.00", "reason": "monitor arrived cracked"}
    response = refund(as_user(people["sam"]), conversation, **big)
    assert response.status_code == 403 and "support lead" in response.json()["error"]
    assert any_shop.refunds("SU-41533") == []
    assert StaffAction.objects.get().status == StaffAction.REFUSED
    assert refund(as_user(people["sam"]), conversation, **{**big, "amount": "100.00"}).status_code == 201
    # 300.00 is above the agent's REFUND_CEILING (150.00): a lead may, within the balance.
    assert refund(as_user(people["lee"]), conversation, **big).status_code == 201
    over = refund(as_user(people["lee"]), conversation, **{**big, "amount": "90.00"})
    assert over.status_code == 409  # 480 - 100 - 300 = 80 left
    assert shop().order("SU-41533").refundable == Decimal("80.00")


def test_staff_without_the_permission_issue_no_refund(as_user, people, conversation, any_shop):
    response = refund(as_user(people["robin"]), conversation, amount="5.00")
    assert response.status_code == 403 and "decide approvals" in response.json()["error"]
    assert made(any_shop) == []


def test_it_refunds_only_the_conversation_customers_orders(as_user, people, conversation, any_shop):
    response = refund(as_user(people["lee"]), conversation, order_id="SU-41444", amount="5.00")  # Tom's
    assert response.status_code == 400 and "No order SU-41444" in response.json()["error"]
    assert made(any_shop) == []


def test_it_keeps_to_the_conversations_order_scope(as_user, people, demo, any_shop):
    # Opened with e-mail + SU-41310: the agent may act on that order only, and so may a person.
    conversation = start_conversation(demo.maya)
    Conversation.objects.filter(pk=conversation.pk).update(order_scope="SU-41310")
    response = refund(as_user(people["lee"]), conversation, order_id="SU-41207", amount="5.00")
    assert response.status_code == 400 and made(any_shop) == []
    assert refund(as_user(people["lee"]), conversation, amount="5.00").status_code == 201


def test_non_staff_and_anonymous_do_nothing(as_user, people, conversation, client, any_shop):
    assert refund(as_user(people["chris"]), conversation).status_code == 403
    response = client.post(f"/api/staff/conversations/{conversation.public_id}/refunds",
                           json.dumps({"order_id": "SU-41310", "amount": "1.00", "reason": "r"}),
                           content_type="application/json")
    assert response.status_code == 403
    assert made(any_shop) == [] and not StaffAction.objects.exists()


def test_it_messages_the_seller_without_an_approval_and_once_per_text(as_user, people, conversation, any_shop):
    client = as_user(people["robin"])
    url = f"/api/staff/conversations/{conversation.public_id}/seller-messages"
    body = {"order_id": "SU-41310", "message": "Please check where parcel HL40131055 was left; the customer "
                                               "can be reached on +44 7700 900123.", "key": "m1"}
    response = client.post_json(url, body)
    assert response.status_code == 201 and response.json()["action"]["result"]["status"] == "sent"
    sent = ["Message from Sundry customer support about order SU-41310\nIssue: other\n\n" + body["message"]]
    assert any_shop.seller_messages("SU-41310") == sent  # inside the template, as the agent's are
    assert ShopEffect.objects.get().conversation == conversation  # the desk's record, for the limits
    again = client.post_json(url, {**body, "key": "m2"})  # the same text again: sent once, as for the agent
    assert again.json()["action"]["result"]["status"] == "already_sent"
    assert any_shop.seller_messages() == sent
    sundry = client.post_json(url, {"order_id": "SU-41210", "message": "Hello"})
    assert sundry.status_code == 400 and "no seller" in sundry.json()["error"]
    assert not conversation.messages.filter(role="assistant", author=Message.SYSTEM).exists()


def test_every_action_is_listed_for_the_trace(as_user, people, conversation):
    client = as_user(people["sam"])
    refund(client, conversation, amount="10.00", key="x")
    refund(client, conversation, amount="999.00", key="y")
    listed = client.get(f"/api/staff/conversations/{conversation.public_id}/actions").json()["actions"]
    assert [(a["kind"], a["status"], a["by"]) for a in listed] == [("refund", "done", "sam"),
                                                                  ("refund", "refused", "sam")]
    assert all(a["created_at"] for a in listed)
    assert as_user(people["chris"]).get(f"/api/staff/conversations/{conversation.public_id}/actions") \
        .status_code == 403


def test_an_unknown_conversation_is_a_404(as_user, people):
    client = as_user(people["sam"])
    assert client.get("/api/staff/conversations/00000000-0000-0000-0000-000000000000/context").status_code == 404
    assert client.post_json("/api/staff/conversations/nope/refunds", {}).status_code == 404


# -- the agent's ceiling from the agent profile ----------------------------------------------------------

def test_a_ceiling_a_lead_tightened_in_the_profile_holds_for_a_support_agents_own_refund(as_user, people,
                                                                                           conversation):
    profile_limits_tightened(people["lee"], refund_ceiling="50.00")
    refused = refund(as_user(people["sam"]), conversation, amount="60.00")
    assert refused.status_code == 403 and "Refunds above 50.00 EUR need a support lead" in refused.json()["error"]
    assert refund(as_user(people["sam"]), conversation, amount="50.00").status_code == 201
    assert refund(as_user(people["lee"]), conversation, amount="14.00").status_code == 201  # a lead: the balance


def test_the_refund_notice_promises_the_days_the_refund_policy_says(demo):
    import re

    from django.utils import translation

    import sundry

    [policy] = [text for doc_id, _, _, text in sundry.POLICIES if doc_id == "POL-REFUND"]
    days = re.search(r"within (\d+) business days", policy).group(1)
    order = shop().order("SU-41310")
    for reference in ("", "R-1"):
        notice = staff_actions.refund_notice(Decimal("12.50"), order, reference)
        assert f"within {days} business days" in notice and " to 10 " not in notice
    with translation.override("de"):
        german = str(staff_actions.REFUND_NOTICE) % {"amount": "12.50", "currency": "EUR", "order": "SU-41310"}
    assert f"innerhalb von {days} Werktagen" in german and "bis 10" not in german
