"""Websocket consumers: relay events to the widget and the console, replay what a client missed.

They read (replays) and hand customer messages to the same service the HTTP API uses; they write nothing
themselves. The protocol is docs/events.md.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.consumer import get_handler_name
from channels.generic.websocket import AsyncJsonWebsocketConsumer, AsyncWebsocketConsumer
from django.conf import settings

from support.customers import cleaning, identity, notify, words
from support.desk import permissions, routing, selectors, serializers, services
from support.live import events, presence
from support.models import Approval, Conversation
from support.ops import limits, metrics
from support.web.views.common import body_limit

log = logging.getLogger(__name__)
security_log = logging.getLogger("support.security")

AUTH_TIMEOUT = 10.0  # seconds a customer socket may stay open without authenticating
# Close codes, 4000 + the HTTP status that says the same (as 4401, 4403). RFC 6455's own (1003, 1007, 1009)
# cannot be sent: daphne's websocket library lets an application close only with 1000 or 3000-4999.
# Each close follows an error frame whose `code` names the problem.
BAD_FRAME = 4400  # not JSON (malformed, truncated), or JSON nested deeper than MAX_FRAME_DEPTH
UNAUTHORIZED = 4401  # no valid conversation token
TOO_LARGE = 4413  # a frame longer than max_frame_chars()
RATE_LIMITED = 4429  # too many sockets from the address
UNSUPPORTED = 4415  # a binary frame: the protocol is JSON text
MAX_FRAME_DEPTH = 8  # our frames are two levels deep
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
        metrics.socket_opened(self)

    async def dispatch(self, message):
        """Channels' own dispatch, less its `aclose_old_connections()` before every message: that is a hop to
        the process's one thread-sensitive thread (shared with every request's view) for each event relayed,
        and it has nothing to close here. Every database call of these consumers goes through db(), whose
        thread gives its connection back (to the pool, or closes it) when the call ends.
        tests/test_consumers_dispatch.py fails if Channels' dispatch changes."""
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def disconnect(self, code):
        metrics.socket_closed(self)
        for group in getattr(self, "joined", ()):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        """Each frame parsed here, so malformed input is told why and closed, never a 1011 and a traceback."""
        content, refusal = parse_frame(text_data, bytes_data)
        if refusal is not None:
            close_code, code, why = refusal
            log.info("%s socket closed with %s: %s", "staff" if self.staff else "customer", close_code, why)
            await self.send_error(code, why)
            await self.close(code=close_code)
            return
        await self.receive_json(content)

    async def send_error(self, code: str, error: str, **fields) -> None:
        """An error frame: `code` for programs (stable), `error` in plain words."""
        await self.send_json({"type": "error", "code": code, "error": error, **fields})

    async def join(self, group: str) -> None:
        if group not in self.joined:
            await self.channel_layer.group_add(group, self.channel_name)
            self.joined.add(group)

    async def leave_all(self) -> None:
        for group in list(self.joined):
            await self.channel_layer.group_discard(group, self.channel_name)
        self.joined.clear()

    async def replay(self, conversation, last_seq: int, *, seen: bool = False, read=None) -> None:
        """`seen`: also record that the customer is here (mark_seen), in the same database call. `read`: what
        _replay_read returned, when the caller read it already (with the token, in one database call)."""
        key = str(conversation.public_id)
        delivered = self.delivered.setdefault(key, Delivered())
        delivered.cover(last_seq)
        if seen:
            self._seen_written = asyncio.get_running_loop().time()
        if read is None:
            read = await db(_replay_read)(conversation, last_seq, self.staff, seen)
        read_to, messages, state = read
        # All of them, even one this socket sent before: the client says it lacks what is after last_seq
        # (a message lost on its way to the page is asked for too); it drops a seq it has already.
        for m in messages:
            await self.send_json({"type": "message.saved", "seq": m.seq, "conversation": key,
                                  "message": serializers.message_json(m, staff=self.staff)})
            delivered.add(m.seq)
        # Every seq up to read_to was read: sent now or before, or one this client does not see.
        delivered.cover(max([read_to] + [m.seq for m in messages]))
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

    async def desk_events(self, message):
        """A batch's events for one group, in one message (events.bundle): each as if it came alone."""
        for one in message["events"]:
            await self.desk_event(one)

    async def last_seqs(self, conversations) -> dict[str, int]:
        """Each conversation's last seq, for the answer to a ping: a client that lacks one asks for a replay,
        so an event lost on the live path is found even when it was the last one."""
        seqs = await db(_last_seqs)([c.pk for c in conversations])
        return {str(c.public_id): seqs.get(c.pk, 0) for c in conversations}


