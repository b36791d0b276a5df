"""The copilot's use-cases: a run asked for (copilot_start), worked by a worker (copilot_execute), a draft that
became a staff reply (draft_used), and runs whose worker died failed by the beat (copilot_sweep).

A run reads and never writes to the conversation: it appends no message, sends nothing to the customer's group
(its text streams to the staff's group only) and offers no tool that writes, is gated or waits for a person."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal
from functools import partial

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from rapidfuzz.distance import Levenshtein

from support import profiles
from support.agent import types as agent
from support.agent.loop import run_loop
from support.agent.tools import ToolContext
from support.copilot import prompts, reads, tools
from support.customers import attachments
from support.customers.identity import parse_uuid
from support.customers.words import staff_name
from support.desk import assistant, queue, runner
from support.live import events
from support.models import Conversation, CopilotRun, Message
from support.ops import limits

log = logging.getLogger(__name__)

QUESTION_CHARS = 500
STALE_AFTER = timedelta(minutes=10)  # a run still queued or running this long has lost its worker
KINDS = dict(CopilotRun.KINDS)
WITH_A_PERSON = (CopilotRun.DRAFT, CopilotRun.SUGGEST)  # kinds only for a conversation a person has


class CopilotRefused(Exception):
    """A copilot request refused, in plain words; `status` as an HTTP answer gives it."""

    def __init__(self, message: str, *, status: int = 400, retry_after: int | None = None):
        super().__init__(message)
        self.status, self.retry_after = status, retry_after


def copilot_start(*, conversation: Conversation, user, kind: str, question: str = "") -> CopilotRun:
    """Queue a copilot run for a member of staff, or CopilotRefused: the copilot off (403), not staff (403), an
    unknown kind or a question empty or too long (400), a draft or suggestion for a conversation no person has
    (409), over the person's hourly number (429). Only a run that is queued is counted."""
    if not settings.COPILOT_ENABLED:
        raise CopilotRefused("The copilot is turned off on this desk (COPILOT_ENABLED).", status=403)
    if not (user.is_authenticated and user.is_active and user.is_staff):
        raise CopilotRefused("Only staff may use the copilot.", status=403)
    if kind not in KINDS:
        raise CopilotRefused(f"kind must be one of: {', '.join(KINDS)}.")
    if not isinstance(question, (str, type(None))):
        raise CopilotRefused("question must be text.")
    question = (question or "").strip()
    if kind == CopilotRun.ASK and not question:
        raise CopilotRefused("Write a question for the copilot.")
    if len(question) > QUESTION_CHARS:
        raise CopilotRefused(f"A question may be at most {QUESTION_CHARS} characters; this one has {len(question)}.")
    if kind in WITH_A_PERSON and conversation.status != Conversation.TAKEN_OVER:
        raise CopilotRefused(f"A {kind} is for a conversation a person has: take the conversation over first.",
                             status=409)
    try:
        limits.hit_or_count_here("copilot runs", limits.copilot_runs_of(user.pk))
    except limits.Limited as over:
        raise CopilotRefused(f"You have asked the copilot {settings.COPILOT_PER_PERSON_PER_HOUR} times this hour, "
                             f"the most there may be; try again in {over.retry_after} s.", status=429,
                             retry_after=over.retry_after) from None
    with transaction.atomic():
        run = CopilotRun.objects.create(conversation=conversation, requested_by=user, kind=kind,
                                        question=question if kind == CopilotRun.ASK else "",
                                        read_to_seq=conversation.last_seq)
        transaction.on_commit(partial(queue.run_copilot, run.pk))
    return run


