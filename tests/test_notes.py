"""Internal notes (staff only: never in the model's request, never in the customer's view) and saved replies.

Who may do what: any staff member (Sam) writes notes and manages saved replies; Chris is not staff: 403.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client

from support.customers import identity
from support.desk import assistant, runner, services
from support.models import Note, SavedReply
from tests.desk_factories import (
    make_user,
    queued,  # noqa: F401  (fixture)
    start_conversation,
)
from tests.fake_model import ScriptedModel, answer

SECRET = "Customer has asked for 3 refunds this month; check before refunding again."


@pytest.fixture
def sam(db):
    return make_user("sam", staff=True)


@pytest.fixture
def staff(sam):
    client = Client()
    client.force_login(sam)
    client.post_json = lambda path, body: client.post(path, json.dumps(body), content_type="application/json")
    client.put_json = lambda path, body: client.put(path, json.dumps(body), content_type="application/json")
    return client


def test_a_note_is_kept_for_staff(staff, demo, queued):
    conversation = start_conversation(demo.maya)
    url = f"/api/staff/conversations/{conversation.public_id}/notes"
    response = staff.post_json(url, {"text": SECRET})
    assert response.status_code == 201 and response.json()["note"]["author"] == "sam"
    assert [n["text"] for n in staff.get(url).json()["notes"]] == [SECRET]
    assert staff.post_json(url, {"text": "   "}).status_code == 400
    chris = Client()
    chris.force_login(make_user("chris", staff=False))
    assert chris.get(url).status_code == 403 and chris.post(url, "{}", content_type="application/json") \
        .status_code == 403
    assert Note.objects.count() == 1


def test_a_note_never_reaches_the_model_or_the_customer(staff, demo, queued, monkeypatch, client,
                                                        django_capture_on_commit_callbacks):
    model = ScriptedModel(*answer("It was delivered yesterday."))
    monkeypatch.setattr(assistant, "shared_model", lambda: model)
    conversation = start_conversation(demo.maya)
    staff.post_json(f"/api/staff/conversations/{conversation.public_id}/notes", {"text": SECRET})
    with django_capture_on_commit_callbacks(execute=True):
        services.conversation_post_message(conversation=conversation, text="Where is SU-41210?")
    assert runner.run_execute(queued.pop()) == "answered"
    sent = json.dumps(model.sent)
    assert "Where is SU-41210?" in sent and "3 refunds this month" not in sent
    token = identity.conversation_token(conversation)
    seen = client.get(f"/api/conversations/{conversation.public_id}/messages?after=0",
                      HTTP_AUTHORIZATION=f"Bearer {token}")
    assert seen.status_code == 200 and "delivered yesterday" in seen.content.decode()
    assert "3 refunds this month" not in seen.content.decode()


def test_saved_replies_are_created_edited_and_deleted(staff, sam):
    url = "/api/staff/saved-replies"
    created = staff.post_json(url, {"title": "Greeting", "body": "Hi, I'm Sam from Sundry."})
    assert created.status_code == 201
    reply = created.json()["saved_reply"]
    assert staff.post_json(url, {"title": "greeting", "body": "again"}).status_code == 409  # titles are unique
    edited = staff.put_json(f"{url}/{reply['id']}", {"title": "Greeting", "body": "Hello, Sam here."})
    assert edited.json()["saved_reply"]["body"] == "Hello, Sam here." and edited.json()["saved_reply"]["updated_by"] == "sam"
    assert [r["title"] for r in staff.get(url).json()["saved_replies"]] == ["Greeting"]
    assert staff.delete(f"{url}/{reply['id']}").status_code == 200
    assert not SavedReply.objects.exists()
    assert staff.delete(f"{url}/{reply['id']}").status_code == 404


def test_the_demo_seeds_a_few_saved_replies(demo):
    assert SavedReply.objects.count() >= 3 and SavedReply.objects.filter(title="Refund issued").exists()