class CustomerConsumer(ReplayingConsumer):
    async def connect(self):
        self.conversation = None
        self.link_version = None  # the link the token came from, when it came from one
        self._auth_deadline = None
        self.address = limits.scope_address(self.scope)
        try:
            await sync_to_async(limits.hit_or_count_here, thread_sensitive=False)("sockets",
                                                                                  limits.sockets_from(self.address))
        except limits.Limited as over:
            # Accepted first so the client reads why: a refusal at the handshake is a bare 403.
            await AsyncJsonWebsocketConsumer.accept(self)
            await self.send_error("rate_limited", "Too many connections from your address; try again "
                                  f"in {words.wait_words(over.retry_after)}.", retry_after=over.retry_after)
            await self.close(code=RATE_LIMITED)
            return
        await super().connect()
        self._auth_deadline = asyncio.get_running_loop().call_later(AUTH_TIMEOUT, self._close_unauthenticated)

    def _close_unauthenticated(self):
        if self.conversation is None:
            asyncio.ensure_future(self.close(code=UNAUTHORIZED))

    async def disconnect(self, code):
        if self._auth_deadline is not None:
            self._auth_deadline.cancel()
        if self.conversation is not None:
            await self.mark_seen()  # what was sent so far reached the customer; the wait for an e-mail starts now
        await super().disconnect(code)

    async def mark_seen(self) -> None:
        """Record in the database that this conversation's customer is connected (support/customers/notify.py): no
        reply e-mail while they are, and none for what reached them."""
        self._seen_written = asyncio.get_running_loop().time()
        await db(_record_presence)(self.conversation)

    async def receive_json(self, content, **kwargs):
        kind = content.get("type") if isinstance(content, dict) else None
        if kind == "resume":
            await self.resume(content)
        elif self.conversation is None:
            await self.close(code=UNAUTHORIZED)
        elif self.link_version is not None and not await self.link_still_valid():
            await self.link_revoked()
        elif kind == "message":
            await self.post(content)
        elif kind == "ping":
            key = str(self.conversation.public_id)
            seqs = await self.last_seqs([self.conversation])
            if asyncio.get_running_loop().time() - self._seen_written >= settings.CUSTOMER_PRESENCE_SECONDS:
                await self.mark_seen()
            await self.send_json({"type": "pong", "conversation": key, "seq": seqs[key]})
        else:
            await self.send_error("unknown_type", "Unknown frame type.")

    async def resume(self, content):
        public_id = self.scope["url_route"]["kwargs"]["public_id"]
        wanted = identity.parse_uuid(public_id)
        # The group is joined before the token is read, so the token's check and the replay's read are one
        # database call and nothing falls between the join and the read. Nothing reaches the socket before the
        # token is good (desk_event; a consumer handles one message at a time, so events wait for this one),
        # and the group is left again when it is not.
        if wanted is not None:
            await self.join(events.conversation_group(wanted))
        last_seq = _seq(content.get("last_seq"))
        access, read = await db(_resume_read)(content.get("token"), public_id, last_seq)
        conversation = access.conversation if access else None
        if conversation is None or (self.conversation is not None and conversation.pk != self.conversation.pk):
            security_log.warning("customer socket refused from %s: no valid token for conversation %s",
                                 self.address, str(public_id)[:40])
            if self.conversation is None:
                await self.leave_all()
            await self.close(code=UNAUTHORIZED)
            return
        self.conversation, self.link_version = conversation, access.link_version
        await self.replay(conversation, last_seq, seen=True, read=read)

    async def desk_event(self, message):
        if self.conversation is None:
            return  # joined while its token is read, and that token was no good
        await super().desk_event(message)

    async def link_still_valid(self) -> bool:
        """Read again on every frame: a revocation whose broadcast was lost still closes the socket."""
        return await db(identity.current_link_version)(self.conversation.public_id) == self.link_version

    async def links_revoked(self, message):
        """Staff revoked the conversation's links: a socket opened through an older one closes now."""
        if self.link_version is not None and message.get("version", 0) != self.link_version:
            await self.link_revoked()

    async def link_revoked(self) -> None:
        security_log.warning("customer socket of conversation %s closed: its link was revoked",
                             self.conversation.public_id)
        await self.send_error("link_revoked", "This conversation's link no longer works. Sign in again to "
                              "carry on.")
        await self.close(code=UNAUTHORIZED)

    async def post(self, content):
        raw_id = content.get("client_id")
        client_id = cleaning.client_id_or_none(raw_id)
        if raw_id is not None and client_id is None:
            # Not echoed back: it may be anything (a NUL byte, a surrogate, a megabyte).
            await self.send_json({"type": "message.rejected", "client_id": None, "code": "invalid_client_id",
                                  "error": "client_id must be 1 to 64 letters, digits or . _ : -"})
            return
        try:
            message, _, _ = await db(services.conversation_post_message)(
                conversation=self.conversation, text=content.get("text"), client_id=client_id,
                client_address=self.address)
        except services.InvalidMessage as e:
            await self.send_json({"type": "message.rejected", "client_id": client_id, "code": e.code,
                                  "error": str(e)})
        except services.RateLimited as e:
            await self.send_json({"type": "message.rejected", "client_id": client_id, "code": "rate_limited",
                                  "error": str(e), "retry_after": e.retry_after})
        except services.BeingSetUp as e:
            await self.send_json({"type": "message.rejected", "client_id": client_id, "code": e.code,
                                  "error": str(e)})
        else:
            await self.send_json({"type": "message.accepted", "client_id": client_id, "seq": message.seq})


