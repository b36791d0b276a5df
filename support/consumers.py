"""Websocket consumers: relay events to the widget and the console, replay what a client missed.

They read (replays) and hand customer messages to the same service the HTTP API uses; they write nothing
themselves. The protocol is docs/events.md.
"""

from __future__ import annotations

import asyncio
from collections import deque

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from support import events, identity, selectors, serializers, services
from support.models import Conversation

AUTH_TIMEOUT = 10.0  # seconds a customer socket may stay open without authenticating
SEQ_EVENTS = ("message.saved", "message.hidden")  # the live events that account for one seq each


def db(fn):
    """Run a read or a service call in the thread pool: each call is self-contained, and with the default
    (thread-sensitive) every socket of the process would queue behind one thread."""
    return database_sync_to_async(fn, thread_sensitive=False)


class Delivered:
    """The seqs of one conversation a socket's client has: all up to `floor`, and `above` it some more.

    Events reach a process out of order (daphne and the workers publish separately), so a seq below the
    highest sent may still be owed to the client: only a seq in here is a duplicate.
    """

    LIMIT = 512  # seqs held above a hole; forgetting one only risks sending it twice (clients dedupe)

    def __init__(self):
        self.floor, self.above = 0, set()

    def __contains__(self, seq: int) -> bool:
        return seq <= self.floor or seq in self.above

    def add(self, seq: int) -> None:
        if seq > self.floor:
            self.above.add(seq)
            self._settle()
            if len(self.above) > self.LIMIT:
                self.above.discard(min(self.above))

    def cover(self, seq: int) -> None:
        """Every seq up to `seq` is with the client (it said so, or a replay read that far)."""
        if seq > self.floor:
            self.floor = seq
            self.above = {s for s in self.above if s > seq}
            self._settle()

    def _settle(self) -> None:
        while self.floor + 1 in self.above:
            self.floor += 1
            self.above.discard(self.floor)


class ReplayingConsumer(AsyncJsonWebsocketConsumer):
    """Joins groups, replays messages after the client's last seq, then relays live events in order.

    The group is joined before the replay reads the database, so nothing falls between the two; a
    message.saved already replayed is dropped when its live event arrives. A client that finds a hole in
    the seqs it received asks for a replay again from below the hole (docs/events.md).
    """

    staff = False

    async def connect(self):
        self.delivered: dict[str, Delivered] = {}
        self.joined: set[str] = set()
        self.recent_ids: deque[str] = deque(maxlen=256)  # events reaching us through two groups
        await self.accept()

    async def disconnect(self, code):
        for group in self.joined:
            await self.channel_layer.group_discard(group, self.channel_name)

    async def join(self, group: str) -> None:
        if group not in self.joined:
            await self.channel_layer.group_add(group, self.channel_name)
            self.joined.add(group)

    async def replay(self, conversation, last_seq: int) -> None:
        key = str(conversation.public_id)
        delivered = self.delivered.setdefault(key, Delivered())
        delivered.cover(last_seq)
        read_to, messages = await db(_replay_read)(conversation, last_seq, self.staff)
        # All of them, even one this socket sent before: the client says it lacks what is after last_seq
        # (a message lost on its way to the page is asked for too); it drops a seq it has already.
        for m in messages:
            await self.send_json({"type": "message.saved", "seq": m.seq, "conversation": key,
                                  "message": serializers.message_json(m, staff=self.staff)})
            delivered.add(m.seq)
        # Every seq up to read_to was read: sent now or before, or one this client does not see.
        delivered.cover(max([read_to] + [m.seq for m in messages]))
        state = await db(selectors.conversation_state)(conversation)
        await self.send_json({"type": "replay.done", "seq": delivered.floor, "conversation": key,
                              "state": state})

    async def desk_event(self, message):
        event_id = message.get("id")
        if event_id is not None:
            if event_id in self.recent_ids:
                return
            self.recent_ids.append(event_id)
        event = message["event"]
        key = event.get("conversation")
        if event["type"] in SEQ_EVENTS and key is not None:
            delivered = self.delivered.setdefault(key, Delivered())
            if event["seq"] in delivered:
                return  # already sent by a replay, or this very event again
            delivered.add(event["seq"])
        await self.send_json(event)

    async def last_seqs(self, conversations) -> dict[str, int]:
        """Each conversation's last seq, for the answer to a ping: a client that lacks one asks for a replay,
        so an event lost on the live path is found even when it was the last one."""
        seqs = await db(_last_seqs)([c.pk for c in conversations])
        return {str(c.public_id): seqs.get(c.pk, 0) for c in conversations}


