"""The agent loop: call the model, branch on the finish reason, run the tools it asked for, repeat.

Everything a run does passes through here; persistence, publishing and approval storage belong to the
caller, reached through the Observer hooks and the values this module returns.
"""

from __future__ import annotations

import json
import re
import secrets
import string
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Mapping, Sequence

from .compaction import compact, estimate_tokens
from .summary import handoff_summary
from .tools import Tool, ToolContext, ToolError, ToolUnavailable
from .types import (
    ANSWERED,
    AWAITING_APPROVAL,
    CONVERSATION_BUDGET,
    EMPTY_REPLY,
    ESCALATED,
    HANDED_TO_PERSON,
    MODEL_ERROR,
    OUTCOMES,
    OVER_BUDGET,
    QUOTA_EXCEEDED,
    REJECTED_AGAIN,
    SPINNING,
    STOPPED,
    TOOL_UNAVAILABLE,
    TURN_LIMIT,
    UNSTATED,
    Decision,
    Limits,
    Model,
    ModelError,
    ModelReply,
    Observer,
    PendingCall,
    RunResult,
    Spent,
    Step,
    ToolCall,
    Transcript,
    from_customer,
    parse_arguments,
)

OUTCOME_TOOL = Tool(
    name="record_outcome",
    description=(
        "Record what this conversation turn achieved, just before your final answer to the customer "
        "(in the same reply or the one before it). outcome: 'resolved' when the customer's request is "
        "fully handled; 'waiting_on_customer' when you asked them for something; 'not_resolved' when "
        "you could not help; 'handed_to_person' when a person must take over. summary: one sentence "
        "for the support team."
    ),
    parameters={
        "type": "object",
        "properties": {
            "outcome": {"type": "string", "enum": list(OUTCOMES)},
            "summary": {"type": "string", "maxLength": 500},
        },
        "required": ["outcome", "summary"],
        "additionalProperties": False,
    },
    fn=lambda ctx, outcome, summary: {"recorded": outcome},
    label="Wrapping up",
)

SPIN_WARNING = (
    "ERROR: not run. You already called {name} with the same arguments {count} times{same}. Do not call "
    "it again with the same arguments; try something different or answer the customer with what you know."
)
REJECTED_BEFORE = "ERROR: not run: staff already rejected this action in this conversation"
SPIN_SAME_RESULT = " and it gave the same result each time"
SPIN_WARNING_PREFIX = SPIN_WARNING.split("{name}")[0]

# Stop reasons a failed model call can carry; any other failure is MODEL_ERROR.
MODEL_FAILURES = (EMPTY_REPLY, QUOTA_EXCEEDED)

# Tool-call ids of this form (nine letters and digits) are the only ones some servers' chat templates
# accept; an id we mint in place of a colliding one keeps the form of the one it replaces.
_SHORT_ID = re.compile(r"[A-Za-z0-9]{9}")
MAX_CALL_ID = 128


def needs_approval_by_default(tool: Tool, arguments: dict, call: ToolCall) -> bool:
    return tool.needs_approval(arguments)


@dataclass
class _Run:
    """The working state of one invocation of the loop."""

    transcript: Transcript
    tools: dict[str, Tool]
    ctx: ToolContext
    limits: Limits
    observer: Observer
    spent: Spent
    needs_approval: Callable[[Tool, dict, ToolCall], bool]
    outcome: str | None = None
    outcome_summary: str = ""
    seen: dict[str, int] = field(default_factory=dict)  # calls since the customer last wrote, by key
    warned: set[str] = field(default_factory=set)  # keys whose repeat was answered with the warning
    results: dict[str, set[str]] = field(default_factory=dict)  # what each key's calls returned
    call_ids: set[str] = field(default_factory=set)  # every tool-call id in the history
    rejected: Mapping[str, str] = field(default_factory=dict)  # action fingerprint -> staff's reason
    asked_again: int = 0  # calls refused because their action was rejected, in the whole conversation
    day_before: Spent = field(default_factory=Spent)  # the conversation's other runs, last 24 hours
    prefetched: dict[str, "_Read"] = field(default_factory=dict)  # call id -> a read already made
    compacted: str = ""  # what the last compaction did, so the trace records each change once
    decided: frozenset[str] = frozenset()  # calls a person decided for this run: compaction keeps them
    waiting: int = 0  # the conversation's requests already waiting for a person, this run's open calls apart
    told_person: bool = False  # observer.needs_person was called

    def append(self, message: dict) -> None:
        # Save before acting: the observer persists the message before any tool runs on it.
        self.transcript.append(message)
        self.observer.message(message)

    def result(self, call: ToolCall, content: str) -> None:
        self.append({"role": "tool", "tool_call_id": call.id, "content": content})
        self.results.setdefault(_call_key(call), set()).add(content)


