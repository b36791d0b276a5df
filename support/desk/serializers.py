"""The JSON shapes of messages, runs, steps and approvals, for the API and for live events.

Customers get a narrower view than staff: their own and the agent's words, never tool calls, tool
results or the trace. Public ids only; integer keys never leave the server.
"""

from __future__ import annotations

from support.customers.attachments import message_fields
from support.customers.words import staff_name
from support.desk import announce, deadlines, permissions, selectors_approvals, selectors_earlier
from support.live import events
from support.ops import tracing
from support.tools import mcp
from support.models import Approval, Conversation, InboundEmail, Message, Run, Step


def _ts(value) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def customer_can_see(message: Message) -> bool:
    return message.role in ("user", "assistant") and bool(message.content)


def message_json(message: Message, *, staff: bool) -> dict:
    data = {"seq": message.seq, "role": message.role, "author": message.author, "content": message.content,
            "created_at": _ts(message.created_at)}
    if message.client_id:  # the customer's own id for it: their widget matches it to what it sent
        data["client_id"] = message.client_id
    if message.author == Message.STAFF and message.author_user_id:
        data["staff_name"] = staff_name(message.author_user)
    if message.author == Message.CUSTOMER:  # photos and PDFs, with signed links (support/customers/attachments.py)
        data.update(message_fields(message, staff=staff))
        data["channel"] = message.channel  # "widget" or "email"
        if staff and message.channel == Message.EMAIL:  # the mail as it came: "Show original"
            mail = InboundEmail.objects.filter(message=message).values_list("public_id", flat=True).first()
            data["original"] = f"/api/staff/emails/{mail}/original" if mail else None
    if staff:
        if message.tool_calls:
            data["tool_calls"] = message.tool_calls
            # The service a tool of an MCP server belongs to, by call id: "Asked the warranty service: …".
            servers = {call.get("id"): mcp.server_of(str((call.get("function") or {}).get("name") or ""))
                       for call in message.tool_calls if isinstance(call, dict)}
            if any(servers.values()):
                data["tool_servers"] = {k: v for k, v in servers.items() if v}
        if message.tool_call_id:
            data["tool_call_id"] = message.tool_call_id
        data["run"] = str(message.run.public_id) if message.run_id else None
    return data


def run_json(run: Run) -> dict:
    return {
        "id": str(run.public_id), "conversation": str(run.conversation.public_id), "status": run.status,
        "stop_reason": run.stop_reason or None, "outcome": run.outcome or None,
        "outcome_summary": run.outcome_summary, "attempts": run.attempts,
        "heartbeat_at": _ts(run.heartbeat_at), "turns": run.turns, "prompt_tokens": run.prompt_tokens,
        "completion_tokens": run.completion_tokens, "cost_usd": str(run.cost_usd), "summary": run.summary,
        "detail": run.detail, "created_at": _ts(run.created_at), "finished_at": _ts(run.finished_at),
        # The agent profile version it worked with (None: before any was published).
        "profile_version": run.profile_version.number if run.profile_version_id else None,
        **_trace(run),
    }


def _trace(run: Run) -> dict:
    """The run's trace id, and the link to it in the operator's trace viewer (TRACE_URL), when it was traced."""
    trace_id = tracing.trace_id_of(run.trace_parent)
    return {"trace_id": trace_id or None, "trace_url": tracing.trace_url(trace_id) or None}


def step_json(step: Step) -> dict:
    return {
        "run": str(step.run.public_id), "kind": step.kind, "turn": step.turn, "label": step.label, "tool": step.tool,
        "server": mcp.server_of(step.tool) if step.kind == "tool" else None, "call_id": step.call_id,
        "arguments": step.arguments, "result": step.result, "error": step.error, "model": step.model,
        "finish_reason": step.finish_reason, "attempts": step.attempts, "prompt_tokens": step.prompt_tokens,
        "completion_tokens": step.completion_tokens, "cached_tokens": step.cached_tokens, "cost_usd": str(step.cost_usd),
        "duration_ms": step.duration_ms, "created_at": _ts(step.created_at),
    }


SINCE_SHOWN = 20  # customer messages shown on an approval card; the count says how many there are in all


def approvals_json(approvals) -> list[dict]:
    """Cards for a page of approvals: their earlier decisions read in one query for all of them."""
    approvals = list(approvals)
    earlier = selectors_earlier.earlier_for(approvals)
    return [approval_json(a, earlier=earlier[a.pk]) for a in approvals]


