"""A customer's photos and PDFs: checked by content, re-encoded, stored, served signed, read by the agent.

Who may see what: Maya sends files in her conversation and sees them through the links her conversation
gives her; Tom (another customer) sees nothing of hers; staff see every file, through links that also need
their staff session. Nothing refused is saved: no message, no row, no file in the storage.
"""

from __future__ import annotations

import io
import time
import uuid
from unittest import mock

import pytest
from django.core.files.storage import storages
from django.test import Client
from PIL import Image

from support.customers import attachments, identity
from support.desk import gate, runner, services
from support.models import Approval, Attachment, Conversation, Message, Run
from tests.desk_factories import customer_messages, make_user, maya_chat, queued, start_conversation, widget  # noqa: F401  (fixtures)
from tests.redis_fixture import limits_redis, limits_redis_server  # noqa: F401  (fixtures)

pytestmark = pytest.mark.usefixtures("limits_redis")


@pytest.fixture(autouse=True)
def memory_storage(settings):
    """Files go to Django's in-memory storage: the storage is whatever STORAGES["attachments"] names."""
    settings.STORAGES = {**settings.STORAGES, "attachments": {"BACKEND": "django.core.files.storage.InMemoryStorage"}}
    return storages["attachments"]


def stored_names(storage) -> list[str]:
    names = []
    for folder in storage.listdir("")[0]:
        names += [f"{folder}/{n}" for n in storage.listdir(folder)[1]]
    return names


def jpeg(size=(1600, 1200), *, gps=True, orientation=None, color=(180, 40, 40)) -> bytes:
    image = Image.new("RGB", size, color)
    exif = Image.Exif()
    exif[0x010F] = "PhoneMaker"
    if orientation:
        exif[0x0112] = orientation
    if gps:
        place = exif.get_ifd(0x8825)
        place[1], place[2], place[3], place[4] = "N", (52.0, 31.0, 12.0), "E", (13.0, 24.0, 36.0)
    out = io.BytesIO()
    image.save(out, "JPEG", exif=exif, quality=90)
    return out.getvalue()


def png_with_text() -> bytes:
    from PIL import PngImagePlugin

    info = PngImagePlugin.PngInfo()
    info.add_text("Comment", "taken at 52.5200 N, 13.4050 E")
    out = io.BytesIO()
    Image.new("RGBA", (300, 200), (0, 0, 255, 128)).save(out, "PNG", pnginfo=info)
    return out.getvalue()


PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"


def upload(client, conversation, token, *files, text=None, client_id=None, capture=None):
    data = {"file": [_file(name, raw) for name, raw in files]}
    if text is not None:
        data["text"] = text
    if client_id is not None:
        data["client_id"] = client_id
    post = lambda: client.post(f"/api/conversations/{conversation.public_id}/attachments", data,  # noqa: E731
                               HTTP_AUTHORIZATION=f"Bearer {token}")
    if capture is None:
        return post()
    with capture(execute=True):
        return post()


def _file(name, raw):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, raw)


@pytest.fixture
def send(client, maya_chat, queued, django_capture_on_commit_callbacks):
    conversation, token = maya_chat

    def go(*files, **options):
        return upload(client, conversation, token, *files, capture=django_capture_on_commit_callbacks, **options)

    return go


# -- sending ---------------------------------------------------------------------------------------------------

def test_a_photo_alone_is_a_message_with_the_photo_and_queues_one_run(send, maya_chat, queued, memory_storage):
    conversation, _ = maya_chat
    response = send(("IMG_2041.JPG", jpeg()))
    assert response.status_code == 202, response.json()
    data = response.json()
    (message,) = customer_messages(conversation)
    (attachment,) = Attachment.objects.filter(message=message)
    assert message.content == "[Sent a photo]" and data["created"] is True
    assert data["message"]["attachments_only"] is True
    (shown,) = data["message"]["attachments"]
    assert shown["ref"] == attachment.reference and shown["ref"].startswith("IMG-") and len(shown["ref"]) == 8
    assert (shown["kind"], shown["content_type"], shown["width"], shown["height"]) == ("image", "image/jpeg", 1600, 1200)
    assert shown["name"] == "IMG_2041.jpg" and shown["url"].startswith("/api/files/")
    assert shown["thumbnail_url"].startswith("/api/files/")
    assert queued == [Run.objects.get(conversation=conversation).pk]
    assert sorted(stored_names(memory_storage)) == sorted([attachment.file.name, attachment.thumbnail.name,
                                                           attachment.preview.name])


