"""`manage.py ask`: work one ticket synchronously and print the transcript and the trace."""

from __future__ import annotations

import json
import textwrap
import uuid

from django.core.management.base import BaseCommand, CommandError

from support.agent.loop import run_loop
from support.agent.tools import ToolContext
from support.agent.types import AWAITING_APPROVAL, Decision, Observer, Step
from support.desk import assistant
from support.models import Customer


class TraceRecorder(Observer):
    def __init__(self, out):
        self.out, self.steps = out, []

    def message(self, m):
        role = m["role"]
        if role == "assistant":
            if m.get("content"):
                self.out(f"\n  agent › {m['content']}")
            for c in m.get("tool_calls") or []:
                self.out(f"  agent › calls {c['function']['name']}({c['function']['arguments']})")
        elif role == "tool":
            self.out(f"  tool  › {_clip(m['content'], 160)}")

    def step(self, s: Step):
        self.steps.append(s)


def _clip(text, n):
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def trace_table(steps: list[Step]) -> str:
    rows = [("turn", "tool", "arguments", "result", "ms", "tokens", "cost $", "finish")]
    for s in steps:
        if s.kind == "model":
            rows.append((str(s.turn), "(model)", "", _clip(s.error, 40) if s.error else "",
                         f"{s.duration_ms:.0f}", f"{s.prompt_tokens}+{s.completion_tokens}", f"{s.cost_usd:.5f}",
                         s.finish_reason or "-"))
        else:
            rows.append((str(s.turn), s.tool, _clip(s.arguments, 38), _clip(s.error or s.result, 48),
                         f"{s.duration_ms:.0f}", "", "", ""))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


class Command(BaseCommand):
    help = "Run the support agent on one customer message and print the transcript and the trace."

    def add_arguments(self, parser):
        parser.add_argument("message", help="what the customer writes")
        parser.add_argument("--customer", default="maya@example.com", help="the customer's e-mail")
        decide = parser.add_mutually_exclusive_group()
        decide.add_argument("--approve", action="store_true", help="approve every gated call and go on")
        decide.add_argument("--reject", metavar="REASON", help="reject every gated call with this reason")

    def handle(self, *args, message, customer, approve, reject, **opts):
        found = Customer.objects.filter(email__iexact=customer).first()
        if found is None:
            raise CommandError(f"No customer {customer!r}. Run `python manage.py seed_demo` for the demo data.")
        out = self.stdout.write
        out(f"customer › {message}")
        transcript = assistant.new_transcript(message)
        recorder = TraceRecorder(out)
        ctx = ToolContext(customer_id=found.pk, run_id=f"ask-{uuid.uuid4()}")
        kwargs = dict(model=assistant.model(), tools=assistant.tools(), ctx=ctx,
                      limits=assistant.limits(), observer=recorder)
        result = run_loop(transcript, **kwargs)
        while result.status == AWAITING_APPROVAL:
            for p in result.pending:
                out(f"\n  ⏸ awaiting approval: {p.call.name}({json.dumps(p.arguments)})")
            if not (approve or reject):
                break
            verdict = Decision(approved=True) if approve else Decision(approved=False, reason=reject)
            out(f"  ▶ {'approved' if approve else 'rejected: ' + reject} by the operator")
            result = run_loop(transcript, spent=result.spent, decisions={p.call.id: verdict for p in result.pending},
                              **kwargs)

        out("\nTrace")
        out(trace_table(recorder.steps))
        s = result.spent
        out(f"\nstatus: {result.status}   stop reason: {result.stop_reason or '-'}   outcome: {result.outcome or '-'}")
        out(f"model calls: {s.turns}   tokens: {s.prompt_tokens} in + {s.completion_tokens} out   "
            f"cost: ${s.cost_usd:.5f}")
        if result.summary:
            out("\nFor a person:\n" + textwrap.indent(result.summary, "  "))
