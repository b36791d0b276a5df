"""The real-model smoke's verdict (`manage.py real_model_smoke`, run by evaluation/real_model_smoke.sh): did the
desk work end to end with a real model server? Judged from the evaluation's report and from a conversation
played over HTTP through the running site, never from the pass rate: a small model may answer badly, the
pipeline must still hold.

What counts as working: every run ended with a defined stop (stopped with one of the desk's stop reasons, or
paused on an approval), no model call failed (the server refused a request, broke a stream or never
answered), nothing of the desk answered 5xx, every customer message was kept, the conversation took a new
message after its first run ended, and the reports were written. Each function returns the problems it
found, in plain words; none means the smoke passed.
"""

from __future__ import annotations

from pathlib import Path

from support.models import Run

DEFINED_STOPS = {reason for reason, _ in Run.STOP_REASONS}
# Defined, but a broken desk, not a weak model: our own code failed, or the worker kept dying.
BROKEN_STOPS = {"internal_error", Run.STALLED}
EXPECTED_STATUS = {"POST /api/conversations": 201, "POST messages": 202, "GET": 200}


def run_problems(where: str, status: str, stop_reason: str | None, model_errors: list[str]) -> list[str]:
    """One run: a defined end, and every model call answered."""
    out = []
    if status == Run.AWAITING_APPROVAL:
        pass
    elif status != Run.STOPPED:
        out.append(f"{where}: the run was left {status or 'without a status'}")
    elif stop_reason not in DEFINED_STOPS:
        out.append(f"{where}: the run stopped without a defined stop reason ({stop_reason!r})")
    elif stop_reason in BROKEN_STOPS:
        out.append(f"{where}: the run stopped as {stop_reason}")
    out += [f"{where}: a model call failed: {error}" for error in model_errors]
    return out


def report_problems(report: dict | None, scenarios: list[str]) -> list[str]:
    """The evaluation's JSON report: each expected scenario played to the end, each of its runs judged."""
    if report is None:
        return ["the evaluation wrote no JSON report"]
    out = []
    played = {s.get("name"): s for s in report.get("scenarios", [])}
    for name in scenarios:
        scenario = played.get(name)
        attempts = [r for r in (scenario or {}).get("runs", []) if not r.get("skipped")]
        if not attempts:
            out.append(f"{name}: not played")
            continue
        for attempt in attempts:
            where = name if len(attempts) == 1 else f"{name} (attempt {attempt.get('attempt')})"
            if attempt.get("error"):
                out.append(f"{where}: the scenario crashed: {attempt['error']}")
            runs = attempt.get("runs") or []
            if not runs:
                out.append(f"{where}: no run was started")
            failed = {}
            for step in attempt.get("trace", []):
                if step.get("kind") == "model" and step.get("error"):
                    failed.setdefault(step.get("run"), []).append(step["error"])
            for run in runs:
                out += run_problems(f"{where}, run {run.get('run')}", run.get("status", ""), run.get("stop_reason"),
                                    failed.get(run.get("run"), []))
    if not report.get("totals", {}).get("model_calls"):
        out.append("the evaluation made no model call: the server was never asked")
    return out


def reports_problems(json_path: Path) -> list[str]:
    """Both reports exist beside each other (the HTML one is what people read)."""
    out = []
    if not json_path.is_file():
        out.append(f"no JSON report at {json_path}")
    if not json_path.with_suffix(".html").is_file():
        out.append(f"no HTML report at {json_path.with_suffix('.html')}")
    return out


def conversation_problems(seen: dict) -> list[str]:
    """A conversation played over HTTP through the running site (daphne and a Celery worker).

    `seen`: "requests" [[method, path, status]], "said" (the customer's texts, in order), "read" (the texts the
    customer's message list returned), "unsettled" (runs still active when the smoke stopped waiting: their
    where) and "runs" (the staff API's runs, each with its steps).
    """
    out = []
    for method, path, status in seen.get("requests", []):
        if status >= 500:
            out.append(f"{method} {path} answered {status}")
            continue
        expected = _expected_status(method, path)
        if status != expected:
            out.append(f"{method} {path} answered {status}, not {expected}")
    read = seen.get("read", [])
    for text in seen.get("said", []):
        if text not in read:
            out.append(f"the customer's message {text!r} is not in the conversation")
    out += [f"{where}: still active when the smoke stopped waiting" for where in seen.get("unsettled", [])]
    runs = seen.get("runs", [])
    if not runs:
        out.append("no run was started for the customer's messages")
    for i, run in enumerate(runs, 1):
        errors = [s["error"] for s in run.get("steps", []) if s.get("kind") == "model" and s.get("error")]
        out += run_problems(f"conversation, run {i}", run.get("status", ""), run.get("stop_reason"), errors)
    return out


def _expected_status(method: str, path: str) -> int:
    if method == "GET":
        return EXPECTED_STATUS["GET"]
    if path.rstrip("/") == "/api/conversations":
        return EXPECTED_STATUS["POST /api/conversations"]
    return EXPECTED_STATUS["POST messages"]
