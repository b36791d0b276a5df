"""An approval waits APPROVAL_TIMEOUT_SECONDS for a person; after that no decision is accepted.

Who may do what: Sam is staff and decides approvals in time; once an approval's expires_at has passed,
nobody may decide it, whether or not the sweeper has run yet: the late decision expires it instead (as
the sweeper would) and is told so with a 409.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from support.desk import gate, services
from support.models import Approval, Conversation, ToolCall
from tests.desk_factories import (
    make_user,
    pending_refund_approval,
    queued,  # noqa: F401  (fixture)
    start_conversation,
)

pytestmark = pytest.mark.django_db(transaction=True)  # the requeue is sent after the commit


@pytest.fixture
def sam(db):
    return make_user("sam", staff=True)


@pytest.fixture
def approval(demo):
    return Approval.objects.select_related("tool_call", "run").get(
        pk=pending_refund_approval(start_conversation(demo.maya)).pk)


def past_its_time(approval: Approval) -> None:
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))


def assert_expired_by_the_system(approval: Approval, queued) -> None:
    approval.refresh_from_db()
    assert (approval.decision, approval.decided_by, approval.executed_arguments) == (Approval.EXPIRED, None, None)
    assert approval.reason.startswith("no one decided within")
    assert ToolCall.objects.get(pk=approval.tool_call_id).status == ToolCall.REJECTED
    conversation = Conversation.objects.get(pk=approval.run.conversation_id)
    assert conversation.status == Conversation.NEEDS_ATTENTION
    assert conversation.attention_reason.startswith("approval expired")
    assert queued == [approval.run_id]  # resumed, so the agent tells the customer


def test_an_approval_expires_the_timeout_after_it_was_asked_for(approval, settings):
    expected = approval.requested_at + timedelta(seconds=settings.APPROVAL_TIMEOUT_SECONDS)
    assert abs((approval.expires_at - expected).total_seconds()) < 1


def test_a_decision_in_time_is_accepted(approval, sam, queued):
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() + timedelta(seconds=30))
    decided = gate.approval_decide(approval=approval, user=sam, approve=True)
    assert (decided.decision, decided.decided_by) == (Approval.APPROVED, sam)


@pytest.mark.parametrize("approve", [True, False])
def test_a_decision_after_the_expiry_is_refused_even_before_the_sweep_and_expires_it(approval, sam, queued, approve):
    past_its_time(approval)
    with pytest.raises(gate.ApprovalExpired, match="expired: no one decided within"):
        gate.approval_decide(approval=approval, user=sam, approve=approve, reason="no")
    assert_expired_by_the_system(approval, queued)
    assert gate.approvals_expire() == 0  # nothing left for the sweeper


def test_a_decision_after_the_sweep_is_told_it_expired(approval, sam, queued):
    past_its_time(approval)
    assert gate.approvals_expire() == 1
    with pytest.raises(gate.ApprovalExpired):
        gate.approval_decide(approval=approval, user=sam, approve=True)
    assert_expired_by_the_system(approval, queued)


def test_the_sweep_expires_by_expires_at(approval, queued):
    assert gate.approvals_expire() == 0
    past_its_time(approval)
    assert gate.approvals_expire() == 1
    assert_expired_by_the_system(approval, queued)


@pytest.mark.parametrize("verb, body", [("approve", {}), ("reject", {"reason": "no"})])
def test_the_api_answers_a_late_decision_409_saying_it_expired(client, sam, approval, queued, verb, body):
    client.force_login(sam)
    past_its_time(approval)
    response = client.post(f"/api/staff/approvals/{approval.public_id}/{verb}", json.dumps(body),
                           content_type="application/json")
    assert response.status_code == 409
    assert response.json()["error"].startswith("This approval expired: no one decided within")
    assert_expired_by_the_system(approval, queued)


@pytest.mark.parametrize("approve", [True, False])
def test_the_decision_s_event_carries_the_seq_as_of_the_decision_even_when_the_run_answered_before_it_went_out(
        approval, sam, queued, monkeypatch, approve):
    """The resumed run may answer between the decision's commit and its event's sending: the event still says
    where the conversation stood when the decision was made, so the widget knows the answer came after it."""
    from support.desk import serializers

    at_decision = Conversation.objects.get(pk=approval.run.conversation_id).last_seq
    sent, publish = [], serializers.publish_approval

    def answered_first(decided):
        services.message_append(conversation=Conversation.objects.get(pk=decided.run.conversation_id),
                                wire={"role": "assistant", "content": "The answer."}, author="agent")
        monkeypatch.setattr(serializers.events.publisher, "send", lambda groups, event: sent.append(event))
        publish(decided)

    monkeypatch.setattr(serializers, "publish_approval", answered_first)
    fresh = Approval.objects.get(pk=approval.pk)  # as a view reads it: nothing of its run loaded
    gate.approval_decide(approval=fresh, user=sam, approve=approve, reason="" if approve else "no")
    [decided] = [e for e in sent if e["type"] == "approval.decided" and "status" in e]
    assert decided["seq"] == at_decision
