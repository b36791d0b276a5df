"""Traces through the real processes: a customer's message posted to a real daphne, the Celery task it sends,
the run in a real worker, its model and tool calls; the approval wait; the resumed run. Both processes export
over OTLP/HTTP (the SDK's real exporter) to a receiver in this test, which decodes what they sent."""

from __future__ import annotations

import json
import os
import urllib.request

import pytest

from support.desk import gate
from support.models import Approval, Conversation, Run
from support.ops import tracing
from tests.otlp_fixture import Receiver, start_daphne, traced_here  # noqa: F401  (fixture)

from .conftest import database_url, wait_run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.stop()


def otel_env(receiver: Receiver, service: str) -> dict:
    # A short batch delay: the test waits for the spans, not the exporter's default 5 s.
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_SERVICE_NAME": service,
            "OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_TRACES_SAMPLER": "always_on"}


@pytest.fixture
def web(redis_server, model_server, receiver, tmp_path):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "agentsite.settings", "DATABASE_URL": database_url(),
           "REDIS_URL": redis_server, "LIMITS_REDIS_URL": redis_server, "MODEL_BASE_URL": model_server.base_url,
           "PYTHONUNBUFFERED": "1", **otel_env(receiver, "desk-web")}
    proc, port = start_daphne(env, tmp_path / "daphne.log")
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(10)


def post(url: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=15) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def by_id(spans):
    return {s["span_id"]: s for s in spans}


def ancestors(span, index):
    out = []
    while span["parent_id"] and span["parent_id"] in index:
        span = index[span["parent_id"]]
        out.append(span)
    return out


def _rooted(span, index) -> bool:
    """Every ancestor of `span` has arrived, up to a span without a parent."""
    while span["parent_id"]:
        if span["parent_id"] not in index:
            return False
        span = index[span["parent_id"]]
    return True


def test_one_customer_message_is_one_trace_from_the_request_to_the_tool_calls(demo, worker, web, receiver):
    worker(**otel_env(receiver, "desk-worker"))
    status, body = post(web + "/api/conversations", {
        "email": "maya@example.com", "order_number": "SU-41207",
        "message": {"text": "Tracking says delivered but nothing arrived. Order SU-41207"}})
    assert status == 201, body
    run = wait_run(Run.objects.get(public_id=body["run"]["id"]), Run.STOPPED)
    assert run.stop_reason == "answered"
    steps = list(run.steps.order_by("id").values_list("kind", "tool"))

    spans = receiver.wait_for(lambda ss: sum(s["name"].startswith(("chat", "execute_tool")) for s in ss) >= len(steps)
                              and any(s["name"].startswith("invoke_agent") for s in ss)
                              and any(s["kind"] == 2 for s in ss))  # SERVER: the API request
    [agent] = [s for s in spans if s["name"].startswith("invoke_agent")]
    # The task's and the request's spans end after the run's: wait until the run's ancestry is in.
    spans = receiver.wait_for(lambda ss: _rooted(agent, by_id(ss)))
    index = by_id(spans)
    trace = agent["trace_id"]
    assert tracing.trace_id_of(run.trace_parent) == trace
    up = ancestors(agent, index)
    # The run's span sits under the Celery task's, which sits under the publish in the API request's span.
    assert [s["service"] for s in up][-1] == "desk-web" and up[-1]["kind"] == 2  # SERVER
    assert "/api/conversations" in (up[-1]["attributes"].get("http.route", "") + up[-1]["attributes"].get(
        "http.target", "") + up[-1]["attributes"].get("url.path", "") + up[-1]["name"]), up[-1]
    assert any(s["service"] == "desk-worker" and "run_agent" in s["name"] for s in up), [s["name"] for s in up]
    assert any(s["service"] == "desk-web" and "run_agent" in s["name"] and s["kind"] == 4 for s in up)  # PRODUCER
    # Its model and tool calls, children of the run, in the order of the trace table.
    children = sorted((s for s in spans if s["parent_id"] == agent["span_id"]), key=lambda s: s["start"])
    assert [s["attributes"]["gen_ai.operation.name"] for s in children] == \
        ["chat" if k == "model" else "execute_tool" for k, _ in steps]
    assert [s["attributes"]["gen_ai.tool.name"] for s in children if s["name"].startswith("execute_tool")] == \
        [t for k, t in steps if k == "tool"]
    assert all(s["trace_id"] == trace for s in children)
    assert agent["attributes"]["desk.run.stop_reason"] == "answered"
    # No content: capture is off.
    dumped = json.dumps(spans)
    assert "gen_ai.tool.call.arguments" not in dumped and "maya@example.com" not in dumped


def test_the_approval_wait_and_the_resumed_run_join_the_trace_of_the_run(demo, worker, web, receiver, staff,
                                                                          traced_here):
    worker(**otel_env(receiver, "desk-worker"))
    status, body = post(web + "/api/conversations", {
        "email": "maya@example.com", "order_number": "SU-41310", "message": {"text": "My parcel SU-41310 never came."}})
    assert status == 201, body
    run = wait_run(Run.objects.get(public_id=body["run"]["id"]), Run.AWAITING_APPROVAL)
    trace = tracing.trace_id_of(run.trace_parent)
    assert trace
    approval = Approval.objects.get(run=run)
    gate.approval_decide(approval=approval, user=staff, approve=True)
    [wait] = [s for s in traced_here.get_finished_spans() if s.name == "approval_wait issue_refund"]
    assert f"{wait.context.trace_id:032x}" == trace and wait.attributes["desk.approval.decision"] == "approved"
    run = wait_run(run, Run.STOPPED)
    assert run.stop_reason == "answered"

    spans = receiver.wait_for(lambda ss: sum(s["name"].startswith("invoke_agent") for s in ss) >= 2
                              and any(s["name"] == "execute_tool issue_refund" for s in ss))
    agents = sorted((s for s in spans if s["name"].startswith("invoke_agent")), key=lambda s: s["start"])
    assert [a["trace_id"] for a in agents] == [trace, trace]
    assert agents[1]["attributes"]["desk.run.resumed"] is True and agents[1]["parent_id"] == agents[0]["span_id"]
    assert agents[1]["links"], "the resumed run links to the task span of the decision that resumed it"
    [refund] = [s for s in spans if s["name"] == "execute_tool issue_refund"]
    assert refund["trace_id"] == trace and refund["attributes"]["desk.tool.gated"] is True
    assert wait.start_time < refund["start"]
    assert Conversation.objects.get(pk=run.conversation_id).status != Conversation.NEEDS_ATTENTION
