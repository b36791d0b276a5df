"""The staff's API, as the console uses it.

Who may do what: Sam is staff, a support agent (support.decide_approval), and may list and decide
approvals and read every conversation with its trace. Chris has an account but is not staff, and an
anonymous visitor has none: both get a 403 in JSON from every staff endpoint (never a redirect to the
login page), and their decisions change nothing. Every POST needs the CSRF token. Staff without the
permission, and large refunds: tests/test_staff_permissions.py.
"""

from __future__ import annotations

import json
import re
import uuid

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from support.desk import permissions, services
from support.models import Approval, Conversation, Message, Run, Step, ToolCall
from tests.desk_factories import (
    REFUND_ARGUMENTS,
    make_user,
    pending_refund_approval,
    queued,  # noqa: F401  (fixture)
    start_conversation,
)


@pytest.fixture
def sam(db):
    user = make_user("sam", staff=True)
    user.groups.add(permissions.ensure_groups()[permissions.AGENTS])
    return user


@pytest.fixture
def staff(client, sam, queued, django_capture_on_commit_callbacks):
    """A client logged in as Sam whose POSTs run their on-commit callbacks (the run's requeue)."""
    client.force_login(sam)

    def post(path, body=None):
        with django_capture_on_commit_callbacks(execute=True):
            return client.post(path, json.dumps(body or {}), content_type="application/json")

    client.post_json = post
    return client


@pytest.fixture
def approval(demo):
    return pending_refund_approval(start_conversation(demo.maya))


def spoken(customer):
    """A conversation the customer wrote in: staff never see an empty one."""
    conversation = start_conversation(customer)
    services.message_append(conversation=conversation, wire={"role": "user", "content": "Hello?"},
                            author=Message.CUSTOMER)
    return conversation


def decide(staff, approval, verb, body=None):
    return staff.post_json(f"/api/staff/approvals/{approval.public_id}/{verb}", body)


def snapshot(approval):
    fresh = Approval.objects.select_related("tool_call", "run").get(pk=approval.pk)
    return (fresh.decided_at, fresh.decision, fresh.decided_by_id, fresh.reason, fresh.executed_arguments,
            fresh.tool_call.status, fresh.run.status)


# -- you may not: anonymous visitors and non-staff accounts ---------------------------------------------

ENDPOINTS = [
    ("get", "/api/staff/approvals"),
    ("get", "/api/staff/approvals?status=all"),
    ("post", "/api/staff/approvals/{approval}/approve"),
    ("post", "/api/staff/approvals/{approval}/reject"),
    ("get", "/api/staff/conversations"),
    ("get", "/api/staff/conversations/{conversation}"),
]


@pytest.mark.parametrize("who", ["anonymous", "not staff"])
@pytest.mark.parametrize("method, path", ENDPOINTS)
def test_only_staff_may_use_the_staff_api(client, approval, queued, who, method, path):
    if who == "not staff":
        client.force_login(make_user("chris", staff=False))
    before = snapshot(approval)
    url = path.format(approval=approval.public_id, conversation=approval.run.conversation.public_id)
    body = {"reason": "no", "arguments": {**REFUND_ARGUMENTS, "amount": "1.00"}}
    if method == "post":
        response = client.post(url, json.dumps(body), content_type="application/json")
    else:
        response = client.get(url)
    assert response.status_code == 403
    expected = "Log in with a staff account to use the staff API." if who == "anonymous" \
        else "This needs a staff account."
    assert response.json() == {"error": expected, "code": "forbidden", "retryable": False}
    assert snapshot(approval) == before and queued == []


def test_a_non_staff_user_is_not_told_whether_an_approval_exists(client, db):
    client.force_login(make_user("chris", staff=False))
    response = client.post(f"/api/staff/approvals/{uuid.uuid4()}/approve", "{}", content_type="application/json")
    assert response.status_code == 403


