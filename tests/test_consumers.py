"""The websocket consumers through the real router: authentication, origins, replay after a seq, dedupe.

Who may see what: a customer socket sees its own conversation only, customer-visible messages only,
after sending a valid conversation token; the staff socket needs a staff session.
"""


import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.test import Client

from agentsite.asgi import application
from support.customers import identity
from support.desk import services
from support.live import events
from support.models import Message
from tests.redis_fixture import limits_redis, limits_redis_server  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("limits_redis")]

ORIGIN = [(b"origin", b"http://127.0.0.1:8000"), (b"host", b"127.0.0.1:8000")]


@pytest.fixture(autouse=True)
def memory_layer(settings, monkeypatch):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    monkeypatch.setattr("support.desk.queue.run_agent", lambda run_id, **ids: None)
    monkeypatch.setattr("support.live.events.publisher.send", lambda groups, event: None)


@pytest.fixture
def chat(demo):
    conversation = services.conversation_start(customer=demo.maya)
    services.conversation_post_message(conversation=conversation, text="Where is SU-41210?")
    services.message_append(conversation=conversation, author=Message.AGENT,
                            wire={"role": "assistant", "content": None, "tool_calls": [
                                {"id": "c1", "type": "function",
                                 "function": {"name": "get_order", "arguments": "{}"}}]})
    services.message_append(conversation=conversation, author=Message.TOOL,
                            wire={"role": "tool", "tool_call_id": "c1", "content": '{"secret": "tool data"}'})
    services.message_append(conversation=conversation, author=Message.AGENT,
                            wire={"role": "assistant", "content": "It was delivered yesterday."})
    conversation.refresh_from_db()
    return conversation


def customer_socket(conversation, origin=ORIGIN):
    return WebsocketCommunicator(application, f"/ws/conversations/{conversation.public_id}/", headers=origin)


async def received_until_replay_done(ws):
    out = []
    while True:
        event = await ws.receive_json_from(timeout=3)
        out.append(event)
        if event["type"] == "replay.done":
            return out


def run(coro):
    return async_to_sync(coro)()


def test_it_replays_only_what_the_customer_may_see(chat):
    async def go():
        ws = customer_socket(chat)
        assert (await ws.connect())[0]
        await ws.send_json_to({"type": "resume", "token": identity.conversation_token(chat), "last_seq": 0})
        events_ = await received_until_replay_done(ws)
        await ws.disconnect()
        return events_

    got = run(go)
    shown = [(e["seq"], e["message"]["role"], e["message"]["content"]) for e in got if e["type"] == "message.saved"]
    assert shown == [(2, "user", "Where is SU-41210?"), (5, "assistant", "It was delivered yesterday.")]
    assert "tool data" not in str(got) and "get_order" not in str(got) and "Sundry's customer support" not in str(got)


@pytest.mark.parametrize("last_seq, reads, shown", [
    (0, 1, [2, 5]),  # both of what the customer sees
    (4, 1, [5]),  # the answer after the tool's result
    (2, 1, [5]),
    (5, 0, []),  # has everything: the state's statement says so and no message is read
])
def test_a_replay_reads_messages_only_when_one_the_client_may_see_is_newer(chat, monkeypatch, last_seq, reads, shown):
    from support.desk import selectors

    calls = []
    real = selectors.messages_after
    monkeypatch.setattr(selectors, "messages_after", lambda *a, **k: calls.append(a) or real(*a, **k))

    async def go():
        ws = customer_socket(chat)
        await ws.connect()
        await ws.send_json_to({"type": "resume", "token": identity.conversation_token(chat), "last_seq": last_seq})
        got = await received_until_replay_done(ws)
        await ws.disconnect()
        return got

    got = run(go)
    assert [e["seq"] for e in got if e["type"] == "message.saved"] == shown
    assert len(calls) == reads
    assert got[-1]["seq"] == 5  # every seq up to the last is with the client either way


