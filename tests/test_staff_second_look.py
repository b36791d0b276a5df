"""An approval card shows what the customer wrote after the agent asked, and asks for a second look.

A "cancel, I don't want the refund" written while the refund waits must not go unseen: the card lists
every customer message since the request (customer_messages_since, with needs_second_look), approving
such a card needs {"confirm_seen": true} (otherwise 409 needs_second_look, nothing changes), and the
staff socket sends the card again when the customer writes while it is shown.

Who: Sam is a support agent (support.decide_approval).
"""

from __future__ import annotations

import json

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.test import Client

from agentsite.asgi import application
from support.desk import permissions, serializers, services
from support.live import events
from support.models import Approval, Message
from tests.desk_factories import (
    make_user,
    pending_refund_approval,
    queued,  # noqa: F401  (fixture)
    record_events,
    start_conversation,
)

CANCEL = "cancel, I don't want the refund"


def agent():
    user = make_user("sam", staff=True)
    user.groups.add(permissions.ensure_groups()[permissions.AGENTS])
    return user


@pytest.fixture
def sam(db, queued, django_capture_on_commit_callbacks):
    client = Client()
    client.force_login(agent())

    def decide(approval, verb, body=None):
        with django_capture_on_commit_callbacks(execute=True):
            return client.post(f"/api/staff/approvals/{approval.public_id}/{verb}", json.dumps(body or {}),
                               content_type="application/json")

    client.decide = decide
    return client


@pytest.fixture
def conversation(demo):
    return start_conversation(demo.maya)


def written_before(conversation, text):
    """A customer message saved as it is, without starting a run or counting against the limits."""
    services.message_append(conversation=conversation, author=Message.CUSTOMER, wire={"role": "user", "content": text})


def customer_writes(conversation, text):
    message, _, _ = services.conversation_post_message(conversation=conversation, text=text)
    return message


def still_pending(approval) -> bool:
    return Approval.objects.get(pk=approval.pk).decided_at is None


# -- the card ------------------------------------------------------------------------------------------------

def test_a_card_lists_every_customer_message_written_after_the_request(conversation):
    written_before(conversation, "My parcel SU-41310 never came.")  # the request answers it
    approval = pending_refund_approval(conversation)
    first = customer_writes(conversation, CANCEL)
    second = customer_writes(conversation, "Really, please cancel it.")
    card = serializers.approval_json(approval)
    assert [(m["seq"], m["text"]) for m in card["customer_messages_since"]] == [
        (first.seq, CANCEL), (second.seq, "Really, please cancel it.")]
    assert all(m["created_at"].endswith("Z") for m in card["customer_messages_since"])
    assert (card["customer_messages_since_count"], card["needs_second_look"]) == (2, True)


def test_a_card_with_nothing_written_since_needs_no_second_look(conversation):
    written_before(conversation, "My parcel SU-41310 never came.")
    card = serializers.approval_json(pending_refund_approval(conversation))
    assert (card["customer_messages_since"], card["needs_second_look"]) == ([], False)


def test_a_card_shows_the_latest_messages_and_counts_them_all(conversation):
    approval = pending_refund_approval(conversation)
    for n in range(serializers.SINCE_SHOWN + 3):  # saved directly: past the rate limits, on purpose
        written_before(conversation, f"message {n}")
    card = serializers.approval_json(approval)
    assert card["customer_messages_since_count"] == serializers.SINCE_SHOWN + 3
    assert [m["text"] for m in card["customer_messages_since"]] == [
        f"message {n}" for n in range(3, serializers.SINCE_SHOWN + 3)]


def test_a_decided_card_keeps_what_was_written_before_the_decision(sam, conversation):
    approval = pending_refund_approval(conversation)
    customer_writes(conversation, CANCEL)
    assert sam.decide(approval, "reject", {"reason": "The customer cancelled."}).status_code == 200
    customer_writes(conversation, "Thanks!")
    card = serializers.approval_json(Approval.objects.get(pk=approval.pk))
    assert [m["text"] for m in card["customer_messages_since"]] == [CANCEL]


