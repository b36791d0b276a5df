"""A customer's photos and PDFs: checked by content, re-encoded (photos), stored through the "attachments"
storage, served through signed expiring URLs, shown as thumbnails, and read by the model.

Photos are opened, verified and re-encoded by Pillow (support/customers/photos.py, which also bounds what
a photo may cost to decode), so what is stored and served is pixels we wrote: no EXIF (location included),
no text chunks, no colour profile, nothing a camera or an attacker put beside the image. PDFs are never
rendered here: the %PDF header and the end-of-file marker are checked and the file is stored as sent (and
served as a download, never shown on the desk's origin). Files are written before the message's
transaction and removed again when it fails, so a refused or failed upload leaves nothing behind.
"""

from __future__ import annotations

import logging
import os
import unicodedata
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.core import signing
from django.db.models import Exists, OuterRef
from django.urls import reverse
from django.utils import timezone
from PIL import Image, UnidentifiedImageError

from support.customers import cleaning, photos
from support.models import Attachment, Message
from support.models.attachments import attachment_storage, remove_stored
from support.ops import limits
from support.ops import prepared as prepared_sql

log = logging.getLogger(__name__)

URL_SALT = "support.attachment"
HEIC_BRANDS = (b"ftypheic", b"ftypheix", b"ftyphevc", b"ftypheim", b"ftypheis", b"ftypmif1", b"ftypmsf1")
BUSY_RETRY_AFTER = 5  # seconds: what a refused upload is told to wait when every photo slot stayed taken


class Refused(Exception):
    """A file or an upload we will not take: `str()` says why in plain words, `code` says it to a program."""

    def __init__(self, message: str, code: str, status: int = 400, file: str | None = None,
                 retry_after: int | None = None):
        super().__init__(message)
        self.code, self.status, self.file, self.retry_after = code, status, file, retry_after


@dataclass
class Prepared:
    """One checked file, ready to store."""

    kind: str
    content_type: str
    ext: str
    data: bytes
    name: str
    uploaded_size: int
    width: int | None = None
    height: int | None = None
    thumbnail: bytes | None = None
    preview: bytes | None = None
    public_id: uuid.UUID = field(default_factory=uuid.uuid4)


# -- words ------------------------------------------------------------------------------------------------

def human_size(size: int) -> str:
    """1.2 MB, 230 KB, 800 bytes: decimal units, as phones and file browsers show sizes."""
    if size >= 1_000_000:
        return f"{size / 1_000_000:.1f} MB"
    if size >= 1_000:
        return f"{round(size / 1_000):,} KB"
    return f"{size} bytes"


def limit_size(size: int) -> str:
    """A limit in words: 10 MB, 50 MB (binary megabytes, as configured, said as a round number)."""
    mb = size / (1024 * 1024)
    return f"{mb:g} MB" if mb >= 1 else human_size(size)


def placeholder(kinds: list[str]) -> str:
    """The message's text when the customer sent files without words: what staff lists and the model read."""
    counts = ((kinds.count(Attachment.IMAGE), "photo"), (kinds.count(Attachment.PDF), "PDF"))
    parts = [f"a {word}" if n == 1 else f"{n} {word}s" for n, word in counts if n]
    return f"[Sent {' and '.join(parts)}]"


def clean_name(raw, fallback: str) -> str:
    """The customer's file name for display: its last path part, NFC, without controls or bidi overrides."""
    name = os.path.basename(str(raw or "").replace("\\", "/"))
    name = cleaning.without_bidi_controls(unicodedata.normalize("NFC", name))
    name = "".join(ch for ch in name if unicodedata.category(ch) not in ("Cc", "Cs", "Co", "Cf")).strip()
    if len(name) > 120:
        stem, dot, ext = name.rpartition(".")
        name = (stem[:110] + "…." + ext[:8]) if dot and len(ext) <= 8 else name[:119] + "…"
    return name or fallback


# -- checking a file by its content ------------------------------------------------------------------------

