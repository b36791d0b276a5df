"""Rate limits and lock-outs: sliding windows counted in Redis, shared by every site process.

A limit is "at most `count` events per `window` seconds" for one key (a conversation, a customer, a client
address, an e-mail). `hit` checks every limit it is given and records the event in all of them in one Lua
script, so two processes can never both pass the last free slot (check and count are one atomic step).
`tally` counts events without ever refusing one, for alerts (persistent sign-in guessing).
Nothing here is data: losing Redis forgets the counters, never a message.
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
import math
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass

import redis
from django.conf import settings

from support.ops import metrics

log = logging.getLogger(__name__)
security_log = logging.getLogger("support.security")

KEY_PREFIX = "limits:"
MINUTE, QUARTER_HOUR, HOUR = 60, 15 * 60, 3600

# KEYS: one sorted set per limit (members: events, scores: their times in ms).
# ARGV[1]: this event's unique member; then, per key, its count and its window in ms.
# Every key under its count: the event is recorded in all of them and 0 is returned. Otherwise nothing is
# recorded, and the answer is how many ms until the fullest key has room again. Redis' own clock, so the
# processes' clocks need not agree.
_HIT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local wait = 0
for i, key in ipairs(KEYS) do
  local count, window = tonumber(ARGV[2 * i]), tonumber(ARGV[2 * i + 1])
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  local held = redis.call('ZCARD', key)
  if held >= count then
    local oldest = redis.call('ZRANGE', key, held - count, held - count, 'WITHSCORES')
    wait = math.max(wait, tonumber(oldest[2]) + window - now, 1)
  end
end
if wait > 0 then return wait end
for i, key in ipairs(KEYS) do
  redis.call('ZADD', key, now, ARGV[1])
  redis.call('PEXPIRE', key, tonumber(ARGV[2 * i + 1]))
end
return 0
"""


@dataclass(frozen=True)
class Limit:
    key: str  # what is counted, e.g. "messages:conversation:<id>"
    count: int
    window: int  # seconds


class Limited(Exception):
    """Over a limit: nothing was recorded; `retry_after` is the whole seconds until there is room."""

    def __init__(self, retry_after: int):
        super().__init__(f"over the limit; room again in {retry_after} s")
        self.retry_after = retry_after


class Unavailable(Exception):
    """Redis could not be reached: the caller decides whether to refuse (503) or go on without it."""


_clients: dict[str, redis.Redis] = {}


def _key(limit: Limit, kind: str = "") -> str:
    """The Redis key of a limit's counter. LIMITS_SCOPE (empty on a site) keeps a set of counters apart from
    the site's: the evaluation gives each trial a scope of its own, so every trial starts from zero."""
    return KEY_PREFIX + settings.LIMITS_SCOPE + kind + limit.key


def store() -> redis.Redis:
    """The Redis client for LIMITS_REDIS_URL: one pool per URL, shared by the threads of the process."""
    url = settings.LIMITS_REDIS_URL
    client = _clients.get(url)
    if client is None:
        client = _clients[url] = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=2)
    return client


def hit(*limits: Limit) -> str:
    """Count one event against every limit, or raise Limited (nothing counted) / Unavailable.

    Returns the event's id, for `forget` (an attempt that turned out not to count, e.g. a sign-in that
    succeeded)."""
    limits = tuple(limit for limit in limits if limit is not None)
    member = uuid.uuid4().hex
    if not limits:
        return member
    args = [member]
    for limit in limits:
        args += [limit.count, limit.window * 1000]
    try:
        wait_ms = store().eval(_HIT, len(limits), *(_key(limit) for limit in limits), *args)
    except redis.RedisError as error:
        raise Unavailable(str(error)) from error
    if wait_ms:
        retry_after = max(1, math.ceil(int(wait_ms) / 1000))
        # The keys name what was counted (an address, a customer id, a conversation, an e-mail's digest).
        security_log.warning("refused over a limit (one of %s); room again in %d s",
                             ", ".join(limit.key for limit in limits), retry_after)
        metrics.rate_limited(limits)
        raise Limited(retry_after)
    return member


def forget(event: str, *limits: Limit) -> None:
    """Take a recorded event back out of those limits (best effort: a failure only keeps it counted)."""
    try:
        pipe = store().pipeline(transaction=False)
        for limit in limits:
            pipe.zrem(_key(limit), event)
        pipe.execute()
    except redis.RedisError:
        log.warning("limits: could not forget an event (%d limits); it stays counted", len(limits))


def clear(*limits: Limit) -> None:
    try:
        store().delete(*(_key(limit) for limit in limits))
    except redis.RedisError:
        log.warning("limits: could not clear %d limits", len(limits))


# -- while Redis is away ---------------------------------------------------------------------------------

