"""Rate limits: atomic sliding windows in a shared Redis, per conversation, per customer, per client address,
on messages, on new conversations and on sockets; over a limit is a refusal that says when to retry.

Maya and Tom each chat; "the address" is the test client's (127.0.0.1) unless a test sets another. Every
counter starts at zero (a fresh database of the session's redis-server).
"""

from __future__ import annotations

import threading

import pytest
import redis
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.db import connection
from django.test import Client

from agentsite.asgi import application
from support.customers import identity
from support.desk import services
from support.models import Message
from support.ops import limits
from tests.desk_factories import customer_messages, start_conversation
from tests.redis_fixture import limits_redis, limits_redis_server  # noqa: F401  (fixtures)

pytestmark = pytest.mark.usefixtures("limits_redis")
TRIALS, AT_ONCE = 20, 30


def say(conversation, text="hello", address="198.51.100.7", token=None):
    client = Client(REMOTE_ADDR=address)
    token = token or identity.conversation_token(conversation)
    return client.post(f"/api/conversations/{conversation.public_id}/messages", {"text": text},
                       content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")


def start(body, address="198.51.100.7", **headers):
    return Client(REMOTE_ADDR=address).post("/api/conversations", body, content_type="application/json", **headers)


# -- the counter itself ---------------------------------------------------------------------------------

def test_a_limit_lets_exactly_its_count_through_when_everyone_asks_at_once():
    limit = limits.Limit("test:at-once", 10, 60)
    barrier, passed = threading.Barrier(AT_ONCE), []

    def ask():
        barrier.wait()
        try:
            limits.hit(limit)
            passed.append(1)
        except limits.Limited:
            pass

    threads = [threading.Thread(target=ask) for _ in range(AT_ONCE)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert len(passed) == 10


def test_an_event_refused_by_one_limit_is_counted_by_none():
    roomy, full = limits.Limit("test:roomy", 5, 60), limits.Limit("test:full", 1, 60)
    limits.hit(full)
    with pytest.raises(limits.Limited):
        limits.hit(roomy, full)
    for _ in range(5):
        limits.hit(roomy)  # all five slots still free


def test_retry_after_is_the_time_until_the_oldest_event_leaves_the_window():
    limit = limits.Limit("test:window", 2, 30)
    limits.hit(limit), limits.hit(limit)
    with pytest.raises(limits.Limited) as refused:
        limits.hit(limit)
    assert 29 <= refused.value.retry_after <= 30


def test_counts_outlive_the_process_that_made_them(settings):
    limit = limits.Limit("test:restart", 1, 60)
    limits.hit(limit)
    limits._clients.clear()  # a restarted (or another) site process: a new connection, the same counts
    with pytest.raises(limits.Limited):
        limits.hit(limit)


def test_a_tally_counts_on_past_its_count_refuses_nothing_and_ends_with_its_window():
    watched, other = limits.Limit("test:tally", 2, 60), limits.Limit("test:tally-other", 2, 600)
    assert [limits.tally(watched, other) for _ in range(4)] == [[1, 1], [2, 2], [3, 3], [4, 4]]
    limits.hit(limits.Limit("test:tally", 1, 60))  # a limit of the same name is another counter
    assert 0 < limits.store().ttl(limits.KEY_PREFIX + "tally:test:tally") <= 60
    assert 540 < limits.store().ttl(limits.KEY_PREFIX + "tally:test:tally-other") <= 600


# -- the client's address -------------------------------------------------------------------------------

def test_the_address_is_the_socket_peer_whatever_the_client_writes_in_headers(settings):
    settings.TRUSTED_PROXIES = 0
    assert limits.client_address("203.0.113.9", "1.2.3.4") == "203.0.113.9"


def test_behind_trusted_proxies_the_address_is_the_one_the_first_of_them_saw(settings):
    settings.TRUSTED_PROXIES = 2
    # client wrote "6.6.6.6"; our first proxy appended the client's real address, our second the first's.
    assert limits.client_address("10.0.0.2", "6.6.6.6, 203.0.113.9, 10.0.0.1") == "203.0.113.9"
    settings.TRUSTED_PROXIES = 1
    assert limits.client_address("10.0.0.2", "6.6.6.6, 203.0.113.9") == "203.0.113.9"


def test_with_fewer_forwarded_entries_than_trusted_proxies_the_address_is_the_peer(settings):
    """The request skipped a proxy (it reached the site or a later proxy directly): every entry may be the
    client's own writing, so none is believed."""
    settings.TRUSTED_PROXIES = 2
    assert limits.client_address("198.51.100.7", "6.6.6.6") == "198.51.100.7"
    settings.TRUSTED_PROXIES = 3
    assert limits.client_address("198.51.100.7", "6.6.6.6, 7.7.7.7") == "198.51.100.7"
    assert limits.client_address("198.51.100.7", " , ") == "198.51.100.7"


def test_an_ipv6_subscriber_counts_as_their_whole_64_block(settings):
    assert limits.client_address("2001:db8:1:2:aaaa::1", None) == limits.client_address("2001:db8:1:2:bbbb::9", None)
    assert limits.client_address("2001:db8:1:3::1", None) != limits.client_address("2001:db8:1:2::1", None)
    assert limits.client_address("::ffff:192.0.2.1", None) == "192.0.2.1"


def test_the_http_api_reads_the_configured_header_only_behind_trusted_proxies(settings, demo):
    settings.ADDRESS_CONVERSATIONS_PER_HOUR = 1
    token = identity.customer_token("maya@example.com")
    settings.TRUSTED_PROXIES = 1
    assert start({"customer_token": token}, address="10.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.1").status_code == 201
    assert start({"customer_token": token}, address="10.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.2").status_code == 201
    assert start({"customer_token": token}, address="10.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.2").status_code == 429


# -- messages -------------------------------------------------------------------------------------------

def test_over_the_conversation_limit_a_post_is_refused_with_429_retry_after_and_the_api_error_shape(demo, queued,
                                                                                                    settings):
    settings.MESSAGES_PER_MINUTE = 2
    conversation = start_conversation(demo.maya)
    assert [say(conversation, f"m{i}").status_code for i in (1, 2)] == [202, 202]
    refused = say(conversation, "m3")
    assert refused.status_code == 429 and 1 <= int(refused["Retry-After"]) <= 60
    assert refused.json()["code"] == "rate_limited" and refused.json()["retryable"] is True
    assert [m.content for m in customer_messages(conversation)] == ["m1", "m2"]


def test_one_customer_cannot_multiply_the_limit_by_opening_conversations(demo, queued, settings):
    settings.MESSAGES_PER_MINUTE, settings.CUSTOMER_MESSAGES_PER_MINUTE = 10, 3
    chats = [start_conversation(demo.maya) for _ in range(3)]
    codes = [say(chat, "hi", address=f"198.51.100.{i}").status_code for i, chat in enumerate(chats * 2)]
    assert codes == [202, 202, 202, 429, 429, 429]
    assert say(start_conversation(demo.tom), "hi").status_code == 202  # another customer is not held up


def test_one_address_cannot_post_for_many_customers_past_its_limit(demo, queued, settings):
    settings.ADDRESS_MESSAGES_PER_MINUTE = 2
    maya, tom = start_conversation(demo.maya), start_conversation(demo.tom)
    assert [say(c, "hi", address="203.0.113.5").status_code for c in (maya, tom, tom)] == [202, 202, 429]
    assert say(tom, "hi", address="203.0.113.6").status_code == 202


def test_a_message_refused_over_the_socket_says_rate_limited_and_when(demo, queued, settings):
    settings.MESSAGES_PER_MINUTE = 1
    conversation = start_conversation(demo.maya)
    services.conversation_post_message(conversation=conversation, text="first")
    with pytest.raises(services.RateLimited) as refused:
        services.conversation_post_message(conversation=conversation, text="second")
    assert 1 <= refused.value.retry_after <= 60


@pytest.mark.django_db(transaction=True)
def test_simultaneous_posts_to_one_conversation_never_pass_its_limit(demo, queued, settings):
    """30 posts at once, 20 times over: exactly MESSAGES_PER_MINUTE of each 30 are saved, every time
    (counted and checked in one step; a count read from the database first let all 30 through)."""
    settings.MESSAGES_PER_MINUTE, settings.CUSTOMER_MESSAGES_PER_MINUTE = 10, 10_000
    outcomes = []
    for _ in range(TRIALS):
        conversation = start_conversation(demo.maya)
        barrier, accepted, refused = threading.Barrier(AT_ONCE), [], []

        def post(n, conversation=conversation, barrier=barrier, accepted=accepted, refused=refused):
            try:
                barrier.wait()
                services.conversation_post_message(conversation=conversation, text=f"message {n}")
                accepted.append(n)
            except services.RateLimited:
                refused.append(n)
            finally:
                connection.close()

        threads = [threading.Thread(target=post, args=(n,)) for n in range(AT_ONCE)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        saved = Message.objects.filter(conversation=conversation, author=Message.CUSTOMER).count()
        outcomes.append((len(accepted), len(refused), saved))
    assert outcomes == [(10, 20, 10)] * TRIALS


def test_without_redis_messages_are_still_limited_per_conversation_from_the_database(demo, queued, settings,
                                                                                       caplog, monkeypatch):
    monkeypatch.setattr(limits, "_last_warning", 0.0)  # said once a minute: another test may have said it just now
    settings.MESSAGES_PER_MINUTE = 2
    settings.LIMITS_REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    conversation = start_conversation(demo.maya)
    assert [say(conversation, f"m{i}").status_code for i in (1, 2, 3)] == [202, 202, 429]
    assert "limits: Redis at LIMITS_REDIS_URL unreachable" in caplog.text


# -- new conversations ----------------------------------------------------------------------------------

def test_one_customer_token_opens_at_most_its_hourly_conversations(demo, settings):
    settings.CUSTOMER_CONVERSATIONS_PER_HOUR = 3
    token = identity.customer_token("maya@example.com")
    codes = [start({"customer_token": token}, address=f"198.51.100.{i}").status_code for i in range(5)]
    assert codes == [201, 201, 201, 429, 429]
    refused = start({"customer_token": token})
    assert refused.json()["code"] == "rate_limited" and int(refused["Retry-After"]) > 3000
    assert start({"customer_token": identity.customer_token("tom@example.com")}).status_code == 201


def test_one_address_opens_at_most_its_hourly_conversations_whoever_it_signs_in_as(demo, settings):
    settings.ADDRESS_CONVERSATIONS_PER_HOUR = 2
    tokens = [identity.customer_token(e) for e in ("maya@example.com", "tom@example.com", "ines@example.com")]
    assert [start({"customer_token": t}).status_code for t in tokens] == [201, 201, 429]


# -- sockets --------------------------------------------------------------------------------------------

def test_sockets_from_one_address_past_the_limit_are_told_why_and_closed_with_4429(demo, settings):
    settings.ADDRESS_SOCKETS_PER_MINUTE = 2
    conversation = start_conversation(demo.maya)

    async def open_socket(peer):
        ws = WebsocketCommunicator(application, f"/ws/conversations/{conversation.public_id}/",
                                   headers=[(b"origin", b"http://127.0.0.1:8000"), (b"host", b"127.0.0.1:8000")])
        ws.scope["client"] = [peer, 50000]
        connected, _ = await ws.connect()
        first = await ws.receive_output(timeout=2) if connected else None
        await ws.disconnect()
        return first

    async def go():
        # Within the limit a socket waits for its resume frame: nothing arrives, so it times out quietly.
        results = []
        for peer in ("203.0.113.1", "203.0.113.1", "203.0.113.1", "203.0.113.2"):
            try:
                results.append(await open_socket(peer))
            except Exception:  # noqa: BLE001 - the communicator's timeout: an open, waiting socket
                results.append("open")
        return results

    first, second, third, other = async_to_sync(go)()
    assert first == second == other == "open"
    assert third["type"] == "websocket.send" and '"code": "rate_limited"' in third["text"]


def test_sockets_over_the_limit_end_with_the_documented_close_code(demo, settings):
    settings.ADDRESS_SOCKETS_PER_MINUTE = 1
    conversation = start_conversation(demo.maya)

    async def go():
        codes = []
        for _ in range(2):
            ws = WebsocketCommunicator(application, f"/ws/conversations/{conversation.public_id}/",
                                       headers=[(b"origin", b"http://127.0.0.1:8000"), (b"host", b"127.0.0.1:8000")])
            assert (await ws.connect())[0]
            if codes:  # the second: an error frame, then the close
                await ws.receive_json_from(timeout=2)
                codes.append((await ws.receive_output(timeout=2)).get("code"))
            else:
                codes.append("open")
            await ws.disconnect()
        return codes

    assert async_to_sync(go)() == ["open", 4429]


def test_the_limits_store_is_the_configured_redis(settings, limits_redis):
    settings.LIMITS_REDIS_URL = limits_redis
    limits.hit(limits.Limit("test:where", 1, 60))
    assert redis.Redis.from_url(limits_redis).exists(limits.KEY_PREFIX + "test:where")