def run_loop(
    transcript: Transcript,
    *,
    model: Model,
    tools: Sequence[Tool],
    ctx: ToolContext,
    limits: Limits = Limits(),
    observer: Observer | None = None,
    spent: Spent | None = None,
    decisions: Mapping[str, Decision] | None = None,
    needs_approval: Callable[[Tool, dict, ToolCall], bool] = needs_approval_by_default,
    rejected: Mapping[str, str] | None = None,
    day_before: Spent | None = None,
    waiting: int = 0,
    outcome_tool: bool = True,
) -> RunResult:
    """Drive one run to a stop or a pause. Never raises for anything the model or a tool does.

    `rejected`: actions staff rejected in this conversation (fingerprint -> reason): asking again is
    refused, and past `limits.asks_after_rejection` stops the run. `day_before`: what the conversation's
    other runs spent in the last 24 hours, for its daily budget. `waiting`: the conversation's requests
    already waiting for a person (the run's own open calls apart), counted against `limits.max_waiting`.
    `outcome_tool`: offer record_outcome (a run that answers no customer, the staff's copilot, has none).
    """
    offered = [*tools, OUTCOME_TOOL] if outcome_tool else list(tools)
    run = _Run(
        transcript=transcript, tools={t.name: t for t in offered}, ctx=ctx, limits=limits,
        observer=observer or Observer(), spent=spent or Spent(), needs_approval=needs_approval,
        rejected=rejected or {}, day_before=day_before or Spent(), decided=frozenset(decisions or {}),
        waiting=waiting,
    )
    _read_history(run)
    started = time.monotonic()

    # Resume: a history that ends in calls without results is answered first (approved calls run,
    # rejected ones return the reason); a crash between a call and its result is repaired the same way.
    paused = _answer_open_calls(run, decisions or {})
    if paused is not None:
        return paused

    while True:
        for message in run.observer.incoming():  # already saved by whoever received it
            run.transcript.append(message)
        # A run resumed after a crash that followed its final answer: that answer stands. Calling the
        # model again would send the customer a second one.
        answer = _final_answer(run.transcript.messages)
        if answer is not None:
            return _answered(run, answer)

        if run.spent.turns >= limits.max_steps:
            return _stop(run, TURN_LIMIT, f"turn limit of {limits.max_steps} model calls reached")
        over = run.spent.over(limits)
        if over:
            return _stop(run, OVER_BUDGET, over)
        over = run.spent.over_day(limits, run.day_before)
        if over:
            return _stop(run, CONVERSATION_BUDGET, over)
        if time.monotonic() - started > limits.max_seconds:
            return _stop(run, OVER_BUDGET, f"wall time of {limits.max_seconds:.0f} s reached")

        run.spent.turns += 1
        step = Step(kind="model", turn=run.spent.turns, label="Thinking")
        run.observer.step_started(step)
        t0 = time.monotonic()
        run.transcript.place_context()  # after what the history holds now: the same place in every later call
        try:
            reply = model.complete(_what_the_model_reads(run), [t.spec() for t in run.tools.values()], run.observer)
        except ModelError as e:
            # Failed attempts the endpoint reported usage for still count against the budget.
            failed = ModelReply(message={}, finish_reason=None, prompt_tokens=e.prompt_tokens,
                                completion_tokens=e.completion_tokens, model=e.model,
                                cached_tokens=e.cached_tokens)
            _spend(run, step, failed, model.cost(failed))
            step.duration_ms, step.error, step.attempts = _ms(t0), str(e), e.attempts
            run.observer.step(step)
            reason = e.code if e.code in MODEL_FAILURES else MODEL_ERROR
            return _stop(run, reason, f"model call failed: {e}")
        _spend(run, step, reply, model.cost(reply))
        step.duration_ms, step.attempts, step.finish_reason = _ms(t0), reply.attempts, reply.finish_reason
        calls = _own_ids(run, reply)
        if not reply.content.strip() and not calls:
            # Nothing to save: an assistant message with neither text nor calls is refused by servers in
            # every later request of the conversation.
            run.observer.step(replace(step, error="empty reply"))
            if reply.finish_reason == "stop":
                return _stop(run, EMPTY_REPLY, "the model replied with neither text nor tool calls")
            return _stop(run, MODEL_ERROR, f"the model stopped with finish reason {reply.finish_reason!r} "
                                           "and no text")
        with run.observer.atomic():  # the trace row and the reply it describes are saved together
            run.observer.step(step)
            run.append(run.transcript.noted(reply.message))  # as the model sent it (ids made unique): a tool
            # result needs its call; with the run's note placed before it, saved with it

        # The one branch, on the finish reason. Some compatible servers say "stop" while still
        # returning calls; those calls are answered too, or the next request would be rejected.
        if reply.finish_reason == "tool_calls" or (reply.finish_reason == "stop" and calls):
            if not calls:
                return _stop(run, MODEL_ERROR, "finish reason tool_calls without any tool call")
            if reply.content.strip() and all(c.name == OUTCOME_TOOL.name for c in calls):
                # The answer and its outcome in one reply: record the outcome, and the turn is over.
                stopped = _run_calls(run, calls, {})
                return stopped if stopped is not None else _answered(run, reply.content)
            over = run.spent.over(limits)
            if over:
                _close_calls(run, calls, "not run: the run's budget was used up")
                return _stop(run, OVER_BUDGET, over)
            stopped = _run_calls(run, calls, {})
            if stopped is not None:
                return stopped
            continue
        if reply.finish_reason == "stop":
            return _answered(run, reply.content)
        # "length", "content_filter" or anything unknown: the text is not a finished answer, and calls
        # in a cut-off reply are not run (their arguments may be cut too), but each gets its result.
        _close_calls(run, calls, f"not run: the reply was cut off (finish reason {reply.finish_reason})")
        return _stop(run, MODEL_ERROR, f"the model stopped with finish reason {reply.finish_reason!r}")