def approval_json(approval: Approval, *, earlier: selectors_earlier.Earlier | None = None) -> dict:
    if earlier is None:
        earlier = selectors_earlier.earlier_for([approval])[approval.pk]
    if approval.staff_action_id:
        return _staff_refund_json(approval, earlier)
    call = approval.tool_call
    executed = approval.executed_arguments
    since = customer_messages_since(approval)
    since_count = since.count()
    shown = list(since.order_by("-seq")[:SINCE_SHOWN])[::-1] if since_count else []
    return {
        **_decision_json(approval), "run": str(approval.run.public_id),
        "conversation": str(approval.run.conversation.public_id), "tool": call.name, "call_id": call.call_id,
        # Approving it needs support.approve_large_refund (support/desk/permissions.py).
        "large_refund": permissions.is_large_refund(call.name, executed if executed is not None
                                                    else approval.arguments_to_run()),
        # What the customer wrote after the agent asked (while it waited): a "cancel" must not go unseen.
        "customer_messages_since": [{"seq": m.seq, "text": m.content, "created_at": _ts(m.created_at)}
                                    for m in shown],
        "customer_messages_since_count": since_count,
        "needs_second_look": since_count > 0,
        # What the card shows to decide in seconds: a sentence, the order's money, the amount's limits,
        # the policies the agent read, the customer's words, the form's fields, the expiry.
        "context": selectors_approvals.approval_context(approval),
        **four_eyes_json(approval),
        # Decisions on the same order before this one, newest first; approving over a rejection needs
        # confirm_over_rejection (gate.approval_decide).
        "earlier_decisions": selectors_earlier.earlier_json(earlier),
    }


def _decision_json(approval: Approval) -> dict:
    """What every card says of its decision: asked when, decided how, by whom, why, with which arguments."""
    return {
        "id": str(approval.public_id), "status": "pending" if approval.pending else approval.decision,
        "requested_at": _ts(approval.requested_at), "requested_arguments": approval.requested_arguments,
        "executed_arguments": approval.executed_arguments, "decided_at": _ts(approval.decided_at),
        "reason": approval.reason, "decided_by": staff_name(approval.decided_by) if approval.decided_by_id else None,
        "decided_via": approval.decided_via or None,  # console, email or slack: where the person decided
        # Why the call never ran although decided (a take-over), and how it expired.
        "not_run_reason": approval.not_run_reason,
        # When it expires, when people are reminded and the leads told, and whether they were (deadlines.py).
        "deadline": deadlines.deadline_json(approval),
        # Whose queue the request is in (support/desk/routing.py); anyone allowed may still decide it.
        "routed_to": {"username": approval.routed_to.get_username(), "name": staff_name(approval.routed_to)}
        if approval.routed_to_id else None,
        "routed_at": _ts(approval.routed_at) if approval.routed_to_id else None,
    }


def _staff_refund_json(approval: Approval, earlier: selectors_earlier.Earlier) -> dict:
    """A staff member's own refund above SECOND_APPROVAL_ABOVE, waiting for another person: a card of the
    same shape (no run, no call, nothing the customer wrote to confirm), with what became of the refund."""
    action = approval.staff_action
    return {
        **_decision_json(approval), "run": None, "conversation": str(action.conversation.public_id),
        "tool": Approval.STAFF_REFUND, "call_id": None,
        "large_refund": permissions.is_large_refund(Approval.STAFF_REFUND, approval.requested_arguments),
        "customer_messages_since": [], "customer_messages_since_count": 0, "needs_second_look": False,
        "context": selectors_approvals.staff_refund_context(approval),
        "staff_action": {"id": str(action.public_id), "status": action.status, "result": action.result},
        **four_eyes_json(approval), "earlier_decisions": selectors_earlier.earlier_json(earlier),
    }


def four_eyes_json(approval: Approval) -> dict:
    """Four eyes on a card (support/desk/four_eyes.py): how many people's approval it needs (1 or 2), who
    counts so far ("asked": a staff member's own refund; "first": the first approval; "second": the approval
    that completed it), and what the first approver approved, which is what the second approves."""
    if approval.staff_action_id or approval.first_approved_at is not None:
        needed = 2
    else:
        arguments = approval.requested_arguments if approval.executed_arguments is None \
            else approval.executed_arguments
        needed = 2 if approval.pending and permissions.needs_second_approver(approval.tool_name, arguments) else 1
    people = []
    if approval.requested_by_id:
        people.append(_person(approval.requested_by, approval.requested_at, "asked"))
    if approval.first_approved_at is not None:
        people.append(_person(approval.first_approved_by, approval.first_approved_at, "first"))
    if needed == 2 and approval.decision == Approval.APPROVED:
        people.append(_person(approval.decided_by, approval.decided_at, "second"))
    return {"approvals_needed": needed, "approvals": people, "first_arguments": approval.first_arguments}


