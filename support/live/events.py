"""Events for the live UIs: typed JSON carrying the conversation's seq, sent through the channel layer.

Publishing happens after the database commit (save, then publish), so a client that reconnects and asks
for what it missed finds every event's message in the database. Token deltas are the one ephemeral event.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import os
import threading
import uuid

from channels.layers import get_channel_layer

from support.ops import metrics

log = logging.getLogger(__name__)

STAFF_GROUP = "staff"  # every staff console: conversation list, runs, approvals
# Seconds between tries of a failed publish: enough to outlast a Redis restart, short enough that the
# events queued behind a batch are not held up for long when Redis stays away.
PUBLISH_RETRY_PAUSES = (0.05, 0.25, 1.0, 2.0)


def conversation_group(public_id) -> str:
    """The customer's widget: what the customer may see of their conversation."""
    return f"conversation.{public_id}"


def staff_conversation_group(public_id) -> str:
    """A staff member's view of one conversation: everything, tool calls and trace included."""
    return f"staff.conversation.{public_id}"


class Publisher:
    """One event loop thread per process sends every event, in order, one after another.

    Calling async_to_sync from each worker thread would start a loop and a Redis connection per call,
    and concurrent sends could overtake each other (token deltas out of order). A queue drained by one
    coroutine on one long-lived loop keeps one connection and the order in which events were published.
    """

    def __init__(self):
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue | None = None
        self._pid = None
        self._lock = threading.Lock()
        # Events wait here until the publisher's thread runs: a burst (a message and its trace row, saved
        # together) wakes that thread once, not once per event.
        self._pending: collections.deque = collections.deque()
        self._wake_scheduled = False
        self._ids = itertools.count()
        self._id_prefix = ""

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():  # a forked child needs its own thread
                loop = asyncio.new_event_loop()
                self._queue = asyncio.Queue()
                self._pending, self._wake_scheduled = collections.deque(), False
                self._id_prefix = uuid.uuid4().hex[:16]  # this process's; the counter makes each id unique
                loop.create_task(self._drain())
                threading.Thread(target=loop.run_forever, name="event-publisher", daemon=True).start()
                self._loop, self._pid = loop, os.getpid()
            return self._loop

    def _take_pending(self) -> None:
        """In the publisher's thread: everything sent so far joins the queue, in order. The flag is cleared
        first, so an event appended after this drain schedules a new one."""
        self._wake_scheduled = False
        while self._pending:
            self._queue.put_nowait(self._pending.popleft())

    async def _drain(self) -> None:
        while True:
            batch = [await self._queue.get()]
            while not self._queue.empty():  # everything else already waiting goes out in this pass
                batch.append(self._queue.get_nowait())
            try:
                await self._publish([(group, message) for groups, message in coalesce(batch) for group in groups])
            except Exception:  # never let one bad batch stop the thread that sends every later event
                log.exception("%d events not published", len(batch))
            finally:
                for _ in batch:
                    self._queue.task_done()

    async def _publish(self, items: list[tuple[str, dict]]) -> None:
        """Send, retrying a failure: after Redis restarts, the first command on a pooled connection fails
        (the layer then drops its idle connections, so the next try dials afresh). A retried batch may
        repeat events that went out before the failure: they keep their ids and sockets send them once."""
        bundled = bundle(items)
        for attempt, pause in enumerate(PUBLISH_RETRY_PAUSES + (None,)):
            try:
                layer = get_channel_layer()  # looked up each time: settings may change (tests)
                send_many = getattr(layer, "group_send_many", None)  # ours: the batch in one round trip
                if send_many is not None:
                    await send_many(bundled)
                else:
                    for group, message in bundled:
                        await layer.group_send(group, message)
                metrics.events_sent(items)
                return
            except Exception as e:
                if pause is None:  # the UIs miss these live; they find the gap and replay it from the database
                    dropped = len({message.get("id") for _, message in items})
                    log.warning("%d events not published after %d attempts: %r", dropped, attempt + 1, e)
                    metrics.events_sent(items, dropped=True)
                    return
                await asyncio.sleep(pause)

    def send(self, groups: list[str], event: dict) -> None:
        if get_channel_layer() is None:
            return
        loop = self._ensure_loop()
        # One id per event, whatever the number of groups: a socket in two of them sends it once.
        message = {"type": "desk.event", "id": f"{self._id_prefix}{next(self._ids):x}", "event": event}
        self._pending.append((groups, message))  # appended before the flag is read: see _take_pending
        if not self._wake_scheduled:
            self._wake_scheduled = True
            loop.call_soon_threadsafe(self._take_pending)

    def flush(self, timeout: float = 5.0) -> None:
        """Wait until everything sent so far has gone out (tests, shutdown)."""
        if self._loop is None:
            return
        asyncio.run_coroutine_threadsafe(self._queue.join(), self._loop).result(timeout)


def bundle(items: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
    """One channel-layer message per group for what a batch sends it: a step's events (its message, its trace
    row, the conversation's update) reach each socket as one message (`desk.events`, handled by the consumers
    as its events one after another), not one each. A group's events keep their order; a socket in several
    groups (a console) may get one group's before another's, as it may from two processes already."""
    by_group: dict[str, list[dict]] = {}
    for group, message in items:
        by_group.setdefault(group, []).append(message)
    return [(group, messages[0] if len(messages) == 1 else {"type": "desk.events", "events": messages})
            for group, messages in by_group.items()]


DELTAS = ("token.delta", "copilot.delta")  # a reply's words as they stream: the agent's, the staff's copilot's


def coalesce(batch: list[tuple[list[str], dict]]) -> list[tuple[list[str], dict]]:
    """The batch in order, with token deltas that queued up behind one another joined into one event.

    A delta joins the pending one of the same reply (run and seq; a copilot run's) unless an event for any of the same
    groups came between; a reset (empty text) never joins. When sending keeps up, nothing waits and every
    delta goes out alone; when it falls behind, fewer, larger deltas catch it up, in the same order.
    """
    out: list[tuple[list[str], dict]] = []
    open_delta: dict[tuple, int] = {}  # (groups, type, run, seq) -> index in out of a delta that may grow
    for groups, message in batch:
        event = message.get("event") or {}
        key = (tuple(groups), event.get("type"), event.get("run") or event.get("copilot"), event.get("seq"))
        if event.get("type") in DELTAS and event.get("text"):
            i = open_delta.get(key)
            if i is not None:
                merged = dict(out[i][1], event={**out[i][1]["event"],
                                                "text": out[i][1]["event"]["text"] + event["text"]})
                out[i] = (out[i][0], merged)
                continue
        touched = set(groups)
        for k in [k for k in open_delta if touched & set(k[0])]:
            del open_delta[k]
        out.append((groups, message))
        if event.get("type") in DELTAS and event.get("text"):
            open_delta[key] = len(out) - 1
    return out


publisher = Publisher()
