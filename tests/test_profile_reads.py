"""The live agent profile is read once per request and once per run: its pointer is one row, and every limit, the
widget's face and the setup gate of one request come from it. A publish still reaches the next request and a
worker's next run (profiles.read_once, support/web/middleware.py's ProfileOnceMiddleware, runner.run_execute)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from support import profiles
from support.desk import assistant, runner, services
from support.models import Approval
from tests.desk_factories import make_user
from tests.fake_model import ScriptedModel, answer, call, reply
from tests.provenance_factories import with_reads

pytestmark = pytest.mark.django_db(transaction=True)


def pointer_reads(captured) -> int:
    return sum('"support_liveprofile"' in q["sql"] for q in captured.captured_queries)


def test_the_approval_queue_api_reads_the_live_pointer_once_for_many_cards(demo, client):
    for _ in range(5):
        with_reads(demo.maya)
    client.force_login(make_user("sam", staff=True))
    with CaptureQueriesContext(connection) as captured:
        cards = client.get("/api/staff/approvals?status=pending").json()["approvals"]
    assert len(cards) == 5 and pointer_reads(captured) == 1


def test_a_publish_in_a_scope_is_read_back_at_once(demo):
    lead = make_user("lee", staff=True, group="leads")
    with profiles.read_once():
        assert profiles.live().agent_name == profiles.SUNDRY.agent_name
        profiles.draft_save(data=replace(profiles.live(), agent_name="Ada").as_data(), by=lead)
        profiles.draft_publish(by=lead)
        assert profiles.live().agent_name == "Ada"


def a_run_asking_a_refund(customer, queued, monkeypatch, *more) -> str:
    refund = call("issue_refund", {"order_id": "SU-41310", "amount": "10.00", "reason": "never came"})
    model = ScriptedModel(reply(calls=[refund]), *more)
    monkeypatch.setattr(assistant, "shared_model", lambda: model)
    conversation = services.conversation_start(customer=customer)
    services.conversation_post_message(conversation=conversation, text="My parcel SU-41310 never came.")
    return queued.pop()


def test_a_run_reads_the_live_pointer_once(desk, queued, monkeypatch):
    run_id = a_run_asking_a_refund(desk.maya, queued, monkeypatch)
    with CaptureQueriesContext(connection) as captured:
        assert runner.run_execute(run_id) == "awaiting_approval"
    assert pointer_reads(captured) == 1  # the refund's ceiling, auto-approval and four eyes from one read


def test_a_workers_next_run_holds_to_a_ceiling_published_meanwhile(desk, queued, monkeypatch):
    assert runner.run_execute(a_run_asking_a_refund(desk.maya, queued, monkeypatch)) == "awaiting_approval"
    lead = make_user("lee", staff=True, group="leads")
    live = profiles.live()
    profiles.draft_save(data=replace(live, limits=replace(live.limits, refund_ceiling="5.00")).as_data(), by=lead)
    profiles.draft_publish(by=lead)

    run_id = a_run_asking_a_refund(desk.maya, queued, monkeypatch, answer("I can't refund that much myself."))
    assert runner.run_execute(run_id) == "answered"
    assert not Approval.objects.filter(run_id=run_id).exists()  # refused at once, above the new ceiling