# -- approving it ------------------------------------------------------------------------------------------

def test_approving_after_the_customer_wrote_needs_confirm_seen(sam, conversation, queued):
    approval = pending_refund_approval(conversation)
    customer_writes(conversation, CANCEL)
    response = sam.decide(approval, "approve")
    body = response.json()
    assert (response.status_code, body["code"], body["retryable"]) == (409, "needs_second_look", False)
    assert body["error"].startswith("The customer wrote after this was requested")
    assert [m["text"] for m in body["approval"]["customer_messages_since"]] == [CANCEL]
    assert still_pending(approval) and queued == []


def test_approving_with_confirm_seen_goes_through(sam, conversation, queued):
    approval = pending_refund_approval(conversation)
    customer_writes(conversation, CANCEL)
    response = sam.decide(approval, "approve", {"confirm_seen": True})
    assert response.status_code == 200 and response.json()["approval"]["status"] == "approved"
    assert queued == [approval.run_id]


def test_rejecting_needs_no_confirmation(sam, conversation):
    approval = pending_refund_approval(conversation)
    customer_writes(conversation, CANCEL)
    assert sam.decide(approval, "reject", {"reason": "The customer cancelled."}).status_code == 200


def test_a_card_without_messages_since_is_approved_without_confirmation(sam, conversation):
    assert sam.decide(pending_refund_approval(conversation), "approve").status_code == 200


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_confirm_seen_is_true_or_false(sam, conversation, value):
    approval = pending_refund_approval(conversation)
    response = sam.decide(approval, "approve", {"confirm_seen": value})
    assert (response.status_code, response.json()["error"]) == (400, "confirm_seen must be true or false.")
    assert still_pending(approval)


def test_the_confirmed_approval_repeated_is_answered_the_same(sam, conversation):
    approval = pending_refund_approval(conversation)
    customer_writes(conversation, CANCEL)
    first = sam.decide(approval, "approve", {"confirm_seen": True})
    again = sam.decide(approval, "approve")  # a retry that lost the flag: the decision stands, nothing changes
    assert (first.status_code, again.status_code) == (200, 200)
    assert again.json() == first.json()


# -- live: the staff socket sends the card again ---------------------------------------------------------------

def _session_cookie(user) -> bytes:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


@pytest.mark.django_db(transaction=True)
def test_the_staff_socket_sends_the_card_again_when_the_customer_writes(demo, monkeypatch):
    monkeypatch.setattr("support.desk.queue.run_agent", lambda run_id, **ids: None)
    conversation = start_conversation(demo.maya)
    approval = pending_refund_approval(conversation)
    headers = [(b"origin", b"http://127.0.0.1:8000"), (b"host", b"127.0.0.1:8000"),
               (b"cookie", _session_cookie(agent()))]
    published = record_events(monkeypatch)

    async def go():
        ws = WebsocketCommunicator(application, "/ws/staff/", headers=headers)
        assert (await ws.connect())[0]
        await database_sync_to_async(customer_writes)(conversation, CANCEL)
        for n, (groups, event) in enumerate(published):  # as the publisher would send them
            for group in groups:
                await get_channel_layer().group_send(group, {"type": "desk.event", "id": f"e{n}", "event": event})
        got = []
        while not any(e["type"] == "approval.requested" for e in got):
            got.append(await ws.receive_json_from(timeout=3))
        await ws.disconnect()
        return got

    got = async_to_sync(go)()
    card = next(e for e in got if e["type"] == "approval.requested")
    assert card["approval"]["id"] == str(approval.public_id) and card["why"] == "customer_wrote"
    assert card["approval"]["needs_second_look"] is True
    assert [m["text"] for m in card["approval"]["customer_messages_since"]] == [CANCEL]
    assert card["conversation"] == str(conversation.public_id)
    assert events.STAFF_GROUP in {g for groups, _ in published for g in groups}