class _ProcessWindows:
    """The same sliding windows, counted in this process's memory: what a path that must stay open (a socket,
    a new conversation) still counts while Redis is away. Each process counts on its own, so N processes let
    N times the count through: a bound, not the rule. At most MAX_KEYS keys are held; past that, keys with
    no event left in their window go first, then the oldest (their events are forgotten, never refused)."""

    MAX_KEYS = 50_000

    def __init__(self):
        self._events: dict[str, deque] = {}
        self._lock = threading.Lock()

    def hit(self, *limits: Limit) -> None:
        now = time.monotonic()
        with self._lock:
            wait = 0.0
            keys = [settings.LIMITS_SCOPE + limit.key for limit in limits]
            for key, limit in zip(keys, limits):
                events = self._events.get(key)
                if events is None:
                    continue
                while events and events[0] <= now - limit.window:
                    events.popleft()
                if len(events) >= limit.count:
                    wait = max(wait, events[len(events) - limit.count] + limit.window - now)
            if wait > 0:
                raise Limited(max(1, math.ceil(wait)))
            for key in keys:
                self._events.setdefault(key, deque()).append(now)
            if len(self._events) > self.MAX_KEYS:
                self._prune(now)

    def _prune(self, now: float) -> None:
        longest = max((HOUR, QUARTER_HOUR, MINUTE))
        for key in [k for k, events in self._events.items() if not events or events[-1] <= now - longest]:
            del self._events[key]
        while len(self._events) > self.MAX_KEYS:
            del self._events[next(iter(self._events))]

    def clear(self) -> None:
        with self._lock:
            self._events.clear()


process_windows = _ProcessWindows()


def hit_or_count_here(what: str, *limits: Limit) -> None:
    """`hit`, or with Redis away the same limits counted in this process (see _ProcessWindows): for paths
    the desk keeps open through an outage. Limited either way when over."""
    limits = tuple(limit for limit in limits if limit is not None)
    try:
        hit(*limits)
    except Unavailable as error:
        warn_unavailable(f"{what} counted per process", error)
        try:
            process_windows.hit(*limits)
        except Limited as over:
            security_log.warning("refused over a limit counted in this process (one of %s); room again in %d s",
                                 ", ".join(limit.key for limit in limits), over.retry_after)
            metrics.rate_limited(limits)
            raise


# KEYS: one counter per tally; ARGV[1..]: their windows in s. Each counter counts one more event and is
# returned; the first event of a window starts it (fixed windows: a count falls back to 0 when it expires).
_TALLY = """
local counts = {}
for i, key in ipairs(KEYS) do
  counts[i] = redis.call('INCR', key)
  if counts[i] == 1 then redis.call('EXPIRE', key, tonumber(ARGV[i])) end
end
return counts
"""


def tally(*limits: Limit) -> list[int]:
    """Count one event in each limit's window without ever refusing; the counts so far in those windows.
    For watching, not limiting: the caller compares them with `limit.count`. Each window is fixed (it starts
    with its first event), so a count reaches a given value once per window. Raises Unavailable."""
    if not limits:
        return []
    try:
        counts = store().eval(_TALLY, len(limits), *(_key(limit, "tally:") for limit in limits),
                              *(limit.window for limit in limits))
    except redis.RedisError as error:
        raise Unavailable(str(error)) from error
    return [int(count) for count in counts]


_last_warning = 0.0


def warn_unavailable(what: str, error: Exception) -> None:
    """Say once a minute per process that limits are not being counted, rather than once per request."""
    global _last_warning
    now = time.monotonic()
    if now - _last_warning > 60:
        _last_warning = now
        log.warning("limits: Redis at LIMITS_REDIS_URL unreachable (%s); %s", error, what)


# -- the client's address ---------------------------------------------------------------------------

def client_address(peer: str | None, forwarded: str | None) -> str:
    """Who is asking, as limits count them: the socket peer, or with TRUSTED_PROXIES = N the address the
    first of our N proxies saw (the Nth entry from the right of CLIENT_ADDRESS_HEADER; entries further left
    are whatever the client wrote; with fewer than N entries, the peer). IPv6 addresses count by /64, the block one subscriber gets."""
    address = peer or ""
    proxies = settings.TRUSTED_PROXIES
    if proxies and forwarded:
        entries = [e.strip() for e in forwarded.split(",") if e.strip()]
        # Fewer entries than proxies: the request did not come through all of them (it reached a later one,
        # or the site, directly), so even the leftmost entry may be the client's own writing: the peer it is.
        if len(entries) >= proxies:
            address = entries[-proxies]
    return _counted_as(address)


def _counted_as(address: str) -> str:
    try:
        ip = ipaddress.ip_address(address.strip("[]"))
    except ValueError:
        # Not an address (a unix socket, a test client): counted by a digest, never echoed into a key raw.
        return "other:" + hashlib.sha256(address.encode("utf-8", "replace")).hexdigest()[:16]
    if ip.version == 6:
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


