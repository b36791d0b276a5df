"""A real SMTP server in this process (aiosmtpd) on a free port, with the site's e-mail settings pointed at
it: tests read what the site sent from what it received."""

from __future__ import annotations

import email
import re
import socket

import pytest
from aiosmtpd.controller import Controller


class Inbox:
    def __init__(self):
        self.messages: list = []  # (recipients, email.message.Message), in the order received

    async def handle_DATA(self, server, session, envelope):
        self.messages.append((envelope.rcpt_tos, email.message_from_bytes(envelope.content)))
        return "250 OK"

    def codes_for(self, address: str) -> list[str]:
        """The sign-in codes sent to `address`, oldest first."""
        return [re.search(r"\b([0-9]{8})\b", m.get_payload()).group(1)
                for rcpt, m in self.messages if rcpt == [address]]


@pytest.fixture
def smtp_inbox(settings):
    """A real SMTP server on a free port; the site sends its e-mail there."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    inbox = Inbox()
    inbox.port = port  # a test may point the site at it again after changing the settings
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_USE_TLS = "127.0.0.1", port, False
    yield inbox
    controller.stop()
