"""Sign-in codes as the tests send them: what a request hands to Celery is recorded instead of sent to a broker
(as `queued` does for runs; tests/test_signin_guessing.py sends one through a real broker), and `run()` runs
each recorded task as a worker would, through the task itself.

Use `from tests.signin_fixture import code_tasks` (the test also needs `smtp_inbox` to read the codes).
"""

from __future__ import annotations

import uuid

import pytest

from support import tasks


class CodeTasks(list):
    """(email, request id) of each code asked for, in order, not yet run."""

    def run(self) -> int:
        """Run every recorded task once, as the worker would; how many were run."""
        done = 0
        while self:
            tasks.send_signin_code(*self.pop(0))
            done += 1
        return done


@pytest.fixture
def code_tasks(monkeypatch):
    recorded = CodeTasks()
    monkeypatch.setattr("support.customers.signin.queue_code",
                        lambda email: recorded.append((email, uuid.uuid4().hex)))
    return recorded
