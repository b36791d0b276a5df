"""Who among the staff may decide approvals, and the record of every refusal on the staff API.

Who may do what: Robin is staff with no permission: Robin reads the queue and conversations but decides
nothing. Sam is a support agent (support.decide_approval): Sam approves refunds up to
LARGE_REFUND_THRESHOLD and rejects any. Lee is a support lead (also support.approve_large_refund): Lee
approves refunds above it too. Chris is not staff. Every 403 is logged on support.security with the user,
the address and the reason.
"""

from __future__ import annotations

import io
import json
import logging

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from support.desk import permissions
from support.models import Approval
from tests.desk_factories import (
    REFUND_ARGUMENTS,
    make_user,
    pending_refund_approval,
    queued,  # noqa: F401  (fixture)
    start_conversation,
)

LARGE = {"order_id": "SU-41533", "amount": "150.00", "reason": "the monitor arrived cracked"}


def member(username: str, group: str | None):
    user = make_user(username, staff=True, group=None)
    if group:
        user.groups.add(permissions.ensure_groups()[group])
    return get_user_model().objects.get(pk=user.pk)  # without the permission cache of the old object


@pytest.fixture
def as_user(db, queued, django_capture_on_commit_callbacks):
    """as_user(user) -> a client logged in as them whose POSTs run their on-commit callbacks."""

    def make(user):
        client = Client()
        client.force_login(user)

        def post(path, body=None):
            with django_capture_on_commit_callbacks(execute=True):
                return client.post(path, json.dumps(body or {}), content_type="application/json")

        client.post_json = post
        return client

    return make


@pytest.fixture
def robin(as_user):
    return as_user(member("robin", None))


@pytest.fixture
def sam(as_user):
    return as_user(member("sam", permissions.AGENTS))


@pytest.fixture
def lee(as_user):
    return as_user(member("lee", permissions.LEADS))


@pytest.fixture
def approval(demo):
    return pending_refund_approval(start_conversation(demo.maya))


@pytest.fixture
def large(demo):
    return pending_refund_approval(start_conversation(demo.maya), LARGE)


def decide(client, approval, verb, body=None):
    return client.post_json(f"/api/staff/approvals/{approval.public_id}/{verb}", body)


def still_pending(approval) -> bool:
    return Approval.objects.get(pk=approval.pk).decided_at is None


# -- read-only staff --------------------------------------------------------------------------------------

@pytest.mark.parametrize("verb, body", [("approve", {}), ("reject", {"reason": "not eligible"})])
def test_staff_without_the_permission_may_not_decide(robin, approval, queued, verb, body):
    response = decide(robin, approval, verb, body)
    assert (response.status_code, response.json()["code"]) == (403, "forbidden")
    assert "support.decide_approval" in response.json()["error"]
    assert still_pending(approval) and queued == []


def test_staff_without_the_permission_still_read_the_queue_and_the_conversation(robin, approval):
    listed = robin.get("/api/staff/approvals")
    assert listed.status_code == 200 and [a["id"] for a in listed.json()["approvals"]] == [str(approval.public_id)]
    conversation = robin.get(f"/api/staff/conversations/{approval.run.conversation.public_id}")
    assert conversation.status_code == 200


def test_the_queue_tells_the_console_what_its_viewer_may_decide(robin, sam, lee, approval, settings):
    settings.LARGE_REFUND_THRESHOLD = "100.00"
    viewers = [c.get("/api/staff/approvals").json()["viewer"] for c in (robin, sam, lee)]
    assert [(v["can_decide"], v["can_approve_large_refunds"]) for v in viewers] == [
        (False, False), (True, False), (True, True)]
    assert {v["large_refund_threshold"] for v in viewers} == {"100.00"}


# -- large refunds ----------------------------------------------------------------------------------------

def test_an_agent_approves_a_refund_up_to_the_threshold(sam, approval):
    response = decide(sam, approval, "approve")
    assert response.status_code == 200 and response.json()["approval"]["status"] == "approved"


def test_an_agent_may_not_approve_a_refund_above_the_threshold(sam, large, queued):
    response = decide(sam, large, "approve")
    assert (response.status_code, response.json()["code"]) == (403, "forbidden")
    assert response.json()["error"].startswith("Refunds above 100.00 need a support lead")
    assert still_pending(large) and queued == []


def test_an_agent_may_lower_a_large_refund_below_the_threshold_and_approve_it(sam, large):
    lowered = {**LARGE, "amount": "90.00"}
    response = decide(sam, large, "approve", {"arguments": lowered})
    assert response.status_code == 200
    assert response.json()["approval"]["executed_arguments"] == lowered


def test_an_agent_may_not_raise_a_refund_above_the_threshold_by_editing_it(sam, approval):
    response = decide(sam, approval, "approve", {"arguments": {**REFUND_ARGUMENTS, "amount": "100.01"}})
    assert response.status_code == 403 and still_pending(approval)


def test_an_agent_may_reject_a_large_refund(sam, large):
    response = decide(sam, large, "reject", {"reason": "Please send a photo of the screen first."})
    assert response.status_code == 200 and response.json()["approval"]["status"] == "rejected"