# -- CSRF -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("verb, body", [("approve", {}), ("reject", {"reason": "not eligible"})])
def test_a_decision_needs_the_csrf_token_from_the_cookie(approval, sam, queued, verb, body,
                                                          django_capture_on_commit_callbacks):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(sam)
    assert browser.get("/api/staff/approvals").status_code == 200  # hands out the CSRF cookie
    url = f"/api/staff/approvals/{approval.public_id}/{verb}"
    before = snapshot(approval)

    refused = browser.post(url, json.dumps(body), content_type="application/json")
    assert refused.status_code == 403
    assert refused.json()["error"].startswith("CSRF check failed")
    assert snapshot(approval) == before

    with django_capture_on_commit_callbacks(execute=True):
        accepted = browser.post(url, json.dumps(body), content_type="application/json",
                                HTTP_X_CSRFTOKEN=browser.cookies["csrftoken"].value)
    assert accepted.status_code == 200
    assert accepted.json()["approval"]["status"] == ("approved" if verb == "approve" else "rejected")


# -- listing approvals ----------------------------------------------------------------------------------

def test_it_lists_pending_approvals_oldest_first_and_drops_them_once_decided(staff, demo):
    first = pending_refund_approval(start_conversation(demo.maya))
    second = pending_refund_approval(start_conversation(demo.tom), {**REFUND_ARGUMENTS, "amount": "10.00"})
    listed = staff.get("/api/staff/approvals").json()["approvals"]
    assert [a["id"] for a in listed] == [str(first.public_id), str(second.public_id)]
    assert listed[0]["context"]["summary"] == "Refund 64.00 EUR on SU-41310 — parcel not received"  # the card: test_approval_cards.py
    assert {key: value for key, value in listed[0].items() if key != "context"} == {
        "id": str(first.public_id), "run": str(first.run.public_id),
        "conversation": str(first.run.conversation.public_id), "tool": "issue_refund",
        "call_id": first.tool_call.call_id, "status": "pending", "requested_at": listed[0]["requested_at"],
        "requested_arguments": REFUND_ARGUMENTS, "executed_arguments": None, "decided_at": None, "reason": "",
        "decided_by": None, "decided_via": None, "large_refund": False, "customer_messages_since": [], "customer_messages_since_count": 0,
        "needs_second_look": False, "not_run_reason": "",
        "routed_to": None, "routed_at": None,  # nobody online to route it to (tests/test_routing.py)
        # four eyes (tests/test_four_eyes.py): off here, so one person's approval decides it
        "approvals_needed": 1, "approvals": [], "first_arguments": None,
        # its deadline (tests/test_approval_deadlines.py): nobody reminded yet
        "deadline": {"expires_at": listed[0]["context"]["expires_at"], "remind_at": listed[0]["deadline"]["remind_at"],
                     "escalate_at": listed[0]["deadline"]["escalate_at"], "reminded_at": None, "escalated_at": None},
        # decisions before it on its order (tests/test_earlier_decisions.py): none
        "earlier_decisions": {"shown": [], "more": 0, "rejection": None},
    }
    assert decide(staff, first, "approve").status_code == 200
    assert [a["id"] for a in staff.get("/api/staff/approvals").json()["approvals"]] == [str(second.public_id)]
    decided = staff.get("/api/staff/approvals?status=decided").json()["approvals"]
    assert [(a["id"], a["status"], a["decided_by"]) for a in decided] == [(str(first.public_id), "approved", "sam")]
    assert len(staff.get("/api/staff/approvals?status=all").json()["approvals"]) == 2


def test_it_refuses_an_unknown_approval_status_filter(staff):
    response = staff.get("/api/staff/approvals?status=maybe")
    assert (response.status_code, response.json()) == (400, {"error": "status must be one of: pending, decided, all.",
                                                             "code": "invalid_request", "retryable": False})


# -- deciding -------------------------------------------------------------------------------------------

def test_it_approves_as_requested_and_requeues_the_run(staff, sam, approval, queued):
    response = decide(staff, approval, "approve")
    assert response.status_code == 200
    data = response.json()["approval"]
    assert (data["status"], data["decided_by"], data["executed_arguments"]) == ("approved", "sam", REFUND_ARGUMENTS)
    assert data["decided_via"] == "console"  # where the decision was made: the console (e-mail, Slack elsewhere)
    approval.refresh_from_db()
    assert (approval.decision, approval.decided_by, approval.executed_arguments) == ("approved", sam, REFUND_ARGUMENTS)
    assert approval.decided_via == Approval.CONSOLE
    assert ToolCall.objects.get(pk=approval.tool_call_id).status == ToolCall.APPROVED
    assert Run.objects.get(pk=approval.run_id).status == Run.QUEUED
    assert queued == [approval.run_id]


