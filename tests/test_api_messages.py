"""Posting to a conversation, as the widget does: saved once, validated, rate-limited, handed to one run.

Maya holds the token of her conversation (who may post at all is in test_api_customer.py). Nothing the
API refuses is saved, and nothing refused queues a run.
"""

from __future__ import annotations

import json
from unittest import mock

import pytest
from django.test import Client

from support.models import Conversation, Run
from support.web.views.common import ApiError, json_body
from tests.desk_factories import Widget, customer_messages, maya_chat, queued, widget  # noqa: F401  (fixtures)
from tests.redis_fixture import limits_redis, limits_redis_server  # noqa: F401  (fixtures)

pytestmark = pytest.mark.usefixtures("limits_redis")


def test_it_saves_a_message_once_and_queues_one_run(widget, maya_chat, queued):
    conversation, token = maya_chat
    response = widget.say(conversation, token, "  My parcel never came.  ")
    assert response.status_code == 202
    data = response.json()
    (message,) = customer_messages(conversation)
    run = Run.objects.get(conversation=conversation)
    assert message.content == "My parcel never came." and message.role == "user"
    assert data == {"message": {"seq": message.seq, "role": "user", "author": "customer",
                                "content": "My parcel never came.", "created_at": mock.ANY, "channel": "widget"},
                    "run": {"id": str(run.public_id), "status": "queued"}, "created": True}
    assert queued == [run.pk]


def test_a_message_while_a_run_is_active_joins_that_run(widget, maya_chat, queued):
    conversation, token = maya_chat
    first = widget.say(conversation, token, "Hello").json()
    second = widget.say(conversation, token, "Order SU-41207").json()
    assert second["run"] == first["run"] and second["created"] is True
    assert len(customer_messages(conversation)) == 2
    assert len(queued) == 1


def test_a_retried_post_with_the_same_client_id_is_saved_once(widget, maya_chat, queued):
    conversation, token = maya_chat
    first = widget.say(conversation, token, "Hello", client_id="c-1")
    again = widget.say(conversation, token, "Hello", client_id="c-1")
    assert (first.status_code, again.status_code) == (202, 202)
    assert (first.json()["created"], again.json()["created"]) == (True, False)
    assert again.json()["message"] == first.json()["message"]
    assert len(customer_messages(conversation)) == 1
    assert len(queued) == 1


@pytest.mark.parametrize("raw, error", [
    ('{"text": ""}', "Your message is empty."),
    ('{"text": "  \\n\\t "}', "Your message is empty."),
    ('{"text": "hi\\u0007there"}', "Your message contains a control character (U+0007) we cannot show; please remove it."),
    ('{"text": "\\ud800"}', "Your message contains characters that are not valid text; please retype it."),
    ('{"text": "hi", "client_id": "a\\u0000b"}', "client_id must be 1 to 64 letters, digits or . _ : -"),
    ('{"text": 42}', "The message must be text."),
    ('{"text": null}', "The message must be text."),
    ('{"message": "hi"}', 'Send the message as {"text": "..."}.'),
    ('{"text": "hi", "client_id": 7}', "client_id must be a non-empty string of at most 64 characters."),
    ('{"text": "hi", "client_id": "' + "x" * 65 + '"}',
     "client_id must be a non-empty string of at most 64 characters."),
])
def test_it_refuses_texts_it_will_not_save_and_says_why(widget, maya_chat, queued, raw, error):
    conversation, token = maya_chat
    response = widget.post(f"/api/conversations/{conversation.public_id}/messages", token, raw)
    assert (response.status_code, response.json()) == (400, {"error": error,
                                                             "code": "invalid_request", "retryable": False})
    assert customer_messages(conversation) == [] and queued == []


