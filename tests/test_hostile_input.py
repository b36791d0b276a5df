"""Hostile input at the edge: every text field cleaned or refused in plain words (never a 500), and a socket
that receives what it cannot read is told why in an error frame and closed (never a 1011 and a traceback).

Maya holds the token of her conversation; the stranger holds nothing. Close codes (4000 + the HTTP status):
4400 not JSON or nested too deeply, 4401 no valid token, 4413 a frame too large, 4415 a binary frame, 4429
too many sockets; an unknown frame type is answered with an error frame (code unknown_type) and the socket
stays.
"""

from __future__ import annotations

import json
import logging

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.test import Client

from agentsite.asgi import application
from support.customers import identity
from support.models import Conversation
from tests.desk_factories import customer_messages, start_conversation
from tests.redis_fixture import limits_redis, limits_redis_server  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("limits_redis")]
HEADERS = [(b"origin", b"http://127.0.0.1:8000"), (b"host", b"127.0.0.1:8000")]


@pytest.fixture(autouse=True)
def quiet_run_queue(monkeypatch):
    monkeypatch.setattr("support.desk.queue.run_agent", lambda run_id, **ids: None)
    monkeypatch.setattr("support.live.events.publisher.send", lambda groups, event: None)


@pytest.fixture
def chat(demo):
    conversation = start_conversation(demo.maya)
    return conversation, identity.conversation_token(conversation)


def post(path, body, token=None):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    raw = body if isinstance(body, str) else json.dumps(body)
    return Client().post(path, raw, content_type="application/json", **headers)


def say(chat, text, **fields):
    conversation, token = chat
    return post(f"/api/conversations/{conversation.public_id}/messages", {"text": text, **fields}, token)


# -- the HTTP API ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("body, status", [
    ({"email": "maya@example.com", "order_number": "SU-41207\x00"}, 400),
    ({"email": "maya@example.com\x00", "order_number": "SU-41207"}, 400),
    ({"email": "maya@example.com", "order_number": "\ud800"}, 400),
    ({"customer_token": "abc\x00def"}, 403),
    ({"customer_token": "\ud800"}, 403),
    ({"email": "maya@example.com", "code": "1234\x005678"}, 403),
])
def test_a_nul_byte_or_a_lone_surrogate_in_a_start_field_is_refused_not_a_500(demo, body, status):
    response = post("/api/conversations", body)
    assert response.status_code == status and response.json()["error"]
    assert not Conversation.objects.exists()


def test_a_nul_byte_in_a_client_id_is_refused_in_plain_words(chat):
    response = say(chat, "hello", client_id="m-1\x00")
    assert response.status_code == 400
    assert response.json()["error"] == "client_id must be 1 to 64 letters, digits or . _ : -"
    assert customer_messages(chat[0]) == []


def test_a_nul_byte_in_the_bearer_token_is_just_a_wrong_token(chat):
    conversation, token = chat
    response = Client().get(f"/api/conversations/{conversation.public_id}", HTTP_AUTHORIZATION=f"Bearer {token}\x00")
    assert response.status_code == 404


@pytest.mark.parametrize("text", ["\u200b", "\u2060\ufeff", " \u200b\n\u200d\t", "\u00ad", "\u202e\u2066"])
def test_a_message_of_only_invisible_characters_is_empty_and_starts_no_run(chat, text):
    response = say(chat, text)
    assert (response.status_code, response.json()["error"]) == (400, "Your message is empty.")
    assert customer_messages(chat[0]) == [] and not chat[0].runs.exists()


def test_emoji_joined_by_zero_width_joiners_are_kept_whole(chat):
    family = "\U0001f469\u200d\U0001f469\u200d\U0001f467"
    assert say(chat, family).status_code == 202
    assert [m.content for m in customer_messages(chat[0])] == [family]


def test_the_size_is_measured_after_normalisation(chat, settings):
    # U+0958 is 3 bytes, and 6 once NFC has decomposed it (a composition exclusion): 40 fit before, not after.
    settings.MAX_MESSAGE_BYTES = 200
    response = say(chat, "\u0958" * 40)
    assert response.status_code == 400
    assert response.json()["error"].startswith("Your message is too long \u2014 please keep it under 200 characters")
    assert say(chat, "\u0958" * 33).status_code == 202
    assert all(len(m.content.encode()) <= 200 for m in customer_messages(chat[0]))


def test_bidi_overrides_and_isolates_are_taken_out_so_text_reads_as_written(chat):
    assert say(chat, "Refund \u202e12345 EUR\u202c please \u2067x\u2069").status_code == 202
    assert [m.content for m in customer_messages(chat[0])] == ["Refund 12345 EUR please x"]


def test_a_control_character_is_named_in_plain_words(chat):
    assert say(chat, "hi\x00there").json()["error"] == \
        "Your message contains a control character (U+0000) we cannot show; please remove it."


