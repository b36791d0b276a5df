"""The two ways customers' mail comes in, both down the one path (support/desk/inbound_mail.py):

- a provider's webhook (Mailgun, Postmark, SendGrid, Amazon SES) through django-anymail: authenticated with
  HTTP basic auth (and Mailgun's signature) before anything is read, so a large unauthenticated post is
  refused without its body being read; refused with 400 without them; off (404)
  while no secret is set;
- the shop's mailbox, read over IMAP by the beat's task from a real IMAP server in this process.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import time

import pytest
from django.test import Client

from support import tasks
from support.customers.signin import email_digest
from support.desk import mailbox
from support.models import InboundEmail, Message
from tests.body_fixture import post_unread
from tests.mail_factories import mail

SECRET = "provider:webhook-password"
SIGNING_KEY = "mailgun-signing-key"


@pytest.fixture
def inbound(demo, settings, queued):
    settings.INBOUND_EMAIL_ADDRESS = "support@shop.example"
    settings.ANYMAIL = {"WEBHOOK_SECRET": SECRET, "MAILGUN_WEBHOOK_SIGNING_KEY": SIGNING_KEY}
    settings.STORAGES = {**settings.STORAGES, "attachments": {"BACKEND": "django.core.files.storage.InMemoryStorage"}}
    return demo


def basic(secret=SECRET) -> dict:
    return {"HTTP_AUTHORIZATION": "Basic " + base64.b64encode(secret.encode()).decode()}


def saved(text):
    return Message.objects.filter(author=Message.CUSTOMER, content=text, channel=Message.EMAIL)


# -- webhooks -------------------------------------------------------------------------------------------------

def postmark(raw: bytes) -> str:
    return json.dumps({"RawEmail": raw.decode(), "Headers": []})


def test_it_takes_a_postmark_post_with_the_webhook_secret(inbound):
    response = Client().post("/email/inbound/postmark/", postmark(mail(text="From Postmark.")),
                             content_type="application/json", **basic())
    assert response.status_code == 200
    record = InboundEmail.objects.get()
    assert record.source == "Postmark" and record.outcome == InboundEmail.STARTED and saved("From Postmark.").count() == 1


@pytest.mark.filterwarnings("ignore::anymail.exceptions.AnymailNotSupportedWarning")
@pytest.mark.parametrize("provider", ["postmark", "sendgrid"])
def test_words_in_any_alphabet_arrive_intact(inbound, provider):
    raw = mail(sender="Jürgen Groß <juergen@beispiel.example>", subject="Größe falsch",
               text="Grüße! Die Jacke ist zu groß — 尺寸不对 🙂")
    if provider == "postmark":
        response = Client().post("/email/inbound/postmark/", json.dumps({"RawEmail": raw.decode(), "Headers": []}),
                                 content_type="application/json", **basic())
    else:
        envelope = json.dumps({"to": ["support@shop.example"], "from": "juergen@beispiel.example"})
        response = Client().post("/email/inbound/sendgrid/", {"email": raw.decode(), "envelope": envelope}, **basic())
    assert response.status_code == 200
    record = InboundEmail.objects.get()
    assert record.message.content == "Grüße! Die Jacke ist zu groß — 尺寸不对 🙂" and record.subject == "Größe falsch"
    assert record.conversation.customer.name == "Jürgen Groß"


def test_a_postmark_post_with_a_photo_larger_than_a_plain_request_is_taken(inbound, settings):
    """Django refuses request bodies past DATA_UPLOAD_MAX_MEMORY_SIZE; a mail's bound is its own."""
    import os

    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100_000
    raw = mail(text="The photo is attached.", files=[("scan.pdf", "application/pdf",
                                                      b"%PDF-1.4\n" + os.urandom(200_000).hex().encode() + b"\n%%EOF\n")])
    assert len(postmark(raw)) > settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    response = Client().post("/email/inbound/postmark/", postmark(raw), content_type="application/json", **basic())
    assert response.status_code == 200 and saved("The photo is attached.").get().attachments.count() == 1
    settings.INBOUND_EMAIL_MAX_BYTES = 100_000  # past the mail's own bound: refused before it is read
    too_large = Client().post("/email/inbound/postmark/", postmark(mail(text="x" * 300_000)),
                              content_type="application/json", **basic())
    assert too_large.status_code == 413 and InboundEmail.objects.count() == 1


