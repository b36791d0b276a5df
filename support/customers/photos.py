"""A customer's photo, opened within bounds and re-encoded: which files Pillow may decode at all, decoding no
more pixels than the stored copy needs, and at most ATTACHMENT_IMAGE_SLOTS photos at a time per process.

Why bounds: a photo is decoded in the web process, and what it costs there is set by its pixels, not its
bytes. A 130 KB PNG can declare 8000 × 5000 pixels (160 MB once decoded, over a second of CPU to copy and
re-encode), and a 1 KB lossless WebP 25 megapixels. So the header is read first (Image.open decodes
nothing) and the file is refused unless
  - it has at most ATTACHMENT_MAX_PIXELS (25 MP: a phone's 12 or 24 MP photo passes), and
  - beyond a 4K screen's worth of pixels (ALWAYS_OPENED_PX), at most ATTACHMENT_MAX_PIXELS_PER_BYTE pixels
    per byte of file (100: a phone JPEG has 2 to 6, a screenshot of text 8 to 15, a nearly blank 4K
    screenshot 200, a flat canvas made to be decoded hundreds to tens of thousands).
Then it is decoded no larger than needed: the copy we keep has at most STORED_PX on its longer side, a JPEG
is decoded at a half, a quarter or an eighth of its size when that still covers it (Image.draft), other
formats are reduced by whole factors before the final resize (resize's reducing_gap). Thumbnail and preview
are made from the stored copy, never from the full decode.

The words a customer reads when a photo is refused are support/customers/attachments.py's: this module
raises TooLarge, NotAPhoto or Busy, and lets Pillow's own errors (a damaged file) through.
"""

from __future__ import annotations

import contextlib
import io
import threading
from dataclasses import dataclass

from django.conf import settings
from PIL import Image, ImageOps

try:  # HEIC/HEIF photos (iPhones) when pillow-heif is installed; otherwise they are refused in plain words
    from pillow_heif import register_heif_opener
    register_heif_opener()
    HEIF = True
except ImportError:  # pragma: no cover - depends on the installation
    HEIF = False

STORED_PX = 2560  # the longer side of the copy we keep and serve: more than a screen shows a photo at
THUMBNAIL_PX = 320  # the longer side of the thumbnail both UIs show
PREVIEW_PX = 1024  # the longer side of the copy the model is sent
ALWAYS_OPENED_PX = 3840 * 2160  # a 4K screen: opened however small its file (a nearly blank screenshot)
# Pillow's format -> (what we store it as, its content type, file extension)
IMAGE_FORMATS = {
    "JPEG": ("JPEG", "image/jpeg", "jpg"), "MPO": ("JPEG", "image/jpeg", "jpg"),  # MPO: some phones' JPEGs
    "PNG": ("PNG", "image/png", "png"), "WEBP": ("WEBP", "image/webp", "webp"),
    "HEIF": ("JPEG", "image/jpeg", "jpg"),  # browsers cannot show HEIC: stored as JPEG
}

class TooLarge(Exception):
    """More pixels than we decode: `per_byte` when the file is small for them, else over the absolute cap."""

    def __init__(self, width: int, height: int, *, per_byte: bool):
        super().__init__(f"{width} x {height} pixels")
        self.width, self.height, self.per_byte = width, height, per_byte


class NotAPhoto(Exception):
    """An image Pillow reads but we do not take (a GIF, a TIFF...), or HEIC without pillow-heif."""


class Busy(Exception):
    """Every slot stayed taken for ATTACHMENT_IMAGE_WAIT seconds: the upload is refused, to be sent again."""


@dataclass
class Photo:
    data: bytes
    content_type: str
    ext: str
    width: int
    height: int
    thumbnail: bytes
    preview: bytes


def check_size(width: int, height: int, file_bytes: int) -> None:
    """TooLarge unless a file of `file_bytes` bytes may declare width × height pixels (see the module)."""
    pixels = width * height
    if pixels > settings.ATTACHMENT_MAX_PIXELS:
        raise TooLarge(width, height, per_byte=False)
    if pixels > ALWAYS_OPENED_PX and pixels > settings.ATTACHMENT_MAX_PIXELS_PER_BYTE * file_bytes:
        raise TooLarge(width, height, per_byte=True)


