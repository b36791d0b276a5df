"""With DATABASE_REPLICA_URL the reports read from the `replica` alias through the router: their reads only,
never a write, and nothing else the desk reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import date
from pathlib import Path
from unittest import mock

import pytest
from django.conf import settings

from support.models import Conversation
from support.ops.replica import REPLICA, ReplicaRouter, report_reads
from support.reports.figures import Filters, report, series

ROOT = Path(__file__).resolve().parents[1]
WEEK = Filters(start=date(2026, 11, 23), end=date(2026, 11, 29), time_zone="UTC")


@pytest.fixture
def with_replica():
    with mock.patch.dict(settings.DATABASES, {REPLICA: {**settings.DATABASES["default"]}}):
        yield


def settings_databases(**env) -> dict:
    code = ("import json, django; from django.conf import settings; django.setup(); "
            "print(json.dumps({'aliases': sorted(settings.DATABASES), 'routers': settings.DATABASE_ROUTERS, "
            "'replica': settings.DATABASES.get('replica', {}).get('NAME')}))")
    environ = {k: v for k, v in os.environ.items() if k != "DATABASE_REPLICA_URL"}
    environ.update(DJANGO_SETTINGS_MODULE="agentsite.settings", **env)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=environ, capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_it_adds_the_replica_alias_only_when_the_replica_url_is_set():
    without = settings_databases()
    assert without["aliases"] == ["default"]
    with_url = settings_databases(DATABASE_REPLICA_URL="postgres://app:app@replica.internal:5432/app")
    assert with_url["aliases"] == ["default", "replica"] and with_url["replica"] == "app"
    assert with_url["routers"] == ["support.ops.replica.ReplicaRouter"]


def test_it_sends_report_reads_to_the_replica_and_every_write_to_default(with_replica):
    router = ReplicaRouter()
    assert router.db_for_read(Conversation) is None
    assert Conversation.objects.all().db == "default"
    with report_reads():
        assert router.db_for_read(Conversation) == REPLICA
        assert Conversation.objects.all().db == REPLICA
        assert router.db_for_write(Conversation) == "default"
    assert Conversation.objects.all().db == "default"
    assert router.allow_migrate(REPLICA, "support") is False and router.allow_migrate("default", "support")


def test_without_a_replica_report_reads_stay_on_default():
    with report_reads():
        assert ReplicaRouter().db_for_read(Conversation) is None
        assert Conversation.objects.all().db == "default"


@pytest.mark.django_db
def test_every_read_of_the_report_and_its_series_goes_to_the_replica(with_replica):
    """The spy records the router's answer for each read and lets it run on default (no second database here)."""
    answers = []
    real = ReplicaRouter.db_for_read

    def spy(self, model, **hints):
        answers.append(real(self, model, **hints))

    with mock.patch.object(ReplicaRouter, "db_for_read", spy):
        report(WEEK)
        series(WEEK, "new_conversations")
        Conversation.objects.count()  # not a report read
    assert len(answers) > 10 and set(answers[:-1]) == {REPLICA} and answers[-1] is None