def _what_the_model_reads(run: _Run) -> Transcript:
    """The history, or when it passes the budget its compacted form (the saved history is not touched)."""
    budget = run.limits.compact_above_tokens
    if not budget:
        return run.transcript
    messages, done = compact(run.transcript.messages, budget, pinned_calls=run.decided)
    if not done:
        return run.transcript
    if done != run.compacted:  # each change of what is left out is one row of the trace
        run.compacted = done
        before, after = estimate_tokens(run.transcript.messages), estimate_tokens(messages)
        run.observer.step(Step(kind="compact", turn=run.spent.turns, label="Compacting the history",
                               result=f"{done}: about {before} tokens sent as {after} (saved {before - after})",
                               prompt_tokens=after))
    return Transcript(messages, context=run.transcript.context, cache_key=run.transcript.cache_key,
                      context_facts=run.transcript.context_facts)


def _spend(run: _Run, step: Step, reply: ModelReply, cost: float) -> None:
    run.spent.prompt_tokens += reply.prompt_tokens
    run.spent.completion_tokens += reply.completion_tokens
    run.spent.cost_usd += cost
    step.model, step.cost_usd = reply.model, cost
    step.prompt_tokens, step.completion_tokens = reply.prompt_tokens, reply.completion_tokens
    step.cached_tokens = reply.cached_tokens


def _own_ids(run: _Run, reply: ModelReply) -> list[ToolCall]:
    """The reply's calls, each with an id no other call of the conversation has.

    Some servers number ids per reply (call_0, call_1… in every reply) or send none; results, audit rows,
    approvals and idempotency keys are all keyed by the id, so a repeated one would answer, overwrite or
    swallow another call. A colliding or missing id is replaced in the message before it is saved, so the
    model, the history and every row agree on ours.
    """
    wire_calls = reply.message.get("tool_calls") or []
    for wire in wire_calls:
        call_id = wire.get("id")
        if not isinstance(call_id, str) or not call_id or call_id in run.call_ids or len(call_id) > MAX_CALL_ID:
            wire["id"] = _new_call_id(call_id if isinstance(call_id, str) else "", run.call_ids)
        run.call_ids.add(wire["id"])
    return reply.tool_calls


