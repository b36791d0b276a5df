"""A conversation and its first message in one request, as the widget starts a chat: nothing exists until the
customer sends something, a retried start is one conversation with one message, and everything a message is
refused for refuses the start too, leaving nothing behind.

Maya signs in with the shop's token or her e-mail and order; Tom is another customer. Empty conversations
(an API client's, opened without a message) are never listed for staff and go after a day.
"""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from unittest import mock

import pytest
from django.db import connection
from django.utils import timezone

from support.customers import identity
from support.desk import selectors, selectors_inbox, services
from support.models import Conversation, Message, Run
from tests.desk_factories import customer_messages, queued, start_conversation, widget  # noqa: F401  (fixtures)
from tests.redis_fixture import limits_redis, limits_redis_server  # noqa: F401  (fixtures)

pytestmark = pytest.mark.usefixtures("limits_redis")


def maya_token():
    return identity.customer_token("maya@example.com")


def start(widget, body):
    """POST /api/conversations with the on-commit callbacks run (the run's enqueue), as after a commit."""
    raw = body if isinstance(body, str) else json.dumps(body)
    with widget.capture(execute=True):
        return widget.client.post("/api/conversations", raw, content_type="application/json")


# -- one request: the conversation and its first message ------------------------------------------------------

def test_it_saves_the_conversation_and_its_first_message_together_and_starts_a_run(widget, demo, queued):
    response = start(widget, {"customer_token": maya_token(),
                              "message": {"text": "  Where is my order SU-41210?  ", "client_id": "first-1"}})
    assert response.status_code == 201
    data = response.json()
    conversation = Conversation.objects.get(public_id=data["conversation"]["id"])
    (message,) = customer_messages(conversation)
    run = Run.objects.get(conversation=conversation)
    assert conversation.customer == demo.maya
    assert message.content == "Where is my order SU-41210?" and message.client_id == "first-1"
    assert data["message"] == {"seq": message.seq, "role": "user", "author": "customer",
                               "content": "Where is my order SU-41210?", "created_at": mock.ANY, "client_id": "first-1",
                               "channel": "widget"}
    assert data["run"] == {"id": str(run.public_id), "status": "queued"} and data["created"] is True
    assert identity.conversation_for_token(data["token"], conversation.public_id) == conversation
    assert queued == [run.pk]


def test_a_retry_with_the_same_client_id_returns_the_same_conversation_and_saves_the_message_once(widget, demo, queued):
    body = {"customer_token": maya_token(), "message": {"text": "Hello", "client_id": "lost-answer"}}
    first = start(widget, body)
    again = start(widget, {**body, "customer_token": maya_token()})  # the page reloaded: a newer shop token
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["conversation"]["id"] == first.json()["conversation"]["id"]
    assert again.json()["message"] == first.json()["message"] and again.json()["created"] is False
    conversation = Conversation.objects.get()
    assert [m.content for m in customer_messages(conversation)] == ["Hello"]
    assert again.json()["run"] == first.json()["run"]
    assert len(queued) == 1


def test_the_same_client_id_from_another_customer_opens_their_own_conversation(widget, demo):
    mine = start(widget, {"customer_token": maya_token(), "message": {"text": "Hi", "client_id": "same"}})
    theirs = start(widget, {"customer_token": identity.customer_token("tom@example.com"),
                            "message": {"text": "Hi", "client_id": "same"}})
    assert (mine.status_code, theirs.status_code) == (201, 201)
    assert theirs.json()["conversation"]["id"] != mine.json()["conversation"]["id"]
    assert Conversation.objects.get(public_id=theirs.json()["conversation"]["id"]).customer == demo.tom


def test_without_a_client_id_each_start_is_a_new_conversation(widget, demo):
    for _ in range(2):
        assert start(widget, {"customer_token": maya_token(), "message": {"text": "Hi"}}).status_code == 201
    assert Conversation.objects.filter(customer=demo.maya).count() == 2


def test_an_order_number_sign_in_scopes_the_new_conversation_to_that_order(widget, demo):
    response = start(widget, {"email": "maya@example.com", "order_number": "SU-41207",
                              "message": {"text": "Where is it?", "client_id": "o-1"}})
    assert response.status_code == 201
    conversation = Conversation.objects.get(public_id=response.json()["conversation"]["id"])
    assert conversation.order_scope == "SU-41207"
    assert [m.content for m in customer_messages(conversation)] == ["Where is it?"]