def test_it_approves_with_edited_arguments_and_keeps_both(staff, approval):
    edited = {**REFUND_ARGUMENTS, "amount": "32.00"}
    data = decide(staff, approval, "approve", {"arguments": edited}).json()["approval"]
    assert (data["requested_arguments"], data["executed_arguments"]) == (REFUND_ARGUMENTS, edited)
    approval.refresh_from_db()
    assert (approval.requested_arguments, approval.executed_arguments) == (REFUND_ARGUMENTS, edited)


@pytest.mark.parametrize("arguments", [{**REFUND_ARGUMENTS, "amount": "ten"}, {"order_id": "SU-41310"}, "all of it"])
def test_it_refuses_invalid_edited_arguments_and_leaves_the_approval_pending(staff, approval, queued, arguments):
    before = snapshot(approval)
    response = decide(staff, approval, "approve", {"arguments": arguments})
    assert response.status_code == 400
    assert "issue_refund" in response.json()["error"] or "JSON object" in response.json()["error"]
    assert snapshot(approval) == before and queued == []


def test_invalid_amount_is_explained_with_the_schema_error(staff, approval):
    error = decide(staff, approval, "approve", {"arguments": {**REFUND_ARGUMENTS, "amount": "ten"}}).json()["error"]
    assert error.startswith("invalid arguments for issue_refund at amount:") and "'ten'" in error


def test_it_rejects_with_a_reason(staff, approval, queued):
    data = decide(staff, approval, "reject", {"reason": "Delivered with a photo."}).json()["approval"]
    assert (data["status"], data["reason"], data["executed_arguments"]) == ("rejected", "Delivered with a photo.", None)
    assert ToolCall.objects.get(pk=approval.tool_call_id).status == ToolCall.REJECTED
    assert queued == [approval.run_id]


@pytest.mark.parametrize("body", [{}, {"reason": ""}, {"reason": "   "}, {"reason": 5}])
def test_a_rejection_needs_a_reason(staff, approval, queued, body):
    before = snapshot(approval)
    response = decide(staff, approval, "reject", body)
    assert response.status_code == 400
    assert response.json()["error"] in ("A rejection needs a reason; the agent relays it to the customer.",
                                        "reason must be text.")
    assert snapshot(approval) == before and queued == []


@pytest.mark.parametrize("first, second", [("approve", "approve"), ("approve", "reject"), ("reject", "approve")])
def test_a_different_second_decision_is_told_409_and_changes_nothing(staff, approval, queued, first, second):
    assert decide(staff, approval, first, {"reason": "first"}).status_code == 200
    after_first, queued_after_first = snapshot(approval), list(queued)
    response = decide(staff, approval, second, {"reason": "second", "arguments": {**REFUND_ARGUMENTS, "amount": "1"}})
    body = response.json()
    assert (response.status_code, body["code"], body["retryable"]) == (409, "conflict", False)
    verdict = "approved" if first == "approve" else "rejected"
    assert re.fullmatch(rf"sam already {verdict} this at \d\d:\d\d UTC\.", body["error"]), body["error"]
    assert body["approval"]["status"] == verdict
    assert snapshot(approval) == after_first and queued == queued_after_first


@pytest.mark.parametrize("verb, body", [("approve", {}), ("approve", {"arguments": {**REFUND_ARGUMENTS, "amount": "20.00"}}),
                                        ("reject", {"reason": "Delivered with a photo."})])
def test_the_same_decision_again_gets_the_same_bytes_whatever_the_run_did_since(staff, approval, verb, body):
    """A double click or a retry after a lost answer: the answer is the card as decided, byte for byte, although
    meanwhile the refund ran (the order's balance, shown live on cards, moved) and the call finished."""
    from decimal import Decimal

    from support.shop import shop

    first = decide(staff, approval, verb, body)
    assert first.status_code == 200
    shop().refund(order_number="SU-41310", amount=Decimal("5.00"), reason="another", idempotency_key="elsewhere")
    ToolCall.objects.filter(pk=approval.tool_call_id).update(status=ToolCall.EXECUTED)
    live = staff.get("/api/staff/approvals?status=all").json()["approvals"]
    assert json.dumps(live[0]["context"], sort_keys=True) != json.dumps(first.json()["approval"]["context"], sort_keys=True)
    again = decide(staff, approval, verb, body)
    assert again.status_code == 200
    assert again.content == first.content