def _new_call_id(like: str, taken: set[str]) -> str:
    while True:
        if _SHORT_ID.fullmatch(like):
            new = "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(9))
        else:
            new = f"call_{secrets.token_hex(12)}"
        if new not in taken:
            return new


def _final_answer(messages: list[dict]) -> str | None:
    """The answer the history ends with, when no customer message came after it: an assistant text with no
    calls, or only record_outcome calls (answered). None when the model has something left to reply to."""
    for m in reversed(messages):
        role = m.get("role")
        if role == "tool":
            continue
        if role != "assistant":
            return None
        calls = m.get("tool_calls") or []
        text = m.get("content") if isinstance(m.get("content"), str) else ""
        if text.strip() and all((c.get("function") or {}).get("name") == OUTCOME_TOOL.name for c in calls):
            return text
        return None
    return None


def _run_calls(run: _Run, calls: list[ToolCall], decisions: Mapping[str, Decision]) -> RunResult | None:
    """Answer every call of one assistant message, in order. Returns a result when the run must end."""
    pending: list[PendingCall] = []
    run.ctx = replace(run.ctx, waiting=())  # tools see this reply's calls waiting for a person
    _read_ahead(run, calls, decisions)
    for i, call in enumerate(calls):
        # Counted before anything else: the same unknown tool or the same malformed arguments, every
        # turn, is a spin too.
        key = _call_key(call)
        run.seen[key] = run.seen.get(key, 0) + 1
        if run.seen[key] > run.limits.spin_max_repeats:
            if key in run.warned:
                _not_run(run, call, "ERROR: not run: the same call was repeated again; a person will take over.",
                         "", "spinning")
                _close_calls(run, calls[i + 1:], "not run: the run was stopped for repeating itself")
                _close_calls(run, [p.call for p in pending], "not run: the run was stopped for repeating itself")
                return _stop(run, SPINNING, f"{call.name} called with the same arguments {run.seen[key]} times")
            run.warned.add(key)  # told once; the next repeat stops the run
            same = SPIN_SAME_RESULT if len(run.results.get(key, ())) == 1 else ""
            _not_run(run, call, SPIN_WARNING.format(name=call.name, count=run.seen[key] - 1, same=same),
                     "", "repeated call")
            continue

        tool = run.tools.get(call.name)
        if tool is None:
            _not_run(run, call, f'ERROR: tool "{call.name}" does not exist. Available tools: '
                                f'{", ".join(sorted(run.tools))}.', "", "unknown tool")
            continue
        try:  # the arguments are generated text: parsing belongs inside the try
            args = parse_arguments(call.arguments)
        except ValueError as e:
            message = f"ERROR: arguments are not valid JSON ({e}). Send a JSON object matching the schema."
            _not_run(run, call, message, message, "malformed arguments")
            continue
        invalid = tool.validation_error(args)
        if invalid:
            _not_run(run, call, f"ERROR: {invalid}", invalid, "invalid arguments")
            continue

        decision = decisions.get(call.id)
        if decision is None and run.needs_approval(tool, args, call):
            reason = run.rejected.get(tool.action(args))
            if reason is not None:
                run.asked_again += 1
                if run.asked_again > run.limits.asks_after_rejection:
                    _not_run(run, call, f"{REJECTED_BEFORE} ({reason}); a person will take over.", reason,
                             "asked again after a rejection")
                    _close_calls(run, [p.call for p in pending] + calls[i + 1:],
                                 "not run: the run was stopped for asking again after a rejection")
                    return _stop(run, REJECTED_AGAIN, f"{call.name} asked for again after staff rejected it")
                _not_run(run, call, f"{REJECTED_BEFORE} ({reason}). Do not ask for it again, in any form; "
                                    "explain the decision to the customer.", reason, "asked again after a rejection")
                continue
            try:
                refused = _refused_before_approval(run, tool, call, args, pending)
            except ToolUnavailable as e:
                _not_run(run, call, _unavailable_text(e), str(e), "tool unavailable")
                return _stop_unavailable(run, call, calls[i + 1:], pending, e)
            if refused:
                _not_run(run, call, f"ERROR: not run: {refused}", refused, "refused before approval")
                continue
            if run.limits.max_waiting and run.waiting + len(pending) >= run.limits.max_waiting:
                _too_many_waiting(run, call)
                continue
            pending.append(PendingCall(call=call, arguments=args))
            run.ctx = replace(run.ctx, waiting=(*run.ctx.waiting, (call.name, args)))
            continue
        if decision is not None and not decision.approved:
            reason = " ".join((decision.reason or "").split()) or "no reason given"
            _not_run(run, call, _rejected_text(decision.by, reason), reason, "rejected by staff")
            continue
        if decision is not None and decision.arguments is not None:
            changed = _changes(args, decision.arguments)
            args = decision.arguments
            if changed:  # the model must not tell the customer what it asked for as if it had happened
                why = f" Their reason, to pass on to the customer as written: {decision.reason}" \
                    if decision.reason else ""
                tool = replace(tool, fn=_noted(tool.fn, f"Approved by staff with a change: {changed}. Tell the "
                                                        f"customer what was actually done.{why}", decision.reason))

        unavailable = _execute(run, tool, call, args)
        if unavailable is not None:
            return _stop_unavailable(run, call, calls[i + 1:], pending, unavailable)
        if tool.name == OUTCOME_TOOL.name:
            run.outcome, run.outcome_summary = args["outcome"], args["summary"]
        if tool.terminal:
            # Nothing runs after a hand-over, gated calls still waiting included.
            _close_calls(run, [p.call for p in pending] + calls[i + 1:],
                         "not run: the conversation was handed to a person")
            return _stop(run, ESCALATED, f"{tool.name} ended the run")
    if pending:
        return RunResult(status=AWAITING_APPROVAL, pending=pending, spent=run.spent,
                         outcome=run.outcome, outcome_summary=run.outcome_summary)
    return None


