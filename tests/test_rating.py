"""The customer's satisfaction rating: offered when the agent resolved the question or staff closed the
conversation, 1 to 5 with an optional comment, one per conversation (rating again changes it), shown to staff.

Who may see what: Maya rates her own conversation with its token; Tom's token (or none) gets the same 404
as an unknown conversation and changes nothing. Sam (staff) reads the rating in the inbox row and the
conversation's rating endpoint; a customer token is no way into the staff API.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.utils import timezone

from support.agent import types as agent
from support.customers import identity
from support.desk import inbox, services
from support.live import events
from support.models import Conversation, Message, Rating, Run, ToolCall
from tests.desk_factories import make_user, queued, record_events, start_conversation, widget  # noqa: F401  (fixtures)


@pytest.fixture
def maya_chat(demo):
    conversation = start_conversation(demo.maya)
    return conversation, identity.conversation_token(conversation)


def written_in(conversation):
    """The customer's question in it: staff never see a conversation nobody wrote in."""
    services.message_append(conversation=conversation, wire={"role": "user", "content": "Where is my order?"},
                            author=Message.CUSTOMER)


def resolved(conversation, outcome="resolved"):
    return Run.objects.create(conversation=conversation, status=Run.STOPPED, stop_reason=agent.ANSWERED,
                              outcome=outcome, finished_at=timezone.now())


def rate(widget, conversation, token, body):
    raw = body if isinstance(body, str) else json.dumps(body)
    return widget.post(f"/api/conversations/{conversation.public_id}/rating", token, raw)


def offer(widget, conversation, token):
    return widget.get(f"/api/conversations/{conversation.public_id}/rating", token)


def test_it_offers_no_rating_while_the_question_is_open(widget, maya_chat):
    conversation, token = maya_chat
    assert offer(widget, conversation, token).json() == {"offered": False, "occasion": None, "rating": None}
    resolved(conversation, outcome="waiting_on_customer")
    assert offer(widget, conversation, token).json()["offered"] is False
    response = rate(widget, conversation, token, {"score": 5})
    assert response.status_code == 409 and response.json()["code"] == "conflict"
    assert "once your question is answered" in response.json()["error"]
    assert not Rating.objects.exists()


def test_it_offers_a_rating_when_the_agent_resolved_the_question(widget, maya_chat):
    conversation, token = maya_chat
    resolved(conversation)
    assert offer(widget, conversation, token).json() == {"offered": True, "occasion": "resolved", "rating": None}
    response = rate(widget, conversation, token, {"score": 4, "comment": "  Quick and clear.  "})
    assert response.status_code == 201
    assert response.json()["rating"]["score"] == 4 and response.json()["rating"]["comment"] == "Quick and clear."
    rating = Rating.objects.get(conversation=conversation)
    assert (rating.score, rating.occasion, rating.rated_seq) == (4, "resolved", conversation.last_seq)


def test_it_offers_a_rating_when_staff_closed_the_conversation(widget, maya_chat, demo):
    conversation, token = maya_chat
    sam = make_user("sam", staff=True)
    with widget.capture(execute=True):
        inbox.conversation_close(conversation=conversation, actor=sam)
    assert offer(widget, conversation, token).json()["occasion"] == "closed"
    assert rate(widget, conversation, token, {"score": 2}).status_code == 201
    assert Rating.objects.get().occasion == "closed"


def test_a_staff_close_tells_the_widget_so_it_can_offer_the_rating(maya_chat, monkeypatch,
                                                                   django_capture_on_commit_callbacks):
    conversation, _ = maya_chat
    sent = record_events(monkeypatch)
    with django_capture_on_commit_callbacks(execute=True):
        inbox.conversation_close(conversation=conversation, actor=make_user("sam", staff=True))
    closed = [(groups, e) for groups, e in sent if e["type"] == "conversation.closed"]
    conversation.refresh_from_db()  # the closing line told to the customer is its last message
    assert closed == [([events.conversation_group(conversation.public_id)],
                       {"type": "conversation.closed", "conversation": str(conversation.public_id),
                        "seq": conversation.last_seq})]


def test_a_customer_who_writes_after_the_close_is_not_asked_to_rate_it(widget, maya_chat):
    conversation, token = maya_chat
    with widget.capture(execute=True):
        inbox.conversation_close(conversation=conversation, actor=make_user("sam", staff=True))
    widget.say(conversation, token, "One more thing about SU-41207")
    assert offer(widget, conversation, token).json()["offered"] is False


def test_rating_again_changes_the_one_rating(widget, maya_chat):
    conversation, token = maya_chat
    resolved(conversation)
    assert rate(widget, conversation, token, {"score": 2, "comment": "Slow"}).status_code == 201
    response = rate(widget, conversation, token, {"score": 5})
    assert response.status_code == 200 and response.json()["rating"]["score"] == 5
    assert Rating.objects.filter(conversation=conversation).count() == 1
    assert Rating.objects.get().comment == ""


def test_a_rating_given_stays_changeable_after_the_customer_writes_again(widget, maya_chat):
    conversation, token = maya_chat
    resolved(conversation)
    rate(widget, conversation, token, {"score": 3})
    widget.say(conversation, token, "Actually, one more question")
    assert offer(widget, conversation, token).json()["rating"]["score"] == 3
    assert rate(widget, conversation, token, {"score": 4}).status_code == 200


