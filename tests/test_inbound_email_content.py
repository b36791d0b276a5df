"""What of a customer's e-mail the conversation gets: only the new words (quoted history and signatures
stripped, HTML turned into text), the files that pass the widget's checks (type by content, size, pixels,
photos re-encoded), and the mail as it came, kept for staff."""

from __future__ import annotations

import io

import pytest
from django.core.files.storage import storages
from PIL import Image

from support.desk import inbound_mail
from support.models import Attachment, InboundEmail, Message
from tests.mail_factories import mail

QUOTED = """Thanks, but it still has not arrived.

Best,
Maya
--
Maya Lin
Sent from my phone

On Tue, 14 May 2024 at 16:02, Sundry support <support@shop.example> wrote:
> Your parcel SU-41210 is with the carrier.
> It should arrive on Monday.
"""


@pytest.fixture
def inbound(demo, settings, queued):
    settings.INBOUND_EMAIL_ADDRESS = "support@shop.example"
    settings.STORAGES = {**settings.STORAGES, "attachments": {"BACKEND": "django.core.files.storage.InMemoryStorage"}}
    return demo


def photo(size=(1600, 1200)) -> bytes:
    image = Image.new("RGB", size, (180, 40, 40))
    exif = Image.Exif()
    exif[0x010F] = "PhoneMaker"
    out = io.BytesIO()
    image.save(out, "JPEG", exif=exif)
    return out.getvalue()


PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"


def test_only_the_new_words_are_saved_without_the_quote_or_the_signature(inbound):
    record = inbound_mail.receive(mail(text=QUOTED), source="imap")
    assert record.message.content == "Thanks, but it still has not arrived."
    assert b"It should arrive on Monday." in bytes(record.raw)  # the original is kept for staff


def test_an_html_mail_becomes_text_without_its_quoted_history(inbound):
    html = ("<html><head><style>p{color:red}</style></head><body><p>My parcel is <b>late</b>.</p>"
            "<p>Can you check?<br>Order SU-41210</p><div class=\"gmail_quote\">On Monday you wrote:"
            "<blockquote>Your parcel shipped.</blockquote></div><script>alert(1)</script></body></html>")
    raw = mail(text="", html=html)
    record = inbound_mail.receive(raw, source="imap")
    content = record.message.content
    assert "My parcel is late." in content and "Can you check?\nOrder SU-41210" in content
    assert "shipped" not in content and "<" not in content and "alert" not in content and "color" not in content


def test_an_attached_photo_and_pdf_go_through_the_upload_checks(inbound):
    record = inbound_mail.receive(mail(text="Here is the damage.", files=[
        ("broken.jpg", "image/jpeg", photo()), ("receipt.pdf", "application/pdf", PDF)]), source="imap")
    files = list(Attachment.objects.filter(message=record.message).order_by("kind"))
    assert [f.kind for f in files] == [Attachment.IMAGE, Attachment.PDF]
    stored = storages["attachments"].open(files[0].file.name).read()
    assert stored != photo() and b"PhoneMaker" not in stored  # re-encoded, without its EXIF
    assert record.message.content == "Here is the damage."


def test_a_file_that_fails_the_checks_is_not_kept_and_the_message_says_so(inbound, settings):
    settings.ATTACHMENT_MAX_PIXELS = 1000 * 1000
    record = inbound_mail.receive(mail(text="See attached.", files=[
        ("virus.exe", "application/octet-stream", b"MZ\x90\x00 not a picture"),
        ("huge.jpg", "image/jpeg", photo(size=(1600, 1200)))]), source="imap")
    assert not Attachment.objects.exists()
    content = record.message.content
    assert content.startswith("See attached.")
    assert "“virus.exe” isn't a photo or a PDF we can read" in content and "huge.jpg" in content


def test_a_mail_with_only_a_photo_is_a_message_with_the_photo(inbound):
    record = inbound_mail.receive(mail(text="", files=[("a.jpg", "image/jpeg", photo())]), source="imap")
    assert record.outcome == InboundEmail.STARTED and record.message.attachments.count() == 1
    assert record.message.content  # the placeholder the widget uses for a photo alone


def test_a_mail_with_no_words_and_no_files_starts_nothing(inbound):
    record = inbound_mail.receive(mail(text="  \n\n  "), source="imap")
    assert record.outcome == InboundEmail.EMPTY and record.message is None
    assert not Message.objects.filter(channel=Message.EMAIL).exists()


def test_a_quote_alone_is_kept_rather_than_lost(inbound):
    """The reply parser finds no new words above a quote; the customer's mail is saved whole, not dropped."""
    record = inbound_mail.receive(mail(text="> Your parcel shipped on Monday.\n"), source="imap")
    assert record.message.content == "> Your parcel shipped on Monday."


def test_the_html_of_a_mail_with_a_blank_text_part_is_read(inbound):
    from email.message import EmailMessage

    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"], msg["Message-ID"] = "maya@example.com", "support@shop.example", "Hi", "<b@x>"
    msg.set_content("\n")
    msg.add_alternative("<p>Only in <i>HTML</i>.</p>", subtype="html")
    assert inbound_mail.receive(msg.as_bytes(), source="imap").message.content == "Only in HTML."