def _too_many_waiting(run: _Run, call: ToolCall) -> None:
    """The conversation has as many requests waiting for a person as it may: the call is refused, as data, and
    a person is asked to look, once a run however many calls are refused."""
    most = run.limits.max_waiting
    why = f"{most} requests already wait for a person in this conversation, the most there may be"
    _not_run(run, call, f"ERROR: not run: {why}. Ask for nothing more that needs a person's approval; tell the "
                        "customer a person will look at the conversation.", why, "too many waiting")
    if not run.told_person:
        run.told_person = True
        run.observer.needs_person(f"The agent asked for more actions than may be waiting for a person at once "
                                  f"({most}); check what it asked for in the trace.")


def _unavailable_text(e: ToolUnavailable) -> str:
    return (f"ERROR: {e}. This cannot be fixed by trying again now: the conversation is being handed to a "
            "person, and the customer is told so.")


def _stop_unavailable(run: _Run, call: ToolCall, rest: Sequence[ToolCall], pending: list[PendingCall],
                      e: ToolUnavailable) -> RunResult:
    _close_calls(run, [p.call for p in pending] + list(rest), "not run: the shop could not be reached")
    return _stop(run, TOOL_UNAVAILABLE, f"{call.name}: {e}")


def _rejected_text(by: str, reason: str) -> str:
    """A rejected call's result. An expiry is no one's verdict: the model is told the request ran out of time."""
    if by == "staff":
        return f"ERROR: rejected by staff: {reason}"
    return (f"ERROR: not run: the request expired before anyone on the team decided ({reason.rstrip('.')}). "
            "Do not ask for it again; tell the customer a person will follow up.")


def _changes(asked: dict, approved: dict) -> str:
    """"amount 40.00 instead of 64.00": what staff changed in the arguments, "" when nothing."""
    def shown(value) -> str:
        return value if isinstance(value, str) and len(value) <= 40 and "\n" not in value else json.dumps(value)[:80]
    keys = [k for k in dict.fromkeys([*asked, *approved]) if asked.get(k) != approved.get(k)]
    return "; ".join(f"{k} {shown(approved.get(k))} instead of {shown(asked.get(k))}" for k in keys)


