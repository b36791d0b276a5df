"""What our subclasses of library classes rely on beyond the libraries' documented API, checked by name and
shape so that an upgrade that changes it fails here, loudly, instead of somewhere in a live path.

- support/live/channel_layer.py subclasses channels_redis' pub/sub layer (a receiver woken by a subscription,
  batched PUBLISH): RedisSingleShardConnection's _lock, _ensure_redis, _redis, _pubsub, _receive_message,
  _do_receiving; RedisPubSubLoopLayer's _shards, _get_group_channel_name, _get_shard; the module's
  _wrap_close; RedisPubSubChannelLayer's _layers, _args, _kwargs, _get_layer.
- support/agent/llm.py subclasses openai.Stream (reads the body to its end, so the connection is reused):
  the __stream__ generator and the response attribute.
- support/desk/journal.py wraps its own psycopg cursor the way Django wraps its cursors (make_cursor,
  make_debug_cursor, queries_logged) and reads the connection's health check (close_if_health_check_failed).
"""

from __future__ import annotations

import asyncio
import inspect

import openai
from channels_redis import pubsub
from django.db import connection

from support.live.channel_layer import PubSubChannelLayer


def test_the_channels_redis_internals_our_layer_builds_on_are_there():
    shard = pubsub.RedisSingleShardConnection
    for name in ("_ensure_redis", "_receive_message", "_do_receiving", "subscribe"):
        assert callable(getattr(shard, name, None)), name
    assert inspect.iscoroutinefunction(shard._do_receiving) and inspect.iscoroutinefunction(shard.subscribe)
    assert list(inspect.signature(shard.__init__).parameters)[1:3] == ["host", "channel_layer"]
    loop_layer = pubsub.RedisPubSubLoopLayer
    for name in ("_get_group_channel_name", "_get_shard"):
        assert callable(getattr(loop_layer, name, None)), name
    assert callable(getattr(pubsub, "_wrap_close", None))

    async def build():
        layer = PubSubChannelLayer(hosts=["redis://127.0.0.1:1"])
        inner = layer._get_layer()
        shard = inner._shards[0]
        found = (hasattr(layer, "_args") and hasattr(layer, "_kwargs") and isinstance(layer._layers, dict),
                 isinstance(shard._lock, asyncio.Lock), hasattr(shard, "_redis"), hasattr(shard, "_pubsub"))
        channel = inner._get_group_channel_name("g")
        assert inner._get_shard(channel) is shard
        await layer.flush()
        return found

    assert asyncio.run(build()) == (True, True, True, True)


def test_the_openai_stream_internals_our_stream_builds_on_are_there():
    assert inspect.isgeneratorfunction(openai.Stream.__stream__)
    assert "response" in inspect.signature(openai.Stream.__init__).parameters


def test_the_django_cursor_wrapping_the_journal_uses_is_there(db):
    for name in ("make_cursor", "make_debug_cursor", "close_if_health_check_failed", "ensure_connection"):
        assert callable(getattr(connection, name, None)), name
    assert isinstance(connection.queries_logged, bool)


def test_the_uvicorn_request_cycle_the_reference_shop_drops_connections_through_is_there():
    # standin/shop/app.py closes a connection without answering (the drop_after_write fault) through the
    # transport of uvicorn's request cycle, which ASGI's receive is a bound method of: h11's and httptools'.
    from uvicorn.protocols.http.h11_impl import RequestResponseCycle

    assert hasattr(RequestResponseCycle, "receive") and "transport" in RequestResponseCycle.__init__.__code__.co_varnames
