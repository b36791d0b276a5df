"""Someone who wrote by e-mail gets the answer as a reply e-mail, in the words of a reply, as soon as it is saved
(no "while you were away", no "left before the reply arrived", no "don't forward", no wait), in their thread
(In-Reply-To, References, "Re: <their subject>"). A widget customer who left still gets the catch-up e-mail
after the wait. Staff see the e-mail's subject, the channel and the language in the console's API.

Who may see what: Sam (staff) reads the console's API; Maya writes by e-mail, Tom in the widget.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from support.customers import notify
from support.desk import assistant, inbound_mail, queue, runner, services
from support.models import Message
from tests.desk_factories import make_user, start_conversation
from tests.fake_model import ScriptedModel, answer
from tests.mail_factories import mail
from tests.smtp_fixture import smtp_inbox  # noqa: F401  (fixture)

ANSWER = "Your parcel SU-41207 left the depot this morning."
WIDGET_WORDS = ("while you were away", "left before the reply arrived", "forward this e-mail")


@pytest.fixture
def inbound(demo, settings, queued, request, monkeypatch):
    settings.INBOUND_EMAIL_ADDRESS = "support@shop.example"
    settings.DESK_PUBLIC_URL = "https://desk.example"
    settings.REPLY_EMAIL_AFTER_MINUTES = 10
    return request.getfixturevalue("smtp_inbox")


def answered_by_email(**headers):
    record = inbound_mail.receive(mail(subject="Parcel late", message_id="<maya-1@mail.example>",
                                       text="Where is my parcel?", **headers), source="imap")
    services.message_append(conversation=record.conversation, author=Message.AGENT,
                            wire={"role": "assistant", "content": ANSWER})
    return record.conversation


def part(message, kind="plain") -> str:
    """One part of the e-mail as a mail client shows it, whitespace folded."""
    found = next(p for p in message.walk() if p.get_content_type() == f"text/{kind}")
    return " ".join(found.get_payload(decode=True).decode(found.get_content_charset() or "utf-8").split())


def staff():
    client = Client()
    client.force_login(get_user_model().objects.filter(username="sam").first() or make_user("sam", staff=True))
    return client


def test_an_email_customer_gets_the_answer_at_once_in_the_words_of_a_reply(inbound):
    conversation = answered_by_email()
    sent = notify.send_reply_emails(now=timezone.now())  # no wait for a customer who wrote by e-mail
    assert [s.conversation for s in sent] == [str(conversation.public_id)]
    (_, reply), = inbound.messages
    text, html = part(reply).lower(), part(reply, "html").lower()
    assert ANSWER.lower() in text and ANSWER.lower() in html
    assert not [words for words in WIDGET_WORDS if words in text or words in html]
    assert reply["Subject"] == "Re: Parcel late"
    assert reply["In-Reply-To"] == "<maya-1@mail.example>" and "<maya-1@mail.example>" in str(reply["References"])


def test_saving_an_answer_in_an_email_conversation_sends_it_without_waiting_for_the_beat(inbound, monkeypatch,
                                                                                          django_capture_on_commit_callbacks):
    asked = []
    monkeypatch.setattr(queue, "reply_email", asked.append)
    with django_capture_on_commit_callbacks(execute=True):
        conversation = answered_by_email()
    assert asked == [conversation.pk]


def test_a_widget_answer_is_not_sent_at_once(inbound, monkeypatch, demo, django_capture_on_commit_callbacks):
    asked = []
    monkeypatch.setattr(queue, "reply_email", asked.append)
    with django_capture_on_commit_callbacks(execute=True):
        conversation = start_conversation(demo.tom)
        services.conversation_post_message(conversation=conversation, text="Where is my parcel?")
        services.message_append(conversation=conversation, author=Message.AGENT,
                                wire={"role": "assistant", "content": ANSWER})
    assert asked == []


def test_the_widget_customers_catch_up_email_stays_as_it_was(inbound, demo, settings):
    conversation = start_conversation(demo.tom)
    services.conversation_post_message(conversation=conversation, text="Where is my parcel?")
    services.message_append(conversation=conversation, author=Message.AGENT,
                            wire={"role": "assistant", "content": ANSWER})
    assert notify.send_reply_emails(now=timezone.now()) == []  # the widget customer gets the wait
    later = timezone.now() + timedelta(minutes=settings.REPLY_EMAIL_AFTER_MINUTES + 1)
    assert len(notify.send_reply_emails(now=later)) == 1
    (_, catch_up), = inbound.messages
    assert "while you were away" in part(catch_up).lower()


def test_staff_see_the_subject_channel_and_language(inbound):
    conversation = answered_by_email(headers={"Content-Language": "de-DE"})
    detail = staff().get(f"/api/staff/conversations/{conversation.public_id}").json()
    assert detail["conversation"]["subject"] == "Parcel late"
    row = next(r for r in staff().get("/api/staff/inbox").json()["conversations"]
               if r["id"] == str(conversation.public_id))
    assert (row["subject"], row["channel"], row["language"]) == ("Parcel late", "email", "de")


def test_a_widget_row_says_widget_and_has_no_subject(inbound, demo):
    conversation = start_conversation(demo.tom)
    services.conversation_post_message(conversation=conversation, text="Hello")
    row = next(r for r in staff().get("/api/staff/inbox").json()["conversations"]
               if r["id"] == str(conversation.public_id))
    assert (row["subject"], row["channel"], row["language"]) == (None, "widget", "en")


@pytest.mark.django_db(transaction=True)
def test_the_agents_answer_to_an_email_is_sent_when_its_run_saves_it(inbound, queued, monkeypatch):
    asked = []
    monkeypatch.setattr(queue, "reply_email", asked.append)
    record = inbound_mail.receive(mail(subject="Parcel late", text="Where is my parcel SU-41207?"), source="imap")
    model = ScriptedModel(*answer(ANSWER))
    monkeypatch.setattr(assistant, "shared_model", lambda: model)
    assert runner.run_execute(queued.pop()) == "answered"
    assert asked == [record.conversation.pk]
