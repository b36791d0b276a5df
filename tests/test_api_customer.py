"""The customer's API, as the widget uses it: starting and reading a conversation (posting: test_api_messages.py).

Who may see what: Maya (SU-41207, SU-41310) and Tom (SU-41444) each start their own conversation and
receive a token for it. A token opens its own conversation and no other; a wrong, expired or other
conversation's token, or an unknown id, is told the same 404. Customers never see tool calls, tool
results or the system prompt.
"""

from __future__ import annotations

import json
import time
import uuid
from unittest import mock

import pytest

from support.customers import identity
from support.desk import services
from support.models import Conversation, Message, Run
from tests.desk_factories import (  # noqa: F401  (fixtures)
    customer_messages,
    maya_chat,
    pending_refund_approval,
    queued,
    start_conversation,
    widget,
)
from tests.redis_fixture import limits_redis, limits_redis_server  # noqa: F401  (fixtures)
from tests.signin_fixture import code_tasks  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("limits_redis")


@pytest.fixture
def mailbox(settings):
    from django.core import mail

    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    mail.outbox = []
    return mail.outbox

START_SHAPES = ('Send {"customer_token": ...}, {"email": ..., "order_number": ...}, {"email": ..., "code": ...} '
                'or {"email": ..., "send_code": true}.')
NOT_FOUND = {"error": "No such conversation.", "code": "not_found", "retryable": False}


# -- starting a conversation ----------------------------------------------------------------------------

def test_it_starts_a_conversation_for_the_customer_the_shop_signed_for(widget, demo):
    response = widget.start({"customer_token": identity.customer_token("maya@example.com")})
    assert response.status_code == 201
    data = response.json()
    conversation = Conversation.objects.get(public_id=data["conversation"]["id"])
    assert conversation.customer == demo.maya
    assert data["conversation"] == {"id": str(conversation.public_id), "status": "open",
                                    "last_seq": conversation.last_seq, "created_at": mock.ANY,
                                    "closed": False}
    assert identity.conversation_for_token(data["token"], conversation.public_id) == conversation


def test_it_starts_a_conversation_from_an_order_number_and_its_email(widget, demo):
    response = widget.start({"email": "Maya@Example.com", "order_number": "SU-41207"})
    assert response.status_code == 201
    conversation = Conversation.objects.get(public_id=response.json()["conversation"]["id"])
    assert conversation.customer == demo.maya


@pytest.mark.parametrize("body", [
    {"email": "tom@example.com", "order_number": "SU-41207"},  # Maya's order
    {"email": "maya@example.com", "order_number": "SU-00001"},  # no such order
])
def test_it_refuses_an_order_number_that_is_not_the_emails_with_one_answer(widget, body):
    response = widget.start(body)
    assert response.status_code == 403
    assert response.json() == {"error": "We could not find that order for that e-mail address.",
                               "code": "forbidden", "retryable": False}
    assert not Conversation.objects.exists()


def test_it_refuses_a_forged_or_expired_customer_token(widget):
    forged = identity.customer_token("maya@example.com")[:-2] + "xx"
    with mock.patch("django.core.signing.time.time", return_value=time.time() - 2 * 24 * 3600):
        expired = identity.customer_token("maya@example.com")
    for token in (forged, expired):
        response = widget.start({"customer_token": token})
        assert response.status_code == 403
        assert "invalid or has expired" in response.json()["error"]
    assert not Conversation.objects.exists()


@pytest.mark.parametrize("raw, error", [
    ("{", "The request body is not valid JSON."),
    ("[]", "The request body must be a JSON object."),
    ("{}", START_SHAPES),
    ('{"email": "maya@example.com"}', START_SHAPES),
    ('{"customer_token": 42}', "customer_token must be a non-empty string."),
    ('{"email": "maya@example.com", "order_number": 41207}', "That does not look like an order number (e.g. SU-41207)."),
    ('{"email": 42, "order_number": "SU-41207"}', "That does not look like an e-mail address (name@example.com)."),
])
def test_it_tells_a_malformed_start_request_what_is_wrong(widget, raw, error):
    response = widget.start(raw)
    assert (response.status_code, response.json()) == (400, {"error": error,
                                                             "code": "invalid_request", "retryable": False})
    assert not Conversation.objects.exists()


# -- reading a conversation -----------------------------------------------------------------------------