@pytest.mark.parametrize("body, words", [
    ({"score": 0}, "from 1 to 5"), ({"score": 6}, "from 1 to 5"), ({"score": "5"}, "from 1 to 5"),
    ({"score": True}, "from 1 to 5"), ({"score": 4.5}, "from 1 to 5"), ({}, "from 1 to 5"),
    ({"score": 4, "comment": 12}, "must be text"), ({"score": 4, "comment": "x" * 1001}, "under 1,000 characters"),
    ({"score": 4, "comment": "bad\u0007bell"}, "character we cannot show"),
])
def test_bad_ratings_are_refused_in_plain_words_and_nothing_is_saved(widget, maya_chat, body, words):
    conversation, token = maya_chat
    resolved(conversation)
    response = rate(widget, conversation, token, body)
    assert response.status_code == 400 and response.json()["code"] == "invalid_request"
    assert words in response.json()["error"]
    assert not Rating.objects.exists()


def test_malformed_bodies_are_refused(widget, maya_chat):
    conversation, token = maya_chat
    resolved(conversation)
    assert rate(widget, conversation, token, "not json").status_code == 400
    assert rate(widget, conversation, token, "[5]").status_code == 400
    assert not Rating.objects.exists()


def test_you_may_not_rate_or_read_another_customers_conversation(widget, maya_chat, demo):
    conversation, _ = maya_chat
    resolved(conversation)
    toms = identity.conversation_token(start_conversation(demo.tom))
    for token in (toms, None, "forged"):
        assert rate(widget, conversation, token, {"score": 1}).status_code == 404
        assert offer(widget, conversation, token).status_code == 404
    assert not Rating.objects.exists()


def test_staff_see_the_rating_in_the_inbox_row_and_on_the_conversation(widget, maya_chat):
    conversation, token = maya_chat
    written_in(conversation)
    resolved(conversation)
    rate(widget, conversation, token, {"score": 5, "comment": "Lovely"})
    staff = Client()
    staff.force_login(make_user("sam", staff=True))
    row = staff.get(f"/api/staff/inbox?ids={conversation.public_id}").json()["conversations"][0]
    assert row["rating"]["score"] == 5 and row["rating"]["comment"] == "Lovely"
    detail = staff.get(f"/api/staff/conversations/{conversation.public_id}/rating").json()
    assert detail["rating"]["score"] == 5 and detail["rating"]["occasion"] == "resolved"


def test_an_unrated_conversation_shows_no_rating_to_staff(maya_chat):
    conversation, _ = maya_chat
    written_in(conversation)
    staff = Client()
    staff.force_login(make_user("sam", staff=True))
    row = staff.get(f"/api/staff/inbox?ids={conversation.public_id}").json()["conversations"][0]
    assert row["rating"] is None


def test_the_staff_rating_endpoint_is_for_staff_only(widget, maya_chat):
    conversation, token = maya_chat
    url = f"/api/staff/conversations/{conversation.public_id}/rating"
    assert Client().get(url).status_code == 403
    assert widget.get(url, token).status_code == 403
    customer = Client()
    customer.force_login(make_user("chris", staff=False))
    assert customer.get(url).status_code == 403


def test_a_rating_is_told_to_the_staff_consoles(widget, maya_chat, monkeypatch):
    conversation, token = maya_chat
    resolved(conversation)
    sent = record_events(monkeypatch)
    rate(widget, conversation, token, {"score": 1, "comment": "Not helpful"})
    rated = [(groups, e) for groups, e in sent if e["type"] == "conversation.rated"]
    assert len(rated) == 1
    groups, event = rated[0]
    assert set(groups) == {events.STAFF_GROUP, events.staff_conversation_group(conversation.public_id)}
    assert event["rating"]["score"] == 1 and event["conversation"] == str(conversation.public_id)


def seller_asked(run, status=ToolCall.EXECUTED):
    """The run messaged the seller (to open a claim with the carrier, or send a return label)."""
    ToolCall.objects.create(run=run, call_id=f"c-{run.pk}", name="message_seller", status=status,
                            arguments={"order_id": "SU-41207", "message": "Please open a claim"},
                            idempotency_key=f"k-{run.pk}")


def test_an_answer_that_leaves_a_claim_open_is_not_offered_for_rating(widget, maya_chat):
    conversation, token = maya_chat
    seller_asked(resolved(conversation))  # "resolved" of its turn: the customer still waits for the claim
    assert offer(widget, conversation, token).json() == {"offered": False, "occasion": None, "rating": None}
    assert rate(widget, conversation, token, {"score": 5}).status_code == 409
    # The customer thanks the agent and it resolves again, asking nobody: now the matter is done.
    resolved(conversation)
    assert offer(widget, conversation, token).json()["occasion"] == "resolved"


def test_a_seller_message_that_was_not_sent_leaves_nothing_open(widget, maya_chat):
    conversation, token = maya_chat
    seller_asked(resolved(conversation), status=ToolCall.FAILED)
    assert offer(widget, conversation, token).json()["offered"] is True


def test_a_conversation_closed_by_staff_is_offered_even_with_a_claim_open(widget, maya_chat):
    conversation, token = maya_chat
    seller_asked(resolved(conversation))
    with widget.capture(execute=True):
        inbox.conversation_close(conversation=conversation, actor=make_user("sam", staff=True))
    assert offer(widget, conversation, token).json()["occasion"] == "closed"


def test_a_conversation_handed_to_a_person_is_not_offered_as_resolved(widget, maya_chat):
    conversation, token = maya_chat
    resolved(conversation)
    Conversation.objects.filter(pk=conversation.pk).update(status=Conversation.NEEDS_ATTENTION)
    assert offer(widget, conversation, token).json()["offered"] is False
