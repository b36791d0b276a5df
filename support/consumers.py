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

AUTH_TIMEOUT = 10.0  # seconds a customer socket may stay open without authenticating


def db(fn):
    """Run a read or a service call in the thread pool: each call is self-contained, and with the default
    (thread-sensitive) every socket of the process would queue behind one thread."""
    return database_sync_to_async(fn, thread_sensitive=False)


class ReplayingConsumer(AsyncJsonWebsocketConsumer):
    """Joins groups, replays messages after the client's last seq, then relays live events in order.

    The group is joined before the replay reads the database, so nothing falls between the two; a
    message.saved already replayed is dropped when its live event arrives.
    """

    staff = False

    async def connect(self):
        self.sent_seq: dict[str, int] = {}
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
        messages = await db(selectors.messages_after)(conversation, last_seq, staff=self.staff)
        sent = max(last_seq, self.sent_seq.get(key, 0))
        for m in messages:
            if m.seq > sent:
                await self.send_json({"type": "message.saved", "seq": m.seq, "conversation": key,
                                      "message": serializers.message_json(m, staff=self.staff)})
                sent = m.seq
        self.sent_seq[key] = sent
        state = await db(selectors.conversation_state)(conversation)
        await self.send_json({"type": "replay.done", "seq": sent, "conversation": key, "state": state})

    async def desk_event(self, message):
        event_id = message.get("id")
        if event_id is not None:
            if event_id in self.recent_ids:
                return
            self.recent_ids.append(event_id)
        event = message["event"]
        key = event.get("conversation")
        if event["type"] == "message.saved" and key is not None:
            if event["seq"] <= self.sent_seq.get(key, 0):
                return  # already sent by the replay
            self.sent_seq[key] = event["seq"]
        await self.send_json(event)


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
            await self.send_json({"type": "pong"})
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
            await self.replay(conversation, _seq(content.get("last_seq")))
        elif kind == "unwatch":
            group = events.staff_conversation_group(content.get("conversation"))
            if group in self.joined:
                await self.channel_layer.group_discard(group, self.channel_name)
                self.joined.discard(group)
        elif kind == "ping":
            await self.send_json({"type": "pong"})
        else:
            await self.send_json({"type": "error", "error": "Unknown frame type."})


def _seq(value) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