def test_a_replay_after_a_message_the_customer_does_not_see_reads_none(chat, monkeypatch):
    """The agent's tool call and its result (seqs 3 and 4) are not the customer's to see."""
    from support.desk import selectors

    Message.objects.filter(conversation=chat, seq=5).delete()
    calls = []
    monkeypatch.setattr(selectors, "messages_after", lambda *a, **k: calls.append(a) or [])

    async def go():
        ws = customer_socket(chat)
        await ws.connect()
        await ws.send_json_to({"type": "resume", "token": identity.conversation_token(chat), "last_seq": 2})
        got = await received_until_replay_done(ws)
        await ws.disconnect()
        return got

    got = run(go)
    assert calls == [] and [e["type"] for e in got] == ["replay.done"] and got[-1]["seq"] == 5


def test_it_replays_only_after_the_seq_the_client_has_and_drops_live_duplicates(chat):
    async def go():
        ws = customer_socket(chat)
        await ws.connect()
        await ws.send_json_to({"type": "resume", "token": identity.conversation_token(chat), "last_seq": 2})
        replayed = await received_until_replay_done(ws)
        layer = get_channel_layer()
        group = events.conversation_group(chat.public_id)
        stale = {"type": "message.saved", "conversation": str(chat.public_id), "seq": 5,
                 "message": {"seq": 5, "role": "assistant", "content": "It was delivered yesterday."}}
        fresh = {**stale, "seq": 6, "message": {"seq": 6, "role": "assistant", "content": "Anything else?"}}
        await layer.group_send(group, {"type": "desk.event", "event": stale})  # already replayed
        await layer.group_send(group, {"type": "desk.event", "event": fresh})
        live = await ws.receive_json_from(timeout=3)
        assert await ws.receive_nothing(timeout=0.2)
        await ws.disconnect()
        return replayed, live

    replayed, live = run(go)
    assert [e["seq"] for e in replayed if e["type"] == "message.saved"] == [5]
    assert live["seq"] == 6 and live["message"]["content"] == "Anything else?"


def test_a_bundle_of_events_reaches_the_socket_as_its_events_in_order_without_duplicates(chat):
    async def go():
        ws = customer_socket(chat)
        await ws.connect()
        await ws.send_json_to({"type": "resume", "token": identity.conversation_token(chat), "last_seq": 5})
        await received_until_replay_done(ws)
        base = {"type": "message.saved", "conversation": str(chat.public_id)}
        saved = [{"type": "desk.event", "id": f"e{seq}", "event": {
            **base, "seq": seq, "message": {"seq": seq, "role": "assistant", "content": f"reply {seq}"}}}
            for seq in (6, 7)]
        await get_channel_layer().group_send(events.conversation_group(chat.public_id), {
            "type": "desk.events", "events": [saved[0], saved[1], saved[0]]})  # the last one again: sent once
        got = [await ws.receive_json_from(timeout=3) for _ in range(2)]
        assert await ws.receive_nothing(timeout=0.2)
        await ws.disconnect()
        return got

    assert [e["message"]["content"] for e in run(go)] == ["reply 6", "reply 7"]


def test_a_token_for_another_conversation_is_refused(chat, demo):
    other = services.conversation_start(customer=demo.tom)

    async def go():
        ws = customer_socket(chat)
        await ws.connect()
        await ws.send_json_to({"type": "resume", "token": identity.conversation_token(other), "last_seq": 0})
        closed = await ws.receive_output(timeout=3)
        return closed

    assert run(go) == {"type": "websocket.close", "code": 4401}