def test_a_lead_approves_a_large_refund(lee, large):
    response = decide(lee, large, "approve")
    assert response.status_code == 200 and response.json()["approval"]["status"] == "approved"


def test_the_threshold_is_a_setting(sam, large, settings):
    settings.LARGE_REFUND_THRESHOLD = "200.00"
    assert decide(sam, large, "approve").status_code == 200


def test_a_card_says_whether_it_is_a_large_refund(robin, approval, large):
    cards = {a["id"]: a for a in robin.get("/api/staff/approvals").json()["approvals"]}
    assert cards[str(approval.public_id)]["large_refund"] is False
    assert cards[str(large.public_id)]["large_refund"] is True


def test_a_superuser_may_decide_everything(as_user, large):
    boss = get_user_model().objects.create_user("boss", password="pw", is_staff=True, is_superuser=True)
    assert decide(as_user(boss), large, "approve").status_code == 200


# -- groups and the demo --------------------------------------------------------------------------------

def test_the_groups_hold_their_permissions(db):
    agent, lead = member("agent", permissions.AGENTS), member("lead", permissions.LEADS)
    assert (agent.has_perm(permissions.DECIDE_APPROVAL), agent.has_perm(permissions.APPROVE_LARGE_REFUND)) == (True, False)
    assert (lead.has_perm(permissions.DECIDE_APPROVAL), lead.has_perm(permissions.APPROVE_LARGE_REFUND)) == (True, True)


def test_the_migration_creates_the_groups(db):
    from django.contrib.auth.models import Group

    # The test database is migrated: the groups are there before anyone asks for them.
    names = set(Group.objects.filter(name__in=[permissions.AGENTS, permissions.LEADS])
                .values_list("name", flat=True))
    assert names == {permissions.AGENTS, permissions.LEADS}


@pytest.mark.parametrize("order", [("seed_demo", "demo_staff"), ("demo_staff", "seed_demo")])
def test_the_demo_staff_login_is_a_support_lead_whichever_command_runs_first(db, settings, order):
    settings.DEBUG = True  # the demo site; demo_staff refuses otherwise
    for command in order:
        call_command(command, stdout=io.StringIO())
    staff = get_user_model().objects.get(username="staff")
    assert staff.is_staff and staff.check_password("sundry-demo")
    assert list(staff.groups.values_list("name", flat=True)) == [permissions.LEADS]
    assert staff.has_perm(permissions.DECIDE_APPROVAL) and staff.has_perm(permissions.APPROVE_LARGE_REFUND)


def test_seeding_a_site_that_is_not_the_demo_creates_no_staff_login(db, settings):
    settings.DEBUG = False
    call_command("seed_demo", stdout=io.StringIO())
    assert not get_user_model().objects.filter(username="staff").exists()


# -- refusals on record ------------------------------------------------------------------------------------

def security_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "support.security" and r.levelno == logging.WARNING]


def test_a_refused_decision_is_logged_with_user_address_and_reason(robin, approval, caplog):
    with caplog.at_level(logging.WARNING, logger="support.security"):
        decide(robin, approval, "approve")
    (line,) = security_lines(caplog)
    assert line.startswith("refused robin (id ") and " from 127.0.0.1: " in line
    assert f"POST /api/staff/approvals/{approval.public_id}/approve" in line and "support.decide_approval" in line


@pytest.mark.parametrize("who, reason", [("anonymous", "Log in with a staff account"),
                                         ("chris", "This needs a staff account")])
def test_outsiders_refused_by_the_staff_api_are_logged(client, db, caplog, who, reason):
    if who != "anonymous":
        client.force_login(make_user(who, staff=False))
    with caplog.at_level(logging.WARNING, logger="support.security"):
        assert client.get("/api/staff/conversations").status_code == 403
    (line,) = security_lines(caplog)
    assert line.startswith(f"refused {who}") and "from 127.0.0.1: GET /api/staff/conversations" in line
    assert reason in line


def test_a_failed_csrf_check_is_logged(db, approval, caplog):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(member("sam", permissions.AGENTS))
    with caplog.at_level(logging.WARNING, logger="support.security"):
        refused = browser.post(f"/api/staff/approvals/{approval.public_id}/approve", "{}",
                               content_type="application/json")
    assert refused.status_code == 403
    (line,) = security_lines(caplog)
    assert line.startswith("refused sam (id ") and line.endswith("CSRF check failed")


def test_a_signed_in_account_that_is_not_staff_on_the_console_is_logged(client, db, caplog):
    client.force_login(make_user("chris", staff=False))
    with caplog.at_level(logging.WARNING, logger="support.security"):
        response = client.get("/console/")
    assert response.status_code == 302  # to the login page, as before
    (line,) = security_lines(caplog)
    assert line.startswith("refused chris (id ") and "GET /console/" in line


def test_an_allowed_request_logs_nothing(sam, approval, caplog):
    with caplog.at_level(logging.WARNING, logger="support.security"):
        assert decide(sam, approval, "approve").status_code == 200
        assert sam.get("/console/").status_code == 200
    assert security_lines(caplog) == []
