"""OpenTelemetry traces of the desk's work: a customer's request, the Celery task it sends, the run, each model
call and tool call, the wait for a person's approval and the resumed run, in the operator's trace viewer.

Off unless settings.TRACING (an OTLP endpoint named with the standard OTEL_* variables): then every function
here returns at its first line, and nothing beyond the OpenTelemetry API is imported. On, setup() (called by
SupportConfig.ready in every process) builds the SDK's tracer provider with the OTLP exporter and turns on the
Django and Celery instrumentations, which carry the trace context across the Celery hop.

The spans of our own follow the GenAI semantic conventions as the opentelemetry-semantic-conventions package
pinned in requirements.txt ships them (schema 1.44.0; still marked development there): `invoke_agent` for a
run, `chat` for a model call, `execute_tool` for a tool call; `desk.*` attributes are the desk's own.
Model and tool spans are written when their step is recorded, with the step's measured start and duration,
so the loop (support/agent, which imports nothing of ours) needs no hook of its own.

A run's span context is saved on the run (Run.trace_parent, a W3C traceparent): the wait for an approval and
the run resumed after it join that trace, so one trace tells a run's whole story; the resumed run's span links
to the task span of the decision that resumed it.

Privacy: no message text, tool arguments, results or error messages (a failed step's status names the error's
type) unless TRACE_CONTENT; then truncated and with e-mail addresses masked. Request spans' URLs carry no token
of a link, a file or a decision page (support/ops/redaction.py). The system prompt and the customer's e-mail
address are never put in a span.
"""

from __future__ import annotations

import logging
import re
import time
from contextlib import contextmanager
from datetime import datetime

from django.conf import settings

from support.ops.redaction import redacted_path, redacted_url

log = logging.getLogger(__name__)

SCHEMA_URL = "https://opentelemetry.io/schemas/1.44.0"
AGENT_NAME = "sundry-support"
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(\.[\w-]+)+")

_provider = None  # the SDK's TracerProvider once setup() ran with tracing on
_tracer = None


def enabled() -> bool:
    return _tracer is not None


def setup(*, exporter=None, instrument: bool = True) -> None:
    """Tracing on for this process when settings.TRACING (or when a test hands an exporter): the provider, its
    exporter and the Django and Celery instrumentations. Safe to call twice."""
    global _provider, _tracer
    if _tracer is not None or not (settings.TRACING or exporter is not None):
        return
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": _service_name()}))
    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    else:  # a test's in-memory exporter: each span handed over as it ends
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    if instrument:
        trace.set_tracer_provider(provider)
        from opentelemetry.instrumentation.celery import CeleryInstrumentor

        instrument_django(provider)
        CeleryInstrumentor().instrument(tracer_provider=provider)
    _provider, _tracer = provider, provider.get_tracer("support", schema_url=SCHEMA_URL)
    log.info("tracing on: spans of service %s go to %s", _service_name(),
             "the OTLP endpoint" if exporter is None else type(exporter).__name__)


def instrument_django(provider) -> None:
    """Django's request spans, their URLs without the tokens of links, files and decision pages."""
    from opentelemetry.instrumentation.django import DjangoInstrumentor

    DjangoInstrumentor().instrument(tracer_provider=provider, request_hook=_redact_request_span)


# The attributes of a request span that hold its URL, old and new HTTP conventions alike.
_URL_ATTRIBUTES = {"http.url": redacted_url, "url.full": redacted_url, "http.target": redacted_path,
                   "url.path": redacted_path}


def _redact_request_span(span, request) -> None:
    """Called as the request's span starts, once its URL attributes are set: they are set again, redacted."""
    attributes = getattr(span, "attributes", None) or {}
    for name, redact in _URL_ATTRIBUTES.items():
        value = attributes.get(name)
        if isinstance(value, str):
            span.set_attribute(name, redact(value))


def shutdown() -> None:
    """Tracing off again (tests): spans still queued are sent first."""
    global _provider, _tracer
    if _provider is not None:
        _provider.shutdown()
    _provider = _tracer = None


def _service_name() -> str:
    return settings.OTEL_SERVICE_NAME.strip() or "sundry-support-desk"


# -- ids for logs and the console ---------------------------------------------------------------------------