def _noted(fn: Callable, note: str, reason: str = "") -> Callable:
    """The tool's function, its result carrying the staff's change (and why, when they said): keys of a JSON
    object, else a first line."""
    def run(ctx, **arguments):
        value = fn(ctx, **arguments)
        if not isinstance(value, dict):
            return f"{note}\n{value}"
        return {**value, "staff_decision": note, **({"staff_reason": reason} if reason else {})}
    return run


def _refused_before_approval(run: _Run, tool: Tool, call: ToolCall, args: dict,
                             pending: list[PendingCall]) -> str:
    """Why a gated call must not be put in front of a person, or "": the tool would refuse it, or a call
    that ends the run (a hand-over) already waits in this reply."""
    if tool.terminal and any(p.call.name == tool.name for p in pending):
        return f"{tool.name} is already waiting for a person in this reply"
    if tool.check is None:
        return ""
    try:
        tool.check(replace(run.ctx, call_id=call.id), **args)
    except ToolError as e:
        return str(e)
    return ""


def _execute(run: _Run, tool: Tool, call: ToolCall, args: dict) -> ToolUnavailable | None:
    """Run the call and save its result; the error when what the tool needs could not be reached."""
    step = Step(kind="tool", turn=run.spent.turns, tool=tool.name, call_id=call.id,
                arguments=call.arguments, label=tool.label or tool.name, read_only=tool.read_only)
    run.observer.step_started(step)
    t0 = time.monotonic()
    ctx = _ctx_for(run, call)
    read = run.prefetched.pop(call.id, None)
    unavailable = None
    # The effect and its result message commit together: a crash leaves neither, and the resumed run
    # executes the call again (tools are idempotent on the key as well).
    with run.observer.atomic():
        try:
            if read is not None:  # made already, at the same time as the reply's other reads
                value = read.value()
            elif tool.read_only:  # it writes nothing, so there is nothing to undo
                value = tool.fn(ctx, **args)
            else:
                with run.observer.atomic():  # a failing tool undoes only its own writes
                    value = tool.fn(ctx, **args)
            out = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        except ToolError as e:
            out = step.error = f"ERROR: {e}"
        except ToolUnavailable as e:
            unavailable, out, step.error = e, _unavailable_text(e), f"unavailable: {e}"
        except Exception as e:  # a tool crash is data for the model, never the end of the run
            out = f"ERROR: {tool.name} failed unexpectedly ({type(e).__name__}). Try again or tell the customer."
            step.error = f"{type(e).__name__}: {e}"
        out = _truncate(out, run.limits.tool_output_max_chars)
        run.result(call, out)
        step.duration_ms, step.result = read.ms if read is not None else _ms(t0), out[:500]
        run.observer.step(step)
    return unavailable


def _ctx_for(run: _Run, call: ToolCall) -> ToolContext:
    return replace(run.ctx, call_id=call.id, idempotency_key=f"{run.ctx.run_id}:{call.id}")


@dataclass
class _Read:
    """A read-only call made ahead of its turn: its value, or the exception it raised, and how long it took."""

    result: object
    ms: float

    def value(self):
        if isinstance(self.result, BaseException):
            raise self.result
        return self.result


def _read_ahead(run: _Run, calls: list[ToolCall], decisions: Mapping[str, Decision]) -> None:
    """Make the reply's independent reads at the same time, before its calls are answered in order.

    Only calls that will run as they are: a read-only tool, valid arguments, no person to ask. The ordered
    pass then answers each call exactly as it would have, using the value made here, so the history is the
    one a sequential run writes; a read it ends up not running (a repeat it refuses) was harmless to make.
    """
    run.prefetched.clear()
    reads = []
    for call in calls:
        tool = run.tools.get(call.name)
        if tool is None or not tool.read_only or call.id in decisions:
            continue
        try:
            args = parse_arguments(call.arguments)
        except ValueError:
            continue
        if tool.validation_error(args) or run.needs_approval(tool, args, call):
            continue
        reads.append((call, tool, args))
    if len(reads) < 2:
        return

    def thunk(call, tool, args):
        def read():
            t0 = time.monotonic()
            try:
                value = tool.fn(_ctx_for(run, call), **args)
            except BaseException as e:
                return _Read(e, _ms(t0))
            return _Read(value, _ms(t0))
        return read

    for (call, _, _), read in zip(reads, run.observer.parallel([thunk(*r) for r in reads])):
        run.prefetched[call.id] = read if isinstance(read, _Read) else _Read(read, 0.0)


