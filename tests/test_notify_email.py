"""Replies that reach a customer who left: one e-mail per conversation with every reply they missed, sent
through a real SMTP server (aiosmtpd, in this process), with the conversation's link and an unsubscribe link.

Who gets what: only the conversation's customer, only the agent's and staff's replies (never tool output,
the system prompt or notices), only replies not already seen on an open widget nor e-mailed before, and
nothing for a customer who unsubscribed.
"""

from __future__ import annotations

import re
import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from support.customers import notify
from support.desk import services
from support.models import Conversation, FollowUp, Message
from tests.smtp_fixture import smtp_inbox  # noqa: F401  (fixture)

MINUTES = 10


@pytest.fixture
def smtp(smtp_inbox, settings):
    settings.REPLY_EMAIL_AFTER_MINUTES = MINUTES
    settings.DESK_PUBLIC_URL = "https://desk.example"
    return smtp_inbox


def text_of(message) -> str:
    part = next(p for p in message.walk() if p.get_content_type() == "text/plain")
    return part.get_payload(decode=True).decode()


def html_of(message) -> str:
    part = next(p for p in message.walk() if p.get_content_type() == "text/html")
    return part.get_payload(decode=True).decode()


@pytest.fixture
def chat(demo, monkeypatch):
    """Maya's conversation, started from her browser in Berlin; she wrote and left."""
    monkeypatch.setattr("support.desk.queue.run_agent", lambda run_id, **ids: None)
    response = Client().post("/api/conversations", {"customer_token": _shop_token(demo.maya),
                                                    "time_zone": "Europe/Berlin"}, content_type="application/json")
    assert response.status_code == 201
    conversation = services.Conversation.objects.get(public_id=response.json()["conversation"]["id"])
    services.conversation_post_message(conversation=conversation, text="Where is SU-41210?")
    return conversation


def _shop_token(customer):
    from support.customers.identity import customer_token

    return customer_token(customer.email)


def reply(conversation, text, *, author=Message.AGENT, user=None, minutes_ago=0):
    message = services.message_append(conversation=conversation, author=author, user=user,
                                      wire={"role": "assistant", "content": text})
    Message.objects.filter(pk=message.pk).update(created_at=timezone.now() - timedelta(minutes=minutes_ago))
    return message


def later(minutes=MINUTES + 1):
    return timezone.now() + timedelta(minutes=minutes)


def test_it_sends_one_email_with_every_reply_the_customer_missed(chat, smtp, demo):
    sam = get_user_model().objects.create_user("sam", first_name="Sam", is_staff=True)
    reply(chat, "Your parcel is with the carrier.")
    services.message_append(conversation=chat, author=Message.TOOL,
                            wire={"role": "tool", "tool_call_id": "c1", "content": '{"secret": "tool data"}'})
    reply(chat, "A member of our team will reply here.", author=Message.SYSTEM)
    reply(chat, "I've asked the carrier to call you tomorrow.", author=Message.STAFF, user=sam)

    sent = notify.send_reply_emails(now=later())

    assert len(sent) == 1 and len(smtp.messages) == 1
    to, message = smtp.messages[0]
    assert to == ["maya@example.com"]
    assert message["Subject"] == "2 new replies from Sundry support"
    body = text_of(message)
    assert "Your parcel is with the carrier." in body and "I've asked the carrier to call you tomorrow." in body
    assert "Sam from Sundry support" in body and "Sundry's assistant" in body
    assert "tool data" not in body and "A member of our team" not in body and "Where is SU-41210?" not in body
    link = re.search(r"https://desk\.example/c/(\S+)/", body).group(1)
    assert notify.conversation_for_link(link) == chat
    unsubscribe = re.search(r"https://desk\.example/c/unsubscribe/(\S+)/", body).group(0)
    assert message["List-Unsubscribe"].strip() == f"<{unsubscribe}>"  # folded by the mail library
    assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert "Continue the conversation" in html_of(message)


def test_it_writes_the_times_in_the_customers_time_zone(chat, smtp):
    message = reply(chat, "Delivered.")
    Message.objects.filter(pk=message.pk).update(created_at=datetime(2024, 5, 14, 14, 2, tzinfo=UTC))
    notify.send_reply_emails(now=datetime(2024, 5, 14, 15, 0, tzinfo=UTC))
    assert "Tue 14 May, 16:02 (Europe/Berlin)" in text_of(smtp.messages[0][1])


