"""A draft test: the evaluation suite played on the agent profile's draft and on the live version side by side,
in a worker (support/trials/). The row says who asked, what was compared with what, how far it got and how it
ended; the two reports are files under VAR_DIR/evaluation/draft-tests/<public_id>/."""

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q


class DraftTest(models.Model):
    QUEUED, RUNNING, FINISHED, FAILED = "queued", "running", "finished", "failed"
    STATES = [(QUEUED, "queued"), (RUNNING, "running"), (FINISHED, "finished"), (FAILED, "failed")]
    ACTIVE = (QUEUED, RUNNING)

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    asked_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    asked_at = models.DateTimeField(auto_now_add=True)
    draft = models.ForeignKey("support.ProfileVersion", on_delete=models.PROTECT, related_name="draft_tests")
    draft_revision = models.PositiveIntegerField()  # the draft as it was tested (each save counts one)
    draft_data = models.JSONField(default=dict)  # what was tested, kept: the draft may change meanwhile
    live_version = models.ForeignKey("support.ProfileVersion", null=True, on_delete=models.PROTECT, related_name="+")
    model = models.CharField(max_length=200)  # the model name both sides ran with
    uses_stand_in = models.BooleanField(default=True)
    estimate_usd = models.DecimalField(max_digits=10, decimal_places=4, null=True, blank=True)
    state = models.CharField(max_length=10, choices=STATES, default=QUEUED)
    done = models.PositiveIntegerField(default=0)  # trials played, both sides together
    total = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)  # why it failed, in plain words
    draft_pass_rate = models.FloatField(null=True, blank=True)
    live_pass_rate = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["-asked_at", "-pk"]
        constraints = [  # one test of a draft at a time: the second is refused by the database itself
            models.UniqueConstraint(fields=["draft"], condition=Q(state__in=("queued", "running")),
                                    name="one_active_test_per_draft"),
        ]

    def __str__(self):
        return f"draft test {self.public_id}"
