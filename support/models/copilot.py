"""The copilot's runs (support/copilot/): a draft, a summary, a suggested next step or an answer to a question,
asked by a person about one conversation. A run reads; it never writes to the conversation. The row keeps what it
read (its trace and the sources it cites), what it cost, and for a draft whether and how it was sent."""

import uuid

from django.conf import settings
from django.db import models


class CopilotRun(models.Model):
    DRAFT, SUMMARY, SUGGEST, ASK = "draft", "summary", "suggest", "ask"
    KINDS = [(DRAFT, "draft"), (SUMMARY, "summary"), (SUGGEST, "suggest"), (ASK, "ask")]
    QUEUED, RUNNING, DONE, FAILED = "queued", "running", "done", "failed"
    STATUSES = [(QUEUED, "queued"), (RUNNING, "running"), (DONE, "done"), (FAILED, "failed")]

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    conversation = models.ForeignKey("support.Conversation", on_delete=models.CASCADE, related_name="copilot_runs")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL,
                                     related_name="+")
    kind = models.CharField(max_length=10, choices=KINDS)
    question = models.TextField(blank=True)  # for `ask`
    status = models.CharField(max_length=10, choices=STATUSES, default=QUEUED)
    text = models.TextField(blank=True)  # the draft, summary, suggestion's words or answer
    error = models.TextField(blank=True)  # why it failed, in plain words
    sources = models.JSONField(default=list)  # what the tools read: [{"kind", "id", "label", "version"?}]
    suggestion = models.JSONField(null=True, blank=True)  # suggest_action's proposal, validated; nothing ran
    trace = models.JSONField(default=list)  # each step: tool, arguments, result excerpt, duration, tokens
    model = models.CharField(max_length=120, blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    cached_tokens = models.PositiveIntegerField(default=0)  # of prompt_tokens
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    read_to_seq = models.PositiveIntegerField(default=0)  # the conversation's last seq when the run was asked
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # A draft sent: the staff reply it became, how many characters the person changed, and whether none.
    sent_message = models.ForeignKey("support.Message", null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="+")
    edit_distance = models.PositiveIntegerField(null=True, blank=True)
    sent_unchanged = models.BooleanField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["conversation", "kind", "status", "-created_at"], name="copilot_conv_kind"),
                   models.Index(fields=["created_at"], name="copilot_created")]

    def __str__(self):
        return f"copilot {self.kind} {self.public_id}"