# -- the customer's socket ------------------------------------------------------------------------------

async def _opened(conversation, token=None):
    ws = WebsocketCommunicator(application, f"/ws/conversations/{conversation.public_id}/", headers=HEADERS)
    assert (await ws.connect())[0]
    if token:
        await ws.send_json_to({"type": "resume", "token": token, "last_seq": 0})
        while (await ws.receive_json_from(timeout=3))["type"] != "replay.done":
            pass
    return ws


def close_code_after(conversation, token, frame):
    """The error frame and the close that answer `frame`."""
    async def go():
        ws = await _opened(conversation, token)
        if isinstance(frame, bytes):
            await ws.send_to(bytes_data=frame)
        else:
            await ws.send_to(text_data=frame)
        error = await ws.receive_json_from(timeout=3)
        closed = await ws.receive_output(timeout=3)
        await ws.disconnect()
        return {"code": closed["code"], "error": error["code"]} if closed["type"] == "websocket.close" else closed

    return async_to_sync(go)()


@pytest.mark.parametrize("frame, close_code, error", [
    ("not json", 4400, "invalid_json"),
    ('{"type": "message", "text": "hel', 4400, "invalid_json"),  # truncated
    ("[" * 1000 + "]" * 1000, 4400, "too_deep"),
    ('{"type": "message", "text": ' + "[" * 20 + "]" * 20 + "}", 4400, "too_deep"),
    (b'{"type": "ping"}', 4415, "binary_frame"),
    ("\xff\xfe", 4400, "invalid_json"),  # text, but not JSON
])
def test_a_frame_it_cannot_read_is_named_in_an_error_frame_and_closes_the_socket(chat, frame, close_code, error,
                                                                                caplog):
    conversation, token = chat
    with caplog.at_level(logging.INFO):
        assert close_code_after(conversation, token, frame) == {"code": close_code, "error": error}
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


def test_a_frame_larger_than_a_maximal_message_closes_with_4413(chat, settings):
    settings.MAX_MESSAGE_BYTES = 100
    conversation, token = chat
    frame = json.dumps({"type": "message", "text": "x" * 5000})
    assert close_code_after(conversation, token, frame) == {"code": 4413, "error": "frame_too_large"}


def test_bad_frames_before_authenticating_close_the_same_way(chat):
    conversation, _ = chat
    assert close_code_after(conversation, None, "{oops") == {"code": 4400, "error": "invalid_json"}


def test_an_unknown_frame_type_gets_an_error_frame_and_the_socket_stays(chat):
    conversation, token = chat

    async def go():
        ws = await _opened(conversation, token)
        await ws.send_json_to({"type": "dance"})
        error = await ws.receive_json_from(timeout=3)
        await ws.send_json_to({"type": "ping"})
        pong = await ws.receive_json_from(timeout=3)
        await ws.disconnect()
        return error, pong

    error, pong = async_to_sync(go)()
    assert error == {"type": "error", "code": "unknown_type", "error": "Unknown frame type."}
    assert pong["type"] == "pong"


def test_a_nul_byte_in_a_client_id_over_the_socket_is_rejected_and_the_socket_stays(chat):
    conversation, token = chat

    async def go():
        ws = await _opened(conversation, token)
        await ws.send_json_to({"type": "message", "text": "hello", "client_id": "m\x00"})
        rejected = await ws.receive_json_from(timeout=3)
        await ws.send_json_to({"type": "message", "text": "\u200b", "client_id": "m-2"})
        empty = await ws.receive_json_from(timeout=3)
        await ws.disconnect()
        return rejected, empty

    rejected, empty = async_to_sync(go)()
    assert (rejected["type"], rejected["code"], rejected["client_id"]) == ("message.rejected", "invalid_client_id", None)
    assert (empty["type"], empty["code"], empty["error"]) == ("message.rejected", "empty", "Your message is empty.")
    assert customer_messages(conversation) == []


def test_a_nul_byte_in_the_resume_token_is_a_bad_token(chat):
    conversation, token = chat

    async def go():
        ws = await _opened(conversation)
        await ws.send_json_to({"type": "resume", "token": token + "\x00", "last_seq": 0})
        out = await ws.receive_output(timeout=3)
        await ws.disconnect()
        return out

    assert async_to_sync(go)()["code"] == 4401


@pytest.mark.parametrize("path", ["/ws/nothing/", "/ws/conversations/not-a-uuid/", "/ws/staff/extra/"])
def test_an_unknown_socket_path_is_refused_at_the_handshake_not_a_500(path):
    async def go():
        ws = WebsocketCommunicator(application, path, headers=HEADERS)
        connected, _ = await ws.connect()
        await ws.disconnect()
        return connected

    assert async_to_sync(go)() is False