def current_ids() -> dict[str, str]:
    """{"trace_id", "span_id"} of the span this thread is in, for log lines; {} when there is none."""
    if _tracer is None:
        return {}
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return {}
    return {"trace_id": f"{context.trace_id:032x}", "span_id": f"{context.span_id:016x}"}


def trace_id_of(traceparent: str) -> str:
    """The trace id in a W3C traceparent ("00-<trace id>-<span id>-01"), or ""."""
    parts = (traceparent or "").split("-")
    return parts[1] if len(parts) == 4 and len(parts[1]) == 32 else ""


def trace_url(trace_id: str) -> str:
    """The operator's trace viewer for `trace_id` (settings.TRACE_URL), or ""."""
    return settings.TRACE_URL.replace("{trace_id}", trace_id) if trace_id and settings.TRACE_URL else ""


def _traceparent(span) -> str:
    c = span.get_span_context()
    return f"00-{c.trace_id:032x}-{c.span_id:016x}-{c.trace_flags:02x}"


def _context_of(traceparent: str):
    """The span context a saved traceparent names, as a parent context; None when there is none."""
    if not traceparent:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator().extract({"traceparent": traceparent})


# -- a run ----------------------------------------------------------------------------------------------------

@contextmanager
def run_span(run):
    """Around a worker's work on `run` (runner.run_execute): the `invoke_agent` span. The first time, a child
    of the Celery task's span (so of the request that queued it) and saved on the run; when the run resumes
    (after an approval, or on another worker), a child of that first span, linked to this task's span."""
    if _tracer is None:
        yield None
        return
    from opentelemetry import trace
    from opentelemetry.trace import Link, SpanKind

    saved = run.trace_parent
    links = []
    parent = None
    if saved:
        here = trace.get_current_span().get_span_context()
        if here.is_valid:
            links.append(Link(here, {"desk.link": "resumed by"}))
        parent = _context_of(saved)
    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": AGENT_NAME,
                  "gen_ai.provider.name": "openai", "gen_ai.request.model": settings.MODEL_NAME,
                  "gen_ai.conversation.id": str(run.conversation.public_id), "desk.run.id": str(run.public_id),
                  "desk.run.attempt": int(run.attempts or 0), "desk.run.resumed": bool(saved),
                  "desk.profile.version": run.profile_version.number if run.profile_version_id else 0}
    with _tracer.start_as_current_span(f"invoke_agent {AGENT_NAME}", context=parent, kind=SpanKind.INTERNAL,
                                       links=links, attributes=attributes) as span:
        if not saved:
            run.trace_parent = _traceparent(span)
            type(run).objects.filter(pk=run.pk, trace_parent="").update(trace_parent=run.trace_parent)
        yield span
        _run_ended(span, run)


def _run_ended(span, run) -> None:
    row = type(run).objects.filter(pk=run.pk).values(
        "status", "stop_reason", "outcome", "turns", "prompt_tokens", "completion_tokens", "cost_usd").first()
    if row is None:
        return
    span.set_attributes({"desk.run.status": row["status"], "desk.run.stop_reason": row["stop_reason"] or "",
                         "desk.run.outcome": row["outcome"] or "", "desk.run.model_calls": row["turns"],
                         "gen_ai.usage.input_tokens": row["prompt_tokens"],
                         "gen_ai.usage.output_tokens": row["completion_tokens"],
                         "desk.cost_usd": float(row["cost_usd"])})
    if row["status"] == "awaiting_approval":
        span.add_event("approval requested")


# -- model and tool calls, from the steps the observer records --------------------------------------------------

def step_started(observer, step) -> None:
    """A step begins (DbObserver.step_started): its wall-clock start, and for a model call the first token's."""
    if _tracer is None:
        return
    observer._trace_started_ns = time.time_ns()
    observer._trace_first_token_ns = None


def token(observer) -> None:
    if _tracer is None or getattr(observer, "_trace_first_token_ns", 0) is not None:
        return
    observer._trace_first_token_ns = time.time_ns()


