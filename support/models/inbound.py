"""E-mail between the desk and customers, beyond the reply e-mails' bookkeeping (followup.py): every mail that came
in (its raw bytes kept for staff's "Show original"), the Message-IDs of the mails the desk sent (threading, loops),
and the addresses that bounce."""

import uuid

from django.db import models

from .desk import Conversation, Message
from .shop import Customer


class InboundEmail(models.Model):
    """One mail received, by a provider's webhook or from the polled mailbox; stored once per Message-ID."""

    # What became of it (support/desk/inbound_mail.py): saved to a conversation, or why not.
    ATTACHED, STARTED = "attached", "started"  # added to an existing conversation / started a new one
    AUTO_REPLY, BOUNCE, LOOP = "auto_reply", "bounce", "loop"  # not a person: no run
    TOO_LARGE, RATE_LIMITED, REFUSED, EMPTY = "too_large", "rate_limited", "refused", "empty"
    OUTCOMES = [(o, o) for o in (ATTACHED, STARTED, AUTO_REPLY, BOUNCE, LOOP, TOO_LARGE, RATE_LIMITED, REFUSED,
                                 EMPTY)]

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    # The Message-ID header without its angle brackets (or one derived from the bytes when a mail has none):
    # a webhook retried or a mailbox read twice finds it and stores nothing.
    mail_id = models.CharField(max_length=250, unique=True)
    source = models.CharField(max_length=40)  # "imap", or the provider's name ("Mailgun", "Postmark", ...)
    sender = models.CharField(max_length=254, blank=True)  # the From address, canonical
    subject = models.CharField(max_length=250, blank=True)
    raw = models.BinaryField()  # the mail as received (empty when it was too large to keep)
    size = models.PositiveIntegerField(default=0)
    outcome = models.CharField(max_length=16, choices=OUTCOMES)
    detail = models.CharField(max_length=300, blank=True)  # why, in plain words, for staff
    conversation = models.ForeignKey(Conversation, null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="inbound_emails")
    message = models.OneToOneField(Message, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="inbound_email")
    received_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-received_at"]

    def __str__(self) -> str:
        return f"mail {self.mail_id} from {self.sender} ({self.outcome})"


class OutboundEmail(models.Model):
    """A mail the desk sent to a customer about a conversation: its Message-ID threads the customer's reply
    (In-Reply-To, References) and tells our own mail coming back (a loop) from a person's."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="outbound_emails")
    mail_id = models.CharField(max_length=250, unique=True)
    to = models.CharField(max_length=254)
    sent_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["sent_at"]


class UndeliverableAddress(models.Model):
    """A customer's address a mail bounced from: no more e-mail goes to it, and staff see why."""

    customer = models.OneToOneField(Customer, on_delete=models.CASCADE, related_name="undeliverable")
    reason = models.CharField(max_length=300, blank=True)  # the bounce's status and words, cut
    inbound_email = models.ForeignKey(InboundEmail, null=True, blank=True, on_delete=models.SET_NULL,
                                      related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
