"""The staff inbox: rows a support agent picks from, filters, search, sort by waiting time, unread counts per
staff member, take / assign / unassign / close / reopen, and the counts the console's title shows.

Who may do what: Sam and Alex are staff (Support agents) and may use every inbox endpoint; Chris has an
account but is not staff, and an anonymous visitor has none: both get a 403 in JSON and change nothing.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from support.desk import services, takeover
from support.live import events
from support.models import Conversation, Message, Run
from support.models.desk import ConversationRead, InboxEvent
from tests.desk_factories import (
    make_user,
    pending_refund_approval,
    queued,  # noqa: F401  (fixture)
    record_events,
    start_conversation,
)


@pytest.fixture
def sam(db):
    user = make_user("sam", staff=True)
    user.first_name = "Sam"
    user.save()
    return user


@pytest.fixture
def alex(db):
    user = make_user("alex", staff=True)
    user.first_name = "Alex"
    user.save()
    return user


def logged_in(user, capture) -> Client:
    client = Client(enforce_csrf_checks=False)
    client.force_login(user)

    def post(path, body=None):
        with capture(execute=True):
            return client.post(path, json.dumps(body or {}), content_type="application/json")

    client.post_json = post
    return client


@pytest.fixture
def as_sam(sam, queued, django_capture_on_commit_callbacks):
    return logged_in(sam, django_capture_on_commit_callbacks)


@pytest.fixture
def as_alex(alex, queued, django_capture_on_commit_callbacks):
    return logged_in(alex, django_capture_on_commit_callbacks)


def say(conversation, text, author=Message.CUSTOMER, user=None):
    role = "user" if author == Message.CUSTOMER else "assistant"
    return services.message_append(conversation=conversation, wire={"role": role, "content": text}, author=author,
                                   user=user)


def spoken(customer, text="Hello?"):
    """A conversation the customer wrote in: an empty one is never in the inbox."""
    conversation = start_conversation(customer)
    say(conversation, text)
    return conversation


def rows(client, **params):
    response = client.get("/api/staff/inbox", params)
    assert response.status_code == 200, response.content
    return response.json()["conversations"]


def row_of(client, conversation, **params):
    found = [r for r in rows(client, **params) if r["id"] == str(conversation.public_id)]
    return found[0] if found else None


def url(conversation, action):
    return f"/api/staff/conversations/{conversation.public_id}/{action}"


# -- what a row says ----------------------------------------------------------------------------------

def test_it_shows_the_customer_their_orders_the_last_message_and_the_time(demo, as_sam):
    conversation = start_conversation(demo.maya)
    say(conversation, "My parcel su-41310 never came.")
    say(conversation, "Sorry to hear that. I'm checking SU-41310 now.", author=Message.AGENT)
    row = row_of(as_sam, conversation)
    assert row["customer"]["name"] == demo.maya.name
    assert row["customer"]["email"] == "maya@example.com"
    assert row["customer"]["since"]
    assert row["orders"] == ["SU-41310"]
    assert row["last_message"]["author"] == "agent"
    assert row["last_message"]["text"].startswith("Sorry to hear that")
    assert row["updated_at"] and row["last_message"]["at"]
    # No run is active: the agent is not working, the conversation is simply with it.
    assert row["status"] == "with_agent" and row["status_label"] == "With the agent"
    assert row["assignee"] is None


def test_an_order_the_customer_does_not_own_is_not_listed_as_theirs(demo, as_sam):
    conversation = start_conversation(demo.maya)
    tom_order = next(n for n, o in demo.orders.items() if o.customer == demo.tom)
    say(conversation, f"Is {tom_order} mine?")
    assert row_of(as_sam, conversation)["orders"] == []


def test_statuses_are_derived_for_people(demo, as_sam, sam):
    working = start_conversation(demo.maya)
    say(working, "Hello?")
    Run.objects.create(conversation=working, status=Run.RUNNING)
    idle = start_conversation(demo.ines)
    say(idle, "Thanks, that's all.")
    say(idle, "Glad to help.", author=Message.AGENT)
    Run.objects.create(conversation=idle, status=Run.STOPPED, stop_reason="answered", outcome="waiting_on_customer")
    approval_wait = spoken(demo.tom)
    pending_refund_approval(approval_wait)
    needs = spoken(demo.ines)
    services.conversation_flag(conversation_id=needs.pk, reason="escalated")
    held = spoken(demo.maya)
    takeover.conversation_take_over(conversation=held, user=sam)
    resolved = start_conversation(demo.tom)
    say(resolved, "Where is it?")
    say(resolved, "It arrives tomorrow.", author=Message.AGENT)
    Run.objects.create(conversation=resolved, status=Run.STOPPED, stop_reason="answered", outcome="resolved")
    statuses = {r["id"]: (r["status"], r["status_label"]) for r in rows(as_sam)}
    assert statuses[str(working.public_id)] == ("agent_working", "Agent working")  # only while a run is active
    assert statuses[str(idle.public_id)] == ("with_agent", "With the agent")
    assert statuses[str(approval_wait.public_id)] == ("waiting_approval", "Waiting for approval")
    assert statuses[str(needs.public_id)] == ("needs_person", "Needs a person")
    assert statuses[str(held.public_id)] == ("with_person", "With Sam")
    assert statuses[str(resolved.public_id)] == ("resolved", "Resolved")


def test_unread_counts_are_per_staff_member(demo, as_sam, as_alex):
    conversation = start_conversation(demo.maya)
    say(conversation, "one")
    say(conversation, "two")
    assert row_of(as_sam, conversation)["unread"] == 2
    response = as_sam.post_json(url(conversation, "read"), {})
    assert response.status_code == 200
    assert row_of(as_sam, conversation)["unread"] == 0
    assert row_of(as_alex, conversation)["unread"] == 2  # Alex has read nothing
    say(conversation, "three")
    assert row_of(as_sam, conversation)["unread"] == 1


def test_a_read_marker_never_goes_backwards_nor_past_the_end(demo, as_sam, sam):
    conversation = start_conversation(demo.maya)
    say(conversation, "one")
    assert as_sam.post_json(url(conversation, "read"), {"seq": 999}).json()["read_seq"] == conversation.last_seq
    assert as_sam.post_json(url(conversation, "read"), {"seq": 1}).json()["read_seq"] == conversation.last_seq
    assert ConversationRead.objects.get(user=sam, conversation=conversation).last_read_seq == conversation.last_seq
    assert as_sam.post_json(url(conversation, "read"), {"seq": "x"}).status_code == 400


def test_reading_tells_the_readers_other_consoles(demo, as_sam, sam, monkeypatch):
    conversation = start_conversation(demo.maya)
    sent = record_events(monkeypatch)
    as_sam.post_json(url(conversation, "read"), {})
    assert [(g, e["type"]) for g, e in sent] == [([f"staff.user.{sam.pk}"], "inbox.read")]


# -- filters, search, sort ----------------------------------------------------------------------------

def test_filters_mine_unassigned_needs_a_person_waiting_for_approval_and_closed(demo, as_sam, sam, alex):
    mine = spoken(demo.maya)
    as_sam.post_json(url(mine, "take"))
    theirs = spoken(demo.tom)
    as_sam.post_json(url(theirs, "assign"), {"assignee": "alex"})
    needs = spoken(demo.ines)
    services.conversation_flag(conversation_id=needs.pk, reason="escalated")
    waiting = spoken(demo.tom)
    pending_refund_approval(waiting)
    closed = spoken(demo.maya)
    as_sam.post_json(url(closed, "close"))

    def ids(**params):
        return {r["id"] for r in rows(as_sam, **params)}

    def of(*conversations):
        return {str(c.public_id) for c in conversations}

    assert ids(filter="mine") == of(mine)
    assert ids(filter="unassigned") == of(needs, waiting)
    assert ids(filter="needs_person") == of(needs)
    assert ids(filter="waiting_approval") == of(waiting)
    assert ids(filter="closed") == of(closed)
    assert ids() == of(mine, theirs, needs, waiting)  # the default: everything not closed
    assert ids(filter="all") == of(mine, theirs, needs, waiting, closed)
    assert as_sam.get("/api/staff/inbox", {"filter": "nonsense"}).status_code == 400


def test_search_finds_name_email_order_and_words(demo, as_sam):
    maya = start_conversation(demo.maya)
    say(maya, "The blender arrived broken")
    tom = start_conversation(demo.tom)
    say(tom, "hello")
    maya_order = next(n for n, o in demo.orders.items() if o.customer == demo.maya)

    def ids(q):
        return {r["id"] for r in rows(as_sam, q=q)}

    assert ids(demo.maya.name.split()[0].lower()) == {str(maya.public_id)}
    assert ids("tom@exam") == {str(tom.public_id)}
    assert str(maya.public_id) in ids(maya_order.lower())
    assert str(tom.public_id) not in ids(maya_order)
    assert ids("BLENDER") == {str(maya.public_id)}
    assert ids("nothing like this") == set()


def test_sorting_by_waiting_time_puts_the_longest_waiting_customer_first(demo, as_sam):
    answered = start_conversation(demo.maya)
    say(answered, "hi")
    say(answered, "Hello!", author=Message.AGENT)
    long_wait = start_conversation(demo.tom)
    first = say(long_wait, "anyone?")
    short_wait = start_conversation(demo.ines)
    say(short_wait, "hello?")
    Message.objects.filter(pk=first.pk).update(created_at=timezone.now() - timedelta(minutes=30))
    say(answered, "thanks")  # the newest update, but it has waited for seconds
    Message.objects.filter(conversation=answered, content="thanks").update(
        created_at=timezone.now() - timedelta(minutes=1))
    order = [r["id"] for r in rows(as_sam, sort="waiting")]
    assert order[:3] == [str(long_wait.public_id), str(answered.public_id), str(short_wait.public_id)]
    by_id = {r["id"]: r for r in rows(as_sam)}
    assert by_id[str(long_wait.public_id)]["waiting_since"] < by_id[str(answered.public_id)]["waiting_since"]


def test_an_answered_customer_is_not_waiting(demo, as_sam, sam):
    conversation = start_conversation(demo.maya)
    say(conversation, "hi")
    takeover.conversation_take_over(conversation=conversation, user=sam)
    say(conversation, "Sam here, how can I help?", author=Message.STAFF, user=sam)
    row = row_of(as_sam, conversation)
    assert row["waiting_since"] is None
    assert row["last_message"]["staff_name"] == "Sam"


def test_the_list_costs_the_same_number_of_queries_for_3_or_30_conversations(demo, as_sam):
    def queries():
        with CaptureQueriesContext(connection) as ctx:
            rows(as_sam, q="a")
            rows(as_sam, sort="waiting", filter="all")
        return len(ctx)

    for customer in (demo.maya, demo.tom, demo.ines):
        conversation = start_conversation(customer)
        say(conversation, "Order SU-41310 please")
    pending_refund_approval(conversation)  # rows with a run and without, from the start
    few = queries()
    for i in range(27):
        conversation = start_conversation((demo.maya, demo.tom, demo.ines)[i % 3])
        say(conversation, f"message {i} about SU-41207")
        if i % 4 == 0:
            pending_refund_approval(conversation)
    assert queries() == few


def test_the_list_is_paged(demo, as_sam):
    for _ in range(5):
        spoken(demo.maya)
    body = as_sam.get("/api/staff/inbox", {"limit": 2}).json()
    assert len(body["conversations"]) == 2 and body["count"] == 5
    rest = as_sam.get("/api/staff/inbox", {"limit": 2, "offset": 4}).json()
    assert len(rest["conversations"]) == 1


# -- take, assign, unassign ---------------------------------------------------------------------------

def test_the_first_to_take_it_has_it_and_the_second_is_told_who(demo, as_sam, as_alex, sam):
    conversation = start_conversation(demo.maya)
    response = as_sam.post_json(url(conversation, "take"))
    assert response.status_code == 200
    assert response.json()["conversation"]["assignee"] == {"username": "sam", "name": "Sam"}
    late = as_alex.post_json(url(conversation, "take"))
    assert late.status_code == 409
    assert late.json()["code"] == "conflict"
    assert late.json()["error"].startswith("Sam already has this conversation")
    assert late.json()["conversation"]["assignee"]["username"] == "sam"
    assert Conversation.objects.get(pk=conversation.pk).assignee == sam
    assert as_sam.post_json(url(conversation, "take")).status_code == 200  # taking it again changes nothing
    assert InboxEvent.objects.filter(conversation=conversation).count() == 1
    # One model of ownership: assigned to Sam, the agent is silent, and the customer is told Sam is here.
    fresh = Conversation.objects.get(pk=conversation.pk)
    assert (fresh.status, fresh.assignee, bool(fresh.assigned_at)) == (Conversation.TAKEN_OVER, sam, True)
    assert fresh.messages.filter(author=Message.SYSTEM, content__contains="Sam from our team has joined").count() == 1


def test_assigning_to_a_colleague_and_unassigning_are_recorded(demo, as_sam, sam, alex):
    conversation = start_conversation(demo.maya)
    assert as_sam.post_json(url(conversation, "assign"), {"assignee": "alex"}).json()["conversation"][
        "assignee"]["username"] == "alex"
    assert as_sam.post_json(url(conversation, "assign"), {"assignee": None}).json()["conversation"]["assignee"] is None
    history = as_sam.get(url(conversation, "inbox-events")).json()["events"]
    assert [(e["kind"], e["by"]["username"], e["assignee"]["username"]) for e in history] == [
        ("assigned", "sam", "alex"), ("unassigned", "sam", "alex")]
    assert history[0]["at"]


def test_only_active_staff_can_be_assigned(demo, as_sam, db):
    conversation = start_conversation(demo.maya)
    make_user("chris", staff=False)
    gone = make_user("gone", staff=True)
    gone.is_active = False
    gone.save()
    for who in ("chris", "gone", "nobody", 12):
        response = as_sam.post_json(url(conversation, "assign"), {"assignee": who})
        assert response.status_code == 400, who
    assert Conversation.objects.get(pk=conversation.pk).assignee is None


def test_assigning_a_colleague_silences_the_agent_and_unassigning_hands_it_back(demo, as_sam, sam, alex):
    conversation = start_conversation(demo.maya)
    say(conversation, "Where is my parcel?")
    run = Run.objects.create(conversation=conversation, status=Run.RUNNING)
    assert as_sam.post_json(url(conversation, "assign"), {"assignee": "alex"}).status_code == 200
    fresh = Conversation.objects.get(pk=conversation.pk)
    assert (fresh.status, fresh.assignee) == (Conversation.TAKEN_OVER, alex)
    assert Run.objects.get(pk=run.pk).stop_reason == "taken_over"  # the agent stops while a person has it
    assert row_of(as_sam, conversation)["status_label"] == "With Alex"
    response = as_sam.post_json(url(conversation, "unassign"))
    assert response.status_code == 200 and response.json()["conversation"]["assignee"] is None
    fresh = Conversation.objects.get(pk=conversation.pk)
    assert (fresh.status, fresh.assignee, fresh.assigned_at) == (Conversation.OPEN, None, None)
    assert list(InboxEvent.objects.filter(conversation=conversation).values_list("kind", "actor__username",
                                                                               "assignee__username")) == [
        ("assigned", "sam", "alex"), ("unassigned", "sam", "alex")]


def test_assignment_is_told_to_every_staff_console_and_not_to_the_customer(demo, as_sam, monkeypatch):
    conversation = start_conversation(demo.maya)
    sent = record_events(monkeypatch)
    as_sam.post_json(url(conversation, "take"))
    ((groups, event),) = [(g, e) for g, e in sent if e["type"] == "inbox.changed"]
    assert events.STAFF_GROUP in groups and events.conversation_group(conversation.public_id) not in groups
    assert event["type"] == "inbox.changed" and event["change"] == "assigned"
    assert event["assignee"] == {"username": "sam", "name": "Sam"} and event["by"]["username"] == "sam"


# -- close and reopen ---------------------------------------------------------------------------------

def test_closing_and_reopening_record_who_and_when(demo, as_sam, sam):
    conversation = start_conversation(demo.maya)
    row = as_sam.post_json(url(conversation, "close")).json()["conversation"]
    assert row["status"] == "closed" and row["closed_by"]["username"] == "sam" and row["closed_at"]
    fresh = Conversation.objects.get(pk=conversation.pk)
    assert fresh.closed_by == sam and fresh.closed_at
    row = as_sam.post_json(url(conversation, "reopen")).json()["conversation"]
    assert row["status"] != "closed" and row["closed_at"] is None
    assert list(InboxEvent.objects.filter(conversation=conversation).values_list("kind", flat=True)) == [
        "closed", "reopened"]


def test_a_customer_who_writes_to_a_closed_conversation_reopens_it(demo, as_sam):
    conversation = start_conversation(demo.maya)
    as_sam.post_json(url(conversation, "close"))
    assert row_of(as_sam, conversation, filter="closed")
    say(conversation, "One more thing!")
    assert row_of(as_sam, conversation, filter="closed") is None
    row = row_of(as_sam, conversation)
    assert row["status"] == "with_agent" and row["unread"] >= 1


def test_a_conversation_the_agent_is_working_on_cannot_be_closed(demo, as_sam):
    conversation = start_conversation(demo.maya)
    pending_refund_approval(conversation)
    response = as_sam.post_json(url(conversation, "close"))
    assert response.status_code == 409
    assert "decide the approval or take the conversation over" in response.json()["error"]
    assert Conversation.objects.get(pk=conversation.pk).closed_at is None


# -- counts for the title and the tabs ----------------------------------------------------------------

def test_counts_for_the_title_and_tabs(demo, as_sam):
    needs = spoken(demo.ines)
    services.conversation_flag(conversation_id=needs.pk, reason="escalated")
    taken = spoken(demo.tom)
    services.conversation_flag(conversation_id=taken.pk, reason="escalated")
    as_sam.post_json(url(taken, "take"))
    pending_refund_approval(spoken(demo.maya))
    counts = as_sam.get("/api/staff/inbox/counts").json()
    assert counts["needs_person"] == 1 and counts["needs_person_unassigned"] == 1  # assigned: with Sam now
    assert counts["needs_person_unassigned_ids"] == [str(needs.public_id)]
    assert counts["waiting_approval"] == 1 and counts["mine"] == 1


# -- who may -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("method,path", [
    ("get", "/api/staff/inbox"), ("get", "/api/staff/inbox/counts"), ("get", "/api/staff/colleagues"),
    ("post", "take"), ("post", "assign"), ("post", "unassign"), ("post", "close"), ("post", "reopen"),
    ("post", "read"), ("get", "inbox-events"),
])
def test_you_may_not_without_a_staff_account(demo, queued, db, method, path):
    conversation = start_conversation(demo.maya)
    target = path if path.startswith("/") else url(conversation, path)
    chris = Client()
    chris.force_login(make_user("chris", staff=False))
    for client in (Client(), chris):
        response = getattr(client, method)(target, json.dumps({"assignee": "chris"}), content_type="application/json") \
            if method == "post" else client.get(target)
        assert response.status_code == 403 and response.json()["code"] == "forbidden"
    fresh = Conversation.objects.get(pk=conversation.pk)
    assert fresh.assignee is None and fresh.closed_at is None and not ConversationRead.objects.exists()


def test_posts_need_the_csrf_token(demo, sam, queued):
    conversation = start_conversation(demo.maya)
    client = Client(enforce_csrf_checks=True)
    client.force_login(sam)
    response = client.post(url(conversation, "take"), "{}", content_type="application/json")
    assert response.status_code == 403
    assert Conversation.objects.get(pk=conversation.pk).assignee is None


def test_unknown_conversations_are_404(as_sam):
    assert as_sam.post_json("/api/staff/conversations/00000000-0000-0000-0000-000000000000/take").status_code == 404
    assert as_sam.post_json("/api/staff/conversations/not-a-uuid/close").status_code == 404