def prepare(upload) -> Prepared:
    """A photo or a PDF, checked and (a photo) re-encoded; Refused otherwise. `upload`: Django's UploadedFile."""
    name = clean_name(getattr(upload, "name", ""), "file")
    if upload.size > settings.ATTACHMENT_MAX_BYTES:
        raise Refused(f"“{name}” is {human_size(upload.size)}; each file can be up to "
                      f"{limit_size(settings.ATTACHMENT_MAX_BYTES)}. Please send a smaller photo or PDF.",
                      "attachment_too_large", 413, name)
    raw = upload.read(settings.ATTACHMENT_MAX_BYTES + 1)
    if len(raw) > settings.ATTACHMENT_MAX_BYTES:  # the declared size was wrong
        raise Refused(f"“{name}” is larger than {limit_size(settings.ATTACHMENT_MAX_BYTES)}. Please send a "
                      "smaller photo or PDF.", "attachment_too_large", 413, name)
    if not raw:
        raise Refused(f"“{name}” is empty.", "attachment_unreadable", 400, name)
    if raw.startswith(b"%PDF-"):
        return _pdf(raw, name)
    return _image(raw, name)


def _pdf(raw: bytes, name: str) -> Prepared:
    # A PDF ends with %%EOF (possibly followed by a line break or some padding); one without is cut off.
    if b"%%EOF" not in raw[-2048:]:
        raise Refused(f"“{name}” looks incomplete (the PDF is cut off). Please save it again and send it.",
                      "attachment_unreadable", 400, name)
    return Prepared(kind=Attachment.PDF, content_type="application/pdf", ext="pdf", data=raw,
                    name=name if name.lower().endswith(".pdf") else f"{name}.pdf", uploaded_size=len(raw))


def _not_a_photo(raw: bytes, name: str) -> Refused:
    if raw[4:12] in HEIC_BRANDS:
        return Refused(f"“{name}” is an HEIC photo, which we can't read. Please send it as a JPEG (on an "
                       "iPhone: Settings › Camera › Formats › Most Compatible), or take a screenshot of it.",
                       "attachment_type", 415, name)
    return Refused(f"“{name}” isn't a photo or a PDF we can read. Please send a JPEG, PNG, WebP or HEIC photo, "
                   "or a PDF.", "attachment_type", 415, name)


def _image(raw: bytes, name: str) -> Prepared:
    """A photo, re-encoded within bounds (support/customers/photos.py); Refused in plain words otherwise."""
    try:
        photo = photos.reencode(raw)
    except photos.TooLarge as large:
        raise _too_many_pixels(name, large, len(raw)) from None
    except Image.DecompressionBombError:  # Pillow's refusal in Image.open, past twice ATTACHMENT_MAX_PIXELS
        raise Refused(f"“{name}” has far too many pixels for us to open (over "
                      f"{_megapixels(2 * settings.ATTACHMENT_MAX_PIXELS)}). Please send a smaller photo.",
                      "attachment_too_large", 413, name) from None
    except photos.Busy:
        raise Refused(f"We're busy with other customers' photos right now, so “{name}” wasn't sent. Please "
                      "send it again in a few seconds.", "busy", 503, name, retry_after=BUSY_RETRY_AFTER) from None
    except (photos.NotAPhoto, UnidentifiedImageError):
        raise _not_a_photo(raw, name) from None
    except (OSError, SyntaxError, ValueError, EOFError, TypeError, IndexError, MemoryError):
        raise Refused(f"“{name}” couldn't be read: the file seems damaged or incomplete. Please take the "
                      "photo again or send another copy.", "attachment_unreadable", 400, name) from None
    stem = name.rsplit(".", 1)[0] if "." in name else name
    return Prepared(kind=Attachment.IMAGE, content_type=photo.content_type, ext=photo.ext, data=photo.data,
                    name=f"{stem}.{photo.ext}", uploaded_size=len(raw), width=photo.width, height=photo.height,
                    thumbnail=photo.thumbnail, preview=photo.preview)


def _megapixels(pixels: int) -> str:
    return f"{pixels / 1_000_000:g} megapixels"


def _too_many_pixels(name: str, large: photos.TooLarge, size: int) -> Refused:
    dimensions = f"{large.width:,} × {large.height:,} pixels"
    if large.per_byte:  # a small file that declares a large picture: mostly one colour, or made to be decoded
        words = (f"“{name}” is {dimensions} in a file of only {human_size(size)}, which we can't open safely. "
                 "Please send the photo as your camera saved it, or a smaller screenshot.")
    else:
        words = (f"“{name}” is too large ({dimensions}). Please send a photo of at most "
                 f"{_megapixels(settings.ATTACHMENT_MAX_PIXELS)}, or a screenshot of it.")
    return Refused(words, "attachment_too_large", 413, name)

# -- a message with files -------------------------------------------------------------------------------------

