"""Inbox search for an order number: the conversations about that order come first (their messages, tool calls
or scope name it), then the customer's other conversations.

Who may see what: Sam (staff) searches the inbox; Maya owns the order SU-41207 and has three conversations.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from support.desk import services
from support.models import Message, Run, ToolCall
from tests.desk_factories import make_user, start_conversation


def said(conversation, text, role="user"):
    author = Message.CUSTOMER if role == "user" else Message.AGENT
    services.message_append(conversation=conversation, wire={"role": role, "content": text}, author=author)


def searched(q):
    client = Client()
    client.force_login(get_user_model().objects.filter(username="sam").first() or make_user("sam", staff=True))
    response = client.get("/api/staff/inbox", {"q": q})
    assert response.status_code == 200, response.content
    return [r["id"] for r in response.json()["conversations"]]


@pytest.mark.django_db
def test_an_order_number_finds_the_conversations_about_it_first_then_the_customers_others(demo):
    named = start_conversation(demo.maya)
    said(named, "Where is su-41207?")
    by_tool = start_conversation(demo.maya)
    said(by_tool, "My parcel never came")
    run = Run.objects.create(conversation=by_tool, status=Run.STOPPED)
    ToolCall.objects.create(run=run, call_id="c1", name="track_order", arguments={"order_id": "SU-41207"},
                            status=ToolCall.EXECUTED, idempotency_key="k1")
    other = start_conversation(demo.maya)
    said(other, "Do you sell gift cards?")  # the newest: without the ranking it would come first
    assert searched("SU-41207")[:2] in ([str(named.public_id), str(by_tool.public_id)],
                                       [str(by_tool.public_id), str(named.public_id)])
    assert searched("SU-41207")[2:] == [str(other.public_id)]


@pytest.mark.django_db
def test_an_order_number_named_by_another_customer_does_not_list_them_before_the_owner(demo):
    owner = start_conversation(demo.maya)
    said(owner, "Hello")
    stranger = start_conversation(demo.tom)
    said(stranger, "Is SU-41207 mine?")
    assert searched("SU-41207")[0] == str(stranger.public_id)  # named in it: about the order, shown
    assert str(owner.public_id) in searched("SU-41207")
