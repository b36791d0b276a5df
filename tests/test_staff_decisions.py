"""A decision repeated is answered, not refused: a double click or a retried request by the same person
with the same verdict gets the same 200 and changes nothing; any other second decision gets a 409 that
says who decided, what, and when.

Who: Sam Lee and Kim are support agents (support.decide_approval).
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from datetime import timezone as dt_timezone

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from support.desk import gate, permissions, services
from support.models import Approval
from tests.desk_factories import (
    REFUND_ARGUMENTS,
    pending_refund_approval,
    queued,  # noqa: F401  (fixture)
    start_conversation,
)


def agent(username: str, **names):
    user = get_user_model().objects.create_user(username, password="pw", is_staff=True, **names)
    user.groups.add(permissions.ensure_groups()[permissions.AGENTS])
    return user


@pytest.fixture
def sam_lee(db):
    return agent("sam", first_name="Sam", last_name="Lee")


@pytest.fixture
def login(queued, django_capture_on_commit_callbacks):
    def make(user):
        client = Client()
        client.force_login(user)

        def post(approval, verb, body=None):
            with django_capture_on_commit_callbacks(execute=True):
                return client.post(f"/api/staff/approvals/{approval.public_id}/{verb}", json.dumps(body or {}),
                                   content_type="application/json")

        client.decide = post
        return client

    return make


@pytest.fixture
def approval(demo):
    return pending_refund_approval(start_conversation(demo.maya))


def record(approval):
    fresh = Approval.objects.select_related("tool_call", "run").get(pk=approval.pk)
    return (fresh.decided_at, fresh.decision, fresh.decided_by_id, fresh.reason, fresh.executed_arguments,
            fresh.tool_call.status, fresh.run.status)


@pytest.mark.parametrize("verb, body", [
    ("approve", {}),
    ("approve", {"arguments": {**REFUND_ARGUMENTS, "amount": "30.00"}}),
    ("reject", {"reason": "Delivered with a photo."}),
])
def test_the_same_decision_twice_by_the_same_person_gets_the_same_answer_and_changes_nothing(
        login, sam_lee, approval, queued, verb, body):
    sam = login(sam_lee)
    first = sam.decide(approval, verb, body)
    after_first, queued_after_first = record(approval), list(queued)
    again = sam.decide(approval, verb, body)
    assert (first.status_code, again.status_code) == (200, 200)
    assert again.json() == first.json()
    assert record(approval) == after_first and queued == queued_after_first == [approval.run_id]


def test_a_rejection_repeated_with_the_reason_padded_is_the_same_rejection(login, sam_lee, approval):
    sam = login(sam_lee)
    assert sam.decide(approval, "reject", {"reason": "Not eligible."}).status_code == 200
    assert sam.decide(approval, "reject", {"reason": "  Not eligible.\n"}).status_code == 200


@pytest.mark.parametrize("first, second", [
    (("approve", {}), ("reject", {"reason": "changed my mind"})),
    (("reject", {"reason": "no"}), ("approve", {})),
    (("approve", {}), ("approve", {"arguments": {**REFUND_ARGUMENTS, "amount": "10.00"}})),
    (("reject", {"reason": "no"}), ("reject", {"reason": "no, and here is why"})),
])
def test_a_different_second_decision_is_409_naming_who_decided_and_when(login, sam_lee, approval, first, second):
    sam = login(sam_lee)
    assert sam.decide(approval, *first).status_code == 200
    after_first = record(approval)
    response = sam.decide(approval, *second)
    assert (response.status_code, response.json()["code"]) == (409, "conflict")
    verdict = "approved" if first[0] == "approve" else "rejected"
    at = Approval.objects.get(pk=approval.pk).decided_at.strftime("%H:%M")
    assert response.json()["error"] == f"Sam Lee already {verdict} this at {at} UTC."
    assert record(approval) == after_first


def test_the_same_decision_by_someone_else_is_409(login, sam_lee, approval):
    assert login(sam_lee).decide(approval, "approve").status_code == 200
    after_sam = record(approval)
    response = login(agent("kim")).decide(approval, "approve")
    assert response.status_code == 409
    assert re.fullmatch(r"Sam Lee already approved this at \d\d:\d\d UTC\.", response.json()["error"])
    assert record(approval) == after_sam


def test_someone_without_a_full_name_is_named_by_username(login, approval):
    assert login(agent("kim")).decide(approval, "approve").status_code == 200
    response = login(agent("ana")).decide(approval, "reject", {"reason": "no"})
    assert re.fullmatch(r"kim already approved this at \d\d:\d\d UTC\.", response.json()["error"])


def test_a_decision_of_another_day_is_named_with_its_date(sam_lee, approval, queued):
    gate.approval_decide(approval=approval, user=sam_lee, approve=True)
    decided_at = timezone.now() - timedelta(days=3)
    Approval.objects.filter(pk=approval.pk).update(decided_at=decided_at)
    with pytest.raises(services.AlreadyDecided) as refused:
        gate.approval_decide(approval=approval, user=sam_lee, approve=False, reason="no")
    utc = decided_at.astimezone(dt_timezone.utc)
    assert str(refused.value) == f"Sam Lee already approved this at {utc:%H:%M} UTC on {utc:%d %b %Y}."


def test_a_decision_made_by_the_system_says_so(approval, sam_lee, queued):
    gate.approval_decide(approval=approval, user=None, approve=True)  # as the auto-approval policy does
    with pytest.raises(services.AlreadyDecided, match=r"^The system already approved this at \d\d:\d\d UTC\.$"):
        gate.approval_decide(approval=approval, user=sam_lee, approve=True)
