"""What staff do on a conversation besides answering it: their actions on record, internal notes, saved replies.

Notes and saved replies are never Messages: a Message is what the model and (for some roles) the customer
read. A note lives apart, so no code path that builds the model's history or the customer's view can reach it.
"""

import uuid

from django.conf import settings
from django.db import models

from .desk import Conversation


class StaffAction(models.Model):
    """One action a staff member took on a conversation's customer (a refund, a message to the seller), with
    who, when, what was asked and what came of it. Written in the transaction that does the action."""

    REFUND, SELLER_MESSAGE = "refund", "seller_message"
    KINDS = [(REFUND, "refund"), (SELLER_MESSAGE, "seller message")]
    # PENDING: saved before the shop is asked (the intent, with its key), so a request repeated after a crash
    # or a lost answer asks the shop by that key instead of acting again.
    # AWAITING_APPROVAL: a refund above SECOND_APPROVAL_ABOVE, saved with its Approval, until another person
    # approves it (then PENDING, then DONE) or rejects it (REFUSED).
    PENDING, DONE, REFUSED, AWAITING_APPROVAL = "pending", "done", "refused", "awaiting_approval"
    STATUSES = [(PENDING, "pending"), (DONE, "done"), (REFUSED, "refused"), (AWAITING_APPROVAL, "awaiting approval")]

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="staff_actions")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    kind = models.CharField(max_length=20, choices=KINDS)
    arguments = models.JSONField()  # what the person asked for, as sent
    status = models.CharField(max_length=20, choices=STATUSES)
    result = models.JSONField(default=dict, blank=True)  # what came of it (a refund id, the error's words)
    # "<user id>:<the client's key>": a double click or a retried request does the action once.
    idempotency_key = models.CharField(max_length=120, null=True, blank=True, unique=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return f"{self.kind} {self.status} by {self.user_id} on {self.conversation_id}"


class Note(models.Model):
    """A staff-only note on a conversation: never sent to the model or the customer."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="notes")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    text = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return f"note on {self.conversation_id} by {self.author_id}"


class SavedReply(models.Model):
    """A reply staff insert into the reply box and adapt before sending."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    title = models.CharField(max_length=80, unique=True)
    body = models.TextField()
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["title"]
        verbose_name_plural = "saved replies"

    def __str__(self) -> str:
        return self.title


class Team(models.Model):
    """A group of staff that hand-overs and approval requests are routed to (support/desk/routing.py). With no
    team marked for a kind of work, every staff member who may do it is one team."""

    name = models.CharField(max_length=80, unique=True)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="support_teams")
    takes_handovers = models.BooleanField(default=True, help_text="Conversations handed to a person go to this team.")
    takes_approvals = models.BooleanField(default=True, help_text="Approval requests go to this team.")

    class Meta:
        ordering = ["name"]
        permissions = [("view_team_queue", "Can see the team's queue by person"),
                       ("manage_team", "Can invite staff and change their roles, teams and access"),
                       ("view_desk_settings", "Can see the desk's settings")]

    def __str__(self) -> str:
        return self.name
