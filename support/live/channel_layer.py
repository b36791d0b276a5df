"""channels_redis' pub/sub channel layer, with a receiver that starts reading as soon as something subscribes.

Upstream's receiver checks every 100 ms whether anything is subscribed while nothing is. A site process
whose last socket just closed is in that state, so the events of the next socket to connect (a customer
opening the widget and writing at once) waited up to 100 ms in the connection. Here a subscription wakes
the receiver at once. group_send_many publishes a batch of events in one pipelined round trip, and after a
connection error leaves no dead connection in the pool for the publisher's retry. Everything else is upstream's.
"""

from __future__ import annotations

import asyncio
import logging

from channels_redis import pubsub
from channels_redis.utils import decode_hosts
from redis import exceptions as redis_errors

log = logging.getLogger(__name__)

IDLE_CHECK_SECONDS = 0.1  # upstream's poll, kept as a bound for states a subscription cannot signal


class _Shard(pubsub.RedisSingleShardConnection):
    def __init__(self, host, channel_layer):
        super().__init__(host, channel_layer)
        self._woken = asyncio.Event()

    async def subscribe(self, channel):
        await super().subscribe(channel)
        self._woken.set()

    async def publish_many(self, batch: list[tuple[str, bytes]]) -> None:
        """PUBLISH each (channel, data) in order, in one round trip."""
        async with self._lock:
            self._ensure_redis()
            try:
                async with self._redis.pipeline(transaction=False) as pipe:
                    for channel, data in batch:
                        pipe.publish(channel, data)
                    await pipe.execute()
            except (redis_errors.ConnectionError, redis_errors.TimeoutError, OSError):
                # Redis restarted or was replaced: every idle pooled connection is as dead as this one, so
                # drop them and the caller's retry dials afresh (the subscription reconnects by itself).
                await self._redis.connection_pool.disconnect(inuse_connections=False)
                raise

    async def _do_receiving(self):
        while True:
            try:
                if self._pubsub and self._pubsub.subscribed:
                    message = await self._pubsub.get_message(ignore_subscribe_messages=True,
                                                             timeout=IDLE_CHECK_SECONDS)
                    self._receive_message(message)
                else:
                    self._woken.clear()
                    try:
                        await asyncio.wait_for(self._woken.wait(), IDLE_CHECK_SECONDS)
                    except asyncio.TimeoutError:
                        pass
            except (asyncio.CancelledError, GeneratorExit):
                raise
            except Exception:
                log.exception("channel layer: receiving failed; retrying in 1 s")
                await asyncio.sleep(1)


class _LoopLayer(pubsub.RedisPubSubLoopLayer):
    def __init__(self, hosts=None, **kwargs):
        super().__init__(hosts=hosts, **kwargs)
        self._shards = [_Shard(host, self) for host in decode_hosts(hosts)]

    async def group_send_many(self, items: list[tuple[str, dict]]) -> None:
        """group_send for each (group, message), in order: one pipelined round trip for each run of
        consecutive items on the same shard (one in all with one Redis host), not one per item."""
        shard, batch = None, []
        for group, message in items:
            channel = self._get_group_channel_name(group)
            target = self._get_shard(channel)
            if target is not shard and batch:
                await shard.publish_many(batch)  # a socket in groups on two shards still gets them in order
                batch = []
            shard = target
            batch.append((channel, self.channel_layer.serialize(message)))
        if batch:
            await shard.publish_many(batch)


class PubSubChannelLayer(pubsub.RedisPubSubChannelLayer):
    def _get_layer(self):
        loop = asyncio.get_running_loop()
        if loop not in self._layers:
            self._layers[loop] = _LoopLayer(*self._args, **self._kwargs, channel_layer=self)
            pubsub._wrap_close(self, loop)
        return self._layers[loop]