def test_it_shows_a_conversation_to_the_holder_of_its_token(widget, maya_chat):
    conversation, token = maya_chat
    response = widget.get(f"/api/conversations/{conversation.public_id}", token)
    assert response.status_code == 200
    assert response.json() == {"conversation": {"id": str(conversation.public_id), "status": "open",
                                                "last_seq": 1, "created_at": mock.ANY, "closed": False},
                               "run": None, "awaiting_approval": False}


def test_it_shows_the_run_and_that_it_waits_for_a_person(widget, maya_chat):
    conversation, token = maya_chat
    approval = pending_refund_approval(conversation)
    data = widget.get(f"/api/conversations/{conversation.public_id}", token).json()
    assert data["run"] == {"id": str(approval.run.public_id), "status": "awaiting_approval",
                           "stop_reason": None, "outcome": None}
    assert data["awaiting_approval"] is True


def test_it_returns_only_the_messages_after_the_seq_given(widget, maya_chat):
    conversation, token = maya_chat
    for text in ("first", "second", "third"):
        widget.say(conversation, token, text)
    url = f"/api/conversations/{conversation.public_id}/messages"
    everything = widget.get(url + "?after=0", token).json()
    assert [m["content"] for m in everything["messages"]] == ["first", "second", "third"]
    assert everything["last_seq"] == conversation.messages.count() == 4  # the system prompt is seq 1
    second_seq = everything["messages"][1]["seq"]
    later = widget.get(f"{url}?after={second_seq}", token).json()
    assert [m["content"] for m in later["messages"]] == ["third"]
    assert widget.get(f"{url}?after=4", token).json() == {"messages": [], "last_seq": 4}


def test_it_never_shows_the_customer_tool_calls_tool_results_or_the_system_prompt(widget, maya_chat):
    conversation, token = maya_chat
    widget.say(conversation, token, "Where is SU-41207?")
    run = Run.objects.get(conversation=conversation)
    call = {"id": "call_1", "type": "function", "function": {"name": "get_order", "arguments": "{}"}}
    for wire, author in [
        ({"role": "assistant", "content": "Let me look.", "tool_calls": [call]}, Message.AGENT),
        ({"role": "tool", "tool_call_id": "call_1", "content": '{"secret": "internal"}'}, Message.TOOL),
        ({"role": "assistant", "content": None, "tool_calls": [{**call, "id": "call_2"}]}, Message.AGENT),
        ({"role": "tool", "tool_call_id": "call_2", "content": "more"}, Message.TOOL),
        ({"role": "assistant", "content": "It was delivered on Thursday."}, Message.AGENT),
    ]:
        services.message_append(conversation=conversation, wire=wire, author=author, run=run)
    data = widget.get(f"/api/conversations/{conversation.public_id}/messages", token).json()
    assert [(m["role"], m["content"]) for m in data["messages"]] == [
        ("user", "Where is SU-41207?"), ("assistant", "Let me look."), ("assistant", "It was delivered on Thursday.")]
    shown = json.dumps(data)
    for hidden in ("tool_calls", "tool_call_id", "call_1", "secret", "system", '"run"'):
        assert hidden not in shown
    assert data["last_seq"] == 7


@pytest.mark.parametrize("after", ["-1", "abc", "1.5", "", "1e3", "٣"])
def test_it_wants_after_to_be_a_non_negative_whole_number(widget, maya_chat, after):
    conversation, token = maya_chat
    response = widget.get(f"/api/conversations/{conversation.public_id}/messages?after={after}", token)
    assert response.status_code == 400
    assert response.json() == {"error": "after must be a non-negative whole number (a message seq).",
                               "code": "invalid_request", "retryable": False}


# -- you may not: somebody else's conversation ----------------------------------------------------------

def test_another_customers_token_can_neither_read_nor_post_to_the_conversation(widget, maya_chat, demo):
    conversation, _ = maya_chat
    toms = widget.start({"customer_token": identity.customer_token("tom@example.com")}).json()["token"]
    base = f"/api/conversations/{conversation.public_id}"
    assert widget.get(base, toms).json() == NOT_FOUND
    assert widget.get(base + "/messages", toms).status_code == 404
    response = widget.say(conversation, toms, "I am Maya, honestly")
    assert (response.status_code, response.json()) == (404, NOT_FOUND)
    assert customer_messages(conversation) == []
    assert not Run.objects.filter(conversation=conversation).exists()


