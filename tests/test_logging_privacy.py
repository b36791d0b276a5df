"""What the logs hold about a customer: at INFO, ids only (request, conversation, run), never what the
customer wrote nor who they are; model and tool errors at WARNING or above, with the run's id.

A scripted conversation goes through the customer API and the run task (`run_agent.apply`: Celery's
signals, as in a worker) while every logger writes JSON lines at INFO, as LOG_FORMAT=json sets them up.
"""

from __future__ import annotations

import io
import json
import logging

import pytest
from django.test import Client

import support.worker  # noqa: F401  (its signal handlers bind the run's ids to the task's lines)
from support.customers import identity
from support.models import Run
from support.ops import log_context
from support.tasks import run_agent

pytestmark = pytest.mark.django_db(transaction=True)

EMAIL = "maya@example.com"
SECRET_PHRASE = "my neighbour Priya Raman at 14 Elm Road took it in"  # what must never reach an INFO line


@pytest.fixture
def json_lines():
    """Every line any logger writes at INFO and above, as the JSON handler of LOGGING writes it."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(log_context.JsonFormatter())
    handler.addFilter(log_context.ContextFilter())
    handler.setLevel(logging.INFO)
    loggers = [logging.getLogger(name) for name in ("", "support", "django", "celery", "daphne")]
    saved = [(lg, lg.level) for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.INFO)
    yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    for lg, level in saved:
        lg.removeHandler(handler)
        lg.setLevel(level)


def start(client: Client, email: str) -> tuple[str, str]:
    response = client.post("/api/conversations", json.dumps({"customer_token": identity.customer_token(email)}),
                           content_type="application/json")
    assert response.status_code in (200, 201), response.content
    return response.json()["conversation"]["id"], response.json()["token"]


def say(client: Client, conversation: str, token: str, text: str) -> None:
    response = client.post(f"/api/conversations/{conversation}/messages", json.dumps({"text": text}),
                           content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 202, response.content


def test_info_lines_of_a_conversation_carry_ids_and_never_the_customers_words_or_identity(
        desk, queued, json_lines, django_capture_on_commit_callbacks):
    web = Client()
    conversation, token = start(web, EMAIL)
    with django_capture_on_commit_callbacks(execute=True):
        say(web, conversation, token, f"Order SU-41207 says delivered but {SECRET_PHRASE}. Where is it?")
    run_agent.apply(args=[queued.pop()])
    run = Run.objects.get(conversation__public_id=conversation)
    assert run.status == Run.STOPPED

    lines = json_lines()
    assert lines, "the API and the run wrote nothing at INFO"
    text = "\n".join(json.dumps(line) for line in lines)
    for secret in (SECRET_PHRASE, "Priya", "Elm Road", EMAIL, "Maya"):
        assert secret not in text, f"{secret!r} reached the logs: " + next(
            json.dumps(line) for line in lines if secret in json.dumps(line))
    # What is there: the request's id on its access line, the conversation and run ids on the run's lines.
    access = [line for line in lines if line["logger"] == "support.http" and line.get("method") == "POST"]
    assert access and all(line.get("request_id") for line in access)
    assert any(line.get("run") == str(run.public_id) and line.get("conversation") == conversation for line in lines)


@pytest.mark.parametrize("fault, logged", [
    ("quota", "model call"),          # the endpoint refuses: the run stops as quota_exceeded
    ("unknown_tool", "tool"),         # the model calls a tool that does not exist: the error goes back to it
])
def test_model_and_tool_errors_are_logged_at_warning_or_above_with_the_run_id(
        desk, queued, json_lines, standin, fault, logged):
    standin.queue_faults([fault])
    web = Client()
    conversation, token = start(web, "tom@example.com")
    from support.desk import services
    from support.models import Conversation

    services.conversation_post_message(conversation=Conversation.objects.get(public_id=conversation),
                                       text="Where is my order SU-41210?")
    run_agent.apply(args=[queued.pop()])
    run = Run.objects.get(conversation__public_id=conversation)
    errors = [line for line in json_lines() if line["level"] in ("WARNING", "ERROR", "CRITICAL")
              and line.get("run") == str(run.public_id) and logged in line["message"]]
    assert errors, [line for line in json_lines() if line["level"] != "INFO"]
    assert all(line.get("conversation") == conversation for line in errors)


SECRET_PATHS = ["/c/{t}/", "/c/unsubscribe/{t}/", "/api/files/{t}", "/console/decide/{t}/", "/c/{t}/more"]


def test_link_unsubscribe_file_and_decide_tokens_never_reach_a_log_line(db, json_lines):
    """Whoever reads the logs must not be able to open a conversation, unsubscribe someone, fetch a file or open a
    decision page: the token in those paths is written as [redacted], in the access line and in Django's own."""
    token = "tok-7Qx9-secret"
    client = Client()
    for path in SECRET_PATHS:
        client.get(path.format(t=token))
        client.post(path.format(t=token))
    lines = json_lines()
    text = "\n".join(json.dumps(line) for line in lines)
    assert token not in text, next(json.dumps(line) for line in lines if token in json.dumps(line))
    paths = {line["path"] for line in lines if line["logger"] == "support.http"}
    assert paths == {p.format(t="[redacted]") for p in SECRET_PATHS}
