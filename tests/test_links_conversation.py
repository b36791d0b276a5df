"""Coming back to a conversation on another device: the e-mailed link (its page, its exchange for a
conversation token, its expiry and revocation), a signed-in customer's past conversations, and the customer
socket telling the database the customer is there.

Who may see what: a link opens its one conversation and nothing else, and is not a conversation token; a
shop token lists and opens only that customer's conversations; revoking links is staff-only.
"""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.core import signing
from django.test import Client

from agentsite.asgi import application
from support.customers import identity, notify
from support.desk import services
from support.models import Conversation, FollowUp, Message


def api(path, body, client=None):
    return (client or Client()).post(f"/api/{path}", body, content_type="application/json")


def bearer(conversation_id, token):
    return Client().get(f"/api/conversations/{conversation_id}/messages?after=0",
                        HTTP_AUTHORIZATION=f"Bearer {token}")


@pytest.fixture
def chat(demo, monkeypatch):
    monkeypatch.setattr("support.desk.queue.run_agent", lambda run_id: None)
    conversation = services.conversation_start(customer=demo.maya)
    services.conversation_post_message(conversation=conversation, text="Where is SU-41210?")
    services.message_append(conversation=conversation, author=Message.AGENT,
                            wire={"role": "assistant", "content": "It is on its way."})
    return conversation


# -- the e-mailed link ---------------------------------------------------------------------------------------

def test_the_link_page_opens_the_conversation_in_the_widget(chat):
    token = notify.link_token(chat)
    page = Client().get(f"/c/{token}/")
    assert page.status_code == 200
    assert f'data-conversation-link="{token}"'.encode() in page.content
    assert page["Referrer-Policy"] == "no-referrer" and "no-store" in page["Cache-Control"]


def test_the_link_is_exchanged_for_a_token_that_reads_the_whole_conversation(chat):
    response = api("conversations/open", {"link": notify.link_token(chat), "time_zone": "America/New_York"})
    assert response.status_code == 200
    body = response.json()
    assert body["conversation"]["id"] == str(chat.public_id)
    messages = bearer(chat.public_id, body["token"]).json()["messages"]
    assert [m["content"] for m in messages] == ["Where is SU-41210?", "It is on its way."]
    assert FollowUp.objects.get(conversation=chat).time_zone == "America/New_York"  # this device's clock now


def test_a_link_is_not_a_conversation_token_and_a_conversation_token_is_not_a_link(chat):
    assert bearer(chat.public_id, notify.link_token(chat)).status_code == 404
    assert api("conversations/open", {"link": identity.conversation_token(chat)}).status_code == 404
    assert Client().get(f"/c/{identity.conversation_token(chat)}/").status_code == 404


def test_a_tampered_link_opens_nothing(chat):
    token = notify.link_token(chat)
    forged = signing.dumps({"c": str(chat.public_id), "v": 1}, salt="something else")
    for bad in (token[:-3] + "abc", forged, "x" * 400):
        assert Client().get(f"/c/{bad}/").status_code == 404
        response = api("conversations/open", {"link": bad})
        assert response.status_code == 404 and response.json()["code"] == "not_found"
    assert api("conversations/open", {"link": 12}).status_code == 404


def test_revoked_links_stop_working_and_the_next_one_works(chat):
    old = notify.link_token(chat)
    notify.links_revoke(chat)
    assert Client().get(f"/c/{old}/").status_code == 404
    assert b"This link no longer works" in Client().get(f"/c/{old}/").content
    assert api("conversations/open", {"link": old}).status_code == 404
    assert api("conversations/open", {"link": notify.link_token(chat)}).status_code == 200


def test_an_expired_link_opens_nothing(chat, settings, monkeypatch):
    settings.CONVERSATION_LINK_MAX_AGE = 3600
    token = notify.link_token(chat)
    import time

    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 7200)
    assert api("conversations/open", {"link": token}).status_code == 404


def test_only_staff_revoke_links(chat, demo):
    path = f"/api/staff/conversations/{chat.public_id}/links/revoke"
    assert Client().post(path).status_code == 403
    staff = get_user_model().objects.create_user("sam", password="pw-sam-123", is_staff=True)
    client = Client()
    client.force_login(staff)
    assert client.post(path).status_code == 200
    assert FollowUp.objects.get(conversation=chat).link_version == 2


