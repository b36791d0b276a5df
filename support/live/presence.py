"""Which staff members have a console open: each staff socket keeps a mark in Redis, renewed while it is open
and taken away when it closes. A person is online while any mark of theirs is current, so closing one of two
tabs (or one daphne process among several) leaves them online; a mark whose process died lapses after
STAFF_PRESENCE_SECONDS. Nothing here is data: losing Redis only makes everyone look offline for a while, and
routing then leaves work unrouted (the whole team sees it)."""

from __future__ import annotations

import logging

import redis
from django.conf import settings

from support.ops import limits

log = logging.getLogger(__name__)

KEY = "presence:staff"  # one sorted set: members "<user id>:<socket>", scores: when each mark lapses (ms)

# KEYS[1]: the set. ARGV: the member, its lifetime in ms. Returns how many current marks the user had before
# this one (0: they just came online). Redis' own clock, so the processes' clocks need not agree.
_MARK = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local user = string.match(ARGV[1], '^[^:]+:')
local before = 0
for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  if m ~= ARGV[1] and string.sub(m, 1, string.len(user)) == user then before = before + 1 end
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
return before
"""
_CURRENT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')
"""


def seconds() -> float:
    return settings.STAFF_PRESENCE_SECONDS


def _member(user_id, socket: str) -> str:
    return f"{int(user_id)}:{socket}"


def mark_online(user_id, socket: str) -> bool:
    """Mark (or renew) one socket of the user. True when the user was offline before it. Raises
    limits.Unavailable when Redis is away."""
    try:
        before = limits.store().eval(_MARK, 1, KEY, _member(user_id, socket), int(seconds() * 1000))
    except redis.RedisError as error:
        raise limits.Unavailable(str(error)) from error
    return int(before) == 0


def mark_offline(user_id, socket: str) -> None:
    """Take one socket's mark away (the user stays online while another of theirs is current). Never
    raises: a mark left behind lapses by itself."""
    try:
        limits.store().zrem(KEY, _member(user_id, socket))
    except redis.RedisError:
        log.warning("staff presence of user id %s not cleared; it lapses in %g s", user_id, seconds(),
                    exc_info=True)


def online_user_ids() -> set[int]:
    """Every staff member with a current mark; empty when Redis is away (nobody is taken for online)."""
    try:
        members = limits.store().eval(_CURRENT, 1, KEY)
    except redis.RedisError:
        log.warning("staff presence not read: nobody counts as online", exc_info=True)
        return set()
    found = set()
    for member in members:
        user_id = (member.decode() if isinstance(member, bytes) else str(member)).split(":", 1)[0]
        if user_id.isdigit():
            found.add(int(user_id))
    return found


def is_online(user_id) -> bool:
    return int(user_id) in online_user_ids()