def _person(user, at, role: str) -> dict:
    return {"by": staff_name(user) if user is not None else "a former colleague",
            "username": user.get_username() if user is not None else None, "at": _ts(at), "role": role}


def customer_messages_since(approval: Approval):
    """The customer's messages written after the agent's message that asked for the call (and, once it is
    decided, up to the decision), in seq order."""
    run = approval.run
    asked = selectors_approvals.asked_seq(approval)
    messages = Message.objects.filter(conversation_id=run.conversation_id, author=Message.CUSTOMER)
    messages = messages.filter(seq__gt=asked) if asked is not None else \
        messages.filter(created_at__gte=approval.requested_at)
    if approval.decided_at is not None:
        messages = messages.filter(created_at__lte=approval.decided_at)
    return messages.order_by("seq")


def conversation_json(conversation: Conversation, *, staff: bool) -> dict:
    closed = conversation.is_closed()
    data = {"id": str(conversation.public_id), "status": conversation.status, "last_seq": conversation.last_seq,
            "created_at": _ts(conversation.created_at), "closed": closed}
    if staff:
        data.update(closed_at=_ts(conversation.closed_at) if closed else None,
                    closed_by=staff_name(conversation.closed_by) if closed and conversation.closed_by_id else None)
        data.update(customer=conversation.customer.email, attention_reason=conversation.attention_reason,
                    assignee=staff_name(conversation.assignee) if conversation.assignee_id else None,
                    # unique, unlike the first name above: the console tells "taken over by me" with it
                    assignee_username=conversation.assignee.get_username() if conversation.assignee_id else None,
                    updated_at=_ts(conversation.updated_at), language=conversation.language,
                    subject=conversation.email_subject or None, waiting=waiting_json(conversation))
    return data


def waiting_json(conversation: Conversation) -> dict | None:
    """What the case waits for and until when (support/desk/waiting.py), or None."""
    if conversation.waiting_until is None:
        return None
    return {"for": conversation.waiting_for, "for_words": conversation.get_waiting_for_display(),
            "until": _ts(conversation.waiting_until)}



# -- live events (sent after commit); each carries the conversation's id and its seq ------------------

def _event(conv: Conversation, event_type: str, /, **fields) -> dict:
    return {"type": event_type, "conversation": str(conv.public_id), "seq": conv.last_seq, **fields}


def _customer(conversation: Conversation, event: dict) -> None:
    events.publisher.send([events.conversation_group(conversation.public_id)], event)


def _staff(conversation: Conversation, event: dict, *, listed: bool = False) -> None:
    groups = [events.staff_conversation_group(conversation.public_id)] + ([events.STAFF_GROUP] if listed else [])
    events.publisher.send(groups, event)


def publish_message(message: Message) -> None:
    conversation = message.conversation
    base = {"type": "message.saved", "conversation": str(conversation.public_id), "seq": message.seq}
    _staff(conversation, {**base, "message": message_json(message, staff=True)})
    if customer_can_see(message):
        _customer(conversation, {**base, "message": message_json(message, staff=False)})
    else:  # the seq alone: the customer's client then tells a seq it may not see from one it lost
        _customer(conversation, {**base, "type": "message.hidden"})
    if message.author in (Message.CUSTOMER, Message.STAFF):  # the console's list shows it moved
        events.publisher.send([events.STAFF_GROUP], _event(conversation, "conversation.updated",
                              status=conversation.status, detail=conversation_json(conversation, staff=True)))


def publish_run(run: Run) -> None:
    conversation = run.conversation
    public = _event(conversation, "run.status", run=str(run.public_id), status=run.status,
                    stop_reason=run.stop_reason or None, outcome=run.outcome or None)
    _customer(conversation, public)
    _staff(conversation, {**public, "detail": run_json(run)}, listed=True)