# -- a signed-in customer's past conversations ----------------------------------------------------------------

def test_a_signed_in_customer_lists_their_own_conversations_newest_first(chat, demo):
    second = services.conversation_start(customer=demo.maya)
    services.conversation_post_message(conversation=second, text="And SU-41207?")
    services.conversation_start(customer=demo.maya)  # never written in: not listed
    toms = services.conversation_start(customer=demo.tom)
    services.conversation_post_message(conversation=toms, text="Tom's question")

    response = api("conversations/history", {"customer_token": identity.customer_token("maya@example.com")})
    assert response.status_code == 200
    rows = response.json()["conversations"]
    assert [r["id"] for r in rows] == [str(second.public_id), str(chat.public_id)]
    assert rows[1]["last_message"] == {"author": "agent", "text": "It is on its way.",
                                       "created_at": rows[1]["last_message"]["created_at"]}
    assert "Tom's question" not in response.content.decode()


def test_a_signed_in_customer_opens_a_past_conversation_of_theirs_only(chat, demo):
    maya = identity.customer_token("maya@example.com")
    opened = api("conversations/open", {"customer_token": maya, "conversation": str(chat.public_id)})
    assert opened.status_code == 200
    assert len(bearer(chat.public_id, opened.json()["token"]).json()["messages"]) == 2

    tom = identity.customer_token("tom@example.com")
    refused = api("conversations/open", {"customer_token": tom, "conversation": str(chat.public_id)})
    assert refused.status_code == 404 and refused.json()["code"] == "not_found"
    assert api("conversations/open", {"customer_token": maya, "conversation": "not-a-uuid"}).status_code == 404


def test_listing_and_opening_need_a_valid_shop_token(chat):
    assert api("conversations/history", {"customer_token": "forged:token:sig"}).status_code == 403
    assert api("conversations/history", {}).status_code == 400
    assert api("conversations/open", {"customer_token": "forged:token:sig",
                                      "conversation": str(chat.public_id)}).status_code == 403
    assert api("conversations/open", {"conversation": str(chat.public_id)}).status_code == 400
    assert Client().get("/api/conversations/history").status_code == 405


# -- presence -----------------------------------------------------------------------------------------------

@pytest.mark.django_db(transaction=True)
def test_an_open_customer_socket_marks_the_replies_seen(demo, settings, monkeypatch):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    monkeypatch.setattr("support.desk.queue.run_agent", lambda run_id: None)
    monkeypatch.setattr("support.live.events.publisher.send", lambda groups, event: None)
    conversation = services.conversation_start(customer=demo.maya)
    services.message_append(conversation=conversation, author=Message.AGENT,
                            wire={"role": "assistant", "content": "Hello again."})
    last_seq = Conversation.objects.get(pk=conversation.pk).last_seq

    async def go():
        ws = WebsocketCommunicator(application, f"/ws/conversations/{conversation.public_id}/",
                                   headers=[(b"origin", b"http://127.0.0.1:8000"), (b"host", b"127.0.0.1:8000")])
        assert (await ws.connect())[0]
        await ws.send_json_to({"type": "resume", "token": identity.conversation_token(conversation), "last_seq": 0})
        while (await ws.receive_json_from(timeout=3))["type"] != "replay.done":
            pass
        await ws.disconnect()

    assert not FollowUp.objects.filter(conversation=conversation).exists()
    async_to_sync(go)()
    seen = FollowUp.objects.get(conversation=conversation)
    assert seen.seen_at is not None and seen.seen_seq == last_seq


def test_the_list_costs_the_same_few_queries_however_many_conversations(chat, demo, django_assert_max_num_queries):
    for n in range(6):
        more = services.conversation_start(customer=demo.maya)
        services.conversation_post_message(conversation=more, text=f"Question {n}")
    with django_assert_max_num_queries(4):  # the customer, the conversations, their last messages (+ a savepoint)
        response = api("conversations/history", {"customer_token": identity.customer_token("maya@example.com")})
    assert len(response.json()["conversations"]) == 7
