"""Builders for support-desk rows in the states tests need, without a worker or a model, and the
fixtures of the API tests (import them by name: `from tests.desk_factories import widget  # noqa: F401`).

    conversation = start_conversation(demo.maya)
    approval = pending_refund_approval(conversation)   # a paused run waiting on a refund decision
    queued = record_run_delays(monkeypatch)            # run ids handed to Celery, nothing sent to Redis
    widget = Widget(client, django_capture_on_commit_callbacks)  # the customer API as the widget calls it
    record_events(monkeypatch)                         # live events recorded instead of published
"""

from __future__ import annotations

import dataclasses
import itertools
import json

import pytest
from django.contrib.auth import get_user_model

from support import profiles
from support.agent.types import Observer
from support.customers import identity
from support.desk import queue, services
from support.models import Approval, Conversation, Customer, Message, Run, ToolCall

REFUND_ARGUMENTS = {"order_id": "SU-41310", "amount": "64.00", "reason": "missing"}
_calls = itertools.count(1)


def start_conversation(customer: Customer) -> Conversation:
    return services.conversation_start(customer=customer)


def pending_refund_approval(conversation: Conversation, arguments: dict | None = None) -> Approval:
    """A run paused on an issue_refund call, as the runner leaves it: awaiting_approval with one pending approval."""
    arguments = dict(REFUND_ARGUMENTS if arguments is None else arguments)
    run = Run.objects.create(conversation=conversation, status=Run.AWAITING_APPROVAL, attempts=1, turns=1)
    call_id = f"call_refund_{next(_calls)}"
    services.message_append(conversation=conversation, author=Message.AGENT, run=run, wire={
        "role": "assistant", "content": None,
        "tool_calls": [{"id": call_id, "type": "function",
                        "function": {"name": "issue_refund", "arguments": json.dumps(arguments)}}]})
    tool_call = ToolCall.objects.create(run=run, call_id=call_id, name="issue_refund", arguments=arguments,
                                        status=ToolCall.PENDING_APPROVAL, idempotency_key=f"{run.public_id}:{call_id}")
    return Approval.objects.create(tool_call=tool_call, run=run, requested_arguments=arguments)


def make_user(username: str, *, staff: bool, group: str | None = "agents", first_name: str = ""):
    """A user; staff are Support agents (may decide approvals) unless `group` says "leads" or None."""
    user = get_user_model().objects.create_user(username=username, password="pw-" + username, is_staff=staff,
                                                first_name=first_name)
    if staff and group:
        from support.desk import permissions

        user.groups.add(permissions.ensure_groups()[permissions.LEADS if group == "leads" else permissions.AGENTS])
    return user


class RunDelays(list):
    """The run ids the desk queued for a worker (support.desk.queue.run_agent), in order."""


def record_run_delays(monkeypatch) -> RunDelays:
    """Replace the Celery enqueue with a recorder: there is no broker in these tests."""
    delays = RunDelays()
    monkeypatch.setattr(queue, "run_agent", lambda run_id, **ids: delays.append(run_id))
    return delays


def record_events(monkeypatch) -> list[tuple[list[str], dict]]:
    """Keep live events from reaching for Redis; returns the (groups, event) pairs sent."""
    from support.live import events

    sent: list[tuple[list[str], dict]] = []
    monkeypatch.setattr(events.publisher, "send", lambda groups, event: sent.append((groups, event)))
    return sent


class Widget:
    """The customer API as the widget calls it: Widget(client, django_capture_on_commit_callbacks).

    POSTs run their on-commit callbacks (the run's enqueue, events) as after a real commit.
    """

    def __init__(self, client, capture):
        self.client, self.capture = client, capture

    def start(self, body, **extra):
        raw = body if isinstance(body, (str, bytes)) else json.dumps(body)
        return self.client.post("/api/conversations", raw, content_type="application/json", **extra)

    def get(self, path, token=None):
        return self.client.get(path, **self._auth(token))

    def post(self, path, token, raw, content_type="application/json"):
        with self.capture(execute=True):
            return self.client.post(path, raw, content_type=content_type, **self._auth(token))

    def say(self, conversation, token, text, **fields):
        return self.post(f"/api/conversations/{conversation.public_id}/messages", token,
                         json.dumps({"text": text, **fields}))

    @staticmethod
    def _auth(token):
        return {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}


def customer_messages(conversation: Conversation) -> list[Message]:
    return list(Message.objects.filter(conversation=conversation, author=Message.CUSTOMER).order_by("seq"))


# -- fixtures -------------------------------------------------------------------------------------------

@pytest.fixture
def queued(monkeypatch):
    """The run ids handed to Celery (no broker here); live events are recorded, not sent to Redis."""
    record_events(monkeypatch)
    return record_run_delays(monkeypatch)


@pytest.fixture
def widget(client, demo, queued, django_capture_on_commit_callbacks):
    return Widget(client, django_capture_on_commit_callbacks)


@pytest.fixture
def maya_chat(demo):
    """Maya's conversation and the widget's token for it."""
    conversation = start_conversation(demo.maya)
    return conversation, identity.conversation_token(conversation)


# -- whole tickets through the loop (no database run: the loop, the openai client, the stand-in, the tools) --

class StepRecorder(Observer):
    """An observer that keeps the trace's steps (the Observer's other hooks do nothing)."""

    def __init__(self):
        self.steps = []

    def step(self, s):
        self.steps.append(s)


def work_ticket(server, text, customer="maya@example.com", decide=None, *, run_id="t", **model_options):
    """Run the loop on a new ticket from `customer` against the model server `server`; approvals, if any,
    are answered with `decide` and the loop resumed. Returns (result, transcript, tools called, paused on)."""
    from support.agent.loop import run_loop
    from support.agent.tools import ToolContext
    from support.agent.types import AWAITING_APPROVAL
    from support.desk import assistant
    from support.models import Customer

    person = Customer.objects.get(email=customer)
    transcript, rec = assistant.new_transcript(text), StepRecorder()
    kwargs = dict(model=assistant.model(base_url=server.base_url, **model_options), tools=assistant.tools(),
                  ctx=ToolContext(customer_id=person.pk, run_id=run_id), observer=rec, limits=assistant.limits())
    result = run_loop(transcript, **kwargs)
    paused = []
    while result.status == AWAITING_APPROVAL and decide is not None:
        paused.extend(p.call.name for p in result.pending)
        result = run_loop(transcript, spent=result.spent,
                          decisions={p.call.id: decide for p in result.pending}, **kwargs)
    return result, transcript, [s.tool for s in rec.steps if s.kind == "tool"], paused


def profile_limits_tightened(lead, **limits) -> None:
    """A lead publishes the live agent profile with `limits` changed (e.g. refund_ceiling="50.00")."""
    live = profiles.live()
    profiles.draft_save(data=dataclasses.replace(live, limits=dataclasses.replace(live.limits, **limits)).as_data(),
                        by=lead)
    profiles.draft_publish(by=lead)
