"""The channel layer against a real Redis: groups, the receiver waking for a new subscription, bad input."""

import asyncio

import pytest

from support.live.channel_layer import PubSubChannelLayer


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 10))


def test_group_events_reach_each_member_once_and_in_order(redis_server):
    async def scenario():
        layer = PubSubChannelLayer(hosts=[{"address": redis_server, "socket_timeout": None}])
        a, b = await layer.new_channel(), await layer.new_channel()
        for ch in (a, b):
            await layer.group_add("conversation.x", ch)
        await layer.group_add("staff", b)
        for i in range(5):
            await layer.group_send("conversation.x", {"type": "desk.event", "n": i})
        await layer.group_send("staff", {"type": "desk.event", "n": "staff"})
        got_a = [(await layer.receive(a))["n"] for _ in range(5)]
        got_b = [(await layer.receive(b))["n"] for _ in range(6)]
        await layer.flush()
        return got_a, got_b

    got_a, got_b = run(scenario())
    assert got_a == [0, 1, 2, 3, 4]
    assert got_b == [0, 1, 2, 3, 4, "staff"]


def test_a_process_whose_sockets_all_left_receives_for_the_next_one(redis_server):
    # The receiver idles once nothing is subscribed; the next subscription must wake it, and events sent
    # right after it must arrive.
    async def scenario():
        layer = PubSubChannelLayer(hosts=[{"address": redis_server, "socket_timeout": None}])
        sender = PubSubChannelLayer(hosts=[{"address": redis_server, "socket_timeout": None}])
        first = await layer.new_channel()
        await layer.group_add("g", first)
        await layer.group_discard("g", first)
        receiving = asyncio.ensure_future(layer.receive(first))
        await asyncio.sleep(0.05)
        receiving.cancel()  # the socket closes: its channel is unsubscribed, nothing is left
        with pytest.raises(asyncio.CancelledError):
            await receiving
        await asyncio.sleep(0.3)  # the receiver is idle now
        second = await layer.new_channel()
        await layer.group_add("g", second)
        await sender.group_send("g", {"type": "desk.event", "text": "hello"})
        message = await asyncio.wait_for(layer.receive(second), 5)
        await layer.flush()
        await sender.flush()
        return message

    assert run(scenario()) == {"type": "desk.event", "text": "hello"}


def test_an_event_nobody_listens_for_is_dropped_without_error(redis_server):
    async def scenario():
        layer = PubSubChannelLayer(hosts=[{"address": redis_server, "socket_timeout": None}])
        await layer.group_send("nobody.listens", {"type": "desk.event"})
        ch = await layer.new_channel()
        await layer.group_add("nobody.listens", ch)
        await layer.group_send("nobody.listens", {"type": "desk.event", "after": True})
        message = await layer.receive(ch)
        await layer.flush()
        return message

    assert run(scenario()) == {"type": "desk.event", "after": True}


def test_a_batch_is_published_in_order_to_each_group(redis_server):
    async def scenario():
        layer = PubSubChannelLayer(hosts=[{"address": redis_server, "socket_timeout": None}])
        a, b = await layer.new_channel(), await layer.new_channel()
        await layer.group_add("one", a)
        await layer.group_add("two", b)
        await layer.group_send_many([("one", {"type": "e", "n": 1}), ("two", {"type": "e", "n": 2}),
                                     ("one", {"type": "e", "n": 3}), ("nobody", {"type": "e", "n": 4})])
        got = [(await layer.receive(a))["n"], (await layer.receive(a))["n"], (await layer.receive(b))["n"]]
        await layer.flush()
        return got

    assert run(scenario()) == [1, 3, 2]