def reencode(raw: bytes) -> Photo:
    """The photo in `raw`, checked by its header, decoded within bounds and written again as pixels alone."""
    # Pillow's own guard, in Image.open: a warning past MAX_IMAGE_PIXELS (we refuse those just below, by our
    # rules) and DecompressionBombError past twice as many (attachments.py answers it 413 like ours). Set here
    # from the setting, so that it never lets through more than we would.
    Image.MAX_IMAGE_PIXELS = settings.ATTACHMENT_MAX_PIXELS
    with Image.open(io.BytesIO(raw)) as probe:  # reads the header only: nothing is decoded yet
        kind = probe.format
        if kind not in IMAGE_FORMATS or (kind == "HEIF" and not HEIF):
            raise NotAPhoto(kind)
        check_size(*probe.size, len(raw))
        probe.verify()
    stored_format, content_type, ext = IMAGE_FORMATS[kind]
    with slot(), Image.open(io.BytesIO(raw)) as opened:
        image = _decoded(opened)
        data = _encode(image, stored_format)
        thumbnail, preview = _jpeg(image, THUMBNAIL_PX, 80), _jpeg(image, PREVIEW_PX, 85)
    return Photo(data=data, content_type=content_type, ext=ext, width=image.width, height=image.height,
                 thumbnail=thumbnail, preview=preview)


def fit(size: tuple[int, int], longest: int) -> tuple[int, int]:
    """`size` scaled down (never up) so that its longer side is at most `longest`, the proportions kept."""
    width, height = size
    scale = longest / max(width, height)
    if scale >= 1:
        return size
    return max(1, round(width * scale)), max(1, round(height * scale))


def _decoded(opened: Image.Image) -> Image.Image:
    """The pixels at the stored size, upright (EXIF orientation applied), decoding as few as the format allows."""
    target = fit(opened.size, STORED_PX)
    if target != opened.size:
        opened.draft(None, target)  # JPEG: decode at 1/2, 1/4 or 1/8 while that still covers target; others: no-op
    opened.load()
    image: Image.Image = opened
    if image.mode not in ("RGB", "RGBA", "L", "LA"):  # palette, CMYK, 16-bit...: what resize and our encoders take
        image = image.convert("RGBA" if _has_alpha(image) else "RGB")
    if image.size != target:
        # reducing_gap: shrink by a whole factor first (cheap box averaging), then LANCZOS the rest of the way
        image = image.resize(target, Image.Resampling.LANCZOS, reducing_gap=2.0)
    if image is opened:
        image = opened.copy()  # ours to change, whatever happens to the file's image
    ImageOps.exif_transpose(image, in_place=True)  # the way the camera held it, before EXIF goes
    image.info = {}  # EXIF, ICC profile, text chunks...: none of it reaches an encoder
    return image


def _has_alpha(image: Image.Image) -> bool:
    return image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info)


def _flatten(image: Image.Image) -> Image.Image:
    """RGB or L, a transparent background made white (a JPEG has no alpha)."""
    if _has_alpha(image):
        rgba = image.convert("RGBA")
        white = Image.new("RGB", rgba.size, (255, 255, 255))
        white.paste(rgba, mask=rgba.getchannel("A"))
        return white
    return image if image.mode in ("RGB", "L") else image.convert("RGB")


def _encode(image: Image.Image, fmt: str) -> bytes:
    """The pixels alone in `fmt`: no EXIF, no ICC profile, no text chunks (nothing of `info` is passed on)."""
    out = io.BytesIO()
    if fmt == "JPEG":
        _flatten(image).save(out, "JPEG", quality=90, optimize=True)
    elif fmt == "PNG":
        image.save(out, "PNG")
    else:
        image.save(out, "WEBP", quality=90)
    return out.getvalue()


def _jpeg(image: Image.Image, px: int, quality: int) -> bytes:
    flat = _flatten(image)
    small = flat.resize(fit(flat.size, px), Image.Resampling.LANCZOS, reducing_gap=2.0) if max(flat.size) > px else flat
    out = io.BytesIO()
    small.save(out, "JPEG", quality=quality, optimize=True)
    return out.getvalue()


# -- at most ATTACHMENT_IMAGE_SLOTS photos decoded at a time in this process ------------------------------------

_slots: dict[int, threading.BoundedSemaphore] = {}
_slots_lock = threading.Lock()


def slots() -> threading.BoundedSemaphore:
    """This process's semaphore for ATTACHMENT_IMAGE_SLOTS (one per value, so a changed setting takes effect)."""
    count = settings.ATTACHMENT_IMAGE_SLOTS
    with _slots_lock:
        if count not in _slots:
            _slots[count] = threading.BoundedSemaphore(count)
        return _slots[count]


@contextlib.contextmanager
def slot():
    """Hold one slot while decoding; Busy when none came free within ATTACHMENT_IMAGE_WAIT seconds. Pillow
    decodes and resizes without the GIL, so each slot can keep a core busy: more slots than cores only add
    memory (each holds one decoded photo), and a request past them waits briefly and then is refused."""
    semaphore = slots()
    if not semaphore.acquire(timeout=settings.ATTACHMENT_IMAGE_WAIT):
        raise Busy()
    try:
        yield
    finally:
        semaphore.release()
