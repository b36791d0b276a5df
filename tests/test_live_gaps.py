"""Live events that cross or get lost, and how a socket's client still ends up with every message.

The live path may lose an event or deliver two out of order (daphne and the workers publish separately;
Redis may restart). Nothing that was saved is lost for the client: a live message below the highest one
sent is still sent; a client that finds a hole in the seqs asks for a replay and gets exactly what it
lacks; a ping is answered with the conversation's last seq, so a lost last event is found too
(docs/events.md). Who sees what: the customer socket, its own conversation's customer-visible messages
(a hidden one as its seq alone); the staff socket, every message of the conversations it watches.
"""

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.test import Client

from agentsite.asgi import application
from support.customers import identity
from support.desk import serializers, services
from support.live import events
from support.models import Message, Run, Step

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = [(b"origin", b"http://127.0.0.1:8000"), (b"host", b"127.0.0.1:8000")]


@pytest.fixture(autouse=True)
def published(settings, monkeypatch):
    """Events the code publishes, recorded instead of sent: a test delivers the ones it wants live."""
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    monkeypatch.setattr("support.desk.queue.run_agent", lambda run_id, **ids: None)
    sent = []
    monkeypatch.setattr("support.live.events.publisher.send", lambda groups, event: sent.append((groups, event)))
    return sent


@pytest.fixture
def chat(demo):
    """seq 1 system prompt, 2 customer, 3 the agent's tool call, 4 the tool result, 5 the agent's answer."""
    conversation = services.conversation_start(customer=demo.maya)
    services.conversation_post_message(conversation=conversation, text="Where is SU-41210?")
    tool_call(conversation, "c1")
    services.message_append(conversation=conversation, author=Message.AGENT,
                            wire={"role": "assistant", "content": "It was delivered yesterday."})
    conversation.refresh_from_db()
    return conversation


def tool_call(conversation, call_id):
    services.message_append(conversation=conversation, author=Message.AGENT,
                            wire={"role": "assistant", "content": None, "tool_calls": [
                                {"id": call_id, "type": "function",
                                 "function": {"name": "get_order", "arguments": "{}"}}]})
    services.message_append(conversation=conversation, author=Message.TOOL,
                            wire={"role": "tool", "tool_call_id": call_id, "content": '{"secret": "tool data"}'})


@database_sync_to_async
def agent_says(conversation, text) -> Message:
    return services.message_append(conversation=conversation, author=Message.AGENT,
                                   wire={"role": "assistant", "content": text})


def run(coro):
    return async_to_sync(coro)()


async def received_until_replay_done(ws):
    out = []
    while True:
        event = await ws.receive_json_from(timeout=3)
        out.append(event)
        if event["type"] == "replay.done":
            return out


async def customer_resumed(conversation, last_seq):
    ws = WebsocketCommunicator(application, f"/ws/conversations/{conversation.public_id}/", headers=ORIGIN)
    assert (await ws.connect())[0]
    await ws.send_json_to({"type": "resume", "token": identity.conversation_token(conversation),
                           "last_seq": last_seq})
    return ws, await received_until_replay_done(ws)


async def deliver(group, event, event_id):
    await get_channel_layer().group_send(group, {"type": "desk.event", "id": event_id, "event": event})


def saved_event(conversation, seq, text):
    return {"type": "message.saved", "conversation": str(conversation.public_id), "seq": seq,
            "message": {"seq": seq, "role": "assistant", "author": "agent", "content": text}}


def shown(frames):
    return [e["seq"] for e in frames if e["type"] == "message.saved"]


# -- crossed events: drop only what was sent already ---------------------------------------------------

def test_a_live_message_overtaken_by_a_later_one_is_still_sent(chat):
    group = events.conversation_group(chat.public_id)

    async def go():
        ws, _ = await customer_resumed(chat, 5)
        await deliver(group, saved_event(chat, 7, "from the worker"), "a")
        await deliver(group, saved_event(chat, 6, "from daphne"), "b")  # published first, arrived second
        got = [await ws.receive_json_from(timeout=3), await ws.receive_json_from(timeout=3)]
        await ws.disconnect()
        return got

    assert [e["seq"] for e in run(go)] == [7, 6]


def test_a_message_sent_already_is_not_sent_again_live(chat):
    group = events.conversation_group(chat.public_id)

    async def go():
        ws, first = await customer_resumed(chat, 2)
        await deliver(group, saved_event(chat, 5, "It was delivered yesterday."), "replayed")
        await deliver(group, saved_event(chat, 7, "You're welcome."), "seven")
        await deliver(group, saved_event(chat, 7, "You're welcome."), "seven-again")  # a retried publish
        await deliver(group, saved_event(chat, 6, "Thanks"), "six")
        live = [await ws.receive_json_from(timeout=3), await ws.receive_json_from(timeout=3)]
        assert await ws.receive_nothing(timeout=0.2)
        await ws.disconnect()
        return first, live

    first, live = run(go)
    assert shown(first) == [5]
    assert shown(live) == [7, 6]


def test_a_replay_asked_for_again_sends_every_message_after_the_seq_given(chat):
    # The client knows what it lacks: a message may be lost between this socket and the page, too.
    async def go():
        ws, first = await customer_resumed(chat, 0)
        await ws.send_json_to({"type": "resume", "token": identity.conversation_token(chat), "last_seq": 2})
        again = await received_until_replay_done(ws)
        await ws.disconnect()
        return first, again

    first, again = run(go)
    assert shown(first) == [2, 5]
    assert shown(again) == [5]


