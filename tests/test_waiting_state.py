"""A case that waits on something with a time is "waiting", not "resolved": the seller was asked and has until a
deadline to answer. The desk learns the deadline from its own tool's result (message_seller), never from the
model's words; the inbox shows the case with its deadline; when the time is up with nothing new, the beat gives
the case back once, to the agent or to a person (WAITING_RETURNS_TO); the customer's next message clears it.

Who may see what: Sam (staff) reads the inbox; the customer Maya writes in her conversation.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from support.agent import types as agent
from support.desk import assistant, runner, services, waiting
from support.models import Conversation, Message, Run, ToolCall
from tests.desk_factories import make_user
from tests.fake_model import ScriptedModel, answer, call, reply

pytestmark = pytest.mark.django_db(transaction=True)

ASKED = "Order SU-41207 has not arrived; please open a missing-parcel claim with the carrier."


def run_with(desk, queued, monkeypatch, *replies, conversation=None, text="My parcel SU-41207 never came."):
    model = ScriptedModel(*replies)
    monkeypatch.setattr(assistant, "shared_model", lambda: model)
    conversation = conversation or services.conversation_start(customer=desk.maya)
    services.conversation_post_message(conversation=conversation, text=text)
    runner.run_execute(queued.pop())
    conversation.refresh_from_db()
    return conversation, Run.objects.filter(conversation=conversation).latest("created_at", "pk")


def seller_asked(desk, queued, monkeypatch, settings, **kwargs):
    settings.SELLER_ANSWER_HOURS = 48
    return run_with(desk, queued, monkeypatch, reply(calls=[call("message_seller", {"order_id": "SU-41207",
                                                                                   "message": ASKED})]),
                    *answer("The seller will open a claim in about 17 hours."), **kwargs)


def inbox_rows(**params):
    client = Client()
    client.force_login(get_user_model().objects.filter(username="sam").first() or make_user("sam", staff=True))
    response = client.get("/api/staff/inbox", params)
    assert response.status_code == 200, response.content
    return response.json()["conversations"]


def test_it_makes_the_outcome_waiting_from_the_sellers_deadline_not_the_models_resolved(desk, queued, monkeypatch,
                                                                                          settings):
    before = timezone.now()
    conversation, run = seller_asked(desk, queued, monkeypatch, settings)
    assert run.stop_reason == agent.ANSWERED and run.outcome == agent.WAITING
    assert conversation.waiting_for == "seller"
    assert before + timedelta(hours=48) <= conversation.waiting_until <= timezone.now() + timedelta(hours=48)
    tool_result = json.loads(conversation.messages.get(role="tool", content__contains="message_id").content)
    assert tool_result["waiting"] == {"for": "seller", "within_hours": 48}


def test_the_models_words_alone_never_make_a_case_wait(desk, queued, monkeypatch):
    conversation, run = run_with(desk, queued, monkeypatch,
                                 *answer("The seller will open a claim in about 17 hours; wait until Tuesday."))
    assert run.outcome == "resolved" and conversation.waiting_until is None


def test_a_deadline_in_a_tool_the_desk_does_not_trust_is_ignored(desk, queued, monkeypatch):
    conversation, run = run_with(desk, queued, monkeypatch, *answer("Done."))
    ToolCall.objects.create(run=run, call_id="x", name="some_mcp_tool", arguments={}, status="executed",
                            idempotency_key="k", result=json.dumps({"waiting": {"for": "seller", "within_hours": 9}}))
    assert waiting.wait_of_run(run) is None


def test_the_inbox_shows_the_waiting_case_with_its_deadline_and_filters_it(desk, queued, monkeypatch, settings):
    conversation, _ = seller_asked(desk, queued, monkeypatch, settings)
    other = services.conversation_start(customer=desk.tom)
    services.message_append(conversation=other, wire={"role": "user", "content": "Hi"}, author=Message.CUSTOMER)
    row = next(r for r in inbox_rows() if r["id"] == str(conversation.public_id))
    assert row["status"] == "waiting" and row["status_label"] == "Waiting for the seller"
    assert row["waiting"] == {"for": "seller", "for_words": "the seller",
                              "until": conversation.waiting_until.isoformat().replace("+00:00", "Z")}
    assert [r["id"] for r in inbox_rows(filter="waiting")] == [str(conversation.public_id)]


def test_a_customer_message_clears_the_wait(desk, queued, monkeypatch, settings):
    conversation, _ = seller_asked(desk, queued, monkeypatch, settings)
    services.conversation_post_message(conversation=conversation, text="Any news?")
    conversation.refresh_from_db()
    assert conversation.waiting_until is None and conversation.waiting_for == ""
    assert waiting.waits_end(now=timezone.now() + timedelta(days=3)) == []


def test_the_beat_gives_an_ended_wait_back_to_the_agent_once(desk, queued, monkeypatch, settings):
    settings.WAITING_RETURNS_TO = "agent"
    conversation, _ = seller_asked(desk, queued, monkeypatch, settings)
    assert waiting.waits_end(now=timezone.now() + timedelta(hours=47)) == []  # not yet
    later = timezone.now() + timedelta(hours=49)
    assert waiting.waits_end(now=later) == [str(conversation.public_id)]
    assert waiting.waits_end(now=later) == []  # a second beat finds nothing to give back
    assert len(queued) == 1 and Run.objects.get(pk=queued[0]).status == Run.QUEUED
    note = conversation.messages.order_by("-seq").first()
    assert note.role == "user" and note.author == Message.SYSTEM and "the seller" in note.content
    conversation.refresh_from_db()
    assert conversation.status == Conversation.OPEN and conversation.waiting_until is None


def test_the_agent_given_an_ended_wait_back_checks_and_tells_the_customer(desk, queued, monkeypatch, settings):
    settings.WAITING_RETURNS_TO = "agent"
    conversation, _ = seller_asked(desk, queued, monkeypatch, settings)
    waiting.waits_end(now=timezone.now() + timedelta(hours=49))
    model = ScriptedModel(reply(calls=[call("get_order", {"order_id": "SU-41207"})]),
                          *answer("The seller has not answered yet; I have passed your case to our team.",
                                  outcome="not_resolved"))
    monkeypatch.setattr(assistant, "shared_model", lambda: model)
    assert runner.run_execute(queued.pop()) == "answered"
    last = conversation.messages.order_by("-seq").first()
    assert last.author == Message.AGENT and "has not answered yet" in last.content
    sent = [m["content"] for m in model.sent[0] if m["role"] == "user"]
    assert "the seller" in sent[-1]  # the model read why it runs


def test_two_beats_at_once_give_it_back_exactly_once(desk, queued, monkeypatch, settings):
    settings.WAITING_RETURNS_TO = "agent"
    conversation, _ = seller_asked(desk, queued, monkeypatch, settings)
    stale = list(Conversation.objects.filter(pk=conversation.pk))  # what a second beat read before the first wrote
    later = timezone.now() + timedelta(hours=49)
    assert waiting.waits_end(now=later) == [str(conversation.public_id)]
    assert not waiting._claim(stale[0])
    assert len(queued) == 1


def test_the_beat_gives_an_ended_wait_to_a_person_by_the_setting(desk, queued, monkeypatch, settings):
    settings.WAITING_RETURNS_TO = "person"
    conversation, _ = seller_asked(desk, queued, monkeypatch, settings)
    assert waiting.waits_end(now=timezone.now() + timedelta(hours=49)) == [str(conversation.public_id)]
    conversation.refresh_from_db()
    assert conversation.status == Conversation.NEEDS_ATTENTION and queued == []
    assert "wait for the seller ended" in conversation.attention_reason
    row = next(r for r in inbox_rows() if r["id"] == str(conversation.public_id))
    assert row["status"] == "needs_person" and row["waiting"] is None
