"""Times in the customer's time zone: the widget sends the browser's IANA zone when a conversation starts; the
model is told the zone and the local time on every run (tool results stay in UTC, marked Z) and writes
times in it; the stand-in does as a model would.

Why the model converts rather than the widget: the times are inside the agent's sentences ("delivered on Thu
2 May at 12:00"), which the widget shows as written; only the model can put them there in the customer's words.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from django.test import Client

from standin import facts
from support.customers import identity, notify
from support.desk import assistant, runner, services
from support.models import Conversation, FollowUp, Message


def start(body):
    return Client().post("/api/conversations", {"customer_token": identity.customer_token("maya@example.com"), **body},
                         content_type="application/json")


def test_the_browsers_time_zone_is_kept_with_the_conversation(demo):
    response = start({"time_zone": "Europe/Berlin"})
    assert response.status_code == 201
    conversation = Conversation.objects.get(public_id=response.json()["conversation"]["id"])
    assert notify.zone_of(conversation) == ZoneInfo("Europe/Berlin")


def test_a_zone_the_server_does_not_know_is_ignored_and_the_chat_still_opens(demo):
    for name in ("Mars/Olympus_Mons", "../../etc/passwd", "", "UTC\x00"):
        response = start({"time_zone": name})
        assert response.status_code == 201, name
        conversation = Conversation.objects.get(public_id=response.json()["conversation"]["id"])
        assert notify.zone_of(conversation) is None


def test_a_time_zone_that_is_not_a_short_string_is_refused_and_nothing_is_created(demo):
    before = Conversation.objects.count()
    for bad in (12, ["Europe/Berlin"], "x" * 65):
        response = start({"time_zone": bad})
        assert response.status_code == 400
        assert response.json()["error"] == "time_zone must be a time zone name such as Europe/Berlin."
    assert Conversation.objects.count() == before


def test_the_model_is_told_the_zone_and_the_local_time_in_the_run_s_context(demo):
    conversation = services.conversation_start(customer=demo.maya)
    notify.set_time_zone(conversation, "Asia/Tokyo")
    [told], _ = assistant.run_context(conversation, now=datetime(2024, 5, 14, 23, 30, tzinfo=UTC))
    assert told["role"] == "system"
    assert told["content"].startswith("The customer's time zone is Asia/Tokyo: it is now Wednesday 15 May "
                                      "2024, 08:30 there.")


def test_no_zone_no_line(demo):
    conversation = services.conversation_start(customer=demo.maya)
    assert not any("time zone" in m["content"] for m in assistant.run_context(conversation)[0])


@pytest.mark.django_db(transaction=True)  # the run is queued after the commit
def test_the_agent_writes_the_delivery_time_in_the_customers_zone(desk, queued, monkeypatch):
    conversation = services.conversation_start(customer=desk.maya)
    notify.set_time_zone(conversation, "America/New_York")
    services.conversation_post_message(conversation=conversation,
                                       text="Tracking says delivered on Thursday but nothing arrived. Order SU-41207")
    sent = []
    model = assistant.shared_model()
    original = model.complete
    monkeypatch.setattr(model, "complete", lambda t, tools, sink: sent.append(t.sent()) or original(t, tools, sink))
    while queued:
        runner.run_execute(queued.pop(0))
    assert any("The customer's time zone is America/New_York" in (m.get("content") or "") for m in sent[0])
    answers = [m.content for m in conversation.messages.filter(author=Message.AGENT, role="assistant")
               .exclude(content="") if m.content]
    assert answers and "your time" in answers[-1] and "UTC" not in answers[-1]
    # The line is told, never saved.
    assert not conversation.messages.filter(content__startswith="The customer's time zone").exists()


def test_the_stand_in_writes_times_in_the_zone_it_was_told():
    messages = [{"role": "system", "content": "The customer's time zone is Europe/Berlin: it is now ..."}]
    token = facts.CUSTOMER_ZONE.set(facts.zone_in(messages))
    try:
        assert facts.when("2024-05-02T10:00:00Z") == "Thu 02 May at 12:00 your time"
    finally:
        facts.CUSTOMER_ZONE.reset(token)
    assert facts.when("2024-05-02T10:00:00Z") == "Thu 02 May at 10:00 UTC"
    assert facts.zone_in([{"role": "system", "content": "The customer's time zone is Nowhere/Land: ..."}]) is None


@pytest.mark.parametrize("name", ["Europe/Berlin", "America/Argentina/Buenos_Aires", "UTC"])
def test_real_zone_names_pass(name):
    assert notify.valid_time_zone(name) == name


def test_the_follow_up_row_is_made_once(demo):
    conversation = services.conversation_start(customer=demo.maya)
    notify.set_time_zone(conversation, "Europe/Paris")
    notify.set_time_zone(conversation, "Europe/Lisbon")
    assert list(FollowUp.objects.filter(conversation=conversation).values_list("time_zone", flat=True)) == ["Europe/Lisbon"]
