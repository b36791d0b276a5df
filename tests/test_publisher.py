"""support/events.Publisher: events sent from any thread go out in the order sent, each with an id of its
own, whether they come one at a time or in a burst that wakes the publisher's thread once."""

from __future__ import annotations

import asyncio
import threading

from support.live import events


class Recording:
    """A channel layer that keeps what it is given, in order: `messages` as sent, `sent` one event each (a
    group's bundle of events opened, as the consumers open it)."""

    def __init__(self):
        self.sent: list[tuple[str, dict]] = []
        self.messages: list[tuple[str, dict]] = []

    async def group_send_many(self, items):
        self.messages.extend(items)
        for group, message in items:
            bundled = message["events"] if message["type"] == "desk.events" else [message]
            self.sent.extend((group, one) for one in bundled)


def test_bursts_and_single_events_from_several_threads_go_out_each_once_in_each_threads_order(monkeypatch):
    layer = Recording()
    monkeypatch.setattr(events, "get_channel_layer", lambda: layer)
    publisher = events.Publisher()

    def burst(name):
        for i in range(300):
            publisher.send([f"g.{name}"], {"type": "step.finished", "n": i, "from": name})

    threads = [threading.Thread(target=burst, args=(n,)) for n in ("a", "b", "c")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    publisher.flush(timeout=10)
    publisher.send(["g.a"], {"type": "run.status", "n": 300, "from": "a"})  # one alone, after the publisher idled
    publisher.flush(timeout=10)

    assert len(layer.sent) == 901
    for name in ("a", "b", "c"):
        mine = [m["event"]["n"] for g, m in layer.sent if m["event"]["from"] == name]
        assert mine == list(range(301 if name == "a" else 300))
    ids = [m["id"] for _, m in layer.sent]
    assert len(set(ids)) == len(ids)


def test_a_forked_child_gets_its_own_thread_queue_and_ids(monkeypatch):
    layer = Recording()
    monkeypatch.setattr(events, "get_channel_layer", lambda: layer)
    publisher = events.Publisher()
    publisher.send(["g"], {"type": "x", "n": 1})
    publisher.flush(timeout=10)
    parent_loop, parent_prefix = publisher._loop, publisher._id_prefix
    monkeypatch.setattr(events.os, "getpid", lambda: -1)  # what a fork looks like to _ensure_loop
    publisher.send(["g"], {"type": "x", "n": 2})
    publisher.flush(timeout=10)
    assert publisher._loop is not parent_loop and publisher._id_prefix != parent_prefix
    assert [m["event"]["n"] for _, m in layer.sent] == [1, 2]
    asyncio.run_coroutine_threadsafe(asyncio.sleep(0), parent_loop).result(5)  # the old thread still runs harmlessly


def test_a_steps_events_reach_each_group_as_one_message_in_order(monkeypatch):
    layer = Recording()
    monkeypatch.setattr(events, "get_channel_layer", lambda: layer)
    publisher = events.Publisher()
    loop = publisher._ensure_loop()  # sent from the publisher's own thread: one batch, as a committed step's
    done = threading.Event()
    loop.call_soon_threadsafe(lambda: (
        publisher.send(["customer", "staff"], {"type": "message.saved", "n": 1}),
        publisher.send(["customer", "staff"], {"type": "step.finished", "n": 2}),
        publisher.send(["staff"], {"type": "conversation.updated", "n": 3}),
        done.set()))
    done.wait(5)
    publisher.flush(timeout=10)

    assert [(g, m["type"]) for g, m in layer.messages] == [("customer", "desk.events"), ("staff", "desk.events")]
    by_group = {g: [e["event"]["n"] for e in m["events"]] for g, m in layer.messages}
    assert by_group == {"customer": [1, 2], "staff": [1, 2, 3]}