def test_a_photo_is_reencoded_without_exif_or_location_and_turned_upright(send, maya_chat):
    assert send(("upright.jpg", jpeg(orientation=6))).status_code == 202
    attachment = Attachment.objects.get()
    with attachment.file.open("rb") as f:
        stored = Image.open(io.BytesIO(f.read()))
    assert stored.format == "JPEG" and stored.size == (1200, 1600)  # rotated as the camera held it
    assert dict(stored.getexif()) == {} and "exif" not in stored.info and "icc_profile" not in stored.info
    assert (attachment.width, attachment.height) == (1200, 1600)
    with attachment.thumbnail.open("rb") as f:
        thumb = Image.open(io.BytesIO(f.read()))
    assert thumb.format == "JPEG" and max(thumb.size) == 320 and dict(thumb.getexif()) == {}


def test_a_pngs_text_chunks_do_not_survive(send):
    assert send(("screenshot.png", png_with_text())).status_code == 202
    attachment = Attachment.objects.get()
    with attachment.file.open("rb") as f:
        raw = f.read()
    assert b"52.5200" not in raw and Image.open(io.BytesIO(raw)).format == "PNG"
    assert attachment.content_type == "image/png"


def test_words_and_files_go_in_one_message(send, maya_chat):
    response = send(("a.jpg", jpeg()), ("invoice.pdf", PDF), text="  It arrived cracked, SU-41402.  ")
    assert response.status_code == 202
    message = response.json()["message"]
    assert message["content"] == "It arrived cracked, SU-41402." and message["attachments_only"] is False
    assert [(a["kind"], a["name"]) for a in message["attachments"]] == [("image", "a.jpg"), ("pdf", "invoice.pdf")]
    pdf = Attachment.objects.get(kind="pdf")
    assert pdf.reference.startswith("PDF-") and pdf.thumbnail.name == "" and pdf.content_type == "application/pdf"


def test_a_retried_upload_with_the_same_client_id_is_saved_once(send, maya_chat, memory_storage, queued):
    first = send(("a.jpg", jpeg()), client_id="up-1")
    again = send(("a.jpg", jpeg()), client_id="up-1")
    assert (first.json()["created"], again.json()["created"]) == (True, False)
    assert again.json()["message"]["seq"] == first.json()["message"]["seq"]
    assert Attachment.objects.count() == 1 and len(stored_names(memory_storage)) == 3 and len(queued) == 1


# -- refusals: in plain words, with a code, and nothing saved -----------------------------------------------

def _zip_named_png() -> bytes:
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("evil.txt", "not a picture")
    return out.getvalue()


@pytest.mark.parametrize("name, raw, status, code, words", [
    ("photo.png", _zip_named_png(), 415, "attachment_type", "isn't a photo or a PDF we can read"),
    ("notes.txt", b"just some text", 415, "attachment_type", "JPEG, PNG, WebP or HEIC photo, or a PDF"),
    ("anim.gif", b"GIF89a\x01\x00\x01\x00\x00\x00\x00;", 415, "attachment_type", "isn't a photo"),
    ("cut.jpg", jpeg()[:3000], 400, "attachment_unreadable", "damaged or incomplete"),
    ("cut.pdf", b"%PDF-1.7\n1 0 obj\n", 400, "attachment_unreadable", "cut off"),
    ("empty.jpg", b"", 400, "attachment_unreadable", "is empty"),
])
def test_a_bad_file_is_refused_by_its_content_and_nothing_is_saved(send, maya_chat, memory_storage, queued,
                                                                   name, raw, status, code, words):
    conversation, _ = maya_chat
    response = send((name, raw))
    assert response.status_code == status
    body = response.json()
    assert (body["code"], body["file"], body["retryable"]) == (code, name, False) and words in body["error"]
    assert customer_messages(conversation) == [] and not Attachment.objects.exists()
    assert stored_names(memory_storage) == [] and queued == []


def test_a_file_over_the_size_limit_is_refused_in_megabytes(send, settings):
    settings.ATTACHMENT_MAX_BYTES = 10 * 1024 * 1024
    response = send(("big.jpg", _noisy_jpeg(3000)))
    assert response.status_code == 413 and response.json()["code"] == "attachment_too_large"
    assert "each file can be up to 10 MB" in response.json()["error"]
    assert "“big.jpg” is 1" in response.json()["error"] and " MB;" in response.json()["error"]


def _noisy_jpeg(px: int) -> bytes:
    import os

    image = Image.frombytes("RGB", (px, px), os.urandom(px * px * 3))
    out = io.BytesIO()
    image.save(out, "JPEG", quality=100)
    return out.getvalue()