def upload_limit(address: str) -> limits.Limit:
    """Upload requests per client address per hour: each one costs decoding and re-encoding photos."""
    return limits.Limit(f"uploads:address:{address}", settings.ATTACHMENT_UPLOADS_PER_HOUR, limits.HOUR)


def request_size_limit() -> int:
    """The largest upload request read: every file of a message at its limit, the text, the form's overhead."""
    return settings.ATTACHMENTS_PER_MESSAGE * settings.ATTACHMENT_MAX_BYTES + 4 * settings.MAX_MESSAGE_BYTES + 65536


ORPHAN_AFTER = timedelta(hours=1)  # an upload's files are saved before its message commits: spare young ones


def sweep_orphans(*, now: datetime | None = None) -> int:
    """Delete stored files no attachment row names, once they are ORPHAN_AFTER old: what a process that
    died between storing a message's files and saving the message left behind (nothing links to them, but
    they take room and hold a customer's photo). Returns how many files went."""
    storage, now, removed = attachment_storage(), now or timezone.now(), 0
    try:
        folders, _ = storage.listdir("")
    except FileNotFoundError:  # nothing was ever stored
        return 0
    for folder in folders:  # one per conversation: its public id's hex
        names = [f"{folder}/{name}" for name in storage.listdir(folder)[1]]
        if not names:
            continue
        known = set()
        for row in Attachment.objects.filter(conversation__public_id=_uuid_or_none(folder)).values_list(
                "file", "thumbnail", "preview"):
            known.update(n for n in row if n)
        for name in names:
            if name in known:
                continue
            try:
                if now - storage.get_modified_time(name) < ORPHAN_AFTER:
                    continue
            except (NotImplementedError, OSError):
                continue  # a storage that cannot tell a file's age keeps it: it may be an upload in progress
            remove_stored([name])
            removed += 1
    if removed:
        log.info("attachments: %d orphaned files removed", removed)
    return removed


def _uuid_or_none(text: str):
    try:
        return uuid.UUID(hex=text)
    except ValueError:
        return None


# -- signed, expiring URLs ------------------------------------------------------------------------------------

def signed_path(attachment: Attachment, variant: str, *, staff: bool) -> str:
    """The file's URL path, valid ATTACHMENT_URL_MAX_AGE seconds. A staff link also needs a staff session."""
    token = signing.dumps({"a": attachment.public_id.hex, "v": variant, "s": int(staff)}, salt=URL_SALT)
    return reverse("api:attachment-file", args=[token])


class BadLink(Exception):
    def __init__(self, expired: bool):
        super().__init__("expired" if expired else "invalid")
        self.expired = expired


def from_signed(token: str) -> tuple[Attachment | None, str, bool]:
    """(attachment or None, variant, staff only) for a link's token; BadLink when forged or expired."""
    if cleaning.token_or_none(token) is None:
        raise BadLink(expired=False)
    try:
        value = signing.loads(token, salt=URL_SALT, max_age=settings.ATTACHMENT_URL_MAX_AGE)
    except signing.SignatureExpired:
        raise BadLink(expired=True) from None
    except signing.BadSignature:
        raise BadLink(expired=False) from None
    if not isinstance(value, dict) or value.get("v") not in ("file", "thumbnail"):
        raise BadLink(expired=False)
    try:
        wanted = uuid.UUID(hex=str(value.get("a")))
    except ValueError:
        raise BadLink(expired=False) from None
    return Attachment.objects.filter(public_id=wanted).first(), value["v"], bool(value.get("s"))


# -- shapes for the API and the live events --------------------------------------------------------------------

def attachment_json(attachment: Attachment, *, staff: bool) -> dict:
    expires = timezone.now() + timedelta(seconds=settings.ATTACHMENT_URL_MAX_AGE)
    return {
        "id": str(attachment.public_id), "ref": attachment.reference, "kind": attachment.kind,
        "name": attachment.name, "content_type": attachment.content_type, "size": attachment.size,
        "size_text": human_size(attachment.size), "width": attachment.width, "height": attachment.height,
        "url": signed_path(attachment, "file", staff=staff),
        "thumbnail_url": signed_path(attachment, "thumbnail", staff=staff) if attachment.thumbnail else None,
        "expires_at": expires.isoformat().replace("+00:00", "Z"),
    }


def has_files():
    """An annotation for a query of messages: whether each has files (so model_wires asks only when one has)."""
    return Exists(Attachment.objects.filter(message=OuterRef("pk")))