class StaffConsumer(ReplayingConsumer):
    """The console's socket: open only while its session and account are.

    Both are read again on every client frame, before relaying an event once the last check is older than
    STAFF_SOCKET_RECHECK_SECONDS, and at least that often while the socket is quiet; logging out closes
    the session's sockets at once (staff.revoke on the user's group). A refused or revoked socket closes
    with 4403 and is logged on support.security.
    """

    staff = True

    async def connect(self):
        user = self.scope.get("user")
        self.revoked = True  # until accepted: nothing is relayed
        if user is None or not user.is_authenticated or not user.is_staff:
            reason = "not a staff account" if user is not None and user.is_authenticated else "not logged in"
            permissions.log_refusal(user, permissions.scope_address(self.scope), f"staff socket: {reason}")
            await self.close(code=permissions.REVOKED)
            return
        await super().connect()
        self.user_id, self.session_key = user.pk, self.scope["session"].session_key
        self.revoked, self.checked_at = False, self.now()
        self.watched: dict[str, Conversation] = {}
        self.with_pending: set[str] = set()  # conversations whose approval cards may change
        await self.join(events.STAFF_GROUP)
        await self.join(permissions.staff_user_group(user.pk))
        self.with_pending |= await db(_conversations_with_pending_approvals)()
        self.rechecks = asyncio.ensure_future(self.recheck_while_open())
        await self.mark_online()  # before the first frame is read: the client's pong means it is online
        self.presence = asyncio.ensure_future(self.online_while_open())

    async def disconnect(self, code):
        if getattr(self, "rechecks", None) is not None:
            self.rechecks.cancel()
        await self.offline()
        await super().disconnect(code)

    async def online_while_open(self) -> None:
        """Renew the presence mark every third of its life while the socket is open."""
        while not self.revoked:
            await asyncio.sleep(presence.seconds() / 3)
            await self.mark_online()

    async def mark_online(self) -> None:
        """Mark the user online (routing's presence, support/live/presence.py); coming online takes in what
        waits unrouted."""
        try:
            # Shielded and kept: a close while a mark is on its way waits for it, then takes it away.
            self.marking = asyncio.ensure_future(sync_to_async(presence.mark_online, thread_sensitive=False)(
                self.user_id, self.channel_name))
            if await asyncio.shield(self.marking):
                routed = await db(routing.route_waiting)()
                if routed:
                    log.info("user id %s came online: %d waiting routed to the team", self.user_id, routed)
        except asyncio.CancelledError:
            raise
        except Exception:  # Redis or the database away: offline for routing until the next renewal
            log.warning("staff presence of user id %s not marked", self.user_id, exc_info=True)

    async def offline(self) -> None:
        """This socket's presence mark goes (the user stays online while another socket of theirs is open)."""
        task = getattr(self, "presence", None)
        if task is None:
            return
        self.presence = None
        task.cancel()
        marking = getattr(self, "marking", None)
        if marking is not None and not marking.done():
            await asyncio.wait([marking])
        await sync_to_async(presence.mark_offline, thread_sensitive=False)(self.user_id, self.channel_name)

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    async def still_allowed(self) -> bool:
        """Read the session and the account again; close the socket if it may no longer be open."""
        if self.revoked:
            return False
        problem = await db(permissions.staff_session_problem)(self.session_key, self.user_id)
        self.checked_at = self.now()
        if problem is not None:
            await self.revoke(problem)
        return problem is None

    async def revoke(self, reason: str) -> None:
        if self.revoked:
            return
        self.revoked = True  # first: events that arrive while the close goes out are dropped
        permissions.log_refusal(self.scope.get("user"), permissions.scope_address(self.scope),
                                f"staff socket closed: {reason}")
        await self.offline()
        await self.leave_all()
        self.watched.clear()
        await self.close(code=permissions.REVOKED)

    async def recheck_while_open(self) -> None:
        period = permissions.recheck_seconds()
        while not self.revoked:
            await asyncio.sleep(max(period - (self.now() - self.checked_at), 0.05))
            if self.now() - self.checked_at < period:
                continue  # a frame or an event checked meanwhile
            try:
                await self.still_allowed()
            except Exception:  # the database is away: keep the socket, try again after the next period
                self.checked_at = self.now()
                log.warning("staff socket of user id %s: session not checked", self.user_id, exc_info=True)

    async def staff_revoke(self, message):
        """Logout (this session's sockets close at once) or an account change (each socket checks itself)."""
        if message.get("session") and message["session"] == permissions.session_tag(self.session_key):
            await self.revoke(message.get("reason") or "logged out")
        else:
            await self.still_allowed()

    async def desk_event(self, message):
        if self.revoked:
            return
        if self.now() - self.checked_at >= permissions.recheck_seconds() and not await self.still_allowed():
            return
        again = message.get("id") is not None and message["id"] in self.recent_ids  # through a second group
        await super().desk_event(message)
        if not again:
            await self.keep_cards_current(message["event"])

    async def keep_cards_current(self, event) -> None:
        """A customer who writes while an approval waits changes its card (customer_messages_since): send
        the card again as approval.requested. conversation.updated on the staff group follows every
        customer message; only conversations with a pending approval are read again."""
        key, kind = event.get("conversation"), event["type"]
        if kind == "approval.requested" and key:
            self.with_pending.add(key)
        elif kind == "conversation.updated" and key in self.with_pending:
            cards = await db(_pending_approvals_json)(key)
            if not cards:
                self.with_pending.discard(key)
            for card in cards:
                await self.send_json({"type": "approval.requested", "conversation": key, "seq": event.get("seq"),
                                      "approval": card, "why": "customer_wrote"})

    async def receive_json(self, content, **kwargs):
        if not await self.still_allowed():
            return
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


