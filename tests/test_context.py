"""The context panel's data: the conversation's customer, their orders with items, money, parcels and latest
scans, their other conversations and refunds, and how much the viewer may refund.

Who may see what: any staff member reads the context of any conversation (Sam, a support agent; Robin,
staff without permissions, sees it too but may refund nothing). Chris is not staff: 403. Only the
conversation customer's data is in it: Maya's conversation never shows Tom's orders or conversations.
"""

from __future__ import annotations

import pytest
from django.test import Client

from support.desk import services
from support.models import Conversation, Run
from tests.desk_factories import (
    make_user,
    profile_limits_tightened,
    queued,  # noqa: F401  (fixture)
    start_conversation,
)


@pytest.fixture
def people(db):
    return {"sam": make_user("sam", staff=True), "robin": make_user("robin", staff=True, group=None),
            "lee": make_user("lee", staff=True, group="leads"), "chris": make_user("chris", staff=False)}


def context(user, conversation):
    client = Client()
    client.force_login(user)
    return client.get(f"/api/staff/conversations/{conversation.public_id}/context")


def test_it_shows_the_customer_their_orders_money_parcels_and_scans(people, demo, queued):
    conversation = start_conversation(demo.maya)
    data = context(people["sam"], conversation).json()
    assert data["customer"]["name"] == "Maya Okafor" and data["customer"]["email"] == "maya@example.com"
    assert data["customer"]["since"]  # the first order or conversation
    orders = {o["number"]: o for o in data["orders"]}
    assert "SU-41444" not in orders  # Tom's
    skillet = orders["SU-41290"]
    assert (skillet["total"], skillet["refunded"], skillet["refundable"]) == ("120.00", "40.00", "80.00")
    assert skillet["refunds"][0]["by"] == "the shop" and skillet["seller"]["is_sundry"]
    towels = orders["SU-41310"]
    assert towels["items"] == [{"sku": "HL-TT-SET4", "title": "Linen tea towels, set of 4", "qty": 1,
                                "unit_price": "64.00", "line_total": "64.00"}]
    (parcel,) = towels["parcels"]
    assert parcel["tracking"] == "HL40131055" and parcel["scans"][0]["detail"] == "Delivered: left in safe place"
    assert towels["in_scope"] and towels["refund_limit"] == "64.00"  # Sam: up to 100.00, the balance is less
    assert [r["order_id"] for r in data["refunds"]] == ["SU-41290"]
    assert data["viewer"] == {"can_refund": True, "refund_limit": "100.00", "confirm_refund_above": "100.00",
                              "second_approval_above": None}


def test_the_refund_dialog_and_four_eyes_limits_reach_the_console(people, demo, queued, settings):
    settings.STAFF_REFUND_CONFIRM_ABOVE = "250"
    settings.SECOND_APPROVAL_ABOVE = "400.00"
    viewer = context(people["lee"], start_conversation(demo.maya)).json()["viewer"]
    assert (viewer["confirm_refund_above"], viewer["second_approval_above"]) == ("250.00", "400.00")
    settings.STAFF_REFUND_CONFIRM_ABOVE = "0"  # off: no dialog
    assert context(people["lee"], start_conversation(demo.maya)).json()["viewer"]["confirm_refund_above"] is None


def test_it_lists_the_customers_other_conversations_only(people, demo, queued):
    earlier = start_conversation(demo.maya)
    services.conversation_post_message(conversation=earlier, text="Where is SU-41388?")
    start_conversation(demo.tom)
    current = start_conversation(demo.maya)
    listed = context(people["sam"], current).json()["conversations"]
    assert [(c["id"], c["first_message"]) for c in listed] == [(str(earlier.public_id), "Where is SU-41388?")]