@pytest.mark.django_db(transaction=True)
def test_identical_decisions_at_the_same_instant_get_identical_answers(demo, sam):
    """Twenty trials of four identical approvals sent at once: every answer of a trial is the same bytes."""
    import threading

    if connection.vendor != "postgresql":
        pytest.skip("SQLite serialises writers: no race to lose")
    differing = 0
    for _ in range(20):
        approval = pending_refund_approval(start_conversation(demo.maya))
        answers, barrier = [], threading.Barrier(4)

        def one():
            client = Client()
            client.force_login(sam)
            barrier.wait()
            answers.append(client.post(f"/api/staff/approvals/{approval.public_id}/approve", "{}",
                                       content_type="application/json"))
            connection.close()

        threads = [threading.Thread(target=one) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert [a.status_code for a in answers] == [200] * 4
        differing += len({a.content for a in answers}) > 1
    assert differing == 0


@pytest.mark.parametrize("public_id", ["3f2b9c1e-5d7a-4e8b-9c0d-1a2b3c4d5e6f", "not-a-uuid"])  # no such approval
@pytest.mark.parametrize("verb", ["approve", "reject"])
def test_deciding_an_unknown_approval_is_404(staff, public_id, verb):
    response = staff.post_json(f"/api/staff/approvals/{public_id}/{verb}", {"reason": "x"})
    assert (response.status_code, response.json()) == (404, {"error": "No such approval.",
                                                             "code": "not_found", "retryable": False})


def test_a_decision_is_a_post(staff, approval):
    response = staff.get(f"/api/staff/approvals/{approval.public_id}/approve")
    assert response.status_code == 405 and response["Allow"] == "POST"
    assert snapshot(approval)[0] is None


# -- conversations --------------------------------------------------------------------------------------

def test_it_lists_conversations_with_their_run_and_pending_approvals(staff, demo):
    quiet = spoken(demo.tom)
    waiting = spoken(demo.maya)
    approval = pending_refund_approval(waiting)  # one pending approval in `waiting`; none in `quiet`
    listed = {c["id"]: c for c in staff.get("/api/staff/conversations").json()["conversations"]}
    assert set(listed) == {str(quiet.public_id), str(waiting.public_id)}
    run = listed[str(waiting.public_id)]["run"]
    assert {k: run[k] for k in ("id", "status", "stop_reason", "outcome")} == {
        "id": str(approval.run.public_id), "status": "awaiting_approval", "stop_reason": None, "outcome": None}
    assert run["cost_usd"] == "0.000000" and run["created_at"]
    assert listed[str(waiting.public_id)]["pending_approvals"] == 1
    assert listed[str(waiting.public_id)]["customer"] == "maya@example.com"
    assert (listed[str(quiet.public_id)]["run"], listed[str(quiet.public_id)]["pending_approvals"]) == (None, 0)
    decide(staff, approval, "reject", {"reason": "no"})
    after = {c["id"]: c for c in staff.get("/api/staff/conversations").json()["conversations"]}
    assert after[str(waiting.public_id)]["pending_approvals"] == 0
    assert after[str(waiting.public_id)]["run"]["status"] == "queued"


def test_it_shows_the_latest_run_of_a_conversation(staff, demo):
    conversation = spoken(demo.maya)
    Run.objects.create(conversation=conversation, status=Run.STOPPED, stop_reason="answered", outcome="resolved")
    latest = Run.objects.create(conversation=conversation, status=Run.STOPPED, stop_reason="escalated")
    (listed,) = staff.get("/api/staff/conversations").json()["conversations"]
    assert {k: listed["run"][k] for k in ("id", "status", "stop_reason", "outcome")} == {
        "id": str(latest.public_id), "status": "stopped", "stop_reason": "escalated", "outcome": None}


def test_it_filters_conversations_by_status(staff, demo):
    spoken(demo.maya)
    flagged = spoken(demo.tom)
    Conversation.objects.filter(pk=flagged.pk).update(status=Conversation.NEEDS_ATTENTION)
    listed = staff.get("/api/staff/conversations?status=needs_attention").json()["conversations"]
    assert [c["id"] for c in listed] == [str(flagged.public_id)]
    response = staff.get("/api/staff/conversations?status=closed")
    assert response.status_code == 400 and "needs_attention" in response.json()["error"]


def test_listing_conversations_takes_the_same_queries_for_one_or_many(staff, demo):
    def list_queries():
        with CaptureQueriesContext(connection) as captured:
            assert staff.get("/api/staff/conversations").status_code == 200
        return len(captured)

    pending_refund_approval(start_conversation(demo.maya))
    one = list_queries()
    for customer in (demo.maya, demo.tom, demo.ines):
        pending_refund_approval(start_conversation(customer))
    assert list_queries() == one


def test_it_shows_a_conversation_with_everything_for_staff(staff, demo):
    conversation = start_conversation(demo.maya)
    approval = pending_refund_approval(conversation)
    Step.objects.create(run=approval.run, kind="model", turn=1, label="Thinking", finish_reason="tool_calls")
    Step.objects.create(run=approval.run, kind="tool", turn=1, tool="issue_refund", call_id=approval.tool_call.call_id)
    data = staff.get(f"/api/staff/conversations/{conversation.public_id}").json()
    assert data["conversation"]["id"] == str(conversation.public_id)
    assert data["conversation"]["customer"] == "maya@example.com"
    assert [m["role"] for m in data["messages"]] == ["system", "assistant"]
    assert data["messages"][1]["tool_calls"][0]["function"]["name"] == "issue_refund"
    assert data["messages"][1]["run"] == str(approval.run.public_id)
    (run,) = data["runs"]
    assert (run["id"], run["status"]) == (str(approval.run.public_id), "awaiting_approval")
    assert [(s["kind"], s["tool"]) for s in run["steps"]] == [("model", ""), ("tool", "issue_refund")]
    assert [(a["id"], a["status"]) for a in data["approvals"]] == [(str(approval.public_id), "pending")]
    assert Message.objects.filter(conversation=conversation).count() == len(data["messages"])


def test_a_tool_of_another_service_is_named_with_its_service_for_staff_only(staff, demo, settings, client):
    from agentsite.mcp_settings import parse_servers
    from support.customers import identity
    from support.desk import services

    settings.MCP_SERVERS = parse_servers([{"name": "warranty", "url": "http://127.0.0.1:9/mcp",
                                           "tools": {"lookup_warranty": {"kind": "read"}}}])
    conversation = start_conversation(demo.maya)
    calls = [{"id": "w1", "type": "function", "function": {"name": "lookup_warranty", "arguments": "{}"}},
             {"id": "o1", "type": "function", "function": {"name": "get_order", "arguments": "{}"}}]
    services.message_append(conversation=conversation, author=Message.AGENT,
                            wire={"role": "assistant", "content": "Let me check.", "tool_calls": calls})
    said = staff.get(f"/api/staff/conversations/{conversation.public_id}").json()["messages"][-1]
    assert said["tool_servers"] == {"w1": "warranty"}  # the desk's own tools have none
    token = identity.conversation_token(conversation)
    seen = client.get(f"/api/conversations/{conversation.public_id}/messages",
                      HTTP_AUTHORIZATION=f"Bearer {token}").json()["messages"][-1]
    assert "tool_servers" not in seen and "tool_calls" not in seen


@pytest.mark.parametrize("public_id", ["3f2b9c1e-5d7a-4e8b-9c0d-1a2b3c4d5e6f", "nope"])  # no such one
def test_an_unknown_conversation_is_404_for_staff_too(staff, public_id):
    response = staff.get(f"/api/staff/conversations/{public_id}")
    assert (response.status_code, response.json()) == (404, {"error": "No such conversation.",
                                                             "code": "not_found", "retryable": False})


# -- logging in -----------------------------------------------------------------------------------------

def test_staff_log_in_on_the_login_page_and_land_on_the_console(client, sam):
    page = client.get("/accounts/login/")
    assert page.status_code == 200 and b'name="password"' in page.content
    response = client.post("/accounts/login/", {"username": "sam", "password": "pw-sam"})
    assert (response.status_code, response["Location"]) == (302, "/console/")
    assert client.get("/api/staff/approvals").status_code == 200


def test_a_wrong_password_stays_on_the_login_page_with_an_error(client, sam):
    response = client.post("/accounts/login/", {"username": "sam", "password": "wrong"})
    assert response.status_code == 200 and b'class="error"' in response.content
    assert client.get("/api/staff/approvals").status_code == 403