class CustomerConsumer(ReplayingConsumer):
    async def connect(self):
        await super().connect()
        self.conversation = None
        self._auth_deadline = asyncio.get_running_loop().call_later(AUTH_TIMEOUT, self._close_unauthenticated)

    def _close_unauthenticated(self):
        if self.conversation is None:
            asyncio.ensure_future(self.close(code=4401))

    async def disconnect(self, code):
        self._auth_deadline.cancel()
        await super().disconnect(code)

    async def receive_json(self, content, **kwargs):
        kind = content.get("type") if isinstance(content, dict) else None
        if kind == "resume":
            await self.resume(content)
        elif self.conversation is None:
            await self.close(code=4401)
        elif kind == "message":
            await self.post(content)
        elif kind == "ping":
            key = str(self.conversation.public_id)
            seqs = await self.last_seqs([self.conversation])
            await self.send_json({"type": "pong", "conversation": key, "seq": seqs[key]})
        else:
            await self.send_json({"type": "error", "error": "Unknown frame type."})

    async def resume(self, content):
        public_id = self.scope["url_route"]["kwargs"]["public_id"]
        conversation = await db(identity.conversation_for_token)(content.get("token"), public_id)
        if conversation is None or (self.conversation is not None and conversation.pk != self.conversation.pk):
            await self.close(code=4401)
            return
        self.conversation = conversation
        await self.join(events.conversation_group(conversation.public_id))
        await self.replay(conversation, _seq(content.get("last_seq")))

    async def post(self, content):
        client_id = content.get("client_id")
        client_id = str(client_id)[:64] if client_id is not None else None
        try:
            message, _, _ = await db(services.conversation_post_message)(
                conversation=self.conversation, text=content.get("text"), client_id=client_id)
        except services.InvalidMessage as e:
            await self.send_json({"type": "message.rejected", "client_id": client_id, "error": str(e)})
        except services.RateLimited as e:
            await self.send_json({"type": "message.rejected", "client_id": client_id, "error": str(e),
                                  "retry_after": e.retry_after})
        else:
            await self.send_json({"type": "message.accepted", "client_id": client_id, "seq": message.seq})


class StaffConsumer(ReplayingConsumer):
    staff = True

    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated or not user.is_staff:
            await self.close(code=4403)
            return
        await super().connect()
        self.watched: dict[str, Conversation] = {}
        await self.join(events.STAFF_GROUP)

    async def receive_json(self, content, **kwargs):
        kind = content.get("type") if isinstance(content, dict) else None
        if kind == "watch":
            conversation = await db(selectors.conversation_by_public_id)(
                content.get("conversation"))
            if conversation is None:
                await self.send_json({"type": "error", "error": "No such conversation."})
                return
            await self.join(events.staff_conversation_group(conversation.public_id))
            self.watched[str(conversation.public_id)] = conversation
            await self.replay(conversation, _seq(content.get("last_seq")))
        elif kind == "unwatch":
            group = events.staff_conversation_group(content.get("conversation"))
            if group in self.joined:
                await self.channel_layer.group_discard(group, self.channel_name)
                self.joined.discard(group)
            self.watched.pop(str(content.get("conversation")), None)
        elif kind == "ping":
            await self.send_json({"type": "pong", "seqs": await self.last_seqs(list(self.watched.values()))})
        else:
            await self.send_json({"type": "error", "error": "Unknown frame type."})


def _replay_read(conversation, after_seq: int, staff: bool):
    """(the conversation's last seq, its messages after after_seq). The seq is read first: a seq is handed
    out in the transaction that saves its message, so every message up to it is in the read that follows."""
    last_seq = Conversation.objects.values_list("last_seq", flat=True).get(pk=conversation.pk)
    return last_seq, selectors.messages_after(conversation, after_seq, staff=staff)


def _last_seqs(pks: list[int]) -> dict[int, int]:
    return dict(Conversation.objects.filter(pk__in=pks).values_list("pk", "last_seq")) if pks else {}


def _seq(value) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
