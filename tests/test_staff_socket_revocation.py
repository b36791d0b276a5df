"""A staff socket stays open only while its session and account are good.

Who may keep one: an active staff account whose session still exists (not logged out, not expired, the
password unchanged since). Logging out closes that session's sockets at once; deactivating the account
(or taking its staff status) closes them when saved; any other change is caught by the check on every
client frame and at least every STAFF_SOCKET_RECHECK_SECONDS. The close code is 4403, nothing more is
sent after it, and each closing is logged on support.security with the user, the address and the reason.
"""

from __future__ import annotations

import asyncio
import logging

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.test import Client

from agentsite.asgi import application
from support.desk import services
from support.live import events
from support.models import Message

pytestmark = pytest.mark.django_db(transaction=True)

HEADERS = [(b"origin", b"http://127.0.0.1:8000"), (b"host", b"127.0.0.1:8000")]


@pytest.fixture(autouse=True)
def quiet_layer(settings, monkeypatch):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    settings.STAFF_SOCKET_RECHECK_SECONDS = 3600  # tests that want the periodic check shorten it
    monkeypatch.setattr("support.desk.queue.run_agent", lambda run_id, **ids: None)
    monkeypatch.setattr("support.live.events.publisher.send", lambda groups, event: None)


@pytest.fixture
def sam(db):
    return get_user_model().objects.create_user("sam", password="pw", is_staff=True)


@pytest.fixture
def chat(demo):
    conversation = services.conversation_start(customer=demo.maya)
    services.message_append(conversation=conversation, author=Message.CUSTOMER,
                            wire={"role": "user", "content": "Where is SU-41210?"})
    return conversation


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def staff_socket(client: Client) -> WebsocketCommunicator:
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    ws = WebsocketCommunicator(application, "/ws/staff/", headers=[*HEADERS, (b"cookie", cookie)])
    ws.scope["client"] = ["192.0.2.7", 50123]  # where the browser connects from, as the server sees it
    return ws


async def closed_with(ws, timeout=3.0):
    """The close code, skipping anything sent before it; fails if the socket stays open."""
    while True:
        output = await ws.receive_output(timeout)
        if output["type"] == "websocket.close":
            return output.get("code")


async def is_open(ws) -> bool:
    await ws.send_json_to({"type": "ping"})
    output = await ws.receive_output(3)
    return output["type"] == "websocket.send"


def security_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "support.security" and r.levelno == logging.WARNING]


async def relay(conversation, n=1):
    """A live event of the conversation on the staff list group, as the publisher would send it."""
    event = {"type": "conversation.updated", "conversation": str(conversation.public_id), "seq": n,
             "status": "open", "detail": {}}
    await get_channel_layer().group_send(events.STAFF_GROUP, {"type": "desk.event", "id": f"ev{n}", "event": event})


# -- logging out ----------------------------------------------------------------------------------------------

def test_logging_out_closes_the_sessions_socket_at_once(sam, chat, caplog):
    browser = logged_in(sam)

    async def go():
        ws = staff_socket(browser)
        assert (await ws.connect())[0]
        await database_sync_to_async(browser.post)("/accounts/logout/")
        code = await closed_with(ws, timeout=2)
        await relay(chat)  # nothing reaches a closed socket
        assert await ws.receive_nothing(0.3)
        return code

    with caplog.at_level(logging.WARNING, logger="support.security"):
        assert async_to_sync(go)() == 4403
    (line,) = security_lines(caplog)
    assert line.startswith("refused sam (id ") and line.endswith(" from 192.0.2.7: staff socket closed: logged out")


def test_logging_out_elsewhere_leaves_a_socket_of_a_session_still_logged_in_open(sam):
    here, elsewhere = logged_in(sam), logged_in(sam)

    async def go():
        ws = staff_socket(here)
        assert (await ws.connect())[0]
        await database_sync_to_async(elsewhere.post)("/accounts/logout/")
        await asyncio.sleep(0.2)
        still = await is_open(ws)
        await ws.disconnect()
        return still

    assert async_to_sync(go)() is True


