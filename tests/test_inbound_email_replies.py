"""Answers to a customer who wrote by e-mail go back by e-mail, in their thread: the agent's reply is
e-mailed (the same one-mail-per-burst rule as for customers who left the widget) with In-Reply-To and
References naming their mail, "Re: <their subject>", a Message-ID the desk keeps and the signed reply
address; their answer to it lands in the same conversation. Staff see each customer message's channel and
may open an e-mail as it came; nobody else may."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from support.customers import notify
from support.desk import inbound_mail, services
from support.models import InboundEmail, Message, OutboundEmail
from tests.mail_factories import mail
from tests.smtp_fixture import smtp_inbox  # noqa: F401  (fixture)


@pytest.fixture
def inbound(demo, settings, queued, request):
    """A real SMTP server catches the desk's mail (tests/smtp_fixture.py)."""
    settings.INBOUND_EMAIL_ADDRESS = "support@shop.example"
    settings.DESK_PUBLIC_URL = "https://desk.example"
    return request.getfixturevalue("smtp_inbox")


def header(message, name) -> str:
    """A header as a mail client reads it: long ones are folded on the wire."""
    return " ".join(str(message[name]).split()) if message[name] is not None else ""


def later(settings):
    return timezone.now() + timedelta(minutes=settings.REPLY_EMAIL_AFTER_MINUTES + 1)


def test_the_answer_goes_back_by_email_in_the_customers_thread_and_their_reply_comes_back(inbound, settings):
    first = inbound_mail.receive(mail(subject="Parcel late", message_id="<maya-1@mail.example>",
                                      text="Where is my parcel?"), source="imap")
    conversation = first.conversation
    services.message_append(conversation=conversation, author=Message.AGENT,
                            wire={"role": "assistant", "content": "Which order is it? Please give its number."})
    sent = notify.send_reply_emails(now=later(settings))
    assert [s.to for s in sent] == ["maya@example.com"]
    (recipients, answer), = inbound.messages
    assert answer["Subject"] == "Re: Parcel late"
    assert answer["In-Reply-To"] == "<maya-1@mail.example>" and "<maya-1@mail.example>" in header(answer, "References")
    assert header(answer, "Reply-To").startswith("support+") and answer["Auto-Submitted"] == "auto-generated"
    kept = OutboundEmail.objects.get(conversation=conversation)
    assert header(answer, "Message-ID") == f"<{kept.mail_id}>" and kept.to == "maya@example.com"
    # Maya answers from her mail client: to the reply address, in reply to our mail.
    again = inbound_mail.receive(mail(subject="Re: Parcel late", to=header(answer, "Reply-To"), in_reply_to=header(answer, "Message-ID"),
                                      references="<maya-1@mail.example> " + header(answer, "Message-ID"),
                                      text="It is SU-41210.\n\nOn Tuesday Sundry support wrote:\n> Which order is it?"),
                                 source="imap")
    assert again.conversation == conversation and again.message.content == "It is SU-41210."
    # Nothing more to send until the agent answers again: one mail per burst.
    assert notify.send_reply_emails(now=later(settings)) == []


def test_the_answer_is_written_in_the_language_the_customers_mail_client_named(inbound, settings):
    record = inbound_mail.receive(mail(subject="Paket", text="Wo ist mein Paket?", headers={"Content-Language": "de-DE"}),
                                  source="imap")
    assert record.conversation.language == "de"
    services.message_append(conversation=record.conversation, author=Message.AGENT,
                            wire={"role": "assistant", "content": "Welche Bestellung ist es?"})
    notify.send_reply_emails(now=later(settings))
    (_, answer), = inbound.messages
    text = next(p for p in answer.walk() if p.get_content_type() == "text/plain").get_payload(decode=True).decode()
    assert answer["Subject"] == "Re: Paket" and "Welche Bestellung ist es?" in text
    assert "Der Assistent von Sundry" in text  # the desk's own words, in German


def test_a_widget_conversations_reply_email_carries_the_reply_address_and_a_kept_message_id(inbound, settings, demo):
    conversation = services.conversation_start(customer=demo.tom)
    services.conversation_post_message(conversation=conversation, text="Hello")
    services.message_append(conversation=conversation, author=Message.AGENT,
                            wire={"role": "assistant", "content": "Hello Tom."})
    notify.send_reply_emails(now=later(settings))
    (_, answer), = inbound.messages
    assert header(answer, "Reply-To").startswith("support+") and "In-Reply-To" not in answer
    assert answer["Subject"] == "New reply from Sundry support"
    assert OutboundEmail.objects.filter(conversation=conversation, mail_id=header(answer, "Message-ID").strip("<>")).exists()
    # Tom answers the e-mail: his mail joins the widget conversation.
    reply = inbound_mail.receive(mail(sender="tom@example.com", to=header(answer, "Reply-To"), text="Thanks!"), source="imap")
    assert reply.conversation == conversation and reply.outcome == InboundEmail.ATTACHED


def staff_client():
    client = Client()
    client.force_login(get_user_model().objects.create_user("sam", is_staff=True))
    return client


def test_staff_see_each_customer_messages_channel_and_may_open_the_original(inbound, demo):
    record = inbound_mail.receive(mail(html="<p>Hi <b>there</b></p>", text="Hi there"), source="imap")
    conversation = record.conversation
    services.conversation_post_message(conversation=conversation, text="And from the widget.")
    client = staff_client()
    body = client.get(f"/api/staff/conversations/{conversation.public_id}").json()
    customer = [m for m in body["messages"] if m["author"] == "customer"]
    assert [m["channel"] for m in customer] == ["email", "widget"]
    assert customer[0]["original"] == f"/api/staff/emails/{record.public_id}/original" and "original" not in customer[1]
    original = client.get(customer[0]["original"])
    assert original.status_code == 200 and original["Content-Type"] == "text/plain; charset=utf-8"
    assert "<p>Hi <b>there</b></p>" in original.content.decode() and "sandbox" in original["Content-Security-Policy"]


def test_nobody_but_staff_may_open_an_original(inbound, demo):
    record = inbound_mail.receive(mail(text="Private words."), source="imap")
    url = f"/api/staff/emails/{record.public_id}/original"
    assert Client().get(url).status_code in (401, 403)
    customer_side = Client()
    customer_side.force_login(get_user_model().objects.create_user("chris", is_staff=False))
    assert customer_side.get(url).status_code == 403
    assert staff_client().get("/api/staff/emails/not-a-uuid/original").status_code == 404