def test_the_sender_of_a_webhooks_mail_is_logged_as_a_digest(inbound, caplog):
    caplog.set_level(logging.INFO)
    assert Client().post("/email/inbound/postmark/", postmark(mail(text="Hello.")), content_type="application/json",
                         **basic()).status_code == 200
    lines = [r.getMessage() for r in caplog.records]
    assert not [line for line in lines if "maya@example.com" in line]
    assert [line for line in lines if email_digest("maya@example.com") in line and "Postmark" in line]


def test_a_retried_webhook_is_stored_once(inbound):
    body = postmark(mail(text="Twice sent.", message_id="<retry@mail.example>"))
    for _ in range(2):
        assert Client().post("/email/inbound/postmark/", body, content_type="application/json",
                             **basic()).status_code == 200
    assert InboundEmail.objects.filter(mail_id="retry@mail.example").count() == 1 and saved("Twice sent.").count() == 1


@pytest.mark.parametrize("credentials", [{}, basic("provider:wrong"), basic("someone:" + SECRET.split(":")[1])])
def test_a_webhook_post_without_the_secret_is_refused_and_saves_nothing(inbound, credentials):
    response = Client().post("/email/inbound/postmark/", postmark(mail(text="Let me in.")),
                             content_type="application/json", **credentials)
    assert response.status_code == 400
    assert not InboundEmail.objects.exists() and not saved("Let me in.").exists()


@pytest.mark.parametrize(("provider", "content_type"), [("postmark", "application/json"),
                                                       ("amazon_ses", "text/plain"),
                                                       ("sendgrid", "multipart/form-data; boundary=x"),
                                                       ("mailgun", "application/x-www-form-urlencoded")])
@pytest.mark.parametrize("credentials", [{}, basic("provider:wrong")])
def test_a_large_post_without_the_secret_is_refused_before_its_body_is_read(inbound, provider, content_type,
                                                                            credentials):
    size = 10 * 1024 * 1024  # within what a mail may be (INBOUND_EMAIL_MAX_BYTES, 15 MB)
    status, body = post_unread(f"/email/inbound/{provider}/", size, content_type, **credentials)
    assert (status, body.reads) == (400, [])
    assert not InboundEmail.objects.exists()


def test_webhooks_are_off_while_no_secret_is_set(inbound, settings):
    settings.ANYMAIL = {"WEBHOOK_SECRET": "", "MAILGUN_WEBHOOK_SIGNING_KEY": ""}
    response = Client().post("/email/inbound/postmark/", postmark(mail()), content_type="application/json")
    assert response.status_code == 404 and not InboundEmail.objects.exists()
    assert Client().post("/email/inbound/nosuchprovider/", "{}", content_type="application/json",
                         **basic()).status_code == 404


def mailgun_form(raw: bytes, key=SIGNING_KEY) -> dict:
    timestamp, token = str(int(time.time())), "a" * 50
    signature = hmac.new(key.encode(), f"{timestamp}{token}".encode(), hashlib.sha256).hexdigest()
    return {"body-mime": raw.decode(), "timestamp": timestamp, "token": token, "signature": signature,
            "recipient": "support@shop.example", "sender": "maya@example.com"}


def test_it_takes_a_signed_mailgun_post_and_refuses_a_badly_signed_one(inbound):
    forged = Client().post("/email/inbound/mailgun/", mailgun_form(mail(text="Forged."), key="not-the-key"), **basic())
    assert forged.status_code == 400 and not saved("Forged.").exists()
    good = Client().post("/email/inbound/mailgun/", mailgun_form(mail(text="From Mailgun.")), **basic())
    assert good.status_code == 200 and InboundEmail.objects.get().source == "Mailgun"
    assert saved("From Mailgun.").count() == 1


def test_mailgun_is_off_without_its_signing_key(inbound, settings):
    settings.ANYMAIL = {"WEBHOOK_SECRET": SECRET, "MAILGUN_WEBHOOK_SIGNING_KEY": ""}
    assert Client().post("/email/inbound/mailgun/", mailgun_form(mail()), **basic()).status_code == 404