def test_a_photo_with_too_many_pixels_is_refused_before_it_is_decoded(send, settings):
    settings.ATTACHMENT_MAX_PIXELS = 1000 * 1000
    response = send(("huge.jpg", jpeg(size=(1600, 1200))))
    assert response.status_code == 413 and "1,600 × 1,200 pixels" in response.json()["error"]


def test_more_files_than_one_message_takes_are_refused(send, settings):
    settings.ATTACHMENTS_PER_MESSAGE = 2
    response = send(("1.jpg", jpeg()), ("2.jpg", jpeg()), ("3.jpg", jpeg()))
    assert response.status_code == 400 and response.json()["code"] == "too_many_attachments"
    assert "up to 2 files in one message" in response.json()["error"] and not Attachment.objects.exists()


def test_the_conversation_holds_so_many_files_and_no_more(send, settings):
    settings.ATTACHMENTS_PER_CONVERSATION = 2
    assert send(("1.jpg", jpeg())).status_code == 202
    refused = send(("2.jpg", jpeg()), ("3.jpg", jpeg()))
    assert refused.status_code == 409 and refused.json()["code"] == "attachments_full"
    assert "You can send 1 more." in refused.json()["error"]
    assert send(("2.jpg", jpeg())).status_code == 202
    assert send(("4.jpg", jpeg())).status_code == 409 and Attachment.objects.count() == 2


def test_the_conversation_holds_so_many_bytes_and_no_more(send, settings):
    settings.ATTACHMENT_BYTES_PER_CONVERSATION = 1000
    response = send(("1.jpg", jpeg()))
    assert response.status_code == 409 and response.json()["code"] == "attachments_full"


