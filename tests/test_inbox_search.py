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


def spoken(customer, text):
    """A conversation of the customer's in which they wrote `text`."""
    conversation = start_conversation(customer)
    services.message_append(conversation=conversation, wire={"role": "user", "content": text},
                            author=Message.CUSTOMER)
    return conversation


def searched(q):
    client = Client()
    client.force_login(get_user_model().objects.filter(username="sam").first() or make_user("sam", staff=True))
    response = client.get("/api/staff/inbox", {"q": q})
    assert response.status_code == 200, response.content
    return [r["id"] for r in response.json()["conversations"]]


@pytest.mark.django_db
def test_an_order_number_finds_the_conversations_about_it_first_then_the_customers_others(demo):
    named = spoken(demo.maya, "Where is su-41207?")
    by_tool = spoken(demo.maya, "My parcel never came")
    run = Run.objects.create(conversation=by_tool, status=Run.STOPPED)
    ToolCall.objects.create(run=run, call_id="c1", name="track_order", arguments={"order_id": "SU-41207"},
                            status=ToolCall.EXECUTED, idempotency_key="k1")
    other = spoken(demo.maya, "Do you sell gift cards?")  # the newest: without the ranking it would come first
    assert searched("SU-41207")[:2] in ([str(named.public_id), str(by_tool.public_id)],
                                       [str(by_tool.public_id), str(named.public_id)])
    assert searched("SU-41207")[2:] == [str(other.public_id)]


@pytest.mark.django_db
def test_an_order_number_named_by_another_customer_does_not_list_them_before_the_owner(demo):
    owner = spoken(demo.maya, "Hello")
    stranger = spoken(demo.tom, "Is SU-41207 mine?")
    assert searched("SU-41207")[0] == str(stranger.public_id)  # named in it: about the order, shown
    assert str(owner.public_id) in searched("SU-41207")