def messages_with_files(conversation) -> list[Message]:
    """The conversation's messages in order, each with has_files (as the annotation above) and its conversation:
    what a run reads before its first model call, in one statement compiled once per process."""
    out = []
    for row in _WITH_FILES.rows(pk=conversation.pk):
        message = prepared_sql.instance(Message, row)
        message.has_files = row["has_files"]
        message.conversation = conversation  # as the conversation's related manager leaves it
        out.append(message)
    return out


_WITH_FILES = prepared_sql.Prepared(Message, lambda pk: Message.objects.filter(conversation_id=pk).annotate(
    has_files=has_files()).order_by("seq").values(*prepared_sql.columns(Message), "has_files"), "pk")


def none_yet(message: Message) -> None:
    """A message just saved with words only: it has no files, so what shows it (message_fields) reads none."""
    message.has_files = False  # as the has_files() annotation says it
    message._prefetched_objects_cache = {**getattr(message, "_prefetched_objects_cache", {}),
                                         "attachments": message.attachments.none()}


def message_fields(message: Message, *, staff: bool) -> dict:
    """What message_json adds for a customer's message with files: the files, and whether its text is only
    our placeholder (the widget then shows the files alone). {} for every other message, with no query."""
    if message.author != Message.CUSTOMER or message.role != "user" or getattr(message, "has_files", None) is False:
        return {}
    items = list(message.attachments.all())  # prefetched by selectors, or one query
    if not items:
        return {}
    return {"attachments": [attachment_json(a, staff=staff) for a in items],
            "attachments_only": message.content == placeholder([a.kind for a in items])}


def limits_json() -> dict:
    return {"max_file_bytes": settings.ATTACHMENT_MAX_BYTES, "per_message": settings.ATTACHMENTS_PER_MESSAGE,
            "per_conversation": settings.ATTACHMENTS_PER_CONVERSATION,
            "conversation_bytes": settings.ATTACHMENT_BYTES_PER_CONVERSATION,
            "types": ["image/jpeg", "image/png", "image/webp", *(["image/heic", "image/heif"] if photos.HEIF else []),
                      "application/pdf"]}


# -- what the model reads ---------------------------------------------------------------------------------------

def note(attachment: Attachment, *, shown: bool) -> str:
    """The line the model reads for a file: "[customer attached photo IMG-3F2A 1.2 MB, 1600×1200]"."""
    if attachment.kind == Attachment.PDF:
        return (f"[customer attached PDF {attachment.reference} “{attachment.name[:60]}” "
                f"{human_size(attachment.size)}; its pages are not shown to you]")
    size = f"{human_size(attachment.size)}, {attachment.width}×{attachment.height}"
    return f"[customer attached photo {attachment.reference} {size}{': the image follows' if shown else ''}]"


def model_wires(messages, *, images: bool) -> dict[int, dict]:
    """The customer's messages with files as the model reads them, by message pk: the text with a note per
    file, and (images=True) the newest MODEL_IMAGES_PER_REQUEST photos as image parts. One query; messages
    without files are not in the result (their saved form is what the model reads)."""
    # has_files: read with the messages (runner's start), so a conversation without files costs no query here.
    ids = [m.pk for m in messages if m.role == "user" and m.author == Message.CUSTOMER and getattr(m, "has_files", True)]
    if not ids:
        return {}
    rows = list(Attachment.objects.filter(message_id__in=ids).order_by("pk"))
    if not rows:
        return {}
    photos = [a for a in rows if a.kind == Attachment.IMAGE and a.preview]
    keep = settings.MODEL_IMAGES_PER_REQUEST if images else 0
    shown = {a.pk for a in photos[len(photos) - keep:]} if keep else set()
    by_message: dict[int, list[Attachment]] = {}
    for a in rows:
        by_message.setdefault(a.message_id, []).append(a)
    out = {}
    for m in messages:
        files = by_message.get(m.pk)
        if not files:
            continue
        text = "\n".join([m.content or "", *(note(a, shown=a.pk in shown) for a in files)]).strip()
        parts = [_image_part(a) for a in files if a.pk in shown]
        parts = [p for p in parts if p is not None]
        out[m.pk] = {"role": "user", "content": [{"type": "text", "text": text}, *parts] if parts else text}
    return out


def _image_part(attachment: Attachment) -> dict | None:
    import base64

    try:
        with attachment.preview.open("rb") as f:
            data = f.read()
    except OSError:  # the file is gone from storage: the note still says it was sent
        return None
    return {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64," + base64.b64encode(data).decode(),
                                               "detail": "auto"}}
