"""The polled mailbox, for shops without an e-mail provider's webhook: the beat (support.tasks.poll_mailbox,
every INBOUND_IMAP_POLL_SECONDS) reads the unseen mail of INBOUND_IMAP_FOLDER over IMAP and hands each mail's
bytes to the desk's one path for mail (support/desk/inbound_mail.py).

A mail is marked seen only once it is stored; one that fails stays unseen and is read again at the next poll.
Reading a mail twice (a crash between storing and marking, two beats at once) stores it once: its Message-ID."""

from __future__ import annotations

import logging

from django.conf import settings
from imap_tools import AND, MailBox, MailBoxUnencrypted, MailMessage, MailMessageFlags

from support.desk import inbound_mail

log = logging.getLogger(__name__)

PER_POLL = 100  # mails read per poll at most; the rest at the next one


class _Mail(MailMessage):
    """imap-tools' message, keeping the bytes as the server sent them (the raw mail staff can open)."""

    def __init__(self, fetch_data: list) -> None:
        self.raw = self._get_message_data_parts(fetch_data)[0]
        super().__init__(fetch_data)


class _SecureBox(MailBox):
    email_message_class = _Mail


class _PlainBox(MailBoxUnencrypted):
    email_message_class = _Mail


def enabled() -> bool:
    return bool(settings.INBOUND_EMAIL_ADDRESS and settings.INBOUND_IMAP_HOST)


def poll() -> int:
    """Read the mailbox's unseen mail once; how many mails were stored (or found stored before)."""
    if not enabled():
        return 0
    box_class = _SecureBox if settings.INBOUND_IMAP_SSL else _PlainBox
    done = 0
    with box_class(settings.INBOUND_IMAP_HOST, settings.INBOUND_IMAP_PORT, timeout=30).login(
            settings.INBOUND_IMAP_USER, settings.INBOUND_IMAP_PASSWORD, settings.INBOUND_IMAP_FOLDER) as box:
        for mail in box.fetch(AND(seen=False), mark_seen=False, limit=PER_POLL):
            try:
                inbound_mail.receive(mail.raw, source="imap")
            except Exception:  # one bad mail never stops the others; it stays unseen for the next poll
                log.exception("mail %s of the mailbox not stored; read again at the next poll", mail.uid)
                continue
            box.flag(mail.uid, MailMessageFlags.SEEN, True)
            done += 1
    return done
