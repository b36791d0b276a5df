"""The sockets relay events without Channels' per-message connection clean-up (ReplayingConsumer.dispatch).

Channels' AsyncConsumer.dispatch awaits aclose_old_connections() before every message: a hop to the process's one
thread-sensitive thread for each event relayed. The desk's consumers reach the database only through db() calls,
whose thread gives the connection back when the call ends, so the override leaves that hop out and does the rest
as Channels does. If an upgrade changes Channels' dispatch, the last test here fails: read the new one and bring
the override in line.
"""

from __future__ import annotations

import inspect
import textwrap

import pytest
from channels.consumer import AsyncConsumer
from channels.layers import get_channel_layer

from support.customers import identity
from support.live import events
from support.web.consumers import CustomerConsumer
from tests.redis_fixture import limits_redis, limits_redis_server  # noqa: F401  (fixtures)
from tests.test_consumers import chat, customer_socket, memory_layer, received_until_replay_done, run  # noqa: F401

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("limits_redis")]


def test_events_reach_the_socket_without_a_connection_clean_up_for_each(chat, monkeypatch):
    cleanups = []

    async def counted():
        cleanups.append(1)

    monkeypatch.setattr("channels.consumer.aclose_old_connections", counted)

    async def go():
        ws = customer_socket(chat)
        await ws.connect()
        await ws.send_json_to({"type": "resume", "token": identity.conversation_token(chat), "last_seq": 5})
        await received_until_replay_done(ws)
        before = len(cleanups)
        for seq in (6, 7, 8):
            await get_channel_layer().group_send(events.conversation_group(chat.public_id), {
                "type": "desk.event", "id": f"e{seq}", "event": {
                    "type": "message.saved", "conversation": str(chat.public_id), "seq": seq,
                    "message": {"seq": seq, "role": "assistant", "content": f"reply {seq}"}}})
        got = [await ws.receive_json_from(timeout=3) for _ in range(3)]
        await ws.disconnect()
        return got, before, len(cleanups)

    got, before, after_events = run(go)
    assert [e["seq"] for e in got] == [6, 7, 8]
    assert before == 0 and after_events == 0


def test_a_message_without_a_handler_is_an_error_as_in_channels():
    consumer = CustomerConsumer()

    async def go():
        await consumer.dispatch({"type": "desk.nothing"})

    with pytest.raises(ValueError, match="No handler for message type desk.nothing"):
        run(go)


def test_channels_dispatch_is_still_the_one_the_override_follows():
    body = textwrap.dedent(inspect.getsource(AsyncConsumer.dispatch))
    code = [line.strip() for line in body.splitlines()
            if line.strip() and not line.strip().startswith(('"""', "Works out"))]
    assert code == [
        "async def dispatch(self, message):",
        "handler = getattr(self, get_handler_name(message), None)",
        "if handler:",
        "await aclose_old_connections()",
        "await handler(message)",
        "else:",
        'raise ValueError("No handler for message type %s" % message["type"])',
    ], "Channels' AsyncConsumer.dispatch changed: compare support/web/consumers.py ReplayingConsumer.dispatch with it"