# -- gaps: the client asks again, and gets what it lacks -------------------------------------------------

def test_a_client_that_saw_a_hole_in_the_seqs_gets_the_missing_message_by_asking_again(chat):
    group = events.conversation_group(chat.public_id)

    async def go():
        ws, _ = await customer_resumed(chat, 5)
        lost = await agent_says(chat, "Anything else?")  # seq 6: saved, its event lost with Redis
        late = await agent_says(chat, "I'm here if you need me.")  # seq 7 arrives
        await deliver(group, saved_event(chat, late.seq, late.content), "seven")
        seen = await ws.receive_json_from(timeout=3)
        await ws.send_json_to({"type": "resume", "token": identity.conversation_token(chat), "last_seq": 5})
        filled = await received_until_replay_done(ws)
        await ws.disconnect()
        return lost.seq, seen, filled

    lost, seen, filled = run(go)
    assert seen["seq"] == lost + 1
    assert [(e["seq"], e["message"]["content"]) for e in filled if e["type"] == "message.saved"] == [
        (lost, "Anything else?"), (lost + 1, "I'm here if you need me.")]  # the client drops the one it has
    assert filled[-1]["type"] == "replay.done" and filled[-1]["seq"] == lost + 1


def test_a_ping_is_answered_with_the_last_seq_so_a_lost_last_message_is_found(chat):
    async def go():
        ws, _ = await customer_resumed(chat, 5)
        lost = await agent_says(chat, "Your refund is on its way.")  # the run's last message; its event lost
        await ws.send_json_to({"type": "ping"})
        pong = await ws.receive_json_from(timeout=3)
        await ws.send_json_to({"type": "resume", "token": identity.conversation_token(chat), "last_seq": 5})
        filled = await received_until_replay_done(ws)
        await ws.disconnect()
        return lost.seq, pong, filled

    lost, pong, filled = run(go)
    assert pong == {"type": "pong", "conversation": str(chat.public_id), "seq": lost}
    assert shown(filled) == [lost]


def test_the_replay_covers_the_seqs_a_customer_may_not_see(chat):
    tool_call(chat, "c2")  # seqs 6 and 7: nothing for the customer, but no hole either

    async def go():
        ws, replayed = await customer_resumed(chat, 5)
        await ws.disconnect()
        return replayed

    replayed = run(go)
    assert shown(replayed) == []
    assert replayed[-1]["type"] == "replay.done" and replayed[-1]["seq"] == 7


def test_a_message_the_customer_may_not_see_reaches_them_as_its_seq_alone(chat, published):
    published.clear()
    tool_call(chat, "c2")
    customer = [e for groups, e in published if events.conversation_group(chat.public_id) in groups]
    assert customer == [{"type": "message.hidden", "conversation": str(chat.public_id), "seq": 6},
                        {"type": "message.hidden", "conversation": str(chat.public_id), "seq": 7}]


def test_a_hidden_seq_is_relayed_to_the_customer_once(chat):
    group = events.conversation_group(chat.public_id)
    hidden = {"type": "message.hidden", "conversation": str(chat.public_id), "seq": 6}

    async def go():
        ws, _ = await customer_resumed(chat, 5)
        await deliver(group, hidden, "h")
        await deliver(group, hidden, "h-retried")
        got = await ws.receive_json_from(timeout=3)
        assert await ws.receive_nothing(timeout=0.2)
        await ws.disconnect()
        return got

    assert run(go) == hidden


def _staff_headers():
    user = get_user_model().objects.create_user("sam", password="x", is_staff=True)
    client = Client()
    client.force_login(user)
    return [*ORIGIN, (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())]


def test_staff_ping_is_answered_with_the_last_seq_of_each_watched_conversation(chat, demo):
    headers = _staff_headers()
    other = services.conversation_start(customer=demo.tom)

    async def go():
        ws = WebsocketCommunicator(application, "/ws/staff/", headers=headers)
        assert (await ws.connect())[0]
        await ws.send_json_to({"type": "ping"})
        unwatched = await ws.receive_json_from(timeout=3)
        await ws.send_json_to({"type": "watch", "conversation": str(chat.public_id), "last_seq": 5})
        await received_until_replay_done(ws)
        lost = await agent_says(chat, "Done.")
        await ws.send_json_to({"type": "ping"})
        pong = await ws.receive_json_from(timeout=3)
        await ws.send_json_to({"type": "watch", "conversation": str(chat.public_id), "last_seq": 5})
        filled = await received_until_replay_done(ws)
        await ws.disconnect()
        return unwatched, lost.seq, pong, filled

    unwatched, lost, pong, filled = run(go)
    assert unwatched == {"type": "pong", "seqs": {}}
    assert pong == {"type": "pong", "seqs": {str(chat.public_id): lost}}
    assert str(other.public_id) not in str(pong)
    assert shown(filled) == [lost]


# -- a reply that starts again ---------------------------------------------------------------------------

def test_a_model_step_starting_tells_the_customer_to_drop_a_partial_reply_without_trace_details(chat, published):
    run_ = Run.objects.get(conversation=chat)  # the customer's message started it
    published.clear()
    serializers.publish_step(Step(run=run_, kind="model", turn=2, label="Thinking", model="gpt-secret",
                                  arguments='{"secret": 1}'), started=True)
    customer = [e for groups, e in published if events.conversation_group(chat.public_id) in groups]
    assert customer == [{"type": "step.started", "conversation": str(chat.public_id), "seq": chat.last_seq,
                         "run": str(run_.public_id), "kind": "model", "label": "Thinking"}]
