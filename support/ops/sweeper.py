"""The beat's pulse: the sweeper records in the broker's Redis when it ran, for /metrics and
`manage.py check_workers`; and the short-timeout Redis clients those reads use."""

from __future__ import annotations

import logging
import time

import redis
from django.conf import settings

log = logging.getLogger(__name__)

_redis_clients: dict = {}


def redis_client(url: str):
    """One client per URL and process, with short timeouts: a scrape or a probe must not hang on a lost server."""
    if url not in _redis_clients:
        _redis_clients[url] = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)
    return _redis_clients[url]


# The sweeper records when it ran in the broker's Redis: the beat's one visible sign of life.
SWEEPER_LAST_RUN_KEY = "desk:sweeper:last_run"


def sweeper_ran() -> None:
    """Called by the sweep task each time it runs (best effort: a lost Redis only hides the beat's pulse)."""
    try:
        redis_client(settings.CELERY_BROKER_URL).set(SWEEPER_LAST_RUN_KEY, repr(time.time()), ex=24 * 3600)
    except Exception as e:
        log.warning("sweeper: could not record its run: %s", type(e).__name__)


def sweeper_last_run(client=None) -> float | None:
    """The Unix time the sweeper last ran, or None (never, or more than a day ago, or Redis unreadable)."""
    try:
        raw = (client or redis_client(settings.CELERY_BROKER_URL)).get(SWEEPER_LAST_RUN_KEY)
        return float(raw) if raw is not None else None
    except Exception:
        return None