def test_a_refused_token_leaves_the_conversations_group_and_relays_nothing(chat, demo, monkeypatch):
    """The group is joined before the token is read (one database call for both): a socket whose token is
    refused gets none of the conversation's events, not even one sent while its token was being read."""
    from support.web import consumers

    other = services.conversation_start(customer=demo.tom)
    group = events.conversation_group(chat.public_id)
    real = consumers._resume_read

    def read_while_an_event_comes(*args):
        async_to_sync(get_channel_layer().group_send)(group, {"type": "desk.event", "event": {
            "type": "message.saved", "conversation": str(chat.public_id), "seq": 6,
            "message": {"seq": 6, "role": "assistant", "content": "secret reply"}}})
        return real(*args)

    monkeypatch.setattr(consumers, "_resume_read", read_while_an_event_comes)

    async def go():
        ws = customer_socket(chat)
        await ws.connect()
        await ws.send_json_to({"type": "resume", "token": identity.conversation_token(other), "last_seq": 0})
        got = []
        while True:
            out = await ws.receive_output(timeout=3)
            got.append(out)
            if out["type"] == "websocket.close":
                break
        assert await ws.receive_nothing(timeout=0.3)  # nor after the close
        layer = get_channel_layer()
        return got, [name for name, members in layer.groups.items() if members and name == group]

    got, still_in = run(go)
    assert got == [{"type": "websocket.close", "code": 4401}]
    assert "secret reply" not in str(got) and still_in == []


def test_nothing_is_sent_before_the_customer_authenticates(chat):
    async def go():
        ws = customer_socket(chat)
        await ws.connect()
        await ws.send_json_to({"type": "message", "text": "hello", "client_id": "x"})
        return await ws.receive_output(timeout=3)

    assert run(go) == {"type": "websocket.close", "code": 4401}
    assert not chat.messages.filter(content="hello").exists()


def test_a_foreign_origin_is_refused_at_the_handshake(chat):
    async def go():
        ws = customer_socket(chat, origin=[(b"origin", b"http://evil.example")])
        connected, _ = await ws.connect()
        return connected

    assert run(go) is False


def test_a_customer_message_over_the_socket_is_saved_once_per_client_id(chat):
    async def go():
        ws = customer_socket(chat)
        await ws.connect()
        await ws.send_json_to({"type": "resume", "token": identity.conversation_token(chat), "last_seq": 5})
        await received_until_replay_done(ws)
        answers = []
        for _ in range(2):
            await ws.send_json_to({"type": "message", "text": "Thanks!", "client_id": "m-1"})
            answers.append(await ws.receive_json_from(timeout=3))
        await ws.send_json_to({"type": "message", "text": "   ", "client_id": "m-2"})
        answers.append(await ws.receive_json_from(timeout=3))
        await ws.disconnect()
        return answers

    first, again, empty = run(go)
    assert first == {"type": "message.accepted", "client_id": "m-1", "seq": 6}
    assert again == first
    assert empty["type"] == "message.rejected" and "empty" in empty["error"]
    assert chat.messages.filter(content="Thanks!").count() == 1


def _session_cookie(user) -> bytes:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


@pytest.mark.parametrize("staff", [False, None])
def test_the_staff_socket_refuses_non_staff_and_anonymous(chat, staff):
    headers = list(ORIGIN)
    if staff is False:
        headers.append((b"cookie", _session_cookie(get_user_model().objects.create_user("cust", password="x"))))

    async def go():
        ws = WebsocketCommunicator(application, "/ws/staff/", headers=headers)
        connected, code = await ws.connect()
        return connected, code

    connected, code = run(go)
    assert connected is False and code == 4403


def test_staff_watch_a_conversation_with_tool_calls_and_results(chat):
    user = get_user_model().objects.create_user("sam", password="x", is_staff=True)
    headers = [*ORIGIN, (b"cookie", _session_cookie(user))]

    async def go():
        ws = WebsocketCommunicator(application, "/ws/staff/", headers=headers)
        assert (await ws.connect())[0]
        await ws.send_json_to({"type": "watch", "conversation": str(chat.public_id), "last_seq": 0})
        got = await received_until_replay_done(ws)
        await ws.disconnect()
        return got

    got = run(go)
    roles = [e["message"]["role"] for e in got if e["type"] == "message.saved"]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    assert any(e["message"].get("tool_calls") for e in got if e["type"] == "message.saved")
