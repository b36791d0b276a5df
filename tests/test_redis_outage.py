"""What each path does while the limits' Redis is away: one written policy (docs/security.md, "When Redis is
away"), each rule tried against a real redis-server that was started and then stopped.

Expensive or guessable paths fail closed (sign-in, codes, uploads: tests/test_signin*.py and
tests/test_attachments*.py); the paths a conversation needs to go on stay open but counted: messages and new
conversations from the database (per conversation, per customer) and in this process (per address), sockets in
this process.
"""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator

from agentsite.asgi import application
from support.customers import identity
from support.models import Conversation, Message
from support.ops import limits
from tests.desk_factories import start_conversation
from tests.redis_fixture import RestartableRedis
from tests.test_limits import say, start


@pytest.fixture
def redis_gone(settings, caplog):
    """The limits' Redis was there and went away: a real server, stopped."""
    server = RestartableRedis()
    server.start()
    settings.LIMITS_REDIS_URL = server.url
    assert limits.store().ping()
    server.stop()
    limits.process_windows.clear()
    limits._last_warning = 0.0  # each test sees its own warning
    yield server
    limits.process_windows.clear()


def test_messages_are_limited_per_conversation_from_the_database(demo, queued, settings, redis_gone, caplog):
    settings.MESSAGES_PER_MINUTE = 2
    conversation = start_conversation(demo.maya)
    assert [say(conversation, f"m{i}").status_code for i in (1, 2, 3)] == [202, 202, 429]
    assert "limits: Redis at LIMITS_REDIS_URL unreachable" in caplog.text
    assert Message.objects.filter(conversation=conversation, author=Message.CUSTOMER).count() == 2


def test_messages_are_limited_per_customer_from_the_database_across_conversations(demo, queued, settings,
                                                                                  redis_gone):
    settings.CUSTOMER_MESSAGES_PER_MINUTE = 3
    chats = [start_conversation(demo.maya) for _ in range(3)]
    codes = [say(chat, f"to {n}").status_code for n, chat in enumerate(chats)] + [say(chats[0], "more").status_code]
    assert codes == [202, 202, 202, 429]
    assert say(start_conversation(demo.tom), "Tom's own").status_code == 202


def test_messages_from_one_address_are_counted_in_the_process(demo, queued, settings, redis_gone):
    settings.ADDRESS_MESSAGES_PER_MINUTE = 2
    chats = [start_conversation(c) for c in (demo.maya, demo.tom, demo.ines)]
    assert [say(chat, "hi", address="203.0.113.5").status_code for chat in chats] == [202, 202, 429]
    assert say(chats[2], "hi", address="203.0.113.6").status_code == 202


def test_new_conversations_are_limited_per_customer_from_the_database(demo, settings, redis_gone):
    settings.CUSTOMER_CONVERSATIONS_PER_HOUR = 2
    token = identity.customer_token("maya@example.com")
    codes = [start({"customer_token": token}, address=f"198.51.100.{i}").status_code for i in range(3)]
    assert codes == [201, 201, 429]
    assert Conversation.objects.filter(customer=demo.maya).count() == 2


def test_new_conversations_from_one_address_are_counted_in_the_process(demo, settings, redis_gone):
    settings.ADDRESS_CONVERSATIONS_PER_HOUR = 2
    tokens = [identity.customer_token(e) for e in ("maya@example.com", "tom@example.com", "ines@example.com")]
    assert [start({"customer_token": t}).status_code for t in tokens] == [201, 201, 429]


def test_sockets_from_one_address_are_counted_in_the_process(demo, settings, redis_gone):
    settings.ADDRESS_SOCKETS_PER_MINUTE = 2
    conversation = start_conversation(demo.maya)

    async def go():
        outcomes = []
        for _ in range(3):
            ws = WebsocketCommunicator(application, f"/ws/conversations/{conversation.public_id}/",
                                       headers=[(b"origin", b"http://127.0.0.1:8000"), (b"host", b"127.0.0.1:8000")])
            assert (await ws.connect())[0]
            if await ws.receive_nothing(timeout=0.3):
                outcomes.append("open")
            else:
                frame = await ws.receive_json_from(timeout=2)
                outcomes.append((frame["code"], (await ws.receive_output(timeout=2)).get("code")))
            await ws.disconnect()
        return outcomes

    assert async_to_sync(go)() == ["open", "open", ("rate_limited", 4429)]


def test_back_with_redis_the_counts_are_redis_again(demo, queued, settings, redis_gone):
    settings.ADDRESS_MESSAGES_PER_MINUTE = 1
    chats = [start_conversation(c) for c in (demo.maya, demo.tom)]
    assert say(chats[0], "while away", address="203.0.113.9").status_code == 202
    redis_gone.start()
    assert say(chats[1], "back", address="203.0.113.9").status_code == 202  # Redis had not seen the first
    assert say(chats[1], "again", address="203.0.113.9").status_code == 429
    redis_gone.stop()


# -- the per-process windows ----------------------------------------------------------------------------------

def test_process_windows_slide_and_name_the_wait(monkeypatch):
    windows = limits._ProcessWindows()
    now = [1000.0]
    monkeypatch.setattr(limits.time, "monotonic", lambda: now[0])
    limit = limits.Limit("k", 2, 60)
    windows.hit(limit)
    now[0] += 10
    windows.hit(limit)
    with pytest.raises(limits.Limited) as over:
        windows.hit(limit)
    assert over.value.retry_after == 50
    now[0] += 51
    windows.hit(limit)  # the first event left the window


def test_process_windows_hold_a_bounded_number_of_keys(monkeypatch):
    windows = limits._ProcessWindows()
    monkeypatch.setattr(windows, "MAX_KEYS", 100)
    for n in range(1000):
        windows.hit(limits.Limit(f"address:{n}", 5, 60))
    assert len(windows._events) <= 100
