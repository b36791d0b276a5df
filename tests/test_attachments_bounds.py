"""What an upload may cost the web process, and how files are handed back.

A photo's cost is set by its pixels, not its bytes: the header is read first, and a photo with too many
pixels (or too many for its file's size) is refused before anything is decoded; what is taken is decoded no
larger than the stored copy needs, and at most ATTACHMENT_IMAGE_SLOTS at a time. Uploads are counted in
Redis, and refused while they cannot be. A PDF is a download, never a page on the desk's origin.
Every refusal names the file in plain words and has a stable code; nothing refused is saved.
"""

# ruff: noqa: F811  (fixtures imported from other test modules are named again as test arguments)
from __future__ import annotations

import io
import struct
import threading
import zlib

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from PIL import Image, ImageFile

from support.customers import attachments
from support.models import Attachment
from support.ops import limits
from tests.desk_factories import customer_messages, maya_chat, queued  # noqa: F401  (fixtures)
from tests.redis_fixture import RestartableRedis, limits_redis, limits_redis_server  # noqa: F401  (fixtures)
from tests.test_attachments import PDF, jpeg, memory_storage, send, stored_names  # noqa: F401  (fixtures)

pytestmark = pytest.mark.usefixtures("limits_redis")


def encoded(image: Image.Image, fmt: str, **options) -> bytes:
    out = io.BytesIO()
    image.save(out, fmt, **options)
    return out.getvalue()


