"""Staff presence for routing: the console's socket marks its staff member online in Redis, renews the mark while
it is open and takes it away when it closes; with two tabs open, closing one leaves the person online. A person
coming online takes in what waited unrouted.

Who: Sam and Alex are staff with a console open (a staff socket each, or two for Sam); a socket that is refused
(not staff) marks nobody.
"""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.test import Client

from agentsite.asgi import application
from support.desk import services
from support.live import presence
from support.models import Conversation
from tests.desk_factories import make_user, start_conversation

pytestmark = pytest.mark.django_db(transaction=True)

HEADERS = [(b"origin", b"http://127.0.0.1:8000"), (b"host", b"127.0.0.1:8000")]


@pytest.fixture(autouse=True)
def quiet_layer(settings, monkeypatch):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    settings.STAFF_SOCKET_RECHECK_SECONDS = 3600
    monkeypatch.setattr("support.desk.queue.run_agent", lambda run_id, **ids: None)
    monkeypatch.setattr("support.live.events.publisher.send", lambda groups, event: None)


@pytest.fixture
def sam(db):
    return make_user("sam", staff=True, first_name="Sam")


@pytest.fixture
def alex(db):
    return make_user("alex", staff=True, first_name="Alex")


def console(user) -> WebsocketCommunicator:
    client = Client()
    client.force_login(user)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    return WebsocketCommunicator(application, "/ws/staff/", headers=[*HEADERS, (b"cookie", cookie)])


async def opened(ws) -> WebsocketCommunicator:
    """Connected, and its first frame answered: the socket has done what it does on connect."""
    assert (await ws.connect())[0]
    await ws.send_json_to({"type": "ping"})
    while (await ws.receive_json_from(timeout=3))["type"] != "pong":
        pass
    return ws


def online_now() -> set[int]:
    return presence.online_user_ids()


def run(coro):
    return async_to_sync(coro)()


def test_an_open_console_marks_its_person_online_and_closing_it_marks_them_offline(sam, alex):
    socket = console(sam)

    async def go():
        ws = await opened(socket)
        during = await asyncio.to_thread(online_now)
        await ws.disconnect()
        return during, await asyncio.to_thread(online_now)

    during, after = run(go)
    assert during == {sam.pk}
    assert after == set()


def test_with_two_tabs_closing_one_leaves_the_person_online(sam):
    tabs = console(sam), console(sam)

    async def go():
        first, second = await opened(tabs[0]), await opened(tabs[1])
        await first.disconnect()
        one_left = await asyncio.to_thread(online_now)
        await second.disconnect()
        return one_left, await asyncio.to_thread(online_now)

    one_left, none_left = run(go)
    assert one_left == {sam.pk}
    assert none_left == set()


def test_two_people_each_online_while_their_console_is_open(sam, alex):
    sockets = console(sam), console(alex)

    async def go():
        a, b = await opened(sockets[0]), await opened(sockets[1])
        both = await asyncio.to_thread(online_now)
        await a.disconnect()
        only_alex = await asyncio.to_thread(online_now)
        await b.disconnect()
        return both, only_alex

    both, only_alex = run(go)
    assert both == {sam.pk, alex.pk}
    assert only_alex == {alex.pk}


def test_the_mark_is_renewed_while_the_socket_is_open(sam, settings):
    settings.STAFF_PRESENCE_SECONDS = 3.0  # renewed every second

    def lapses_at() -> float:
        members = presence.limits.store().zrange(presence.KEY, 0, -1, withscores=True)
        return max(score for _, score in members)

    socket = console(sam)

    async def go():
        ws = await opened(socket)
        first = await asyncio.to_thread(lapses_at)
        renewed = first
        for _ in range(100):  # until the socket renews its mark (about a second)
            await asyncio.sleep(0.05)
            renewed = await asyncio.to_thread(lapses_at)
            if renewed > first:
                break
        await ws.disconnect()
        return first, renewed

    first, renewed = run(go)
    assert renewed > first


def test_logging_out_takes_the_mark_away(sam):
    client = Client()
    client.force_login(sam)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    socket = WebsocketCommunicator(application, "/ws/staff/", headers=[*HEADERS, (b"cookie", cookie)])

    async def go():
        ws = await opened(socket)
        await asyncio.to_thread(client.post, "/accounts/logout/")
        while True:
            output = await ws.receive_output(3)
            if output["type"] == "websocket.close":
                break
        gone = await asyncio.to_thread(online_now)
        await ws.disconnect()
        return gone

    assert run(go) == set()


def test_a_refused_socket_marks_nobody(db):
    chris = make_user("chris", staff=False)

    socket = console(chris)

    async def go():
        connected, _ = await socket.connect()
        return connected, await asyncio.to_thread(online_now)

    connected, marked = run(go)
    assert not connected and marked == set()


def test_coming_online_routes_what_waited_unrouted(demo, sam):
    conversation = start_conversation(demo.maya)
    services.conversation_flag(conversation_id=conversation.pk, reason="the agent handed this over")
    assert Conversation.objects.get(pk=conversation.pk).routed_to is None  # nobody online

    socket = console(sam)

    async def go():
        ws = await opened(socket)
        await ws.disconnect()

    run(go)
    assert Conversation.objects.get(pk=conversation.pk).routed_to == sam