# -- the account changes ------------------------------------------------------------------------------------

@pytest.mark.parametrize("change", ["is_active", "is_staff"])
def test_deactivating_the_account_closes_its_sockets_when_saved(sam, change):
    browser = logged_in(sam)

    def revoke():
        setattr(sam, change, False)
        sam.save()

    async def go():
        ws = staff_socket(browser)
        assert (await ws.connect())[0]
        await database_sync_to_async(revoke)()
        return await closed_with(ws, timeout=2)

    assert async_to_sync(go)() == 4403


def test_a_change_made_behind_the_sites_back_is_caught_by_the_periodic_check(sam, settings, caplog):
    settings.STAFF_SOCKET_RECHECK_SECONDS = 0.3
    browser = logged_in(sam)

    async def go():
        ws = staff_socket(browser)
        assert (await ws.connect())[0]
        # No signal: as a bulk update, a shell or another site's process would do it.
        await database_sync_to_async(get_user_model().objects.filter(pk=sam.pk).update)(is_active=False)
        return await closed_with(ws, timeout=2)

    with caplog.at_level(logging.WARNING, logger="support.security"):
        assert async_to_sync(go)() == 4403
    assert any("staff socket closed: the account was deactivated" in line for line in security_lines(caplog))


def test_a_session_deleted_behind_the_sites_back_closes_the_socket_at_the_next_frame(sam, chat):
    browser = logged_in(sam)

    async def go():
        ws = staff_socket(browser)
        assert (await ws.connect())[0]
        await database_sync_to_async(Session.objects.all().delete)()
        await ws.send_json_to({"type": "watch", "conversation": str(chat.public_id), "last_seq": 0})
        first = await ws.receive_output(2)
        return first

    first = async_to_sync(go)()
    assert first == {"type": "websocket.close", "code": 4403}  # no replay of the conversation before it


def test_an_event_after_the_check_went_stale_is_not_relayed_to_a_revoked_socket(sam, chat, settings):
    settings.STAFF_SOCKET_RECHECK_SECONDS = 0.2
    browser = logged_in(sam)

    async def go():
        ws = staff_socket(browser)
        assert (await ws.connect())[0]
        await database_sync_to_async(Session.objects.all().delete)()
        await asyncio.sleep(0.25)
        await relay(chat)
        return await ws.receive_output(2)

    assert async_to_sync(go)() == {"type": "websocket.close", "code": 4403}


def test_a_password_change_ends_the_sessions_socket(sam, settings):
    settings.STAFF_SOCKET_RECHECK_SECONDS = 0.3
    browser = logged_in(sam)

    def change_password():
        sam.set_password("a new one")
        sam.save()

    async def go():
        ws = staff_socket(browser)
        assert (await ws.connect())[0]
        await database_sync_to_async(change_password)()
        return await closed_with(ws, timeout=2)

    assert async_to_sync(go)() == 4403


def test_a_good_session_keeps_its_socket_through_the_checks(sam, chat, settings):
    settings.STAFF_SOCKET_RECHECK_SECONDS = 0.1
    browser = logged_in(sam)

    async def go():
        ws = staff_socket(browser)
        assert (await ws.connect())[0]
        await asyncio.sleep(0.35)
        await relay(chat)
        relayed = await ws.receive_json_from(2)
        still = await is_open(ws)
        await ws.disconnect()
        return relayed, still

    relayed, still = async_to_sync(go)()
    assert relayed["type"] == "conversation.updated" and still


# -- refused at the door ------------------------------------------------------------------------------------

def test_a_socket_refused_at_connect_is_logged(db, caplog):
    browser = logged_in(get_user_model().objects.create_user("chris", password="pw"))

    async def go():
        return await staff_socket(browser).connect()

    with caplog.at_level(logging.WARNING, logger="support.security"):
        assert async_to_sync(go)() == (False, 4403)
    (line,) = security_lines(caplog)
    assert line.startswith("refused chris (id ") and line.endswith("staff socket: not a staff account"), line
    assert " from 192.0.2.7: " in line