def publish_step(step: Step, *, started: bool) -> None:
    """step.started of a model step also tells both UIs that a new reply begins: a run resumed after its
    worker died streams its reply again from the start, so a partial reply still shown is dropped."""
    conversation = step.run.conversation
    event_type = "step.started" if started else "step.finished"
    _customer(conversation, _event(conversation, event_type, run=str(step.run.public_id), kind=step.kind,
                                   label=step.label))
    _staff(conversation, _event(conversation, event_type, step=step_json(step)))


def as_decided(approval: Approval) -> None:
    """Read the approval's conversation now, in the decision's transaction, so the event sent after the commit
    carries the conversation's seq as of the decision: read later, the resumed run may have answered already,
    and the widget would take the decision for news that came after the answer (its banner left showing)."""
    if approval.staff_action_id:
        approval.staff_action.conversation
    else:
        approval.run.conversation


def publish_approval(approval: Approval) -> None:
    kind = "approval.requested" if approval.pending else "approval.decided"
    data = approval_json(approval)
    if approval.staff_action_id:  # between staff: the customer hears of the refund once it is made
        conversation = approval.staff_action.conversation
        _staff(conversation, _event(conversation, kind, approval=data), listed=True)
        return
    conversation = approval.run.conversation
    waiting = Approval.objects.filter(run__conversation=conversation, decided_at__isnull=True).count()
    _customer(conversation, _event(conversation, kind, status=data["status"], pending_approvals=waiting))
    _staff(conversation, _event(conversation, kind, approval=data), listed=True)
    announce.approval_changed(approval)  # e-mail and Slack, when set up


def publish_approval_nudged(approval: Approval, *, nudge: str, to: list) -> None:
    """approval.nudged, to staff only: a pending approval's reminder or escalation went to these people (nudges.py).
    Every console updates the card; the consoles of the people named raise an alert."""
    conversation = approval.staff_action.conversation if approval.staff_action_id else approval.run.conversation
    _staff(conversation, _event(conversation, "approval.nudged", nudge=nudge, approval=approval_json(approval),
                                to=[{"username": u.get_username(), "name": staff_name(u)} for u in to]), listed=True)


def publish_conversation(conversation: Conversation, event_type: str = "conversation.updated") -> None:
    """conversation.updated, or conversation.assigned when a staff member took it over or handed it back."""
    extra = {"status": conversation.status}
    if event_type == "conversation.assigned":
        extra["assignee"] = staff_name(conversation.assignee)
    _customer(conversation, _event(conversation, event_type, detail=conversation_json(conversation, staff=False),
                                   **extra))
    _staff(conversation, _event(conversation, event_type, detail=conversation_json(conversation, staff=True),
                                **extra), listed=True)


def publish_token(conversation: Conversation, run: Run, seq: int, text: str) -> None:
    event = {"type": "token.delta", "conversation": str(conversation.public_id), "seq": seq,
             "run": str(run.public_id), "text": text}
    events.publisher.send([events.conversation_group(conversation.public_id),
                           events.staff_conversation_group(conversation.public_id)], event)


# -- staff work on a conversation (support/desk/staff_actions.py): actions on record, notes, saved replies --------

def staff_action_json(action) -> dict:
    """A person's action, for the trace: who, when, what was asked, and what came of it (the codes as stored);
    for a refund that needed a second person, that approval and who gave it (or refused it)."""
    approval = Approval.objects.filter(staff_action=action).select_related("decided_by").first()
    return {"id": str(action.public_id), "conversation": str(action.conversation.public_id), "kind": action.kind,
            "status": action.status, "arguments": action.arguments, "result": action.result,
            "by": staff_name(action.user) if action.user_id else None, "created_at": _ts(action.created_at),
            "approval": None if approval is None else {
                "id": str(approval.public_id), "status": "pending" if approval.pending else approval.decision,
                "decided_by": staff_name(approval.decided_by) if approval.decided_by_id else None,
                "decided_at": _ts(approval.decided_at)}}


def note_json(note) -> dict:
    return {"id": str(note.public_id), "text": note.text, "created_at": _ts(note.created_at),
            "author": staff_name(note.author) if note.author_id else None,
            "author_username": note.author.get_username() if note.author_id else None}


def saved_reply_json(reply) -> dict:
    return {"id": str(reply.public_id), "title": reply.title, "body": reply.body,
            "updated_at": _ts(reply.updated_at),
            "updated_by": staff_name(reply.updated_by) if reply.updated_by_id else None}