def _conversations_with_pending_approvals() -> set[str]:
    return {str(c) for c in Approval.objects.filter(decided_at__isnull=True, run__isnull=False)
            .values_list("run__conversation__public_id", flat=True).distinct()}


def _pending_approvals_json(conversation_key: str) -> list[dict]:
    approvals = (Approval.objects.filter(run__conversation__public_id=conversation_key, decided_at__isnull=True)
                 .select_related("tool_call", "run__conversation", "decided_by").order_by("requested_at"))
    return serializers.approvals_json(approvals)


def _replay_read(conversation, after_seq: int, staff: bool, seen: bool):
    """(the conversation's last seq, its messages after after_seq, its state), in one trip to the thread
    pool. The seq is read first, with the state: a seq is handed out in the transaction that saves its
    message, so every message up to it is in the read that follows. `seen`: the customer's presence is
    recorded too."""
    state = selectors.conversation_state(conversation, newer_than=after_seq, staff=staff)  # refreshes last_seq
    last_seq = conversation.last_seq
    messages = selectors.messages_after(conversation, after_seq, staff=staff) if state.pop("newer") else []
    if seen:
        _record_presence(conversation)
    return last_seq, messages, state


def _resume_read(token, public_id, after_seq: int):
    """(access, the replay's read) when the token opens the conversation, else (None, None): the customer's
    resume in one trip to the thread pool and one loan of a database connection."""
    access = identity.access_for_token(token, public_id)
    if access is None:
        return None, None
    return access, _replay_read(access.conversation, after_seq, False, True)