class _Observer(agent.Observer):
    """The loop's hooks for a copilot run: nothing is saved as it goes (no message, no trace row of the
    conversation's); the text streams to the staff's group, the steps are kept for the run's row."""

    def __init__(self, run: CopilotRun):
        self.run, self.trace = run, []
        self.group = events.staff_conversation_group(run.conversation.public_id)

    def _send(self, text: str) -> None:
        events.publisher.send([self.group], {
            "type": "copilot.delta", "conversation": str(self.run.conversation.public_id),
            "copilot": str(self.run.public_id), "kind": self.run.kind, "text": text})

    def token(self, delta: str) -> None:
        self._send(delta)

    def tokens_reset(self) -> None:
        self._send("")  # start again: the reply is being asked for once more

    def step_started(self, step: agent.Step) -> None:
        if step.kind == "model" and step.turn > 1:
            self._send("")  # each model call's words replace the last one's

    def step(self, step: agent.Step) -> None:
        self.trace.append(reads.step_json(step))

    def parallel(self, thunks: list) -> list:
        return [_outcome(thunk) for thunk in thunks]  # one by one, on this thread's database connection


def _outcome(thunk):
    try:
        return thunk()
    except BaseException as e:  # handed back as the value: the loop raises it in order
        return e


def copilot_execute(run_id: int) -> str:
    """Claim the queued run and work it to done or failed; never leaves it running (the sweep is for a worker
    that died). Returns what happened, for logs."""
    if not CopilotRun.objects.filter(pk=run_id, status=CopilotRun.QUEUED).update(
            status=CopilotRun.RUNNING, started_at=timezone.now()):
        return "not claimed"
    run = CopilotRun.objects.select_related("conversation", "requested_by").get(pk=run_id)
    observer, found = _Observer(run), tools.Reads()
    try:
        with profiles.read_once():
            result = _work(run, observer, found)
        error = "" if result.stop_reason == agent.ANSWERED else failure_words(result)
    except Exception as e:  # our own failure: the run ends failed, with words a person can act on
        log.exception("copilot run %s failed unexpectedly", run.public_id)
        result, error = None, f"The copilot failed unexpectedly ({type(e).__name__}); try again."
    return _finish(run, observer, found, result, error)


def _work(run: CopilotRun, observer: _Observer, found: tools.Reads) -> agent.RunResult:
    problem = assistant.model_price_problem()
    if problem:
        return agent.RunResult(status=agent.STOPPED, stop_reason=agent.MODEL_ERROR, detail=problem)
    conversation = run.conversation
    profile = profiles.live()
    messages = attachments.messages_with_files(conversation)
    history, held = runner.history_for_model(messages, notes=True)
    history = assistant.with_profile([*history, *held], conversation, profile)
    person = staff_name(run.requested_by) if run.requested_by_id else "a colleague"
    note, _ = assistant.run_context(conversation)  # the time now (the customer's too) and the orders known
    transcript = agent.Transcript(prompts.transcript_messages(run, conversation, profile, history, person),
                                  context=note, cache_key=assistant.cache_key(conversation))
    return run_loop(
        transcript, model=assistant.shared_model(), tools=tools.for_run(run.kind, profile, found),
        ctx=ToolContext(customer_id=conversation.customer_id, conversation_id=str(conversation.public_id),
                        run_id=f"copilot-{run.public_id}"),
        limits=run_limits(profile), observer=observer, outcome_tool=False)


def run_limits(profile: profiles.Profile) -> agent.Limits:
    """The agent's limits, with the copilot's few model calls and cost cap, and no day budget (staff asked)."""
    return replace(assistant.limits(profile), max_steps=settings.COPILOT_MAX_STEPS,
                   max_cost_usd=settings.COPILOT_MAX_COST_USD, max_waiting=0, day_max_steps=0, day_max_tokens=0,
                   day_max_cost_usd=0.0)


FAILURES = {
    agent.TURN_LIMIT: "The copilot used its model calls without finishing ({detail}); ask again or work it by hand.",
    agent.OVER_BUDGET: "The copilot reached its limit ({detail}).",
    agent.SPINNING: "The copilot kept repeating the same look-up and was stopped.",
    agent.TOOL_UNAVAILABLE: "The shop could not be reached ({detail}).",
    agent.MODEL_ERROR: "The model could not answer ({detail}).",
    agent.EMPTY_REPLY: "The model answered with nothing.",
    agent.QUOTA_EXCEEDED: "The model's account has no quota left ({detail}).",
}