@pytest.mark.filterwarnings("ignore::anymail.exceptions.AnymailNotSupportedWarning")
def test_it_takes_a_sendgrid_raw_post(inbound):
    form = {"email": mail(text="From SendGrid.").decode(),
            "envelope": json.dumps({"to": ["support@shop.example"], "from": "maya@example.com"})}
    assert Client().post("/email/inbound/sendgrid/", form, **basic()).status_code == 200
    assert InboundEmail.objects.get().source == "SendGrid" and saved("From SendGrid.").count() == 1


def test_it_takes_an_amazon_ses_notification(inbound):
    raw = mail(text="From SES.")
    notification = {"notificationType": "Received", "content": base64.b64encode(raw).decode(),
                    "mail": {"source": "maya@example.com", "messageId": "ses-1", "timestamp": "2026-01-05T10:00:00Z"},
                    "receipt": {"action": {"type": "SNS", "encoding": "BASE64"},
                                "recipients": ["support@shop.example"]}}
    body = json.dumps({"Type": "Notification", "MessageId": "sns-1", "TopicArn": "arn:aws:sns:eu-west-1:1:inbound",
                       "Message": json.dumps(notification)})
    response = Client().post("/email/inbound/amazon_ses/", body, content_type="text/plain; charset=UTF-8",
                             HTTP_X_AMZ_SNS_MESSAGE_TYPE="Notification", HTTP_X_AMZ_SNS_MESSAGE_ID="sns-1", **basic())
    assert response.status_code == 200
    assert InboundEmail.objects.get().source == "Amazon SES" and saved("From SES.").count() == 1


# -- the polled mailbox --------------------------------------------------------------------------------------

def test_the_beat_reads_unseen_mail_from_the_mailbox_and_marks_it_seen(inbound, imap_server):
    first = imap_server.deliver(mail(text="First by IMAP."))
    second = imap_server.deliver(mail(sender="tom@example.com", text="Second by IMAP."))
    assert tasks.poll_mailbox() == 2
    assert imap_server.seen() == {first, second}
    assert saved("First by IMAP.").count() == 1 and saved("Second by IMAP.").count() == 1
    assert set(InboundEmail.objects.values_list("source", flat=True)) == {"imap"}
    # The raw bytes are kept as the server sent them, for "Show original".
    assert bytes(InboundEmail.objects.get(message__content="First by IMAP.").raw) == imap_server.mails[first - 1]
    assert tasks.poll_mailbox() == 0  # nothing unseen left


def test_a_mail_read_twice_from_the_mailbox_is_stored_once(inbound, imap_server):
    uid = imap_server.deliver(mail(text="Read twice.", message_id="<twice@mail.example>"))
    assert mailbox.poll() == 1
    imap_server.flags[uid].clear()  # marked unseen again (another client, a crash before the mark)
    assert mailbox.poll() == 1
    assert InboundEmail.objects.filter(mail_id="twice@mail.example").count() == 1 and saved("Read twice.").count() == 1


def test_a_mail_that_fails_stays_unseen_and_the_others_go_on(inbound, imap_server, monkeypatch):
    from support.desk import inbound_mail

    real = inbound_mail.receive

    def flaky(raw, *, source):
        if b"Breaks." in raw:
            raise RuntimeError("the database went away")
        return real(raw, source=source)

    monkeypatch.setattr(inbound_mail, "receive", flaky)
    broken = imap_server.deliver(mail(text="Breaks."))
    fine = imap_server.deliver(mail(text="Fine."))
    assert mailbox.poll() == 1
    assert imap_server.seen() == {fine} and broken not in imap_server.seen()


def test_the_mailbox_is_not_read_when_it_is_not_configured(inbound, imap_server, settings):
    imap_server.deliver(mail(text="Nobody reads this."))
    settings.INBOUND_IMAP_HOST = ""
    assert mailbox.poll() == 0 and imap_server.logins == []


def test_the_beat_polls_the_mailbox_only_when_one_is_configured():
    from agentsite import settings as configured

    assert ("inbound-mailbox" in configured.CELERY_BEAT_SCHEDULE) == bool(configured.INBOUND_IMAP_HOST)
    assert tasks.poll_mailbox.name == "support.tasks.poll_mailbox"
