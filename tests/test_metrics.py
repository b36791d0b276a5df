"""Metrics: what each process counts, the desk's state read at scrape time, and who may scrape.

Counters are per process and never reset, so each test compares a value before and after what it does.
"""

from __future__ import annotations

import socket
import urllib.request
import uuid

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.test import Client
from prometheus_client import REGISTRY

from support.agent import types as agent
from support.desk import runner, services
from support.models import Run
from support.ops import metrics
from support.ops import scrape as exposition
from tests.desk_factories import pending_refund_approval, start_conversation
from tests.standin_fixture import standin  # noqa: F401


def value(name: str, **labels) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def scrape(client, **headers) -> dict[str, float]:
    """/metrics as {"name{label=value,...}": value}, read from the text a scraper reads."""
    response = client.get("/metrics", **headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    samples = {}
    for line in response.content.decode().splitlines():
        if line and not line.startswith("#"):
            key, _, number = line.rpartition(" ")
            samples[key] = float(number)
    return samples


@pytest.fixture
def redis_down(settings):
    """The queue gauges need Redis; these tests are about the others, so it is simply not there."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{s.getsockname()[1]}/0"


def test_http_requests_are_counted_by_route_pattern_never_by_path(client):
    route = "/api/conversations/<str:public_id>"
    before = value("desk_http_requests_total", route=route, method="GET", status="404")
    for _ in range(2):  # two ids, one series: a path per id would grow without end
        assert client.get(f"/api/conversations/{uuid.uuid4()}").status_code == 404
    assert value("desk_http_requests_total", route=route, method="GET", status="404") == before + 2
    assert value("desk_http_request_seconds_count", route=route) >= 2


def test_a_path_no_route_matches_is_counted_as_unmatched(client):
    before = value("desk_http_requests_total", route="unmatched", method="GET", status="404")
    client.get(f"/no-such-page-{uuid.uuid4()}/")
    assert value("desk_http_requests_total", route="unmatched", method="GET", status="404") == before + 1


@pytest.mark.django_db
def test_metrics_show_runs_by_status_approvals_waiting_and_the_oldest_queued_run(client, demo, redis_down):
    pending_refund_approval(start_conversation(demo.maya))
    Run.objects.create(conversation=start_conversation(demo.tom), status=Run.QUEUED)
    samples = scrape(client)
    assert samples['desk_runs{status="awaiting_approval"}'] == 1
    assert samples['desk_runs{status="queued"}'] == 1
    assert samples['desk_runs{status="running"}'] == 0
    assert samples["desk_approvals_pending"] == 1
    assert samples["desk_oldest_queued_run_seconds"] >= 0
    assert "process_resident_memory_bytes" in samples  # the process's own CPU and memory
    assert not any(k.startswith("desk_queue_messages") for k in samples)  # Redis down: left out, not failed


@pytest.mark.django_db
def test_metrics_show_the_celery_queue_when_redis_answers(client, settings, monkeypatch):
    class Broker:
        def llen(self, key):
            return 7 if key == "celery" else 0

        def hlen(self, key):
            return 3 if key == "unacked" else 0

    monkeypatch.setattr(exposition, "redis_client", lambda url: Broker())
    samples = scrape(client)
    assert samples['desk_queue_messages{state="waiting"}'] == 7
    assert samples['desk_queue_messages{state="reserved"}'] == 3


@pytest.mark.django_db
def test_metrics_ask_for_the_bearer_token_when_one_is_set(client, settings, redis_down):
    settings.METRICS_TOKEN = "scrape-me-" + uuid.uuid4().hex
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    scrape(client, HTTP_AUTHORIZATION=f"Bearer {settings.METRICS_TOKEN}")
    for encoded in ("/%6Detrics", "/m%65trics"):  # the same view however the path is spelled
        assert client.get(encoded).status_code == 401
        assert client.get(encoded, HTTP_AUTHORIZATION=f"Bearer {settings.METRICS_TOKEN}").status_code == 200


@pytest.mark.django_db(transaction=True)  # the run is queued after its message's commit
def test_model_and_tool_calls_of_a_run_are_counted_with_tokens_and_cost(desk, queued):
    model = "sundry-standin-1"
    calls = value("desk_model_calls_total", model=model, result="ok")
    tokens = value("desk_model_tokens_total", model=model, kind="prompt")
    cost = value("desk_model_cost_usd_total", model=model)
    lookups = value("desk_tool_calls_total", server="desk", tool="get_order", result="ok")
    conversation = start_conversation(desk.maya)
    services.conversation_post_message(conversation=conversation, text="Where is SU-41210?")
    assert runner.run_execute(queued.pop()) == "answered"
    run = Run.objects.get(conversation=conversation)
    assert value("desk_model_calls_total", model=model, result="ok") == calls + run.turns
    assert value("desk_model_tokens_total", model=model, kind="prompt") == tokens + run.prompt_tokens
    assert value("desk_model_cost_usd_total", model=model) == pytest.approx(cost + float(run.cost_usd), abs=1e-6)
    assert value("desk_tool_calls_total", server="desk", tool="get_order", result="ok") > lookups


def test_a_tool_name_the_model_made_up_is_counted_as_unknown():
    before = value("desk_tool_calls_total", server="desk", tool="unknown", result="error")
    metrics.step_recorded(agent.Step(kind="tool", turn=1, tool="drop_tables_" + uuid.uuid4().hex, error="no such tool"))
    assert value("desk_tool_calls_total", server="desk", tool="unknown", result="error") == before + 1


def test_retries_and_failed_model_calls_are_counted():
    retries = value("desk_model_retries_total", model="m-test")
    errors = value("desk_model_calls_total", model="m-test", result="error")
    metrics.step_recorded(agent.Step(kind="model", turn=1, model="m-test", attempts=4, error="503"))
    assert value("desk_model_retries_total", model="m-test") == retries + 3
    assert value("desk_model_calls_total", model="m-test", result="error") == errors + 1


def test_a_workers_run_tasks_are_counted_by_what_happened_through_celerys_signals():
    from celery.signals import task_postrun, task_prerun

    from support.tasks import run_agent as task

    before = value("desk_run_tasks_total", result="lease_lost")
    timed = value("desk_run_task_seconds_count")
    task_prerun.send(sender=task, task_id="t-1", task=task, args=(10 ** 9,), kwargs={})
    task_postrun.send(sender=task, task_id="t-1", task=task, args=(10 ** 9,), kwargs={}, retval="lease lost")
    assert value("desk_run_tasks_total", result="lease_lost") == before + 1
    assert value("desk_run_task_seconds_count") == timed + 1


def test_the_sweepers_work_is_counted():
    runs, approvals = value("desk_sweeper_requeued_runs_total"), value("desk_sweeper_expired_approvals_total")
    metrics.task_ended("support.tasks.sweep", {"requeued": [4, 5], "expired": [9]}, 0.01)
    assert value("desk_sweeper_requeued_runs_total") == runs + 2
    assert value("desk_sweeper_expired_approvals_total") == approvals + 1


@pytest.mark.django_db(transaction=True)
def test_open_staff_sockets_are_counted_and_a_refused_one_is_not(settings):
    from agentsite.asgi import application

    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    origin = [(b"origin", b"http://127.0.0.1:8000"), (b"host", b"127.0.0.1:8000")]
    web = Client()
    web.force_login(get_user_model().objects.create_user("sam", password="x", is_staff=True))
    cookie = (b"cookie", f"sessionid={web.cookies['sessionid'].value}".encode())

    async def go():
        refused = WebsocketCommunicator(application, "/ws/staff/", headers=origin)
        assert (await refused.connect())[0] is False
        after_refused = value("desk_websockets_open", socket="staff")
        ws = WebsocketCommunicator(application, "/ws/staff/", headers=[*origin, cookie])
        assert (await ws.connect())[0]
        while_open = value("desk_websockets_open", socket="staff")
        await ws.disconnect()
        return after_refused, while_open

    before = value("desk_websockets_open", socket="staff")
    after_refused, while_open = async_to_sync(go)()
    assert (after_refused, while_open) == (before, before + 1)
    assert value("desk_websockets_open", socket="staff") == before


def test_a_worker_serves_its_own_metrics_and_a_taken_port_is_logged_not_raised(caplog):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exposition.serve_worker_metrics("127.0.0.1", port)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        body = response.read().decode()
    assert "desk_run_tasks_total" in body or "# HELP desk_run_tasks_total" in body
    exposition.serve_worker_metrics("127.0.0.1", port)  # a second worker given the same port
    assert "cannot listen" in caplog.text
