"""The signed reply address a conversation's e-mails carry ("support+<conversation>.<day>.<signature>@shop"),
and reading it back from a customer's reply. Lower-case letters and digits only: some mail systems change
the case of an address, none changes these."""

from __future__ import annotations

import base64
import time
import uuid

from django.conf import settings
from django.utils.crypto import constant_time_compare, salted_hmac

from support.customers.identity import current_link_version
from support.models import Conversation

SALT = "support.reply-address"  # its own salt: no other signed value of the desk verifies as one
DAY = 24 * 3600


def _parts() -> tuple[str, str] | None:
    local, at, domain = settings.INBOUND_EMAIL_ADDRESS.rpartition("@")
    return (local.lower(), domain.lower()) if at and local and domain else None


def _signature(conversation_b32: str, day: str, version: int) -> str:
    # The version of the conversation's links is signed too: revoking the links makes old addresses stale.
    return salted_hmac(SALT, f"{conversation_b32}.{day}.{version}", algorithm="sha256").hexdigest()[:16]


def reply_address(conversation: Conversation, *, now: float | None = None) -> str | None:
    """The address a reply to this conversation's e-mail goes to; None when the desk reads no mail."""
    parts = _parts()
    if parts is None:
        return None
    local, domain = parts
    b32 = base64.b32encode(conversation.public_id.bytes).decode().rstrip("=").lower()
    day = format(int((now or time.time()) // DAY), "x")
    signature = _signature(b32, day, current_link_version(conversation.public_id))
    return f"{local}+{b32}.{day}.{signature}@{domain}"


class Stale(Exception):
    """A reply address that is ours in form but forged, too old, or of revoked links."""


def conversation_for(recipients: list[str], *, now: float | None = None) -> Conversation | None:
    """The conversation a reply address among `recipients` names; None when there is none; Stale when one
    is there but does not verify (forged, expired, revoked, or its conversation is gone)."""
    parts = _parts()
    if parts is None:
        return None
    local, domain = parts
    prefix = f"{local}+"
    tagged = [r.lower() for r in recipients if r.lower().startswith(prefix) and r.lower().endswith(f"@{domain}")]
    if not tagged:
        return None
    token = tagged[0][len(prefix):-len(domain) - 1]
    b32, _, rest = token.partition(".")
    day, _, signature = rest.partition(".")
    try:
        public_id = uuid.UUID(bytes=base64.b32decode(b32.upper() + "======"))
        issued = int(day, 16) * DAY
    except (ValueError, TypeError):
        raise Stale("not a reply address of ours") from None
    if not constant_time_compare(signature, _signature(b32, day, current_link_version(public_id))):
        raise Stale("the signature does not match")
    if (now or time.time()) - issued > settings.INBOUND_REPLY_ADDRESS_MAX_AGE:
        raise Stale("the address is too old")
    conversation = Conversation.objects.filter(public_id=public_id).select_related("customer").first()
    if conversation is None:
        raise Stale("its conversation is gone")
    return conversation
