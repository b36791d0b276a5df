"""A remote shop that is down, failing or answering nonsense: plain words for staff and customers, never a 500,
nothing made twice; on the reference shop (HTTP) and the fake Shopify alike."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from django.test import Client

from support.agent.tools import ToolContext, ToolUnavailable
from support.desk import staff_actions
from support.models import ShopEffect, StaffAction
from support.tools import tool_by_name
from tests.desk_factories import make_user, start_conversation


@pytest.fixture
def remote(remote_shop):
    return remote_shop


@pytest.fixture
def lead(db):
    return make_user("lee", staff=True, group="leads")


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def post(client, path, body):
    return client.post(path, json.dumps(body), content_type="application/json")


def test_the_context_panel_says_the_shop_cannot_be_reached_and_shows_the_rest(remote, demo, lead):
    conversation = start_conversation(demo.maya)
    remote.configure(down=True)
    response = client_for(lead).get(f"/api/staff/conversations/{conversation.public_id}/context")
    assert response.status_code == 200
    body = response.json()
    assert body["shop_unavailable"].startswith("The shop can't be reached right now")
    assert body["orders"] == [] and body["customer"]["email"] == "maya@example.com"
    remote.configure(down=False)


def test_a_staff_refund_while_the_shop_is_down_is_a_503_in_plain_words_and_nothing_is_made(remote, demo, lead):
    conversation = start_conversation(demo.maya)
    remote.configure(down=True)
    response = post(client_for(lead), f"/api/staff/conversations/{conversation.public_id}/refunds",
                    {"order_id": "SU-41310", "amount": "10.00", "reason": "goodwill", "key": "k-down"})
    assert response.status_code == 503 and "can't be reached" in response.json()["error"]
    assert "Traceback" not in response.content.decode()
    remote.configure(down=False)
    assert remote.refunds("SU-41310") == [] and not ShopEffect.objects.exists()


def test_a_staff_refund_whose_answer_is_lost_is_made_once_when_sent_again(remote, demo, lead, settings):
    conversation = start_conversation(demo.maya)
    # The shop writes the refund, then closes the connection without answering; asked by the key straight
    # after, it answers: the desk records it once, the customer is told once.
    remote.configure(drop_after_write=True)
    client = client_for(lead)
    url = f"/api/staff/conversations/{conversation.public_id}/refunds"
    body = {"order_id": "SU-41310", "amount": "10.00", "reason": "goodwill", "key": "k-lost"}
    first = post(client, url, body)
    assert first.status_code == 201, first.content
    again = post(client, url, body)
    assert again.json()["action"]["id"] == first.json()["action"]["id"]
    assert remote.refunds("SU-41310") == [Decimal("10.00")]
    assert ShopEffect.objects.filter(kind=ShopEffect.REFUND).count() == 1
    assert conversation.messages.filter(content__contains="10.00 EUR on order SU-41310").count() == 1


def test_a_pending_staff_refund_is_resolved_by_the_key_when_the_same_request_comes_again(remote, demo, lead):
    conversation = start_conversation(demo.maya)
    # A first attempt whose worker died after the shop made the refund: its intent is pending, the shop has it.
    # (Its key in the form saved before keys named the conversation and the kind: found by that form too.)
    action = StaffAction.objects.create(conversation=conversation, user=lead, kind=StaffAction.REFUND,
                                        arguments={}, status=StaffAction.PENDING, idempotency_key=f"{lead.pk}:k-p")
    from support.shop import shop

    made = shop().refund(order_number="SU-41310", amount=Decimal("12.00"), reason="goodwill",
                         idempotency_key=f"staff:{lead.pk}:k-p")
    again = staff_actions.refund_issue(conversation=conversation, user=lead, order_id="SU-41310", amount="12.00",
                                       reason="goodwill", key="k-p")
    assert again.pk == action.pk and again.status == StaffAction.DONE
    assert again.result["refund_id"] == made.id
    assert remote.refunds("SU-41310") == [Decimal("12.00")]


def test_the_agents_tools_turn_a_shop_that_is_away_into_a_hand_over_not_an_error_to_explain(remote, demo):
    remote.configure(down=True)
    ctx = ToolContext(customer_id=demo.maya.pk, conversation_id="conv", run_id="run", call_id="c1",
                      idempotency_key="run:c1")
    with pytest.raises(ToolUnavailable, match="could not be reached"):
        tool_by_name("get_order").fn(ctx, order_id="SU-41207")
    with pytest.raises(ToolUnavailable):
        tool_by_name("issue_refund").check(ctx, order_id="SU-41310", amount="5.00", reason="r")
    remote.configure(down=False)


def test_a_malformed_answer_is_a_hand_over_too(remote, demo):
    remote.configure(malformed_next="not_json")
    ctx = ToolContext(customer_id=demo.maya.pk, conversation_id="conv", run_id="run", call_id="c1",
                      idempotency_key="run:c1")
    with pytest.raises(ToolUnavailable):
        tool_by_name("get_order").fn(ctx, order_id="SU-41207")


@pytest.mark.timeout(60)
def test_a_shop_whose_answer_never_ends_is_a_hand_over_too(remote, demo, settings):
    settings.SHOP_ANSWER_DEADLINE_SECONDS = 0.5
    remote.configure(endless_answer="trickle")
    ctx = ToolContext(customer_id=demo.maya.pk, conversation_id="conv", run_id="run", call_id="c1",
                      idempotency_key="run:c1")
    with pytest.raises(ToolUnavailable):
        tool_by_name("get_order").fn(ctx, order_id="SU-41207")