def request_address(request) -> str:
    header = "HTTP_" + settings.CLIENT_ADDRESS_HEADER.upper().replace("-", "_")
    return client_address(request.META.get("REMOTE_ADDR"), request.META.get(header))


def scope_address(scope) -> str:
    """The same for a websocket's ASGI scope."""
    client = scope.get("client") or (None, None)
    wanted = settings.CLIENT_ADDRESS_HEADER.lower().encode("latin-1")
    forwarded = [v.decode("latin-1") for k, v in scope.get("headers", []) if k.lower() == wanted]
    return client_address(client[0], ",".join(forwarded) if forwarded else None)


# -- the limits of the desk ---------------------------------------------------------------------------

def _digest(text: str) -> str:
    # E-mail addresses and such go into keys as digests: nothing personal sits in Redis in clear.
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def messages_of_conversation(public_id) -> Limit:
    return Limit(f"messages:conversation:{public_id}", settings.MESSAGES_PER_MINUTE, MINUTE)


def messages_of_customer(customer_id: int) -> Limit:
    return Limit(f"messages:customer:{customer_id}", settings.CUSTOMER_MESSAGES_PER_MINUTE, MINUTE)


def messages_from(address: str) -> Limit:
    return Limit(f"messages:address:{address}", settings.ADDRESS_MESSAGES_PER_MINUTE, MINUTE)


def mails_from(sender: str) -> Limit:
    """Mails one address sends the desk in an hour (support/desk/inbound_mail.py)."""
    return Limit(f"mails:sender:{_digest(sender)}", settings.INBOUND_EMAILS_PER_SENDER_PER_HOUR, HOUR)


def conversations_by_mail() -> Limit:
    """Conversations started by e-mail in an hour, whoever sent them: senders cost nothing to invent."""
    return Limit("mails:conversations", settings.INBOUND_EMAIL_CONVERSATIONS_PER_HOUR, HOUR)


def conversations_of_customer(customer_id: int) -> Limit:
    return Limit(f"conversations:customer:{customer_id}", settings.CUSTOMER_CONVERSATIONS_PER_HOUR, HOUR)


def conversations_from(address: str) -> Limit:
    return Limit(f"conversations:address:{address}", settings.ADDRESS_CONVERSATIONS_PER_HOUR, HOUR)


def copilot_runs_of(user_id: int) -> Limit:
    """Copilot runs one person may ask for in an hour (support/copilot/services.py)."""
    return Limit(f"copilot:user:{user_id}", settings.COPILOT_PER_PERSON_PER_HOUR, HOUR)


def sockets_from(address: str) -> Limit:
    return Limit(f"sockets:address:{address}", settings.ADDRESS_SOCKETS_PER_MINUTE, MINUTE)


def signin_guesses(kind: str, address: str, email: str) -> tuple[Limit, ...]:
    """Failed guesses (`kind`: "order" or "code") by this address at this e-mail and by this address at any;
    for order numbers also at this e-mail from anywhere. Never a lock on the owner: past an order-number
    limit the e-mailed code still signs in, and wrong codes are never limited per e-mail (a stranger's
    would shut the owner out). See support/customers/signin.py."""
    digest = _digest(email)
    per_address = (
        Limit(f"signin:{kind}:pair:{address}:{digest}", settings.SIGNIN_FAILURES_PER_ADDRESS_AND_EMAIL, QUARTER_HOUR),
        Limit(f"signin:{kind}:address:{address}", settings.SIGNIN_FAILURES_PER_ADDRESS, QUARTER_HOUR),
    )
    if kind == "code":
        return per_address
    return (*per_address, Limit(f"signin:{kind}:email:{digest}", settings.SIGNIN_FAILURES_PER_EMAIL, HOUR))


def code_sends_to(email: str) -> Limit:
    """Codes e-mailed to one address (counted by the task that sends them, support/tasks.py)."""
    return Limit(f"signin:code-sends:{_digest(email)}", settings.SIGNIN_CODE_SENDS_PER_EMAIL, HOUR)


def code_requests_from(address: str) -> Limit:
    """Codes asked for from one client address, whoever they are for: one client cannot mail every customer."""
    return Limit(f"signin:code-requests:{address}", settings.SIGNIN_CODE_REQUESTS_PER_ADDRESS, HOUR)


def signin_failures_watched(address: str, email: str) -> tuple[Limit, Limit]:
    """Failed sign-ins (wrong or refused, order numbers and codes alike) at this e-mail and from this address:
    tallied for the alert on persistent guessing only, never to refuse (see `tally`)."""
    threshold = settings.SIGNIN_GUESSING_ALERT_PER_HOUR
    return (Limit(f"signin:failures:email:{_digest(email)}", threshold, HOUR),
            Limit(f"signin:failures:address:{address}", threshold, HOUR))
