"""Approvals away from the console: who among the staff is e-mailed when one is asked, the links those e-mails
carry (each used once), who a Slack user is at the desk, and the Slack message that stands for an approval."""

import uuid

from django.conf import settings
from django.db import models

from .desk import Approval


class ApprovalEmailOptIn(models.Model):
    """This staff member is e-mailed each approval request (while they may decide approvals); set in /admin/."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="approval_emails")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "approval e-mails for a staff member"
        verbose_name_plural = "approval e-mails: staff who get them"

    def __str__(self) -> str:
        return f"approval e-mails to {self.user}"


class DecisionLink(models.Model):
    """One e-mailed link: one approval, one staff member, one verdict. Its token signs public_id with a salt
    naming the three (support/desk/approval_links.py); used_at is set, once, by the request that decides."""

    APPROVE, REJECT = "approve", "reject"
    KINDS = [(APPROVE, "approve"), (REJECT, "reject")]

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    approval = models.ForeignKey(Approval, on_delete=models.CASCADE, related_name="decision_links")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=8, choices=KINDS)
    created_at = models.DateTimeField(auto_now_add=True)
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["approval", "user", "kind"], name="one_link_per_verdict")]

    def __str__(self) -> str:
        return f"{self.kind} link for approval {self.approval_id} to user {self.user_id}"


class SlackAccount(models.Model):
    """Who a Slack user is at the desk: their buttons decide as this staff account. Set in /admin/."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="slack_account")
    slack_user_id = models.CharField(max_length=32, unique=True, help_text="The member ID Slack shows in the "
                                     "person's profile (⋮ → Copy member ID), e.g. U024BE7LH.")

    def __str__(self) -> str:
        return f"{self.slack_user_id} is {self.user}"


class SlackApprovalMessage(models.Model):
    """The message posted for an approval in SLACK_APPROVALS_CHANNEL. Claimed (ts blank) before it is posted, so
    a second task posts no second message; ts is Slack's id of the message, for chat.update."""

    approval = models.OneToOneField(Approval, on_delete=models.CASCADE, related_name="slack_message")
    channel = models.CharField(max_length=64)
    ts = models.CharField(max_length=32, blank=True)
    posted_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"Slack message {self.channel}/{self.ts or '(posting)'} of approval {self.approval_id}"
