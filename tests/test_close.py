"""A person closes a conversation (from the inbox or the conversation page; one service, support/desk/inbox.py)
and the customer is told: one closing line in their language, then their widget learns the conversation is
closed (conversation.closed) and offers the rating. The customer and staff JSON say `closed`, until the
customer writes again.

Who may: any active staff member (the inbox's endpoints, tests/test_inbox.py has their "you may not" tests);
the customer reads `closed` on their own conversation only, with its token.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client

from support.customers import identity
from support.desk import inbox, takeover
from support.live import events
from support.models import Conversation, Message
from tests.desk_factories import make_user, pending_refund_approval, queued, record_events, start_conversation, widget  # noqa: F401

CLOSED_EN = "Sam from our team has closed this conversation. If you need anything else, just write here."
CLOSED_DE = ("Sam aus unserem Team hat dieses Gespräch abgeschlossen. Wenn Sie noch etwas brauchen, schreiben Sie "
             "einfach hier.")


@pytest.fixture
def sam(db):
    return make_user("sam", staff=True, first_name="Sam")


@pytest.fixture
def as_sam(sam, queued):
    client = Client()
    client.force_login(sam)
    return client


def close(client, conversation, capture):
    with capture(execute=True):
        return client.post(f"/api/staff/conversations/{conversation.public_id}/close", "{}",
                           content_type="application/json")


def notices(conversation) -> list[str]:
    return list(conversation.messages.filter(author=Message.SYSTEM, role="assistant").order_by("seq")
                .values_list("content", flat=True))


def test_closing_tells_the_customer_in_one_line(demo, as_sam, sam, django_capture_on_commit_callbacks):
    conversation = start_conversation(demo.maya)
    assert close(as_sam, conversation, django_capture_on_commit_callbacks).status_code == 200
    line = Message.objects.get(conversation=conversation, author=Message.SYSTEM, role="assistant")
    assert (line.content, line.author_user) == (CLOSED_EN, sam)
    close(as_sam, conversation, django_capture_on_commit_callbacks)  # closed already: nothing more is said
    assert notices(conversation) == [CLOSED_EN]


def test_the_closing_line_is_in_the_customers_language(demo, sam):
    conversation = start_conversation(demo.maya)
    Conversation.objects.filter(pk=conversation.pk).update(language="de")
    conversation.refresh_from_db()
    inbox.conversation_close(conversation=conversation, actor=sam)
    assert notices(conversation) == [CLOSED_DE]


def test_a_close_nobody_is_named_for_is_our_teams(demo):
    conversation = start_conversation(demo.maya)
    inbox.conversation_close(conversation=conversation, actor=None)
    assert notices(conversation) == ["Our team has closed this conversation. If you need anything else, just "
                                     "write here."]


def test_the_widget_hears_the_line_first_then_that_the_conversation_is_closed(demo, sam, monkeypatch,
                                                                              django_capture_on_commit_callbacks):
    conversation = start_conversation(demo.maya)
    takeover.conversation_take_over(conversation=conversation, user=sam)  # "Sam from our team is here"
    sent = record_events(monkeypatch)
    with django_capture_on_commit_callbacks(execute=True):
        inbox.conversation_close(conversation=conversation, actor=sam)
    to_customer = [e for groups, e in sent if events.conversation_group(conversation.public_id) in groups]
    kinds = [e["type"] for e in to_customer]
    assert kinds == ["message.saved", "conversation.closed"], kinds
    line = Message.objects.get(conversation=conversation, content=CLOSED_EN)
    assert to_customer[0]["message"]["content"] == CLOSED_EN
    assert to_customer[1]["seq"] == line.seq == Conversation.objects.get(pk=conversation.pk).last_seq


def test_the_customer_and_staff_read_closed_until_the_customer_writes_again(demo, widget, as_sam, sam,
                                                                           django_capture_on_commit_callbacks):
    conversation = start_conversation(demo.maya)
    token = identity.conversation_token(conversation)
    mine = f"/api/conversations/{conversation.public_id}"
    staff = f"/api/staff/conversations/{conversation.public_id}"
    assert widget.get(mine, token).json()["conversation"]["closed"] is False
    close(as_sam, conversation, django_capture_on_commit_callbacks)
    assert widget.get(mine, token).json()["conversation"]["closed"] is True
    detail = as_sam.get(staff).json()["conversation"]
    assert (detail["closed"], detail["closed_by"]) == (True, "Sam") and detail["closed_at"]
    widget.say(conversation, token, "One more thing about SU-41207")
    assert widget.get(mine, token).json()["conversation"]["closed"] is False
    detail = as_sam.get(staff).json()["conversation"]
    assert (detail["closed"], detail["closed_by"], detail["closed_at"]) == (False, None, None)


def test_a_conversation_the_agent_is_working_on_is_not_closed_and_the_customer_is_told_nothing(
        demo, as_sam, django_capture_on_commit_callbacks):
    conversation = start_conversation(demo.maya)
    pending_refund_approval(conversation)
    response = close(as_sam, conversation, django_capture_on_commit_callbacks)
    assert response.status_code == 409 and "decide the approval" in response.json()["error"]
    assert notices(conversation) == []


def test_another_customer_cannot_read_whether_it_is_closed(demo, widget):
    conversation = start_conversation(demo.maya)
    toms = identity.conversation_token(start_conversation(demo.tom))
    response = widget.get(f"/api/conversations/{conversation.public_id}", toms)
    assert response.status_code == 404 and "closed" not in json.dumps(response.json())
