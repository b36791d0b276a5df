"""OpenTelemetry spans of the desk's own (support/ops/tracing.py), read with the SDK's in-memory exporter: a run,
its model and tool calls in order with the GenAI attributes, the approval wait and the resumed run in the same
trace, no content unless content capture is on (and e-mail addresses never), the trace id in log lines and in
the run's JSON; and with tracing off, no span, no SDK loaded, nothing saved.
"""

import json
import logging
import subprocess
import sys

from types import SimpleNamespace

import pytest
from django.test import Client

from support.desk import gate, runner, serializers, services
from support.models import Approval, Run
from support.ops import tracing
from support.ops.log_context import JsonFormatter, PlainFormatter
from tests.otlp_fixture import traced_here  # noqa: F401  (fixture)
from tests.standin_fixture import standin  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def spans(traced_here):  # noqa: F811
    return traced_here


def ask(customer, text, queued):
    conversation = services.conversation_start(customer=customer)
    services.conversation_post_message(conversation=conversation, text=text)
    return conversation, queued.pop()


def named(exporter, prefix):
    return [s for s in exporter.get_finished_spans() if s.name.startswith(prefix)]


def test_a_run_is_one_invoke_agent_span_with_its_model_and_tool_calls_as_children_in_order(desk, queued, spans):
    conversation, run_id = ask(desk.maya, "Tracking says delivered but nothing arrived. Order SU-41207", queued)
    assert runner.run_execute(run_id) == "answered"
    run = Run.objects.get(pk=run_id)
    [agent] = named(spans, "invoke_agent")
    assert agent.name == "invoke_agent sundry-support"
    a = agent.attributes
    assert a["gen_ai.operation.name"] == "invoke_agent" and a["gen_ai.agent.name"] == "sundry-support"
    assert a["desk.run.id"] == str(run.public_id) and a["gen_ai.conversation.id"] == str(conversation.public_id)
    assert (a["desk.run.status"], a["desk.run.stop_reason"]) == ("stopped", "answered")
    assert a["gen_ai.usage.input_tokens"] == run.prompt_tokens and a["desk.run.model_calls"] == run.turns
    # Saved on the run: its trace id is the span's.
    assert tracing.trace_id_of(run.trace_parent) == f"{agent.context.trace_id:032x}"

    children = sorted([s for s in spans.get_finished_spans() if s.parent is not None
                       and s.parent.span_id == agent.context.span_id], key=lambda s: s.start_time)
    kinds = [s.attributes["gen_ai.operation.name"] for s in children]
    steps = list(run.steps.order_by("id").values_list("kind", "tool"))
    assert kinds == ["chat" if k == "model" else "execute_tool" for k, _ in steps]
    assert all(s.context.trace_id == agent.context.trace_id for s in children)
    chat = children[0].attributes
    assert children[0].name.startswith("chat ") and chat["gen_ai.provider.name"] == "openai"
    assert chat["gen_ai.usage.input_tokens"] > 0 and chat["gen_ai.usage.output_tokens"] > 0
    assert chat["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert chat["desk.model.retries"] == 0 and chat["desk.cost_usd"] > 0
    # The answer streamed text: its first chunk is timed (a reply of tool calls alone streams no text).
    answer = [s for s in children if s.attributes.get("gen_ai.response.finish_reasons") == ("stop",)]
    assert answer and 0 <= answer[-1].attributes["gen_ai.response.time_to_first_chunk"] \
        <= (answer[-1].end_time - answer[-1].start_time) / 1e9
    tools = [s for s in children if s.attributes["gen_ai.operation.name"] == "execute_tool"]
    assert [s.attributes["gen_ai.tool.name"] for s in tools] == [t for k, t in steps if k == "tool"]
    assert tools[0].name == f"execute_tool {tools[0].attributes['gen_ai.tool.name']}"
    assert all(s.attributes["desk.tool.status"] == "ok" and s.attributes["desk.tool.gated"] is False for s in tools)
    assert all(s.attributes["gen_ai.tool.call.id"] for s in tools)
    assert all(s.start_time <= s.end_time for s in children)


def test_no_content_in_spans_unless_capture_is_on(desk, queued, spans, settings):
    _, run_id = ask(desk.maya, "Tracking says delivered but nothing arrived. Order SU-41207", queued)
    runner.run_execute(run_id)
    everything = json.dumps([dict(s.attributes) for s in spans.get_finished_spans()])
    assert "gen_ai.tool.call.arguments" not in everything and "gen_ai.output.messages" not in everything
    assert "SU-41207" not in everything and "maya@example.com" not in everything

    spans.clear()
    settings.TRACE_CONTENT = True
    settings.TRACE_CONTENT_MAX_CHARS = 60
    _, run_id = ask(desk.maya, "Where is SU-41210? Write to me at maya.private@example.org", queued)
    runner.run_execute(run_id)
    tools = named(spans, "execute_tool")
    assert any("SU-41210" in s.attributes["gen_ai.tool.call.arguments"] for s in tools)
    results = [s.attributes["gen_ai.tool.call.result"] for s in tools]
    assert all(len(r) <= 60 for r in results) and any(r.endswith("…") for r in results)
    everything = json.dumps([dict(s.attributes) for s in spans.get_finished_spans()])
    assert "@example" not in everything  # e-mail addresses are masked even with capture on
    assert "You are" not in everything  # the system prompt is never put in a span
    assert tracing.content("write to sam@shop.example now") == "write to [e-mail] now"


def test_with_content_capture_off_a_failed_steps_status_names_only_the_errors_type(spans, settings):
    settings.TRACE_CONTENT = False
    observer = SimpleNamespace(run=SimpleNamespace(trace_parent=""))
    message = "no order SU-41207 for maya@example.com, who wrote 'my neighbour took it'"
    for kind, error in (("tool", f"LookupError: {message}"), ("model", f"unavailable: {message}"),
                        ("tool", message)):
        step = SimpleNamespace(kind=kind, tool="lookup_order", call_id="call_1", turn=1, duration_ms=3.0, error=error,
                               result="", arguments={}, model="m", prompt_tokens=1, completion_tokens=1,
                               cached_tokens=0, finish_reason="", attempts=1, cost_usd=0, step=None)
        tracing.step_recorded(observer, step)
    statuses = [s.status.description for s in spans.get_finished_spans()]
    assert statuses == ["LookupError", "unavailable", "tool_error"]
    settings.TRACE_CONTENT = True
    tracing.step_recorded(observer, step)
    assert "SU-41207" in spans.get_finished_spans()[-1].status.description  # the operator chose to see content


@pytest.fixture
def http_spans(spans):
    """Django's own request spans, to memory, for the test's client; uninstrumented after."""
    from opentelemetry.instrumentation.django import DjangoInstrumentor

    tracing.instrument_django(tracing._provider)
    yield spans
    DjangoInstrumentor().uninstrument()


def test_link_unsubscribe_file_and_decide_tokens_are_redacted_from_the_http_spans_urls(http_spans):
    token = "tok-7Qx9-secret"
    client = Client()
    for path in ("/c/{t}/", "/c/unsubscribe/{t}/?x=1", "/api/files/{t}", "/console/decide/{t}/"):
        client.get(path.format(t=token))
    server = [s for s in http_spans.get_finished_spans() if s.kind.name == "SERVER"]
    assert len(server) == 4
    everything = json.dumps([{**dict(s.attributes), "name": s.name} for s in server])
    assert token not in everything and "[redacted]" in everything


def test_the_approval_wait_and_the_resumed_run_join_the_run_s_trace(desk, queued, spans, django_user_model):
    conversation, run_id = ask(desk.maya, "My parcel SU-41310 never came.", queued)
    assert runner.run_execute(run_id) == "awaiting_approval"
    [first] = named(spans, "invoke_agent")
    assert first.attributes["desk.run.status"] == "awaiting_approval"
    assert [e.name for e in first.events] == ["approval requested"]
    gated = [s for s in named(spans, "execute_tool") if s.attributes["gen_ai.tool.name"] == "issue_refund"]
    assert not gated  # nothing ran yet: the call waits

    sam = django_user_model.objects.create_user("sam", password="pw", is_staff=True)
    approval = Approval.objects.get(run_id=run_id)
    gate.approval_decide(approval=approval, user=sam, approve=True)
    [wait] = named(spans, "approval_wait")
    assert wait.name == "approval_wait issue_refund"
    assert wait.context.trace_id == first.context.trace_id and wait.parent.span_id == first.context.span_id
    assert (wait.attributes["desk.approval.decision"], wait.attributes["desk.approval.decided_by"]) == ("approved", "sam")
    approval.refresh_from_db()
    assert wait.start_time == tracing._ns(approval.requested_at) and wait.end_time == tracing._ns(approval.decided_at)

    assert runner.run_execute(queued.pop()) == "answered"
    agents = named(spans, "invoke_agent")
    assert len(agents) == 2
    resumed = agents[1]
    assert resumed.context.trace_id == first.context.trace_id and resumed.attributes["desk.run.resumed"] is True
    refund = [s for s in named(spans, "execute_tool") if s.attributes["gen_ai.tool.name"] == "issue_refund"]
    assert len(refund) == 1 and refund[0].attributes["desk.tool.gated"] is True
    assert refund[0].parent.span_id == first.context.span_id  # under the run's first span, in the same trace


def test_log_lines_and_the_run_json_carry_the_trace_id(desk, queued, spans, settings):
    settings.TRACE_URL = "http://traces.example:16686/trace/{trace_id}"
    _, run_id = ask(desk.maya, "Where is SU-41210?", queued)
    runner.run_execute(run_id)
    run = Run.objects.get(pk=run_id)
    body = serializers.run_json(run)
    [agent] = named(spans, "invoke_agent")
    assert body["trace_id"] == f"{agent.context.trace_id:032x}"
    assert body["trace_url"] == f"http://traces.example:16686/trace/{body['trace_id']}"

    # A line written while a run is worked names the run's trace and span.
    record = logging.LogRecord("support.desk.runner", logging.WARNING, __file__, 1, "tool failed", None, None)
    with tracing.run_span(run):
        line = json.loads(JsonFormatter().format(record))
        plain = PlainFormatter().format(record)
    resumed = named(spans, "invoke_agent")[-1]
    assert line["trace_id"] == body["trace_id"] == f"{resumed.context.trace_id:032x}"
    assert line["span_id"] == f"{resumed.context.span_id:016x}"
    assert f"trace_id={body['trace_id']}" in plain
    # Outside any span: no ids.
    assert "trace_id" not in json.loads(JsonFormatter().format(record))


def test_with_tracing_off_there_are_no_spans_and_nothing_is_saved(desk, queued):
    assert not tracing.enabled()
    _, run_id = ask(desk.maya, "Where is SU-41210?", queued)
    assert runner.run_execute(run_id) == "answered"
    run = Run.objects.get(pk=run_id)
    assert run.trace_parent == "" and serializers.run_json(run)["trace_id"] is None
    assert tracing.current_ids() == {}


def test_a_process_with_tracing_off_loads_no_sdk():
    # (redis-py imports opentelemetry.sdk.metrics on its own when the SDK is installed: not ours to switch.)
    code = ("import django, os, sys; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'agentsite.settings');"
            "[os.environ.pop(k, None) for k in ('OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT')];"
            "django.setup(); import support.desk.runner, support.web.views.console;"
            "print(sorted(m for m in sys.modules if m.startswith(('opentelemetry.sdk.trace', 'opentelemetry.exporter',"
            " 'opentelemetry.instrumentation'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_with_an_endpoint_the_process_turns_tracing_on_with_the_instrumentations(tmp_path):
    code = ("import django, os, sys; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'agentsite.settings');"
            "django.setup(); from support.ops import tracing; from django.conf import settings;"
            "print(tracing.enabled(), 'opentelemetry.instrumentation.django' in sys.modules,"
            " 'opentelemetry.instrumentation.celery' in sys.modules, tracing._service_name())")
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_SERVICE_NAME": "desk-test",
           "PATH": "/usr/bin:/bin", "VAR_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env,
                         cwd=str(__import__("pathlib").Path(__file__).resolve().parents[1]))
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True", "True", "True", "desk-test"]