def _record_presence(conversation) -> None:
    """notify.customer_seen, never raising: with the database away the socket carries on (and the replay goes
    out); at worst an e-mail says again what the customer saw."""
    try:
        notify.customer_seen(conversation.pk)
    except Exception:
        log.warning("customer presence of conversation %s not recorded", conversation.public_id, exc_info=True)


def _last_seqs(pks: list[int]) -> dict[int, int]:
    return dict(Conversation.objects.filter(pk__in=pks).values_list("pk", "last_seq")) if pks else {}


def _seq(value) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


class NotFoundConsumer(AsyncWebsocketConsumer):
    """Any other websocket path: refused before the handshake completes (the server answers 403), instead
    of the router raising and the server answering 500."""

    async def connect(self):
        await self.close()


def max_frame_chars() -> int:
    """The longest frame we read: a maximal message with every character escaped, plus room for the rest
    (the HTTP API's body limit)."""
    return body_limit()


def parse_frame(text_data, bytes_data):
    """(the frame's JSON, None), or (None, (close code, error code, why)) for a frame we will not read."""
    if text_data is None:
        return None, (UNSUPPORTED, "binary_frame", "Binary frames are not supported; send JSON text.")
    if len(text_data) > max_frame_chars():
        return None, (TOO_LARGE, "frame_too_large", "The frame is too large.")
    try:
        content = json.loads(text_data)
    except RecursionError:  # deeper than the parser's own limit
        return None, (BAD_FRAME, "too_deep", "The frame's JSON is nested too deeply.")
    except ValueError:
        return None, (BAD_FRAME, "invalid_json", "The frame is not valid JSON.")
    if _depth(content) > MAX_FRAME_DEPTH:
        return None, (BAD_FRAME, "too_deep", "The frame's JSON is nested too deeply.")
    return content, None


def _depth(value) -> int:
    """How deeply lists and objects nest in `value`, walked without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, level)
            if level <= MAX_FRAME_DEPTH:  # deeper than that is refused whatever lies below
                stack.extend((child, level + 1) for child in (node.values() if isinstance(node, dict) else node))
    return deepest
