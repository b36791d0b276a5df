"""The copilot's reads and JSON shapes: a run as the console reads it (docs/copilot.md), a conversation's runs for
one person, and the latest summary, which anyone who opens the conversation later (or its hand-over) reads."""

from __future__ import annotations

import json

from support.agent import types as agent
from support.customers.words import staff_name
from support.models import Conversation, CopilotRun

RECENT_RUNS = 20
RESULT_CHARS = 500


def _ts(moment) -> str | None:
    return moment.isoformat().replace("+00:00", "Z") if moment else None


def _arguments(raw: str):
    try:
        return json.loads(raw or "{}")
    except ValueError:
        return raw


def step_json(step: agent.Step) -> dict:
    """One step of a run's trace, as kept on its row: a model call with its tokens and cost, or a tool's read."""
    return {"kind": step.kind, "tool": step.tool, "arguments": _arguments(step.arguments) if step.tool else None,
            "result": step.result[:RESULT_CHARS], "error": step.error, "duration_ms": step.duration_ms,
            "model": step.model, "prompt_tokens": step.prompt_tokens, "completion_tokens": step.completion_tokens,
            "cached_tokens": step.cached_tokens, "cost_usd": step.cost_usd}


def run_json(run: CopilotRun, *, last_seq: int | None = None) -> dict:
    """`last_seq`: the conversation's, for whether a summary is stale (read from the run's conversation when
    not given)."""
    user = run.requested_by
    duration = (run.finished_at - run.started_at).total_seconds() * 1000 if run.finished_at and run.started_at \
        else None
    last_seq = run.conversation.last_seq if last_seq is None else last_seq
    return {
        "id": str(run.public_id), "kind": run.kind, "status": run.status, "question": run.question,
        "text": run.text, "sources": run.sources, "suggestion": run.suggestion, "error": run.error or None,
        "requested_by": {"username": user.get_username(), "name": staff_name(user)} if user else None,
        "created_at": _ts(run.created_at), "finished_at": _ts(run.finished_at),
        "duration_ms": round(duration) if duration is not None else None,
        "prompt_tokens": run.prompt_tokens, "completion_tokens": run.completion_tokens,
        "cached_tokens": run.cached_tokens, "cost_usd": f"{run.cost_usd:.6f}",
        "steps": [s for s in run.trace if s.get("kind") == "tool"],
        "trace": run.trace,
        "stale": run.kind == CopilotRun.SUMMARY and last_seq > run.read_to_seq,
        "sent": None if run.sent_message_id is None else {
            "edit_distance": run.edit_distance, "unchanged": run.sent_unchanged},
    }


def latest_summary(conversation: Conversation) -> CopilotRun | None:
    """The latest finished summary of the conversation, whoever asked for it."""
    return CopilotRun.objects.filter(conversation=conversation, kind=CopilotRun.SUMMARY, status=CopilotRun.DONE) \
        .select_related("requested_by").order_by("-finished_at", "-pk").first()


def summary_json(conversation: Conversation) -> dict | None:
    summary = latest_summary(conversation)
    return run_json(summary, last_seq=conversation.last_seq) if summary else None


def copilot_view(*, conversation: Conversation, user) -> dict:
    """This person's recent runs of the conversation, newest first, and its latest summary by anyone."""
    runs = CopilotRun.objects.filter(conversation=conversation, requested_by=user).select_related(
        "requested_by").order_by("-created_at", "-pk")[:RECENT_RUNS]
    return {"summary": summary_json(conversation),
            "runs": [run_json(r, last_seq=conversation.last_seq) for r in runs]}