def test_the_other_conversations_say_their_status_as_the_inbox_does(people, demo, queued):
    from support.desk import inbox, takeover

    closed = start_conversation(demo.maya)
    services.conversation_post_message(conversation=closed, text="Where is SU-41388?")
    Run.objects.filter(conversation=closed).update(status=Run.STOPPED, stop_reason="answered")
    inbox.conversation_close(conversation=closed, actor=people["sam"])
    held = start_conversation(demo.maya)
    services.conversation_post_message(conversation=held, text="And SU-41310?")
    takeover.conversation_take_over(conversation=held, user=people["sam"])
    listed = context(people["lee"], start_conversation(demo.maya)).json()["conversations"]
    assert {c["id"]: (c["inbox_status"], c["status_label"]) for c in listed} == {
        str(closed.public_id): ("closed", "Closed"), str(held.public_id): ("with_person", f"With {people['sam'].get_short_name() or 'sam'}")}


def test_a_conversation_opened_with_one_order_still_shows_staff_the_whole_customer(people, demo, queued):
    conversation = start_conversation(demo.maya)
    Conversation.objects.filter(pk=conversation.pk).update(order_scope="SU-41310")
    data = context(people["lee"], conversation).json()
    assert data["scope"] == "SU-41310" and len(data["orders"]) > 1
    in_scope = {o["number"] for o in data["orders"] if o["in_scope"]}
    assert in_scope == {"SU-41310"}


def test_what_each_person_may_refund(people, demo, queued):
    conversation = start_conversation(demo.maya)
    robin = context(people["robin"], conversation).json()
    assert robin["viewer"]["can_refund"] is False and all(o["refund_limit"] is None for o in robin["orders"])
    lee = {o["number"]: o for o in context(people["lee"], conversation).json()["orders"]}
    assert lee["SU-41533"]["refund_limit"] == "480.00"  # above the agent's 150.00 ceiling: a lead may


def test_only_staff_read_it(people, demo, queued, client):
    conversation = start_conversation(demo.maya)
    assert context(people["chris"], conversation).status_code == 403
    assert client.get(f"/api/staff/conversations/{conversation.public_id}/context").status_code == 403


def test_the_console_shows_the_refund_limit_a_lead_tightened_in_the_profile(people, demo, queued):
    profile_limits_tightened(people["lee"], refund_ceiling="50.00")
    data = context(people["sam"], start_conversation(demo.maya)).json()
    assert data["viewer"]["refund_limit"] == "50.00"  # the profile's ceiling, below LARGE_REFUND_THRESHOLD's 100
    assert {o["number"]: o["refund_limit"] for o in data["orders"]}["SU-41310"] == "50.00"


def test_a_refund_a_person_changed_is_credited_to_them_not_the_agent(people, demo, queued):
    from decimal import Decimal

    from support.desk import gate
    from support.shop import shop
    from tests.desk_factories import pending_refund_approval

    conversation = start_conversation(demo.maya)
    asked = pending_refund_approval(conversation)  # the agent asks 64.00 on SU-41310
    gate.approval_decide(approval=asked, user=people["sam"], approve=True, channel="console",
                         arguments={**asked.requested_arguments, "amount": "40.00"})
    shop().refund(order_number="SU-41310", amount=Decimal("40.00"), reason="missing",
                  idempotency_key=asked.tool_call.idempotency_key)  # as the tool makes it once approved
    as_asked = pending_refund_approval(start_conversation(demo.maya), {**asked.requested_arguments, "amount": "10.00"})
    gate.approval_decide(approval=as_asked, user=people["sam"], approve=True, channel="console")
    shop().refund(order_number="SU-41310", amount=Decimal("10.00"), reason="missing",
                  idempotency_key=as_asked.tool_call.idempotency_key)
    data = context(people["sam"], conversation).json()
    towels = {o["number"]: o for o in data["orders"]}["SU-41310"]
    assert sorted((r["amount"], r["by"]) for r in towels["refunds"]) == [
        ("10.00", "the agent"), ("40.00", "sam (the agent asked 64.00 EUR)")]