def test_it_refuses_a_text_over_the_size_limit(widget, maya_chat, settings):
    settings.MAX_MESSAGE_BYTES = 100
    conversation, token = maya_chat
    response = widget.say(conversation, token, "é" * 51)  # 102 bytes in UTF-8
    assert (response.status_code, response.json()) == (
        400, {"error": "Your message is too long \u2014 please keep it under 100 characters (fewer with accents, "
                       "other alphabets or emoji).", "code": "invalid_request", "retryable": False})
    assert widget.say(conversation, token, "é" * 50).status_code == 202
    assert [m.content for m in customer_messages(conversation)] == ["é" * 50]


def test_it_limits_messages_per_minute_and_says_when_to_retry(widget, maya_chat, settings):
    settings.MESSAGES_PER_MINUTE = 2
    conversation, token = maya_chat
    assert [widget.say(conversation, token, f"message {i}").status_code for i in (1, 2)] == [202, 202]
    response = widget.say(conversation, token, "message 3")
    assert response.status_code == 429
    assert 58 <= int(response["Retry-After"]) <= 60
    assert response.json() == {"error": "You are sending messages faster than we can read them \u2014 please wait "
                                        "about a minute and try again.",
                               "code": "rate_limited", "retryable": True}
    assert [m.content for m in customer_messages(conversation)] == ["message 1", "message 2"]


@pytest.mark.parametrize("raw", ['{"text": "hi"', "text=hi", b'{"text": "\xff\xfe"}', "[]", '"hi"'])
def test_it_refuses_a_body_that_is_not_a_json_object(widget, maya_chat, raw):
    conversation, token = maya_chat
    response = widget.post(f"/api/conversations/{conversation.public_id}/messages", token, raw)
    assert response.status_code == 400
    assert response.json()["error"] in ("The request body is not valid JSON.",
                                        "The request body must be a JSON object.")
    assert customer_messages(conversation) == []


def test_it_refuses_an_oversized_body_before_parsing_it(widget, maya_chat, settings):
    settings.MAX_MESSAGE_BYTES = 100
    conversation, token = maya_chat
    limit = 4 * 100 + 1024
    url = f"/api/conversations/{conversation.public_id}/messages"
    response = widget.post(url, token, json.dumps({"text": "x" * limit}))
    assert response.status_code == 413
    assert response.json() == {"error": f"The request body is larger than {limit} bytes.",
                               "code": "too_large", "retryable": False}
    # Even when it is not JSON at all: the size is checked first.
    assert widget.post(url, token, "x" * (limit + 1), content_type="text/plain").status_code == 413
    assert customer_messages(conversation) == []


def test_it_measures_a_body_that_declares_no_length(rf, settings):
    settings.MAX_MESSAGE_BYTES = 100
    request = rf.post("/api/conversations", json.dumps({"text": "x" * 2000}), content_type="application/json")
    del request.META["CONTENT_LENGTH"]  # as with a chunked upload
    with pytest.raises(ApiError) as refused:
        json_body(request)
    assert refused.value.status == 413


def test_it_wants_a_json_content_type(widget, maya_chat):
    conversation, token = maya_chat
    response = widget.post(f"/api/conversations/{conversation.public_id}/messages", token,
                           '{"text": "hi"}', content_type="text/plain")
    assert response.status_code == 415
    assert response.json() == {"error": "Send the request body as JSON (Content-Type: application/json).",
                               "code": "unsupported_media_type", "retryable": False}
    assert customer_messages(conversation) == []


def test_it_needs_no_csrf_token_since_it_uses_no_cookies(maya_chat, queued, django_capture_on_commit_callbacks):
    widget = Widget(Client(enforce_csrf_checks=True), django_capture_on_commit_callbacks)
    conversation, token = maya_chat
    assert widget.say(conversation, token, "hello").status_code == 202
    assert widget.start({"email": "tom@example.com", "order_number": "SU-41444"}).status_code == 201


def test_a_message_to_a_conversation_a_person_took_over_waits_for_them(widget, maya_chat, queued):
    conversation, token = maya_chat
    Conversation.objects.filter(pk=conversation.pk).update(status=Conversation.TAKEN_OVER)
    data = widget.say(conversation, token, "Are you still there?").json()
    assert data["run"] is None and data["created"] is True
    assert queued == []