def png_header_only(width: int, height: int) -> bytes:
    """A PNG that declares width × height and holds almost nothing: what a decompression bomb starts with."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b""))


@pytest.fixture
def decodes(monkeypatch):
    """The size of every image Pillow decodes (ImageFile.load), in order."""
    sizes = []
    original = ImageFile.ImageFile.load

    def load(self):
        if self.tile:  # pixels still to decode (a second load() of the same image decodes nothing)
            sizes.append(self.size)
        return original(self)

    monkeypatch.setattr(ImageFile.ImageFile, "load", load)
    return sizes


def refused_and_nothing_saved(response, conversation, storage, *, status, code, name):
    body = response.json()
    assert response.status_code == status, body
    assert (body["code"], body["file"]) == (code, name)
    assert customer_messages(conversation) == [] and not Attachment.objects.exists()
    assert stored_names(storage) == []
    return body


# -- pixels ---------------------------------------------------------------------------------------------------

def test_a_small_png_declaring_40_megapixels_is_refused_from_its_header_without_decoding(
        send, maya_chat, memory_storage, decodes):
    conversation, _ = maya_chat
    flat = encoded(Image.new("RGB", (8000, 5000), (240, 240, 236)), "PNG")
    assert len(flat) < 200_000  # 120 MB of pixels in a file this small
    body = refused_and_nothing_saved(send(("plan.png", flat)), conversation, memory_storage,
                                     status=413, code="attachment_too_large", name="plan.png")
    assert "“plan.png” is too large (8,000 × 5,000 pixels)" in body["error"]
    assert "at most 25 megapixels" in body["error"] and body["retryable"] is False
    assert decodes == []


@pytest.mark.parametrize("name, raw", [
    # 15 MP of one colour: a lossless WebP holds it in about a kilobyte
    ("canvas.webp", encoded(Image.new("RGB", (5000, 3000), (10, 20, 30)), "WEBP", lossless=True)),
    # 24 MP of one colour as a PNG: under the 25 MP cap, but 300 pixels per byte
    ("canvas.png", encoded(Image.new("RGB", (6000, 4000), (10, 20, 30)), "PNG")),
])
def test_a_small_file_cannot_declare_a_large_canvas(send, maya_chat, memory_storage, decodes, name, raw):
    conversation, _ = maya_chat
    body = refused_and_nothing_saved(send((name, raw)), conversation, memory_storage,
                                     status=413, code="attachment_too_large", name=name)
    assert f"in a file of only {attachments.human_size(len(raw))}" in body["error"]
    assert "which we can't open safely" in body["error"]
    assert decodes == []


@pytest.mark.parametrize("width, height, words", [
    (6_000, 6_000, "“bomb.png” is too large (6,000 × 6,000 pixels)"),  # past our cap: our own check
    (100_000, 100_000, "“bomb.png” has far too many pixels for us to open (over 50 megapixels)"),  # Pillow's
])
def test_a_decompression_bomb_is_refused_in_plain_words_not_as_a_server_error(send, maya_chat, memory_storage,
                                                                             width, height, words):
    conversation, _ = maya_chat
    body = refused_and_nothing_saved(send(("bomb.png", png_header_only(width, height))), conversation,
                                     memory_storage, status=413, code="attachment_too_large", name="bomb.png")
    assert words in body["error"]


def test_a_nearly_blank_4k_screenshot_is_taken(send, maya_chat):
    blank = Image.new("RGB", (3840, 2160), (255, 255, 255))
    blank.paste((30, 60, 110), (0, 0, 3840, 120))  # a title bar, and nothing else
    raw = encoded(blank, "PNG")
    assert 3840 * 2160 / len(raw) > 100  # more pixels per byte than a larger picture may have
    response = send(("screenshot.png", raw))
    assert response.status_code == 202, response.json()
    assert (Attachment.objects.get().width, Attachment.objects.get().height) == (2560, 1440)


# -- decoded no larger than needed ----------------------------------------------------------------------------

def test_a_large_jpeg_is_decoded_at_half_size_and_stored_at_2560_pixels_upright(send, maya_chat, decodes):
    response = send(("wide.jpg", jpeg(size=(6000, 4000), orientation=6)))
    assert response.status_code == 202, response.json()
    assert decodes == [(3000, 2000)]  # never the 24 MP the header declares
    attachment = Attachment.objects.get()
    with attachment.file.open("rb") as f:
        stored = Image.open(io.BytesIO(f.read()))
    assert stored.size == (1707, 2560) and (attachment.width, attachment.height) == (1707, 2560)  # turned upright
    assert dict(stored.getexif()) == {}
    shown = response.json()["message"]["attachments"][0]
    assert (shown["width"], shown["height"]) == (1707, 2560)


def test_a_large_png_is_stored_at_2560_pixels_and_a_small_photo_as_it_came(send, maya_chat):
    assert send(("plan.png", encoded(Image.new("RGB", (3000, 2000), (1, 2, 3)), "PNG"))).status_code == 202
    assert send(("small.jpg", jpeg(size=(1600, 1200)))).status_code == 202
    big, small = Attachment.objects.order_by("pk")
    assert (big.width, big.height, big.content_type) == (2560, 1707, "image/png")
    assert (small.width, small.height) == (1600, 1200)


# -- at most so many photos decoded at once -------------------------------------------------------------------

class SlowDecode:
    """Holds the first decode of a named thread until released: a photo that takes a while to decode."""

    def __init__(self, monkeypatch, thread_name: str):
        self.started, self.release, self.order = threading.Event(), threading.Event(), []
        original = ImageFile.ImageFile.load

        def load(image):
            if not image.tile:  # decoded already: nothing to hold
                return original(image)
            me = threading.current_thread().name
            self.order.append(f"{me} starts")
            if me == thread_name:
                self.started.set()
                self.release.wait(10)
            try:
                return original(image)
            finally:
                self.order.append(f"{me} ends")

        monkeypatch.setattr(ImageFile.ImageFile, "load", load)


def _prepare_in_thread(name: str) -> tuple[threading.Thread, list]:
    out = []
    thread = threading.Thread(name=name, target=lambda: out.append(attachments.prepare(
        SimpleUploadedFile("first.jpg", jpeg()))))
    thread.start()
    return thread, out


def test_past_the_photo_slots_an_upload_waits_and_then_is_refused_busy(send, maya_chat, memory_storage,
                                                                       monkeypatch, settings):
    conversation, _ = maya_chat
    settings.ATTACHMENT_IMAGE_SLOTS, settings.ATTACHMENT_IMAGE_WAIT = 1, 0.3
    slow = SlowDecode(monkeypatch, "first")
    first, prepared = _prepare_in_thread("first")
    try:
        assert slow.started.wait(10)
        response = send(("second.jpg", jpeg()))
    finally:
        slow.release.set()
        first.join(10)
    body = refused_and_nothing_saved(response, conversation, memory_storage, status=503, code="busy",
                                     name="second.jpg")
    assert body["retryable"] is True and response["Retry-After"] == "5" and body["retry_after"] == 5
    assert "“second.jpg” wasn't sent. Please send it again in a few seconds." in body["error"]
    assert len(prepared) == 1  # the photo that held the slot was done, not disturbed
    assert send(("second.jpg", jpeg())).status_code == 202  # and with the slot free again, it goes


def test_an_upload_waits_for_a_free_slot_rather_than_decoding_alongside(send, monkeypatch, settings):
    settings.ATTACHMENT_IMAGE_SLOTS, settings.ATTACHMENT_IMAGE_WAIT = 1, 10
    slow = SlowDecode(monkeypatch, "first")
    first, _ = _prepare_in_thread("first")
    try:
        assert slow.started.wait(10)
        threading.Timer(0.3, slow.release.set).start()
        response = send(("second.jpg", jpeg()))
    finally:
        slow.release.set()
        first.join(10)
    assert response.status_code == 202, response.json()
    me = threading.current_thread().name
    assert slow.order == ["first starts", "first ends", f"{me} starts", f"{me} ends"]


# -- the upload limit without Redis ---------------------------------------------------------------------------

@pytest.fixture
def stoppable_redis(settings, monkeypatch):
    # The warning that limits are not counted is said once a minute per process: put its clock back after,
    # so a later test that expects it still hears it.
    monkeypatch.setattr(limits, "_last_warning", limits._last_warning)
    server = RestartableRedis()
    server.start()
    settings.LIMITS_REDIS_URL = server.url
    yield server
    server.stop()


def test_uploads_are_refused_while_their_limit_cannot_be_counted(send, maya_chat, memory_storage, stoppable_redis):
    conversation, _ = maya_chat
    assert send(("before.jpg", jpeg())).status_code == 202
    stoppable_redis.stop()
    response = send(("during.jpg", jpeg()))
    body = response.json()
    assert response.status_code == 503 and body["code"] == "unavailable" and body["retryable"] is True
    assert response["Retry-After"] == "5" and "Sending files is unavailable for a moment" in body["error"]
    assert len(customer_messages(conversation)) == 1 and Attachment.objects.count() == 1
    assert len(stored_names(memory_storage)) == 3  # the first photo's file, thumbnail and preview: nothing new
    stoppable_redis.start()
    assert send(("after.jpg", jpeg())).status_code == 202
    assert Attachment.objects.count() == 2


# -- how files are handed back --------------------------------------------------------------------------------

def test_a_pdf_is_a_download_under_a_strict_policy_never_a_page_on_the_desks_origin(send):
    links = send(("invoice.pdf", PDF), ("a.jpg", jpeg())).json()["message"]["attachments"]
    pdf, photo = (Client().get(link["url"]) for link in links)
    assert pdf.status_code == 200 and pdf["Content-Type"] == "application/pdf"
    assert pdf["Content-Disposition"] == 'attachment; filename="invoice.pdf"'
    policy = pdf["Content-Security-Policy"]
    assert "default-src 'none'" in policy and "sandbox" in policy and "script-src" not in policy
    assert pdf["X-Content-Type-Options"] == "nosniff"
    assert b"".join(pdf.streaming_content) == PDF
    # A photo (pixels we wrote) is still shown in the browser, under the same policy.
    assert photo["Content-Disposition"].startswith("inline;") and photo["Content-Security-Policy"] == policy
    assert photo["X-Content-Type-Options"] == "nosniff"


def test_the_upload_rate_limit_says_when_to_try_again(send, settings):
    settings.ATTACHMENT_UPLOADS_PER_HOUR = 1
    assert send(("1.jpg", jpeg())).status_code == 202
    refused = send(("2.jpg", jpeg()))
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 3000
    assert refused.json()["retry_after"] == int(refused["Retry-After"])


def test_slots_are_taken_back_after_each_photo(send, settings):
    from support.customers import photos

    settings.ATTACHMENT_IMAGE_SLOTS, settings.ATTACHMENT_IMAGE_WAIT = 1, 0
    for name in ("1.jpg", "2.jpg"):
        assert send((name, jpeg())).status_code == 202
    assert send(("broken.jpg", jpeg()[:3000])).json()["code"] == "attachment_unreadable"
    assert photos.slots().acquire(timeout=0)  # free: a refused photo gave its slot back too
    photos.slots().release()
