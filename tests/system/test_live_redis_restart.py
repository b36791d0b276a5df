"""Redis restarted under a running process: the publisher's next batch still goes out (on a fresh
connection), and a batch that cannot go out is dropped with a warning saying how many events it held.

These tests restart a redis-server of their own, not the session's one the workers use.
"""

import asyncio
import logging
import re
import time

import pytest
import redis

from support.live import events
from tests import redis_fixture

pytestmark = pytest.mark.timeout(60)


class RestartableRedis(redis_fixture.RestartableRedis):
    """The shared restartable redis-server, with what these tests ask of it."""

    def subscribers(self, channel: str) -> int:
        with redis.Redis.from_url(self.url, socket_timeout=1) as client:
            return dict(client.pubsub_numsub(channel)).get(channel.encode(), 0)

    def wait_until(self, check, what: str, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with redis.Redis.from_url(self.url, socket_connect_timeout=0.2, socket_timeout=1) as client:
                    if check(client):
                        return
            except redis.ConnectionError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"redis-server on port {self.port}: timed out waiting for {what}")
            time.sleep(0.02)


@pytest.fixture
def own_redis(settings):
    server = RestartableRedis()
    server.start()
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "support.live.channel_layer.PubSubChannelLayer",
                                           "CONFIG": {"hosts": [{"address": server.url, "socket_timeout": None}]}}}
    yield server
    server.stop()


def event(n: int) -> dict:
    return {"type": "run.status", "conversation": "c", "seq": n}


def test_events_published_after_redis_restarts_still_arrive(own_redis):
    from channels.layers import get_channel_layer

    publisher = events.Publisher()  # its own thread and connection, as in a worker or daphne process

    async def scenario():
        layer = get_channel_layer()
        channel = await layer.new_channel()
        await layer.group_add("conversation.c", channel)
        group_channel = layer._get_layer()._get_group_channel_name("conversation.c")
        publisher.send(["conversation.c"], event(1))  # the publisher's connection is now open and pooled
        first = await asyncio.wait_for(layer.receive(channel), 5)

        own_redis.restart()
        # The subscription reconnects by itself; wait for it, so that only the publisher is on trial.
        await asyncio.to_thread(own_redis.wait_until,
                                lambda c: dict(c.pubsub_numsub(group_channel)).get(group_channel.encode(), 0), "resubscribe")
        publisher.send(["conversation.c"], event(2))
        second = await asyncio.wait_for(layer.receive(channel), 8)
        await layer.flush()
        return first, second

    first, second = asyncio.run(scenario())
    assert first["event"]["seq"] == 1
    assert second["event"]["seq"] == 2


def test_a_batch_redis_never_takes_is_dropped_with_a_warning_that_counts_it(own_redis, monkeypatch, caplog):
    monkeypatch.setattr(events, "PUBLISH_RETRY_PAUSES", (0.01, 0.01))
    publisher = events.Publisher()
    own_redis.stop()
    with caplog.at_level(logging.WARNING, logger="support.live.events"):
        publisher.send(["conversation.c", "staff.conversation.c"], event(1))
        publisher.send(["conversation.c"], event(2))
        publisher.flush(timeout=10)
    # The two sends may go out as one batch or two (the publisher takes what is queued when it wakes):
    # either way both events are counted as dropped, each once, after 3 attempts.
    dropped = [int(m.group(1)) for m in re.finditer(r"(\d+) events not published after 3 attempts", caplog.text)]
    assert sum(dropped) == 2, caplog.text
