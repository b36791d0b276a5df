"""Reaching a customer after they leave the page: whether their widget is connected, which replies were
e-mailed, the version of the conversation's e-mailed links, the customer's time zone; and who asked for
no more reply e-mails."""

from django.db import models

from .desk import Conversation
from .shop import Customer


class FollowUp(models.Model):
    """One row per conversation, made when first needed (a socket, a time zone, an e-mail)."""

    conversation = models.OneToOneField(Conversation, on_delete=models.CASCADE, related_name="follow_up")
    # The last sign of an open customer socket (its resume, a heartbeat, its close), in the database so that
    # every daphne process and the beat agree; and the conversation's last seq at that moment: the replies
    # up to it reached an open widget.
    seen_at = models.DateTimeField(null=True, blank=True)
    seen_seq = models.PositiveIntegerField(default=0)
    # Replies up to this seq were e-mailed (claimed with a conditional UPDATE, so each is sent at most once).
    emailed_seq = models.PositiveIntegerField(default=0)
    emailed_at = models.DateTimeField(null=True, blank=True)
    # Every e-mailed link names this version: bumping it revokes the links sent so far.
    link_version = models.PositiveIntegerField(default=1)
    # The customer's IANA time zone (from their browser), for the model and the e-mails; blank: unknown (UTC).
    time_zone = models.CharField(max_length=64, blank=True)

    def __str__(self) -> str:
        return f"follow-up of conversation {self.conversation_id}"


class ReplyEmailOptOut(models.Model):
    """The customer followed an unsubscribe link: no more reply e-mails, for any conversation."""

    customer = models.OneToOneField(Customer, on_delete=models.CASCADE, related_name="reply_email_opt_out")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"no reply e-mails for customer {self.customer_id}"
