"""What a photo in a request costs the model in tokens, by the provider's rule, read from the image's header.

A photo reaches the model as an image part (a base64 data URL). Counted as text it would be its base64
length over four, tens of thousands of tokens; the provider counts its size instead (OpenAI's rule, which
compatible servers copy or undercut):
- detail "low": 85 tokens, whatever the size;
- detail "high" or "auto" (counted as high: never less than it may cost): the image is scaled down to fit
  2048 × 2048, then down again so that its shorter side is at most 768 px; it costs 85 tokens plus 170 for
  every 512-px tile that covers it (a 1600 × 1200 photo: 1024 × 768, 4 tiles, 765 tokens).
The width and height are read from the first bytes of the data (Pillow reads the header, decodes no pixel);
an image whose size cannot be read that way (an http URL, a header past the first 64 KB, a damaged file)
counts as the most any image costs by the rule, UNKNOWN_IMAGE_TOKENS.
"""

from __future__ import annotations

import base64
import binascii
import io
import math

from PIL import Image

LOW_DETAIL_TOKENS = 85
BASE_TOKENS = 85
TILE_TOKENS = 170
TILE_PX = 512
FIT_PX = 2048  # first, scaled down to fit a square of this side
SHORT_SIDE_PX = 768  # then, scaled down until the shorter side is at most this
# The most any image costs by the rule: 768 × 2048 after scaling, 2 × 4 tiles.
UNKNOWN_IMAGE_TOKENS = BASE_TOKENS + TILE_TOKENS * 8
HEADER_READS = (4096, 65536)  # base64 characters decoded to find the size: a header sits at the start


def image_tokens(width: int, height: int, detail: str = "auto") -> int:
    """The tokens an image of width × height pixels costs at this detail."""
    if detail == "low":
        return LOW_DETAIL_TOKENS
    if width <= 0 or height <= 0:
        return UNKNOWN_IMAGE_TOKENS
    w, h = float(width), float(height)
    scale = FIT_PX / max(w, h)
    if scale < 1:  # only ever scaled down
        w, h = w * scale, h * scale
    scale = SHORT_SIDE_PX / min(w, h)  # of the size just fitted
    if scale < 1:
        w, h = w * scale, h * scale
    tiles = math.ceil(round(w) / TILE_PX) * math.ceil(round(h) / TILE_PX)
    return BASE_TOKENS + TILE_TOKENS * tiles


def part_tokens(part: dict) -> int:
    """The tokens an image part ({"type": "image_url", "image_url": {"url", "detail"}}) costs."""
    image = part.get("image_url") if isinstance(part.get("image_url"), dict) else {}
    detail = image.get("detail") or "auto"
    if detail == "low":
        return LOW_DETAIL_TOKENS
    size = data_url_size(image.get("url"))
    return image_tokens(*size, detail) if size else UNKNOWN_IMAGE_TOKENS


def data_url_size(url) -> tuple[int, int] | None:
    """(width, height) of the image in a base64 data URL, from its first bytes; None when they do not say."""
    if not isinstance(url, str) or not url.startswith("data:"):
        return None
    comma = url.find(",")
    if comma < 0 or ";base64" not in url[:comma]:
        return None
    for chars in HEADER_READS:
        chunk = url[comma + 1: comma + 1 + chars]
        try:
            head = base64.b64decode(chunk[: len(chunk) - len(chunk) % 4])
            with Image.open(io.BytesIO(head)) as probe:  # the header only: no pixel is decoded
                return probe.size
        except (binascii.Error, ValueError):
            return None  # not base64: no longer read will do better
        except Exception:  # noqa: BLE001 - cut before the size (read more), damaged, or a size past Pillow's bounds
            if len(chunk) < chars:
                return None  # that was all of it
    return None