def test_a_wrong_order_number_saves_nothing(widget, demo):
    response = start(widget, {"email": "tom@example.com", "order_number": "SU-41207",
                              "message": {"text": "Hi", "client_id": "x"}})
    assert response.status_code == 403
    assert not Conversation.objects.exists()


def test_the_language_and_time_zone_sent_with_it_are_the_conversations_before_the_run_starts(widget, demo):
    response = start(widget, {"customer_token": maya_token(), "language": "de", "time_zone": "Europe/Berlin",
                              "message": {"text": "Wo ist meine Bestellung?"}})
    conversation = Conversation.objects.get(public_id=response.json()["conversation"]["id"])
    assert conversation.language == "de"
    assert conversation.follow_up.time_zone == "Europe/Berlin"


def test_an_unknown_language_is_refused_and_nothing_is_saved(widget, demo):
    response = start(widget, {"customer_token": maya_token(), "language": "xx", "message": {"text": "Hi"}})
    assert response.status_code == 400 and "language must be one of" in response.json()["error"]
    assert not Conversation.objects.exists()


# -- a message's rules apply to the first one -------------------------------------------------------------------

@pytest.mark.parametrize("message, error", [
    ({"text": ""}, "Your message is empty."),
    ({"text": "hi\u0007there"}, "Your message contains a control character (U+0007) we cannot show; please remove it."),
    ({"text": 42}, "The message must be text."),
    ({"text": "hi", "client_id": "a\u0000b"}, "client_id must be 1 to 64 letters, digits or . _ : -"),
    ({"text": "hi", "client_id": 7}, "client_id must be a non-empty string of at most 64 characters."),
    ({"client_id": "c"}, 'Send the first message as "message": {"text": "...", "client_id": "..."}.'),
    ("hi", 'Send the first message as "message": {"text": "...", "client_id": "..."}.'),
])
def test_a_first_message_a_message_would_be_refused_for_is_refused_and_nothing_is_saved(widget, demo, queued,
                                                                                         message, error):
    response = start(widget, {"customer_token": maya_token(), "message": message})
    assert (response.status_code, response.json()) == (400, {"error": error, "code": "invalid_request",
                                                             "retryable": False})
    assert not Conversation.objects.exists() and queued == []


def test_a_first_message_over_the_size_limit_is_refused_as_a_message_is(widget, demo, settings):
    settings.MAX_MESSAGE_BYTES = 100
    response = start(widget, {"customer_token": maya_token(), "message": {"text": "é" * 51}})
    assert response.status_code == 400 and response.json()["error"].startswith("Your message is too long")
    assert not Conversation.objects.exists()
    assert start(widget, {"customer_token": maya_token(), "message": {"text": "é" * 50}}).status_code == 201


def test_the_customers_message_limit_counts_the_first_message_and_a_refused_one_leaves_nothing(widget, demo,
                                                                                                settings):
    settings.CUSTOMER_MESSAGES_PER_MINUTE = 1
    assert start(widget, {"customer_token": maya_token(), "message": {"text": "one"}}).status_code == 201
    response = start(widget, {"customer_token": maya_token(), "message": {"text": "two"}})
    assert response.status_code == 429 and response.json()["code"] == "rate_limited"
    assert int(response["Retry-After"]) > 0
    assert response.json()["error"].startswith("You are sending messages faster than we can read them")
    assert [m.content for m in Message.objects.filter(author=Message.CUSTOMER)] == ["one"]
    assert Conversation.objects.count() == 1


def test_the_new_conversation_limit_applies_and_a_retry_is_not_a_new_conversation(widget, demo, settings):
    settings.CUSTOMER_CONVERSATIONS_PER_HOUR = 1
    body = {"customer_token": maya_token(), "message": {"text": "Hi", "client_id": "c-1"}}
    assert start(widget, body).status_code == 201
    assert start(widget, body).status_code == 200  # the retry: the same conversation, not counted
    refused = start(widget, {"customer_token": maya_token(), "message": {"text": "Hi", "client_id": "c-2"}})
    assert refused.status_code == 429 and refused.json()["error"].startswith("Too many new conversations")
    assert Conversation.objects.count() == 1


