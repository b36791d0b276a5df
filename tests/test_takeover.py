"""A staff member takes a conversation over, replies, and hands it back to the agent.

Who may do what: only staff (the API's staff_required; covered for every staff endpoint in
test_api_staff.py); a reply needs the conversation taken over first.
"""

import json
import threading
import time

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from support import runner, services
from support.models import Approval, Conversation, Message, Run
from tests.standin_fixture import standin  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sam():
    return get_user_model().objects.create_user("sam", password="pw", first_name="Sam", is_staff=True)


def staff_client(user):
    client = Client()
    client.force_login(user)
    return client


def post(client, url, body=None):
    return client.post(url, json.dumps(body or {}), content_type="application/json")


def paused_refund(desk, queued):
    conversation = services.conversation_start(customer=desk.maya)
    services.conversation_post_message(conversation=conversation, text="My parcel SU-41310 never came.")
    run_id = queued.pop()
    assert runner.run_execute(run_id) == "awaiting_approval"
    return conversation, Run.objects.get(pk=run_id)


def test_taking_over_a_paused_run_stops_it_and_closes_its_waiting_calls(desk, queued, sam):
    conversation, run = paused_refund(desk, queued)
    response = post(staff_client(sam), f"/api/staff/conversations/{conversation.public_id}/takeover")
    assert response.status_code == 200 and response.json()["conversation"]["status"] == "taken_over"
    run.refresh_from_db()
    assert (run.status, run.stop_reason) == ("stopped", "taken_over")
    approval = Approval.objects.get(run=run)
    assert approval.decision == "expired" and "took the conversation over" in approval.reason
    closing = conversation.messages.filter(role="tool").last()
    assert closing.content.startswith("ERROR: not run") and closing.tool_call_id == approval.tool_call.call_id
    conversation.refresh_from_db()
    assert conversation.assignee == sam
    _, new_run, _ = services.conversation_post_message(conversation=conversation, text="Hello?")
    assert new_run is None and queued == []  # the person answers now


def test_a_working_run_stops_before_its_next_model_call(desk, queued, sam, standin):
    standin.queue_faults(["delay:ms=1500"], match="Where is SU-41210?")
    conversation = services.conversation_start(customer=desk.maya)
    services.conversation_post_message(conversation=conversation, text="Where is SU-41210?")
    outcome = []
    worker = threading.Thread(target=lambda: outcome.append(runner.run_execute(queued.pop())))
    worker.start()
    deadline = time.monotonic() + 5  # claimed, and so inside its first (delayed) model call
    while not Run.objects.filter(conversation=conversation, status=Run.RUNNING).exists():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    time.sleep(0.3)
    services.conversation_take_over(conversation=conversation, user=sam)
    worker.join(10)
    assert outcome == ["taken_over"]
    run = Run.objects.get(conversation=conversation)
    assert run.stop_reason == "taken_over" and run.turns == 1
    assert not conversation.messages.filter(role="assistant", author=Message.AGENT).exclude(content=None).exists()


def test_staff_replies_reach_the_conversation_as_the_staff_member(desk, queued, sam):
    conversation, _ = paused_refund(desk, queued)
    client = staff_client(sam)
    url = f"/api/staff/conversations/{conversation.public_id}/messages"
    assert post(client, url, {"text": "Hi, Sam here."}).status_code == 409  # not taken over yet
    post(client, f"/api/staff/conversations/{conversation.public_id}/takeover")
    response = post(client, url, {"text": "Hi, Sam here. I'm checking with the carrier."})
    assert response.status_code == 201
    reply = conversation.messages.last()
    assert (reply.role, reply.author, reply.author_user) == ("assistant", "staff", sam)
    assert post(client, url, {"text": ""}).status_code == 400


def test_handing_back_lets_the_agent_answer_what_is_unanswered(desk, queued, sam):
    conversation, _ = paused_refund(desk, queued)
    client = staff_client(sam)
    post(client, f"/api/staff/conversations/{conversation.public_id}/takeover")
    post(client, f"/api/staff/conversations/{conversation.public_id}/messages", {"text": "Let me look."})
    services.conversation_post_message(conversation=conversation, text="Where is SU-41210 then?")
    response = post(client, f"/api/staff/conversations/{conversation.public_id}/handback")
    assert response.status_code == 200 and response.json()["conversation"]["status"] == "open"
    # The history has a staff reply, an answered-as-not-run call and a new question: OpenAI must accept it.
    assert runner.run_execute(queued.pop()) == "answered"
    conversation.refresh_from_db()
    assert conversation.status == Conversation.OPEN and conversation.assignee is None


def test_handing_back_with_nothing_unanswered_starts_no_run(desk, queued, sam):
    conversation, _ = paused_refund(desk, queued)
    services.conversation_take_over(conversation=conversation, user=sam)
    services.conversation_staff_reply(conversation=conversation, user=sam, text="All sorted, refund issued.")
    assert services.conversation_hand_back(conversation=conversation, user=sam) is None and queued == []


def test_a_run_that_inherits_an_approved_call_runs_it_when_decided_again(desk, queued, sam):
    # Approved, then taken over before the resume ran: the approved call is still open when the
    # conversation is handed back. The new run pauses on it before any model call; its decision must
    # still reach it, or the run would wait for ever on an approval nobody can decide again.
    from support.models import Refund, ToolCall

    conversation, run = paused_refund(desk, queued)
    services.approval_decide(approval=Approval.objects.get(run=run), user=sam, approve=True)
    assert queued == [run.pk]
    queued.clear()  # the resume is queued but no worker has claimed it yet
    services.conversation_take_over(conversation=conversation, user=sam)
    services.conversation_post_message(conversation=conversation, text="Hello? Any news?")
    second = services.conversation_hand_back(conversation=conversation, user=sam)
    assert second is not None and second.pk != run.pk
    assert runner.run_execute(queued.pop()) == "awaiting_approval"
    second.refresh_from_db()
    assert second.turns == 0  # paused on the inherited call, before calling the model
    services.approval_decide(approval=Approval.objects.get(run=second), user=sam, approve=True)
    assert queued == [second.pk]
    assert runner.run_execute(queued.pop()) == "answered"
    assert Refund.objects.filter(order__number="SU-41310").count() == 1
    assert ToolCall.objects.get(run=second, name="issue_refund").status == ToolCall.EXECUTED
