"""PostgreSQL's connection pool in a worker: a run holds a database connection only while it reads or writes.

A worker with more runs at once than its pool has connections still finishes them all on their first
attempt: each run gives its connection back before every model call (runner._give_back_connection), so
the runs waiting on the model hold none. Without that, runs beyond the pool's size wait for a connection
longer than the pool allows and fail.
"""

import pytest
from django.db import connection

from support.models import Run

from .conftest import ask, wait_run

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the pool is PostgreSQL's (settings.DB_POOL)"),
]

MISSING_41207 = "Tracking says delivered on Thursday but nothing arrived. Order SU-41207"


def test_more_runs_than_pooled_connections_all_finish_first_time(demo, worker, model_server):
    model_server.configure(latency_ms=300)  # 5 model calls each: every run waits on the model ~1.5 s
    w = worker(concurrency=8, DB_POOL_MIN_SIZE=1, DB_POOL_MAX_SIZE=2, DB_POOL_TIMEOUT=1)
    runs = [ask(customer, MISSING_41207)[2] for customer in [demo.maya, demo.tom] * 4]
    finished = [wait_run(run, Run.STOPPED, timeout=60) for run in runs]
    assert [(r.stop_reason, r.attempts) for r in finished] == [("answered", 1)] * 8
    assert "PoolTimeout" not in w.log() and "couldn't get a connection" not in w.log()
