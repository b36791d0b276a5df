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

from support.desk import gate, runner, services, takeover
from support.models import Approval, Conversation, Message, Refund, Run, Step, ToolCall
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


def test_a_working_run_stops_at_once_and_its_late_reply_is_neither_saved_nor_acted_on(desk, queued, sam, standin):
    # The reply to this question calls a tool; it arrives after the take-over, which has cleared the
    # run's lease: the worker's next write fails, so nothing of the reply is saved and no tool runs.
    standin.queue_faults(["delay:ms=1500"], match="Where is SU-41210?")
    conversation = services.conversation_start(customer=desk.maya)
    services.conversation_post_message(conversation=conversation, text="Where is SU-41210?")
    worker = threading.Thread(target=runner.run_execute, args=(queued.pop(),))
    worker.start()
    deadline = time.monotonic() + 5  # claimed, and so inside its first (delayed) model call
    while not Run.objects.filter(conversation=conversation, status=Run.RUNNING).exists():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    time.sleep(0.3)
    takeover.conversation_take_over(conversation=conversation, user=sam)
    run = Run.objects.get(conversation=conversation)
    assert (run.status, run.stop_reason, run.lease) == ("stopped", "taken_over", "")  # now, not later
    worker.join(10)
    assert not worker.is_alive()
    run.refresh_from_db()
    assert (run.status, run.stop_reason, run.turns) == ("stopped", "taken_over", 0)
    assert not conversation.messages.filter(author=Message.AGENT).exists()
    assert not ToolCall.objects.filter(run=run).exists() and not Step.objects.filter(run=run).exists()


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


def test_after_a_hand_back_the_agent_answers_what_the_customer_writes_next(desk, queued, sam):
    conversation, _ = paused_refund(desk, queued)
    client = staff_client(sam)
    post(client, f"/api/staff/conversations/{conversation.public_id}/takeover")
    post(client, f"/api/staff/conversations/{conversation.public_id}/messages", {"text": "Let me look."})
    services.conversation_post_message(conversation=conversation, text="Thanks Sam")  # for the person
    response = post(client, f"/api/staff/conversations/{conversation.public_id}/handback")
    assert response.status_code == 200 and response.json()["conversation"]["status"] == "open"
    assert queued == []  # what the customer said to Sam is not the agent's to answer
    services.conversation_post_message(conversation=conversation, text="Where is SU-41210 then?")
    # The history has a staff reply, an answered-as-not-run call, the notices and a new question: OpenAI
    # must accept it.
    assert runner.run_execute(queued.pop()) == "answered"
    conversation.refresh_from_db()
    assert conversation.status == Conversation.OPEN and conversation.assignee is None


def test_handing_back_with_nothing_unanswered_starts_no_run(desk, queued, sam):
    conversation, _ = paused_refund(desk, queued)
    takeover.conversation_take_over(conversation=conversation, user=sam)
    takeover.conversation_staff_reply(conversation=conversation, user=sam, text="All sorted, refund issued.")
    assert takeover.conversation_hand_back(conversation=conversation, user=sam) is None and queued == []


def test_an_approved_call_not_yet_run_is_answered_as_not_run_and_never_runs_after_hand_back(desk, queued, sam):
    # Approved, then taken over before the resume ran: the person handles the case, so the refund must
    # not happen later behind their back, nor be asked for again under a new approval.
    conversation, run = paused_refund(desk, queued)
    approval = Approval.objects.get(run=run)
    gate.approval_decide(approval=approval, user=sam, approve=True)
    assert queued == [run.pk]
    takeover.conversation_take_over(conversation=conversation, user=sam)
    approval.refresh_from_db()
    call = ToolCall.objects.get(pk=approval.tool_call_id)
    assert (approval.decision, approval.decided_by, approval.not_run_reason) == ("approved", sam, takeover.TAKEN_OVER)
    assert (call.status, call.result) == (ToolCall.REJECTED, takeover.TAKEN_OVER_RESULT)
    assert conversation.messages.get(role="tool", tool_call_id=call.call_id).content == takeover.TAKEN_OVER_RESULT
    assert runner.run_execute(queued.pop()) == "not claimed"  # the resume finds the run stopped

    takeover.conversation_hand_back(conversation=conversation, user=sam)
    services.conversation_post_message(conversation=conversation, text="Hello? Any news?")
    second = Run.objects.get(pk=queued[-1])
    assert runner.run_execute(queued.pop()) == "answered"
    assert not Refund.objects.filter(tool_call_id__isnull=False).exists()
    assert not Approval.objects.filter(run=second).exists()


def test_a_half_run_call_of_a_queued_run_is_answered_as_not_run_and_not_run_again(desk, queued, sam):
    # The worker died inside a tool (its effect rolled back with its result) and the sweeper requeued
    # the run; a person takes over before it runs again.
    conversation = services.conversation_start(customer=desk.maya)
    services.conversation_post_message(conversation=conversation, text="Where is SU-41210?")
    run = Run.objects.get(pk=queued.pop())
    call = {"id": "call_track_1", "type": "function",
            "function": {"name": "get_order", "arguments": json.dumps({"order_id": "SU-41210"})}}
    services.message_append(conversation=conversation, author=Message.AGENT, run=run,
                            wire={"role": "assistant", "content": None, "tool_calls": [call]})
    ToolCall.objects.create(run=run, call_id="call_track_1", name="get_order", arguments={"order_id": "SU-41210"},
                            status=ToolCall.RUNNING, attempts=1, idempotency_key=f"{run.public_id}:call_track_1")
    takeover.conversation_take_over(conversation=conversation, user=sam)
    run.refresh_from_db()
    assert (run.status, run.stop_reason) == ("stopped", "taken_over")
    assert ToolCall.objects.get(run=run).status == ToolCall.REJECTED
    assert conversation.messages.get(role="tool").content == takeover.TAKEN_OVER_RESULT

    takeover.conversation_hand_back(conversation=conversation, user=sam)
    services.conversation_post_message(conversation=conversation, text="And SU-41310?")
    second = Run.objects.get(pk=queued[-1])
    assert runner.run_execute(queued.pop()) == "answered"
    assert not Step.objects.filter(run=second, call_id="call_track_1").exists()
    assert conversation.messages.filter(role="tool", tool_call_id="call_track_1").count() == 1


def test_handing_back_a_stalled_run_answers_its_open_calls_as_not_run_first(desk, queued, sam):
    # Recovery gave up inside a tool and flagged the conversation; a person hands it back without
    # taking it over. The new run must not pick the old call up and run it.
    conversation = services.conversation_start(customer=desk.maya)
    services.conversation_post_message(conversation=conversation, text="Where is SU-41210?")
    run = Run.objects.get(pk=queued.pop())
    call = {"id": "call_track_2", "type": "function",
            "function": {"name": "get_order", "arguments": json.dumps({"order_id": "SU-41210"})}}
    services.message_append(conversation=conversation, author=Message.AGENT, run=run,
                            wire={"role": "assistant", "content": None, "tool_calls": [call]})
    Run.objects.filter(pk=run.pk).update(status=Run.STOPPED, stop_reason=Run.STALLED)
    services.conversation_flag(conversation_id=conversation.pk, reason="the agent's run stalled")
    services.conversation_post_message(conversation=conversation, text="Hello?")
    second = takeover.conversation_hand_back(conversation=conversation, user=sam)
    result = conversation.messages.get(role="tool", tool_call_id="call_track_2")
    assert result.content == f"ERROR: not run: {takeover.HANDED_BACK}"
    assert runner.run_execute(queued.pop()) == "answered"
    assert not Step.objects.filter(run=second, call_id="call_track_2").exists()