def test_a_request_declaring_more_than_a_message_can_hold_is_refused_unread(client, maya_chat, settings):
    conversation, token = maya_chat
    settings.ATTACHMENT_MAX_BYTES, settings.ATTACHMENTS_PER_MESSAGE = 1000, 1
    response = client.post(f"/api/conversations/{conversation.public_id}/attachments", {"file": _file("a.jpg", jpeg())},
                           HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 413 and response.json()["code"] == "attachment_too_large"


def test_no_file_at_all_is_refused(send):
    response = send(text="hello")
    assert response.status_code == 400 and response.json()["code"] == "no_attachment"


def test_uploads_per_address_are_rate_limited(send, settings):
    settings.ATTACHMENT_UPLOADS_PER_HOUR = 1
    assert send(("1.jpg", jpeg())).status_code == 202
    refused = send(("2.jpg", jpeg()))
    assert refused.status_code == 429 and refused.json()["retryable"] is True


def test_text_with_the_files_is_checked_like_any_message(send, settings):
    settings.MAX_MESSAGE_BYTES = 10
    response = send(("1.jpg", jpeg()), text="far too long for the limit")
    assert response.status_code == 400 and response.json()["code"] == "too_long"
    assert not Attachment.objects.exists()


# -- who may see the files -----------------------------------------------------------------------------------

def test_the_customer_opens_their_file_and_its_thumbnail_through_signed_links(send, client):
    links = send(("a.jpg", jpeg())).json()["message"]["attachments"][0]
    anonymous = Client()
    full = anonymous.get(links["url"])
    assert full.status_code == 200 and full["Content-Type"] == "image/jpeg"
    assert full["Cache-Control"].startswith("private") and "sandbox" in full["Content-Security-Policy"]
    assert b"".join(full.streaming_content) == Attachment.objects.get().file.open("rb").read()
    thumb = anonymous.get(links["thumbnail_url"])
    assert thumb.status_code == 200 and max(Image.open(io.BytesIO(b"".join(thumb.streaming_content))).size) == 320


def test_a_pdf_is_served_as_a_pdf(send):
    url = send(("invoice.pdf", PDF)).json()["message"]["attachments"][0]["url"]
    response = Client().get(url)
    assert response.status_code == 200 and response["Content-Type"] == "application/pdf"
    assert b"".join(response.streaming_content) == PDF and 'filename="invoice.pdf"' in response["Content-Disposition"]


def test_a_link_expires(send, settings):
    url = send(("a.jpg", jpeg())).json()["message"]["attachments"][0]["url"]
    later = time.time() + settings.ATTACHMENT_URL_MAX_AGE + 5
    with mock.patch("django.core.signing.time.time", return_value=later):
        response = Client().get(url)
    assert response.status_code == 403 and response.json()["code"] == "link_expired"


def test_a_forged_or_altered_link_finds_nothing(send):
    url = send(("a.jpg", jpeg())).json()["message"]["attachments"][0]["url"]
    token = url.rsplit("/", 1)[1]
    for bad in (token[:-2] + ("AA" if not token.endswith("AA") else "BB"), "x", "eyJh:b:c"):
        assert Client().get(f"/api/files/{bad}").status_code == 404


def test_the_media_folder_has_no_public_url(send):
    attachment = Attachment.objects.get() if send(("a.jpg", jpeg())).status_code == 202 else None
    for path in (f"/media/{attachment.file.name}", f"/media/attachments/{attachment.file.name}",
                 f"/static/{attachment.file.name}"):
        assert Client().get(path).status_code == 404


def test_the_customer_gets_fresh_links_to_their_conversations_files_only(send, client, maya_chat, demo):
    conversation, token = maya_chat
    send(("a.jpg", jpeg()))
    mine = client.get(f"/api/conversations/{conversation.public_id}/attachments", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert mine.status_code == 200
    assert [a["ref"] for a in mine.json()["attachments"]] == [Attachment.objects.get().reference]
    assert mine.json()["limits"]["per_message"] == 4 and "application/pdf" in mine.json()["limits"]["types"]
    toms = start_conversation(demo.tom)
    toms_token = identity.conversation_token(toms)
    # Tom's token opens his conversation only: Maya's files answer the same 404 as a conversation that does not exist
    assert client.get(f"/api/conversations/{conversation.public_id}/attachments",
                      HTTP_AUTHORIZATION=f"Bearer {toms_token}").status_code == 404
    assert client.get(f"/api/conversations/{toms.public_id}/attachments",
                      HTTP_AUTHORIZATION=f"Bearer {toms_token}").json()["attachments"] == []
    # and nobody uploads into Maya's conversation without her token
    assert upload(client, conversation, toms_token, ("x.jpg", jpeg())).status_code == 404


def test_staff_links_need_a_staff_session(send, maya_chat, db):
    conversation, _ = maya_chat
    send(("a.jpg", jpeg()))
    staff = Client()
    staff.force_login(make_user("sam", staff=True))
    data = staff.get(f"/api/staff/conversations/{conversation.public_id}").json()
    (message,) = [m for m in data["messages"] if m["author"] == "customer"]
    (link,) = message["attachments"]
    assert staff.get(link["thumbnail_url"]).status_code == 200 and staff.get(link["url"]).status_code == 200
    assert Client().get(link["url"]).status_code == 403  # the same link, without the session
    customer_user = Client()
    customer_user.force_login(make_user("shopper", staff=False))
    assert customer_user.get(link["url"]).status_code == 403
    fresh = staff.get(f"/api/staff/attachments/{link['id']}")
    assert fresh.status_code == 200 and fresh.json()["attachment"]["ref"] == link["ref"]
    assert Client().get(f"/api/staff/attachments/{link['id']}").status_code == 403


def test_the_live_event_carries_the_files(send, maya_chat, monkeypatch):
    from tests.desk_factories import record_events

    sent = record_events(monkeypatch)
    send(("a.jpg", jpeg()), text="Look")
    saved = [e for groups, e in sent if e["type"] == "message.saved" and e["message"]["author"] == "customer"]
    assert len(saved) == 2  # the staff view and the customer's
    assert all(len(e["message"]["attachments"]) == 1 for e in saved)


def test_deleting_a_conversation_deletes_its_files(send, maya_chat, memory_storage, django_capture_on_commit_callbacks):
    conversation, _ = maya_chat
    send(("a.jpg", jpeg()))
    assert len(stored_names(memory_storage)) == 3
    with django_capture_on_commit_callbacks(execute=True):
        Run.objects.filter(conversation=conversation).delete()
        Conversation.objects.filter(pk=conversation.pk).delete()
    assert stored_names(memory_storage) == []


# -- what the agent reads ---------------------------------------------------------------------------------------

def test_the_model_reads_a_note_per_file_by_default(send, maya_chat):
    conversation, _ = maya_chat
    send(("a.jpg", jpeg()), ("invoice.pdf", PDF), text="Cracked.")
    history, _ = runner.history_for_model(list(conversation.messages.order_by("seq")))
    user = history[-1]
    photo, pdf = Attachment.objects.order_by("pk")
    assert isinstance(user["content"], str) and user["content"].startswith("Cracked.\n")
    assert f"[customer attached photo {photo.reference} " in user["content"] and "1600×1200]" in user["content"]
    assert f"customer attached PDF {pdf.reference} “invoice.pdf”" in user["content"]
    assert Message.objects.get(pk=customer_messages(conversation)[0].pk).content == "Cracked."  # saved as sent


def test_a_model_that_reads_images_gets_the_newest_photos_as_image_parts(send, maya_chat, settings):
    conversation, _ = maya_chat
    settings.MODEL_IMAGES_PER_REQUEST = 1
    send(("old.jpg", jpeg()))
    send(("new.jpg", jpeg(color=(10, 200, 10))), text="And another")
    history, _ = runner.history_for_model(list(conversation.messages.order_by("seq")), images=True)
    old, new = [m for m in history if m["role"] == "user"]
    assert isinstance(old["content"], str) and "the image follows" not in old["content"]
    text, image = new["content"]
    assert text["type"] == "text" and text["text"].startswith("And another\n") and "the image follows" in text["text"]
    assert image["type"] == "image_url" and image["image_url"]["url"].startswith("data:image/jpeg;base64,")
    import base64

    preview = Image.open(io.BytesIO(base64.b64decode(image["image_url"]["url"].split(",", 1)[1])))
    assert max(preview.size) == 1024 and dict(preview.getexif()) == {}


# -- the damaged-item flow with the stand-in -----------------------------------------------------------------

def _run(queued):
    return runner.run_execute(queued.pop())


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("images", [True, False])
def test_the_agent_asks_for_a_photo_of_the_damage_and_goes_on_to_the_refund_once_it_has_one(
        desk, standin, queued, settings, client, django_capture_on_commit_callbacks, images):
    settings.MODEL_ACCEPTS_IMAGES = images
    conversation = start_conversation(desk.maya)
    token = identity.conversation_token(conversation)
    services.conversation_post_message(conversation=conversation,
                                       text="My speakers from SU-41402 arrived cracked, I can send a photo.")
    assert _run(queued) == "answered"
    asked = conversation.messages.filter(author=Message.AGENT).last().content
    assert "attach one of the damaged item" in asked and not Approval.objects.exists()
    response = upload(client, conversation, token, ("cracked.jpg", jpeg()), capture=django_capture_on_commit_callbacks)
    assert response.status_code == 202
    assert _run(queued) == "awaiting_approval"
    approval = Approval.objects.get()
    assert approval.requested_arguments["order_id"] == "SU-41402" and approval.requested_arguments["amount"] == "129.00"
    seen = [r.get("images", 0) for r in standin.requests() if r["status"] == 200]
    assert max(seen) == (1 if images else 0)  # image parts reached the model only when it reads them
    gate.approval_decide(approval=approval, user=None, approve=True)
    assert _run(queued) == "answered"
    assert "Thank you for the photo." in conversation.messages.filter(author=Message.AGENT).last().content


@pytest.mark.django_db(transaction=True)
def test_without_a_photo_offered_the_damage_flow_is_unchanged(desk, queued):
    conversation = start_conversation(desk.maya)
    services.conversation_post_message(conversation=conversation, text="My order SU-41402 arrived cracked.")
    assert _run(queued) == "awaiting_approval"


# -- files nobody names ------------------------------------------------------------------------------------------

def test_files_no_attachment_names_are_removed_once_an_hour_old_and_every_saved_one_stays(send, maya_chat,
                                                                                          memory_storage):
    from datetime import timedelta

    from django.core.files.base import ContentFile
    from django.utils import timezone

    from support.customers import attachments

    conversation, _ = maya_chat
    assert send(("parcel.jpg", jpeg())).status_code == 202
    saved = set(stored_names(memory_storage))
    assert len(saved) == 3  # the photo, its thumbnail and its preview
    # What a process that died between storing and saving leaves: files under the conversation's folder
    # and under one whose conversation is gone, named by no row.
    orphans = {memory_storage.save(f"{conversation.public_id.hex}/{uuid.uuid4().hex}.jpg", ContentFile(b"x")),
               memory_storage.save(f"{uuid.uuid4().hex}/{uuid.uuid4().hex}.pdf", ContentFile(b"%PDF"))}

    assert attachments.sweep_orphans() == 0  # too young: they may be an upload in progress
    assert set(stored_names(memory_storage)) == saved | orphans
    assert attachments.sweep_orphans(now=timezone.now() + attachments.ORPHAN_AFTER + timedelta(minutes=1)) == 2
    assert set(stored_names(memory_storage)) == saved