def failure_words(result: agent.RunResult) -> str:
    if result.status == agent.AWAITING_APPROVAL:  # never offered such a tool; nothing ran
        return "The copilot asked for an action that needs an approval, which it may not; nothing was done."
    words = FAILURES.get(result.stop_reason, "The copilot stopped ({detail}).")
    return words.format(detail=(result.detail or result.stop_reason or "")[:300])


def _finish(run: CopilotRun, observer: _Observer, found: tools.Reads, result: agent.RunResult | None,
            error: str) -> str:
    spent = result.spent if result is not None else agent.Spent()
    model_steps = [s for s in observer.trace if s["kind"] == "model"]
    fields = dict(
        status=CopilotRun.FAILED if error else CopilotRun.DONE, error=error, finished_at=timezone.now(),
        text="" if error else (result.answer or "").strip(), sources=found.sources, suggestion=found.suggestion,
        trace=observer.trace, prompt_tokens=spent.prompt_tokens, completion_tokens=spent.completion_tokens,
        cached_tokens=sum(s["cached_tokens"] for s in model_steps),
        cost_usd=Decimal(str(round(spent.cost_usd, 6))),
        model=next((s["model"] for s in reversed(model_steps) if s["model"]), "")[:120])
    with transaction.atomic():
        if not CopilotRun.objects.filter(pk=run.pk, status=CopilotRun.RUNNING).update(**fields):
            return "swept"  # the sweep failed it meanwhile: its words stand
        transaction.on_commit(partial(_publish_done, run.pk))
    return fields["status"]


def _publish_done(run_id: int) -> None:
    run = CopilotRun.objects.select_related("conversation", "requested_by").get(pk=run_id)
    events.publisher.send([events.staff_conversation_group(run.conversation.public_id)], {
        "type": "copilot.done", "conversation": str(run.conversation.public_id), "copilot": reads.run_json(run)})


def copilot_sweep() -> int:
    """The beat: runs queued or running for STALE_AFTER lost their worker; each is failed once, with why."""
    now = timezone.now()
    stale = list(CopilotRun.objects.filter(status__in=(CopilotRun.QUEUED, CopilotRun.RUNNING),
                                           created_at__lt=now - STALE_AFTER).values_list("pk", flat=True))
    failed = 0
    for pk in stale:
        failed += CopilotRun.objects.filter(pk=pk, status__in=(CopilotRun.QUEUED, CopilotRun.RUNNING)).update(
            status=CopilotRun.FAILED, finished_at=now,
            error=f"The copilot did not finish within {int(STALE_AFTER.total_seconds() // 60)} minutes; ask again.")
        transaction.on_commit(partial(_publish_done, pk))
    return failed


# -- a draft sent ------------------------------------------------------------------------------------------

def draft_for_reply(*, conversation: Conversation, user, draft) -> CopilotRun:
    """The draft a staff reply says it was written from, checked before the reply is saved: this person's, this
    conversation's, finished and not sent before; else CopilotRefused."""
    wanted = parse_uuid(draft) if isinstance(draft, str) else None
    run = CopilotRun.objects.filter(public_id=wanted, kind=CopilotRun.DRAFT).first() if wanted else None
    if run is None or run.conversation_id != conversation.pk:
        raise CopilotRefused("draft names no copilot draft of this conversation.")
    if run.requested_by_id != user.pk:
        raise CopilotRefused("That draft was asked for by someone else; ask the copilot for your own.", status=403)
    if run.status != CopilotRun.DONE:
        raise CopilotRefused("That draft is not finished.", status=409)
    if run.sent_message_id is not None:
        raise CopilotRefused("That draft was sent already.", status=409)
    return run


def draft_used(*, run: CopilotRun, message: Message) -> CopilotRun:
    """Record the reply a draft became: the characters changed (Levenshtein) and whether none were. Once."""
    distance = Levenshtein.distance(run.text.strip(), (message.content or "").strip())
    CopilotRun.objects.filter(pk=run.pk, sent_message=None).update(
        sent_message=message, edit_distance=distance, sent_unchanged=distance == 0)
    run.refresh_from_db()
    return run
