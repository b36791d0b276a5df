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
from support.desk import inbox, services
from support.models import Conversation, FollowUp, Message, Run


def api(path, body, client=None):
    return (client or Client()).post(f"/api/{path}", body, content_type="application/json")


def bearer(conversation_id, token):
    return Client().get(f"/api/conversations/{conversation_id}/messages?after=0",
                        HTTP_AUTHORIZATION=f"Bearer {token}")


@pytest.fixture
def chat(demo, monkeypatch):
    monkeypatch.setattr("support.desk.queue.run_agent", lambda run_id, **ids: None)
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


def test_revoking_links_revokes_the_tokens_they_were_exchanged_for(chat, demo):
    """A forwarded link's holder keeps nothing: the conversation token they got reads and posts no more. The
    customer's own token from signing in is not a link's and keeps working."""
    from_link = api("conversations/open", {"link": notify.link_token(chat)}).json()["token"]
    signed_in = api("conversations/open", {"customer_token": identity.customer_token("maya@example.com"),
                                           "conversation": str(chat.public_id)}).json()["token"]
    assert bearer(chat.public_id, from_link).status_code == 200
    notify.links_revoke(chat)
    assert bearer(chat.public_id, from_link).status_code == 404
    post = Client().post(f"/api/conversations/{chat.public_id}/messages", {"text": "still here?"},
                         content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {from_link}")
    assert post.status_code == 404
    assert not Message.objects.filter(conversation=chat, content="still here?").exists()
    assert bearer(chat.public_id, signed_in).status_code == 200
    fresh = api("conversations/open", {"link": notify.link_token(chat)}).json()["token"]  # the new e-mail's link
    assert bearer(chat.public_id, fresh).status_code == 200


def test_a_token_cannot_claim_a_newer_link_version_than_it_was_given(chat):
    """The version is inside the signature: editing it breaks the token."""
    token = api("conversations/open", {"link": notify.link_token(chat)}).json()["token"]
    notify.links_revoke(chat)
    claims = signing.loads(token, salt=identity.CONVERSATION_SALT)
    assert claims == {"c": str(chat.public_id), "l": 1}
    forged = signing.dumps({"c": str(chat.public_id), "l": 2}, salt="support.other")
    assert bearer(chat.public_id, forged).status_code == 404
    assert bearer(chat.public_id, token).status_code == 404


def _socket(conversation):
    return WebsocketCommunicator(application, f"/ws/conversations/{conversation.public_id}/",
                                 headers=[(b"origin", b"http://127.0.0.1:8000"), (b"host", b"127.0.0.1:8000")])


async def _resumed(ws, token):
    assert (await ws.connect())[0]
    await ws.send_json_to({"type": "resume", "token": token, "last_seq": 0})
    while (await ws.receive_json_from(timeout=3))["type"] != "replay.done":
        pass


@pytest.fixture
def sockets(settings, monkeypatch):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    monkeypatch.setattr("support.live.events.publisher.send", lambda groups, event: None)


@pytest.mark.django_db(transaction=True)  # the sockets read the database from threads of their own
def test_revoking_links_closes_the_sockets_opened_through_one(chat, sockets):
    from channels.db import database_sync_to_async

    from_link = api("conversations/open", {"link": notify.link_token(chat)}).json()["token"]

    def revoke():
        notify.links_revoke(chat)

    async def go():
        linked, own = _socket(chat), _socket(chat)
        await _resumed(linked, from_link)
        await _resumed(own, identity.conversation_token(chat))
        await database_sync_to_async(revoke)()
        frame = await linked.receive_json_from(timeout=3)
        assert frame["type"] == "error" and frame["code"] == "link_revoked"
        assert (await linked.receive_output(timeout=3)) == {"type": "websocket.close", "code": 4401}
        await own.send_json_to({"type": "ping"})
        assert (await own.receive_json_from(timeout=3))["type"] == "pong"  # signed in: not a link's socket
        await own.disconnect()

    async_to_sync(go)()


@pytest.mark.django_db(transaction=True)
def test_a_link_socket_that_missed_the_revocation_closes_at_its_next_frame(chat, sockets, monkeypatch):
    """The broadcast is lost (the layer was away): the socket reads the version again on every frame."""
    monkeypatch.setattr(notify, "_close_link_sockets", lambda public_id, version: None)
    from_link = api("conversations/open", {"link": notify.link_token(chat)}).json()["token"]

    async def go():
        ws = _socket(chat)
        await _resumed(ws, from_link)
        from channels.db import database_sync_to_async
        await database_sync_to_async(notify.links_revoke)(chat)
        await ws.send_json_to({"type": "message", "text": "hello?", "client_id": "c1"})
        frame = await ws.receive_json_from(timeout=3)
        assert frame["code"] == "link_revoked"
        assert (await ws.receive_output(timeout=3))["code"] == 4401

    async_to_sync(go)()
    assert not Message.objects.filter(conversation=chat, content="hello?").exists()


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


def test_the_list_shows_a_closed_conversation_as_closed_until_the_customer_writes_again(chat, demo):
    lead = get_user_model().objects.create_user("lead", password="x", is_staff=True)
    Conversation.objects.filter(pk=chat.pk).update(status=Conversation.TAKEN_OVER, assignee=lead)
    Run.objects.filter(conversation=chat).update(status=Run.STOPPED)  # the agent's run had ended
    inbox.conversation_close(conversation=Conversation.objects.get(pk=chat.pk), actor=lead)
    maya = {"customer_token": identity.customer_token("maya@example.com")}
    (row,) = api("conversations/history", maya).json()["conversations"]
    assert row["status"] == "closed"

    services.conversation_post_message(conversation=chat, text="One more thing")  # writing again reopens it
    (row,) = api("conversations/history", maya).json()["conversations"]
    assert row["status"] == Conversation.TAKEN_OVER


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
    monkeypatch.setattr("support.desk.queue.run_agent", lambda run_id, **ids: None)
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