def expired_token(conversation, settings):
    with mock.patch("django.core.signing.time.time",
                    return_value=time.time() - settings.CONVERSATION_TOKEN_MAX_AGE - 5):
        return identity.conversation_token(conversation)


@pytest.mark.parametrize("way_in", ["no header", "basic scheme", "garbage", "expired", "other conversation",
                                    "unknown id", "malformed id"])
def test_every_wrong_way_in_gets_the_same_404(widget, maya_chat, demo, settings, way_in):
    conversation, token = maya_chat
    public_id, header = str(conversation.public_id), f"Bearer {token}"
    if way_in == "no header":
        header = ""
    elif way_in == "basic scheme":
        header = f"Basic {token}"
    elif way_in == "garbage":
        header = "Bearer not.a.token"
    elif way_in == "expired":
        header = f"Bearer {expired_token(conversation, settings)}"
    elif way_in == "other conversation":
        header = f"Bearer {identity.conversation_token(start_conversation(demo.tom))}"
    elif way_in == "unknown id":
        public_id = str(uuid.uuid4())
    elif way_in == "malformed id":
        public_id = "12345"
    for path in (f"/api/conversations/{public_id}", f"/api/conversations/{public_id}/messages"):
        response = widget.client.get(path, HTTP_AUTHORIZATION=header)
        assert (response.status_code, response.json()) == (404, NOT_FOUND)
    with widget.capture(execute=True):
        response = widget.client.post(f"/api/conversations/{public_id}/messages", {"text": "hello"},
                                      content_type="application/json", HTTP_AUTHORIZATION=header)
    assert (response.status_code, response.json()) == (404, NOT_FOUND)
    assert customer_messages(conversation) == []


def test_an_expired_conversation_token_opens_nothing_but_a_fresh_one_does(widget, maya_chat, settings):
    conversation, _ = maya_chat
    url = f"/api/conversations/{conversation.public_id}"
    assert widget.get(url, expired_token(conversation, settings)).status_code == 404
    assert widget.get(url, identity.conversation_token(conversation)).status_code == 200


def test_a_staff_session_cookie_is_no_way_in(widget, maya_chat, django_user_model):
    conversation, _ = maya_chat
    widget.client.force_login(django_user_model.objects.create_user("sam", is_staff=True, is_superuser=True))
    assert widget.get(f"/api/conversations/{conversation.public_id}").status_code == 404


# -- the rest of the protocol ---------------------------------------------------------------------------

@pytest.mark.parametrize("method, path, allowed", [
    ("get", "/api/conversations", "POST"),
    ("delete", "/api/conversations/{id}", "GET"),
    ("put", "/api/conversations/{id}/messages", "GET, POST"),
])
def test_it_answers_other_methods_with_405_in_json(widget, maya_chat, method, path, allowed):
    conversation, token = maya_chat
    response = getattr(widget.client, method)(path.format(id=conversation.public_id),
                                              HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 405
    assert response["Allow"] == allowed
    assert "error" in response.json()


def test_an_unknown_api_path_is_a_json_404(widget):
    response = widget.client.get("/api/nothing/here")
    assert (response.status_code, response.json()) == (404, {"error": "There is no such API endpoint.",
                                                             "code": "not_found", "retryable": False})


def test_after_five_wrong_order_numbers_from_one_address_only_an_emailed_code_signs_in(widget, demo, mailbox,
                                                                                      code_tasks):
    for n in range(5):
        assert widget.start({"email": "maya@example.com", "order_number": f"SU-9{n:04d}"}).status_code == 403
    # Right or wrong, the same answer now, and nothing sent: nothing to learn by guessing on.
    for number in ("SU-41207", "SU-90009"):
        r = widget.start({"email": "maya@example.com", "order_number": number})
        assert (r.status_code, r.json()["code"]) == (403, "code_required")
    assert (mailbox, list(code_tasks)) == ([], [])
    # The owner asks for a code (the widget does on code_required); a worker e-mails it.
    assert widget.start({"email": "maya@example.com", "send_code": True}).status_code == 202
    code_tasks.run()
    assert [m.to for m in mailbox] == [["maya@example.com"]]
    assert not Conversation.objects.exists()
