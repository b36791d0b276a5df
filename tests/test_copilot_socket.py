"""The copilot's events reach the console through the staff socket of a watched conversation, and never the
customer's widget: they are published to the staff's group only.

Who: Maya's conversation, taken over by Sam, who watches it in the console while the copilot drafts."""

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.test import Client

from agentsite.asgi import application
from support.live import events
from tests.copilot_factories import ask, copilot_queued, handed_over, sam  # noqa: F401  (fixtures)
from tests.redis_fixture import limits_redis, limits_redis_server  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("limits_redis")]

ORIGIN = [(b"origin", b"http://127.0.0.1:8000"), (b"host", b"127.0.0.1:8000")]


def test_a_watching_staff_socket_receives_the_copilots_delta_and_done_events(desk, queued, copilot_queued, sam,
                                                                             settings, monkeypatch):
    conversation = handed_over(queued, desk.maya, sam)
    published = []
    monkeypatch.setattr(events.publisher, "send", lambda groups, event: published.append((groups, event)))
    run = ask(conversation, sam, "draft")
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    client = Client()
    client.force_login(sam)
    headers = [*ORIGIN, (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())]

    async def go():
        ws = WebsocketCommunicator(application, "/ws/staff/", headers=headers)
        assert (await ws.connect())[0]
        await ws.send_json_to({"type": "watch", "conversation": str(conversation.public_id),
                               "last_seq": conversation.last_seq})
        while (await ws.receive_json_from(timeout=3))["type"] != "replay.done":
            pass
        for n, (groups, event) in enumerate(published):  # as the publisher sends them
            for group in groups:
                await get_channel_layer().group_send(group, {"type": "desk.event", "id": f"c{n}", "event": event})
        got = []
        while not got or got[-1]["type"] != "copilot.done":
            got.append(await ws.receive_json_from(timeout=3))
        await ws.disconnect()
        return got

    got = async_to_sync(go)()
    assert {e["type"] for e in got} == {"copilot.delta", "copilot.done"}
    assert "".join(e["text"] for e in got if e["type"] == "copilot.delta").endswith(run.text)
    assert got[-1]["copilot"]["id"] == str(run.public_id) and got[-1]["conversation"] == str(conversation.public_id)
    assert all(groups == [events.staff_conversation_group(conversation.public_id)] for groups, _ in published)
