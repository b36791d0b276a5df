"""A customer's message with photos or PDFs: the files checked and stored (support/customers/attachments.py),
the message saved once and handed to a run, as services.conversation_post_message does for words."""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.core.files.base import ContentFile
from django.db import IntegrityError, transaction

from support.customers import attachments, cleaning
from support.desk import services
from support.models import Attachment, Conversation, Message
from support.models.attachments import attachment_storage, remove_stored
from support.ops import limits


def check_room(conversation: Conversation, prepared: list[attachments.Prepared]) -> None:
    """The conversation's limits: how many files, and how many bytes, all its messages together."""
    kept = Attachment.objects.filter(conversation=conversation)
    count, size = kept.count(), sum(kept.values_list("size", flat=True))
    if count + len(prepared) > settings.ATTACHMENTS_PER_CONVERSATION:
        left = settings.ATTACHMENTS_PER_CONVERSATION - count
        raise attachments.Refused(f"This conversation already has {count} files, and it can hold "
                                  f"{settings.ATTACHMENTS_PER_CONVERSATION}. " +
                                  (f"You can send {left} more." if left > 0 else "Please describe the rest in "
                                   "words, or ask us how to send more."), "attachments_full", 409)
    if size + sum(len(p.data) for p in prepared) > settings.ATTACHMENT_BYTES_PER_CONVERSATION:
        raise attachments.Refused(f"These files would take this conversation past its "
                                  f"{attachments.limit_size(settings.ATTACHMENT_BYTES_PER_CONVERSATION)} of "
                                  "attachments. Please send fewer or smaller files.", "attachments_full", 409)


def conversation_post_files(*, conversation: Conversation, text, uploads: list, client_id: str | None = None,
                            client_address: str | None = None):
    """A customer's message with photos or PDFs (and words, or none): checked, stored, saved once, handed to a
    run, as services.conversation_post_message does for words. Returns (message, run, created)."""
    services.setup_check()  # before a photo is decoded
    text = services.message_clean(text) if isinstance(text, str) and text.strip() else ""
    if client_id is not None:
        client_id = cleaning.client_id_or_none(client_id)
        if client_id is None:
            raise services.InvalidMessage("client_id must be 1 to 64 letters, digits or . _ : -",
                                          code="invalid_client_id")
        existing = conversation.messages.filter(client_id=client_id).first()
        if existing is not None:  # a retried upload: the same message, saved once
            return existing, services.active_run(conversation), False
    if not uploads:
        raise attachments.Refused("Choose a photo or a PDF to send.", "no_attachment", 400)
    if len(uploads) > settings.ATTACHMENTS_PER_MESSAGE:
        raise attachments.Refused(f"You can send up to {settings.ATTACHMENTS_PER_MESSAGE} files in one message; you chose "
                      f"{len(uploads)}. Please send the rest in another message.", "too_many_attachments", 400)
    prepared = [attachments.prepare(upload) for upload in uploads]
    check_room(conversation, prepared)
    counted = services.message_rate_check(conversation=conversation, client_address=client_address)
    stored: list[str] = []
    try:
        rows = files_store(conversation, prepared, stored)
        with transaction.atomic():
            content = text or attachments.placeholder([p.kind for p in prepared])
            message = services.message_append(conversation=conversation, wire={"role": "user", "content": content},
                                               author=Message.CUSTOMER, client_id=client_id)
            check_room(conversation, prepared)  # again under the conversation's row lock (message_append's)
            for row in rows:
                row.message, row.conversation = message, conversation
                row.save(force_insert=True)
            run = services.run_start_if_idle(conversation_id=conversation.pk, current=conversation)
    except IntegrityError:
        remove_stored(stored)
        if client_id is None:
            raise
        if counted:
            limits.forget(*counted)
        existing = conversation.messages.get(client_id=client_id)
        return existing, services.active_run(conversation), False
    except BaseException:
        remove_stored(stored)
        if counted:
            limits.forget(*counted)
        raise
    return message, run, True


def files_store(conversation: Conversation, prepared: list[attachments.Prepared], stored: list[str]) -> list[Attachment]:
    """Write each file (and its thumbnail and preview) under names nobody can guess; `stored` collects them."""
    storage, rows = attachment_storage(), []
    for p in prepared:
        base = f"{conversation.public_id.hex}/{p.public_id.hex}"
        names = {}
        for part, data, ext in (("file", p.data, p.ext), ("thumbnail", p.thumbnail, "jpg"),
                                ("preview", p.preview, "jpg")):
            if data is None:
                names[part] = ""
                continue
            suffix = "" if part == "file" else f"-{part}"
            names[part] = storage.save(f"{base}{suffix}.{ext}", ContentFile(data))
            stored.append(names[part])
        rows.append(Attachment(public_id=p.public_id, kind=p.kind, content_type=p.content_type, name=p.name,
                               size=len(p.data), uploaded_size=p.uploaded_size, width=p.width, height=p.height,
                               sha256=hashlib.sha256(p.data).hexdigest(), **names))
    return rows