def _answer_open_calls(run: _Run, decisions: Mapping[str, Decision]) -> RunResult | None:
    """Give every trailing call without a result its one result, or pause again on undecided ones."""
    msgs = run.transcript.messages
    last_assistant = next((i for i in range(len(msgs) - 1, -1, -1) if msgs[i].get("role") == "assistant"), None)
    if last_assistant is None or not msgs[last_assistant].get("tool_calls"):
        return None
    answered = {m.get("tool_call_id") for m in msgs[last_assistant + 1:] if m.get("role") == "tool"}
    open_calls = [ToolCall.from_wire(c) for c in msgs[last_assistant]["tool_calls"] if c.get("id") not in answered]
    if not open_calls:
        return None
    # The repeat counter already holds these calls (counted from the history); run them uncounted.
    for c in open_calls:
        key = _call_key(c)
        if key in run.seen:
            run.seen[key] -= 1
    return _run_calls(run, open_calls, decisions)


def _read_history(run: _Run) -> None:
    """Rebuild what a run carries across a pause or a crash from the history alone: every call id, and
    since the customer last wrote, the repeat counter, which repeats were warned, what each call
    returned, and the outcome the model recorded."""
    msgs = run.transcript.messages
    results = {m.get("tool_call_id"): m.get("content") for m in msgs if m.get("role") == "tool"}
    start = max((i for i, m in enumerate(msgs) if from_customer(m)), default=-1)
    for i, m in enumerate(msgs):
        for c in m.get("tool_calls") or []:
            call = ToolCall.from_wire(c)
            run.call_ids.add(call.id)
            if str(results.get(call.id) or "").startswith(REJECTED_BEFORE):
                run.asked_again += 1  # the conversation's re-asks so far, across runs
            if i < start:
                continue
            key = _call_key(call)
            run.seen[key] = run.seen.get(key, 0) + 1
            result = results.get(call.id)
            if not isinstance(result, str):
                continue
            if result.startswith(SPIN_WARNING_PREFIX):
                # Warned only if the warning was saved: a crash right after counting a repeat must
                # still warn before it stops.
                run.warned.add(key)
            else:
                run.results.setdefault(key, set()).add(result)
            if call.name == OUTCOME_TOOL.name and not result.startswith("ERROR"):
                args = parse_arguments(call.arguments)
                run.outcome, run.outcome_summary = args.get("outcome"), args.get("summary", "")


def _call_key(call: ToolCall) -> str:
    try:
        return call.name + json.dumps(parse_arguments(call.arguments), sort_keys=True)
    except ValueError:
        return call.name + str(call.arguments)


def _close_calls(run: _Run, calls: Sequence[ToolCall], why: str) -> None:
    """Answer calls that will not run, so the history stays valid for the next request."""
    for call in calls:
        run.result(call, f"ERROR: {why}")


def _not_run(run: _Run, call: ToolCall, content: str, result: str, error: str) -> None:
    """Answer a call that is not run, and trace why: the answer and its trace row are saved together."""
    with run.observer.atomic():
        run.result(call, content)
        run.observer.step(Step(kind="tool", turn=run.spent.turns, tool=call.name, call_id=call.id,
                               arguments=call.arguments, result=result[:500], error=error))


def _answered(run: _Run, text: str) -> RunResult:
    # A text reply is not success by itself: the outcome is what the model stated, or UNSTATED.
    return RunResult(status=STOPPED, stop_reason=ANSWERED, answer=text, outcome=run.outcome or UNSTATED,
                     outcome_summary=run.outcome_summary, spent=run.spent)


def _stop(run: _Run, reason: str, detail: str) -> RunResult:
    """Every stop but an answer hands the ticket to a person, with a summary of what is known."""
    return RunResult(
        status=STOPPED, stop_reason=reason, detail=detail, outcome=HANDED_TO_PERSON,
        outcome_summary=run.outcome_summary, summary=handoff_summary(run.transcript.messages, reason, detail),
        spent=run.spent,
    )


def _truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[truncated: showing {limit} of {len(text)} characters]"


def _ms(t0: float) -> float:
    return round((time.monotonic() - t0) * 1000, 2)
