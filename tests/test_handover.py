"""Honest hand-over: one message to the customer when the agent hands over, one when a person joins, one on
hand-back, each in both transcripts; the agent is silent while a person holds the conversation and after
hand-back answers only what is new.

Who: Sam is a staff member (a support agent). The customer is Maya; her widget reads the customer API.
"""

import json

import pytest
from django.contrib.auth import get_user_model

from support.customers import identity
from support.desk import gate, runner, services, takeover
from support.desk.notices import ESCALATED as NOTICE_ESCALATED
from support.models import Approval, Conversation, Message, Run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sam():
    return get_user_model().objects.create_user("sam", password="pw", first_name="Sam", is_staff=True)


def customer_view(client, conversation, after=0):
    token = identity.conversation_token(conversation)
    response = client.get(f"/api/conversations/{conversation.public_id}/messages?after={after}",
                          HTTP_AUTHORIZATION=f"Bearer {token}")
    return response.json()["messages"]


def ask(desk, queued, text):
    conversation = services.conversation_start(customer=desk.maya)
    services.conversation_post_message(conversation=conversation, text=text)
    return conversation, queued.pop()


def test_an_escalation_goes_straight_to_a_person_with_one_message_for_the_customer(desk, queued, client):
    conversation, run_id = ask(desk, queued, "I want a full refund for order SU-41533.")
    assert runner.run_execute(run_id) == "escalated"
    assert not Approval.objects.filter(run_id=run_id).exists()  # no "approve the hand-over" click
    conversation.refresh_from_db()
    assert conversation.status == Conversation.NEEDS_ATTENTION
    # In words for the queue, not "escalated: escalate_to_human ended the run".
    assert conversation.attention_reason.startswith("The agent handed this over: Refund of 480.00 EUR on SU-41533")
    seen = customer_view(client, conversation)
    assert [m["author"] for m in seen] == ["customer", "system"] and seen[-1]["content"] == NOTICE_ESCALATED
    assert "A member of our team will reply here" in NOTICE_ESCALATED
    run = Run.objects.get(pk=run_id)
    assert run.stop_reason == "escalated" and run.detail == "escalate_to_human ended the run"  # codes kept
    assert "The customer wants" in run.summary and "Left for you" in run.summary


def test_a_shop_can_have_a_person_confirm_each_hand_over(desk, queued, client, settings):
    settings.ESCALATION_NEEDS_APPROVAL = True
    conversation, run_id = ask(desk, queued, "I want a full refund for order SU-41533.")
    assert runner.run_execute(run_id) == "awaiting_approval"
    approval = Approval.objects.get(run_id=run_id)
    assert approval.tool_call.name == "escalate_to_human"
    gate.approval_decide(approval=approval, user=None, approve=True)
    assert runner.run_execute(queued.pop()) == "escalated"
    notices = [m for m in customer_view(client, conversation) if m["author"] != "customer"]
    assert [m["content"] for m in notices] == [NOTICE_ESCALATED]  # one message, not three


def test_a_person_joining_is_one_message_in_both_transcripts(desk, queued, client, sam):
    conversation, run_id = ask(desk, queued, "I want a full refund for order SU-41533.")
    runner.run_execute(run_id)
    takeover.conversation_take_over(conversation=conversation, user=sam)
    takeover.conversation_take_over(conversation=conversation, user=sam)  # again: nothing new
    joined = conversation.messages.filter(content="Sam from our team has joined the conversation.")
    assert joined.count() == 1 and joined.get().author == Message.SYSTEM and joined.get().author_user == sam
    assert customer_view(client, conversation)[-1]["content"] == "Sam from our team has joined the conversation."


def test_the_agent_is_silent_while_a_person_has_it_and_after_hand_back_answers_only_what_is_new(
        desk, queued, client, sam):
    conversation, run_id = ask(desk, queued, "I want a full refund for order SU-41533.")
    runner.run_execute(run_id)
    takeover.conversation_take_over(conversation=conversation, user=sam)
    takeover.conversation_staff_reply(conversation=conversation, user=sam, text="I've refunded it in full.")
    services.conversation_post_message(conversation=conversation, text="Thanks Sam")
    assert queued == []  # silent while Sam has it
    assert takeover.conversation_hand_back(conversation=conversation, user=sam) is None
    assert queued == []  # "Thanks Sam" was for Sam: no "You're welcome!" from the agent
    last = conversation.messages.order_by("seq").last()
    assert last.author == Message.SYSTEM and last.content.startswith("Sam from our team took care of the")
    assert customer_view(client, conversation)[-1]["content"] == last.content

    services.conversation_post_message(conversation=conversation, text="Where is my order SU-41210?")
    assert runner.run_execute(queued.pop()) == "answered"  # the history (notices included) is valid
    answer = conversation.messages.filter(author=Message.AGENT, role="assistant").exclude(content="") \
        .order_by("seq").last()
    assert "SU-41210" in answer.content and "welcome" not in answer.content.lower()


def test_a_conversation_handed_back_from_the_queue_answers_the_waiting_message(desk, queued, client, sam):
    conversation, run_id = ask(desk, queued, "I want a full refund for order SU-41533.")
    runner.run_execute(run_id)
    services.conversation_post_message(conversation=conversation, text="Where is my order SU-41210?")
    assert queued == []  # waiting for a person
    run = takeover.conversation_hand_back(conversation=conversation, user=sam)
    assert run is not None and runner.run_execute(queued.pop()) == "answered"


def test_the_escalation_tool_asks_for_a_person_only_when_the_shop_says_so(settings):
    from support.tools import tool_by_name

    tool = tool_by_name("escalate_to_human")
    assert not tool.needs_approval({"reason": "r", "summary": "s"})
    settings.ESCALATION_NEEDS_APPROVAL = True
    assert tool.needs_approval({"reason": "r", "summary": "s"})
    assert "do not" in tool.description and json.dumps(tool.spec())