def test_a_german_conversation_gets_its_email_in_german(chat, smtp):
    Conversation.objects.filter(pk=chat.pk).update(language="de")
    sam = get_user_model().objects.create_user("sam", first_name="Sam", is_staff=True)
    message = reply(chat, "Ihr Paket ist unterwegs.", author=Message.STAFF, user=sam)
    Message.objects.filter(pk=message.pk).update(created_at=datetime(2024, 5, 14, 14, 2, tzinfo=UTC))
    notify.send_reply_emails(now=datetime(2024, 5, 14, 15, 0, tzinfo=UTC))

    message = smtp.messages[0][1]
    assert message["Subject"] == "Neue Antwort vom Sundry-Support"
    body, html = text_of(message), html_of(message)
    assert "Der Sundry-Support hat geantwortet, während Sie weg waren:" in body
    assert "Sam vom Sundry-Support, Di 14 Mai, 16:02 (Europe/Berlin):" in body
    assert "Diese E-Mails abbestellen:" in body and "replied while you were away" not in body
    assert '<html lang="de">' in html and "Gespräch fortsetzen" in html


def test_it_waits_until_the_reply_is_old_enough(chat, smtp):
    reply(chat, "Your parcel is with the carrier.")
    assert notify.send_reply_emails(now=later(MINUTES - 1)) == []
    assert len(notify.send_reply_emails(now=later(MINUTES + 1))) == 1


def test_it_sends_nothing_for_replies_an_open_widget_showed(chat, smtp):
    reply(chat, "Your parcel is with the carrier.", minutes_ago=30)
    notify.customer_seen(chat.pk, now=timezone.now() - timedelta(minutes=20))  # she was there after it
    assert notify.send_reply_emails(now=later()) == [] and smtp.messages == []


def test_it_sends_nothing_while_the_customer_is_connected(chat, smtp):
    reply(chat, "Your parcel is with the carrier.", minutes_ago=30)
    FollowUp.objects.filter(conversation=chat).update(seen_at=later())  # a heartbeat just now, seq not yet moved
    assert notify.send_reply_emails(now=later()) == []


def test_a_reply_is_emailed_once_and_the_next_one_in_an_email_of_its_own(chat, smtp):
    reply(chat, "First answer.")
    reply(chat, "Second answer.")
    assert len(notify.send_reply_emails(now=later())) == 1
    assert notify.send_reply_emails(now=later(MINUTES + 5)) == []  # nothing new
    reply(chat, "Third answer.")
    assert len(notify.send_reply_emails(now=later(2 * MINUTES + 5))) == 1
    bodies = [text_of(m) for _, m in smtp.messages]
    assert len(bodies) == 2
    assert "First answer." in bodies[0] and "Second answer." in bodies[0]
    assert "Third answer." in bodies[1] and "First answer." not in bodies[1]
    assert smtp.messages[1][1]["Subject"] == "New reply from Sundry support"