def test_the_old_way_without_a_message_still_opens_an_empty_conversation(widget, demo, queued):
    response = start(widget, {"customer_token": maya_token()})
    assert response.status_code == 201 and set(response.json()) == {"conversation", "token"}
    conversation = Conversation.objects.get()
    assert customer_messages(conversation) == [] and queued == []


# -- staff never see an empty conversation; the beat removes them -----------------------------------------------

def test_an_empty_conversation_is_neither_listed_nor_counted_for_staff(widget, demo, django_user_model):
    staff = django_user_model.objects.create_user("sam", password="x", is_staff=True)
    empty = start_conversation(demo.maya)
    spoken = start(widget, {"customer_token": maya_token(), "message": {"text": "Hi"}}).json()["conversation"]["id"]
    ids = [row["id"] for row in selectors_inbox.inbox(staff, filter_="all").rows]
    assert ids == [spoken]
    assert selectors_inbox.inbox_row(staff, str(empty.public_id)) is None
    assert selectors_inbox.inbox_counts(staff)["unassigned"] == 1
    assert [str(c.public_id) for c in selectors.conversations_for_staff()] == [spoken]


def test_the_context_panel_lists_and_counts_only_the_customers_conversations_with_something_in_them(widget, demo,
                                                                                                   django_user_model):
    from support.desk import selectors_context

    staff = django_user_model.objects.create_user("sam", password="x", is_staff=True)
    earlier = start(widget, {"customer_token": maya_token(), "message": {"text": "Hi"}}).json()["conversation"]["id"]
    start_conversation(demo.maya)  # an API client's, never written in
    spoken = Conversation.objects.get(public_id=start(widget, {"customer_token": maya_token(),
                                                               "message": {"text": "Hi"}}).json()["conversation"]["id"])
    context = selectors_context.conversation_context(spoken, staff)
    assert [c["id"] for c in context["conversations"]] == [earlier]  # the others: not the empty one
    assert context["customer"]["conversations"] == 2


def test_empty_conversations_older_than_a_day_are_deleted_and_no_other(widget, demo, settings):
    settings.EMPTY_CONVERSATION_HOURS = 24
    old_empty, new_empty = start_conversation(demo.maya), start_conversation(demo.maya)
    spoken = Conversation.objects.get(public_id=start(widget, {"customer_token": maya_token(),
                                                               "message": {"text": "Hi"}}).json()["conversation"]["id"])
    day_ago = timezone.now() - timedelta(hours=25)
    Conversation.objects.filter(pk__in=[old_empty.pk, spoken.pk]).update(created_at=day_ago, updated_at=day_ago)
    assert services.conversations_empty_delete() == 1
    assert set(Conversation.objects.values_list("pk", flat=True)) == {new_empty.pk, spoken.pk}
    assert services.conversations_empty_delete(now=timezone.now() + timedelta(hours=25)) == 1
    assert list(Conversation.objects.values_list("pk", flat=True)) == [spoken.pk]


def test_the_beat_runs_the_empty_conversation_sweep_hourly(settings):
    entry = settings.CELERY_BEAT_SCHEDULE["empty-conversations"]
    assert entry == {"task": "support.tasks.delete_empty_conversations", "schedule": 3600}


# -- the same first send twice at once ----------------------------------------------------------------------------

@pytest.mark.django_db(transaction=True)
def test_the_same_first_message_sent_twice_at_once_is_one_conversation_with_one_message(demo, queued):
    """Two copies of one request at once (a retry racing its original): they take turns on the customer's row
    (on SQLite on the whole database), so the second finds the first's message. Tried several times."""
    for trial in range(5):
        barrier, outcomes = threading.Barrier(2), []

        def send():
            try:
                barrier.wait(timeout=10)
                outcomes.append(services.conversation_open_with_message(
                    opening=services.Opening(customer=demo.maya), text="Hello", client_id=f"twice-{trial}"))
            finally:
                connection.close()

        threads = [threading.Thread(target=send) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert len(outcomes) == 2, outcomes
        assert outcomes[0][0].pk == outcomes[1][0].pk and outcomes[0][1].pk == outcomes[1][1].pk
        assert sorted(created for *_, created in outcomes) == [False, True]
        assert Message.objects.filter(client_id=f"twice-{trial}").count() == 1
    assert Conversation.objects.filter(customer=demo.maya).count() == 5
