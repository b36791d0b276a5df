"""The Celery side's health (`manage.py check_workers`): a worker answers, the beat has run recently (the
sweeper records each run), and the oldest queued run has not waited too long. Exit status 1 names what
failed. The worker ping is Celery's own broadcast; tests/system/test_scale_out.py asks real workers.
"""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from agentsite.celery import app
from support.models import Run
from support.ops import health, sweeper
from support.tasks import sweep
from tests.desk_factories import start_conversation


@pytest.fixture
def broker(settings, limits_redis):
    """The sweeper's pulse is kept in the broker's Redis: the session's own server here."""
    settings.CELERY_BROKER_URL = limits_redis
    return limits_redis


@pytest.fixture
def workers(monkeypatch):
    """The names that answer Celery's ping (none by default)."""
    answering: list[str] = []
    monkeypatch.setattr(app.control, "ping", lambda timeout=1.0: [{name: {"ok": "pong"}} for name in answering])
    return answering


def check(*args) -> tuple[int, dict]:
    out = io.StringIO()
    try:
        call_command("check_workers", "--json", *args, stdout=out)
        status = 0
    except SystemExit as e:
        status = e.code
    return status, json.loads(out.getvalue())


@pytest.mark.django_db
def test_all_is_well_when_a_worker_answers_the_sweeper_just_ran_and_nothing_waits(broker, workers):
    workers.append("celery@web-3")
    sweep.apply()
    status, report = check()
    assert status == 0, report
    assert report["checks"]["workers"]["answered"] == ["celery@web-3"]
    assert report["checks"]["beat"]["last_sweep_seconds_ago"] >= 0
    assert report["checks"]["queue"]["oldest_queued_run_seconds"] == 0


@pytest.mark.django_db
def test_no_worker_answering_fails_the_check(broker, workers):
    sweep.apply()
    status, report = check()
    assert status == 1
    assert report["checks"]["workers"] == {"ok": False, "answered": []}


@pytest.mark.django_db
def test_a_beat_that_never_ran_or_stopped_running_fails_the_check(broker, workers, settings):
    workers.append("celery@w1")
    assert check()[1]["checks"]["beat"]["ok"] is False  # never ran
    settings.RUN_SWEEP_SECONDS = 10
    from support.ops.sweeper import redis_client as _redis

    _redis(broker).set(sweeper.SWEEPER_LAST_RUN_KEY, repr(timezone.now().timestamp() - 31))  # 3 periods + 1 s
    status, report = check()
    assert status == 1 and report["checks"]["beat"]["ok"] is False
    assert report["checks"]["beat"]["allowed_seconds"] == 30


@pytest.mark.django_db
def test_a_run_queued_longer_than_allowed_fails_the_check(broker, workers, demo):
    workers.append("celery@w1")
    sweep.apply()
    Run.objects.create(conversation=start_conversation(demo.maya), status=Run.QUEUED,
                       heartbeat_at=timezone.now() - timedelta(seconds=90))
    status, report = check("--max-queued-age", "60")
    assert status == 1 and report["checks"]["queue"]["ok"] is False
    assert report["checks"]["queue"]["oldest_queued_run_seconds"] >= 90
    assert check("--max-queued-age", "120")[0] == 0


@pytest.mark.django_db
def test_the_text_report_names_each_check(broker, workers):
    out = io.StringIO()
    with pytest.raises(SystemExit):
        call_command("check_workers", stdout=out)
    text = out.getvalue()
    assert "BAD workers: none answered" in text
    assert "BAD beat: the sweeper last ran never" in text
    assert "ok  queue" in text
