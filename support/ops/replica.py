"""Report reads on a read replica: a database router that sends the reads made inside `report_reads()` to the
`replica` alias (set up when DATABASE_REPLICA_URL is set) and everything else, every write included, to default.

The reports mark their reads with `report_reads()` rather than naming the alias, so they run unchanged without a
replica (the router then answers None and Django uses default). A replica lags its primary by a little; a report
reads closed days and today's live figures, which tolerate seconds of lag; nothing that decides or writes does.
"""

from __future__ import annotations

import functools
from contextlib import contextmanager
from contextvars import ContextVar

from django.conf import settings

REPLICA = "replica"
_reporting: ContextVar[bool] = ContextVar("report_reads", default=False)


@contextmanager
def report_reads():
    """Reads made inside this block (in this thread or task) go to the replica, when there is one."""
    token = _reporting.set(True)
    try:
        yield
    finally:
        _reporting.reset(token)


def on_replica(function):
    """A function whose reads are report reads (report(), series())."""
    @functools.wraps(function)
    def reading(*args, **kwargs):
        with report_reads():
            return function(*args, **kwargs)
    return reading


def replica_configured() -> bool:
    return REPLICA in settings.DATABASES


class ReplicaRouter:
    """Report reads to `replica`; writes, migrations and every other read to default."""

    def db_for_read(self, model, **hints):
        return REPLICA if _reporting.get() and replica_configured() else None

    def db_for_write(self, model, **hints):
        return "default"

    def allow_relation(self, obj1, obj2, **hints):
        return True  # the replica is a copy of default: its rows are default's rows

    def allow_migrate(self, db, app_label, model_name=None, **hints):
        return db != REPLICA  # the replica follows the primary; it is never migrated itself