def step_recorded(observer, step, *, gated: bool = False, server: str = "desk") -> None:
    """A model or tool step was recorded (DbObserver.step): its span, child of the run's, timed by the step."""
    if _tracer is None or step.kind not in ("model", "tool"):
        return
    from opentelemetry.trace import SpanKind, Status, StatusCode

    end = time.time_ns()
    start = end - int(step.duration_ms * 1_000_000)
    parent = _context_of(observer.run.trace_parent)
    if step.kind == "model":
        name = f"chat {settings.MODEL_NAME}"
        attributes = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                      "gen_ai.request.model": settings.MODEL_NAME, "gen_ai.response.model": step.model or "",
                      "gen_ai.usage.input_tokens": step.prompt_tokens, "gen_ai.usage.output_tokens": step.completion_tokens,
                      "gen_ai.usage.cache_read.input_tokens": step.cached_tokens,
                      "gen_ai.response.finish_reasons": [step.finish_reason or ""], "desk.model.retries": max(step.attempts - 1, 0),
                      "desk.cost_usd": float(step.cost_usd), "desk.step.turn": step.turn}
        first = getattr(observer, "_trace_first_token_ns", None)
        began = getattr(observer, "_trace_started_ns", None)
        if first and began and first >= began:
            attributes["gen_ai.response.time_to_first_chunk"] = (first - began) / 1e9
        if settings.TRACE_CONTENT and step.result:
            attributes["gen_ai.output.messages"] = content(step.result)
        kind = SpanKind.CLIENT
    else:
        name = f"execute_tool {step.tool}"
        status = "rejected" if step.error == "rejected by staff" else ("error" if step.error else "ok")
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": step.tool,
                      "gen_ai.tool.call.id": step.call_id, "gen_ai.tool.type": "extension" if server != "desk" else "function",
                      "desk.tool.gated": gated, "desk.tool.status": status, "desk.tool.server": server,
                      "desk.step.turn": step.turn}
        if settings.TRACE_CONTENT:
            attributes["gen_ai.tool.call.arguments"] = content(step.arguments)
            attributes["gen_ai.tool.call.result"] = content(step.error or step.result)
        kind = SpanKind.INTERNAL
    span = _tracer.start_span(name, context=parent, kind=kind, attributes=attributes, start_time=start)
    if step.error and step.error != "rejected by staff":
        kind = "tool_error" if step.kind == "tool" else "model_error"
        # An error's message may quote the customer or name them: only with content capture on.
        described = step.error[:200] if settings.TRACE_CONTENT else _error_type(step.error, kind)
        span.set_status(Status(StatusCode.ERROR, described))
        span.set_attribute("error.type", kind)
    span.end(end_time=end)


_ERROR_TYPE = re.compile(r"([A-Za-z_][A-Za-z0-9_.]{0,60}):")


def _error_type(error: str, kind: str) -> str:
    """The type an error string starts with ("LookupError: ...", "unavailable: ..."), else the step's kind."""
    found = _ERROR_TYPE.match(error)
    return found.group(1) if found else kind


def content(text) -> str:
    """Text for a span when content capture is on: e-mail addresses masked, cut to TRACE_CONTENT_MAX_CHARS."""
    text = _EMAIL.sub("[e-mail]", str(text or ""))
    limit = settings.TRACE_CONTENT_MAX_CHARS
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- the wait for a person --------------------------------------------------------------------------------------

def approval_decided(approval) -> None:
    """A person decided (gate.approval_decide): the `approval_wait` span, from the request to the decision, in
    the run's trace."""
    if _tracer is None or not approval.decided_at or not approval.requested_at:
        return
    parent = _context_of(approval.run.trace_parent)
    by = approval.decided_by
    attributes = {"gen_ai.tool.name": approval.tool_call.name, "gen_ai.tool.call.id": approval.tool_call.call_id,
                  "desk.approval.decision": approval.decision, "desk.approval.via": approval.decided_via or "",
                  "desk.approval.edited": approval.executed_arguments not in (None, approval.requested_arguments),
                  "desk.approval.decided_by": by.get_username() if by is not None else "the system",
                  "desk.run.id": str(approval.run.public_id)}
    span = _tracer.start_span(f"approval_wait {approval.tool_call.name}", context=parent,
                              attributes=attributes, start_time=_ns(approval.requested_at))
    span.end(end_time=_ns(approval.decided_at))


def _ns(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000_000)
