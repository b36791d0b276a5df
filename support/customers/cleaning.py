"""Text from outside, at the edge: what a customer's message may contain, and the small fields (ids, tokens)
that must be plain printable ASCII. Pure functions, no Django."""

from __future__ import annotations

import re
import unicodedata

# Explicit embeddings, overrides and isolates (LRE, RLE, PDF, LRO, RLO; LRI, RLI, FSI, PDI): they reorder
# the text around them wherever it is shown, so "12345 EUR" inside a message can read as "RUE 54321".
# The implicit marks (U+200E, U+200F, U+061C) only nudge neutral characters and stay.
BIDI_CONTROLS = frozenset(map(chr, [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]))
_STRIP_BIDI = {ord(c): None for c in BIDI_CONTROLS}
_PRINTABLE_ASCII = re.compile(r"[\x21-\x7e]+")
CLIENT_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")


def without_bidi_controls(text: str) -> str:
    return text.translate(_STRIP_BIDI)


def is_blank(text: str) -> bool:
    """Nothing a person can read: only spaces and format characters (category Cf: zero-width spaces and
    joiners, word joiners, byte-order marks, soft hyphens...). Such a message must not start a run."""
    return all(ch.isspace() or unicodedata.category(ch) == "Cf" for ch in text)


def first_forbidden(text: str) -> str | None:
    """The first control, surrogate or private-use character other than a line break or a tab."""
    return next((ch for ch in text if unicodedata.category(ch) in ("Cc", "Cs", "Co") and ch not in "\n\t"), None)


def is_valid_unicode(text: str) -> bool:
    """False for a string holding lone surrogates (JSON's "\\ud800" decodes to one): not storable text."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def token_or_none(value, *, max_length: int = 2000) -> str | None:
    """A signed token as we mint them (printable ASCII, bounded), else None: a NUL byte, a surrogate or a
    megabyte never reaches the signature check or a database query."""
    if isinstance(value, str) and len(value) <= max_length and _PRINTABLE_ASCII.fullmatch(value):
        return value
    return None


def client_id_or_none(value) -> str | None:
    """A client's id for its message: 1-64 letters, digits and . _ : - (what the widget sends), else None."""
    return value if isinstance(value, str) and CLIENT_ID.fullmatch(value) else None