@pytest.mark.django_db(transaction=True)
def test_two_beats_at_once_send_one_email(demo, smtp, monkeypatch):
    monkeypatch.setattr("support.desk.queue.run_agent", lambda run_id, **ids: None)
    conversation = services.conversation_start(customer=demo.maya)
    reply(conversation, "Your parcel is with the carrier.")
    for _ in range(5):  # a few trials: the two claims race for the same batch each time
        start = threading.Barrier(2)
        results = []

        def beat():
            start.wait()
            try:
                results.append(len(notify.send_reply_emails(now=later())))
            finally:
                from django.db import connection

                connection.close()

        threads = [threading.Thread(target=beat) for _ in range(2)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        assert sorted(results) == [0, 1]
        reply(conversation, "Another answer.", minutes_ago=0)
    assert len(smtp.messages) == 5


def test_a_failed_send_is_tried_again_by_the_next_beat(chat, smtp, settings):
    reply(chat, "Your parcel is with the carrier.")
    settings.EMAIL_PORT = 1  # nothing listens there
    assert notify.send_reply_emails(now=later()) == []
    assert FollowUp.objects.get(conversation=chat).emailed_seq == 0  # given back
    settings.EMAIL_PORT = smtp.port
    assert len(notify.send_reply_emails(now=later())) == 1


def test_replies_older_than_the_window_are_history_not_news(chat, smtp):
    reply(chat, "Last week's answer.", minutes_ago=3 * 24 * 60)
    assert notify.send_reply_emails(now=later()) == []


def test_reply_emails_can_be_turned_off(chat, smtp, settings):
    settings.REPLY_EMAILS = False
    reply(chat, "Your parcel is with the carrier.")
    assert notify.send_reply_emails(now=later()) == []


# -- unsubscribing ------------------------------------------------------------------------------------------

def unsubscribe_path(customer) -> str:
    return f"/c/unsubscribe/{notify.unsubscribe_token(customer)}/"


def test_opening_the_unsubscribe_link_asks_and_only_the_button_unsubscribes(chat, smtp, demo):
    page = Client().get(unsubscribe_path(demo.maya))
    assert page.status_code == 200 and b"Stop these e-mails" in page.content
    reply(chat, "Your parcel is with the carrier.")
    assert len(notify.send_reply_emails(now=later())) == 1  # a mail scanner following the link changed nothing

    done = Client(enforce_csrf_checks=True).post(unsubscribe_path(demo.maya), {"action": "stop"})
    assert done.status_code == 200 and b"You won't get these e-mails any more" in done.content
    reply(chat, "Another answer.")
    assert notify.send_reply_emails(now=later(2 * MINUTES + 2)) == []
    assert len(smtp.messages) == 1


def test_one_click_unsubscribe_from_the_mail_client_and_undo(chat, smtp, demo):
    response = Client(enforce_csrf_checks=True).post(unsubscribe_path(demo.maya),
                                                     "List-Unsubscribe=One-Click",
                                                     content_type="application/x-www-form-urlencoded")
    assert response.status_code == 200
    reply(chat, "Your parcel is with the carrier.")
    assert notify.send_reply_emails(now=later()) == []
    Client().post(unsubscribe_path(demo.maya), {"action": "resume"})
    assert len(notify.send_reply_emails(now=later())) == 1


def test_a_forged_unsubscribe_link_changes_nothing(chat, smtp, demo):
    token = notify.unsubscribe_token(demo.maya)
    assert Client().post(f"/c/unsubscribe/{token[:-2]}xx/", {"action": "stop"}).status_code == 404
    reply(chat, "Your parcel is with the carrier.")
    assert len(notify.send_reply_emails(now=later())) == 1


def test_the_pages_a_link_opens_speak_the_customer_s_language(chat, demo):
    Conversation = services.Conversation
    Conversation.objects.filter(pk=chat.pk).update(language="de")
    page = Client().get(unsubscribe_path(demo.maya))  # her latest conversation is in German
    assert page.status_code == 200 and page["Content-Language"] == "de"
    assert "Diese E-Mails abbestellen" in page.content.decode() and b'<html lang="de">' in page.content
    done = Client().post(unsubscribe_path(demo.maya), {"action": "stop"}).content.decode()
    assert "Sie bekommen diese E-Mails nicht mehr" in done and demo.maya.email in done

    chat.refresh_from_db()
    opened = Client().get(f"/c/{notify.link_token(chat)}/")
    assert opened.status_code == 200 and 'data-lang="de"' in opened.content.decode()  # the widget too
    assert "Ihr Gespräch mit unserem Support-Team" in opened.content.decode()

    broken = Client().get("/c/unsubscribe/nonsense/", HTTP_ACCEPT_LANGUAGE="de-DE,de;q=0.9")
    assert broken.status_code == 404 and "Dieser Link funktioniert nicht mehr" in broken.content.decode()
    english = Client().get("/c/unsubscribe/nonsense/", HTTP_ACCEPT_LANGUAGE="en-GB")
    assert "This link no longer works" in english.content.decode()


def test_an_address_in_the_page_is_shown_inert(chat, demo):
    from support.models import Customer

    Customer.objects.filter(pk=demo.maya.pk).update(email='maya+<b>x</b>@example.com')
    page = Client().get(unsubscribe_path(Customer.objects.get(pk=demo.maya.pk))).content.decode()
    assert "<b>x</b>" not in page and "&lt;b&gt;x&lt;/b&gt;" in page


def test_the_beat_runs_the_batch(settings):
    assert settings.CELERY_BEAT_SCHEDULE["reply-emails"]["task"] == "support.tasks.send_reply_emails"
    from support import tasks

    assert tasks.send_reply_emails.name == "support.tasks.send_reply_emails"
