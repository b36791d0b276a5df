"""The agent profile's versions (DESIGN decision 15): a row per version, never edited once published; one
pointer row says which version is live, moved by one conditional UPDATE; a row per move, which the audit reads.
The profile itself (the JSON in `data`) is read and written by support/profiles/.
"""

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q


class ProfileVersion(models.Model):
    """A draft (state draft, no number: at most one, edited freely) or a published version (a number, who and
    when; its data never changes again)."""

    DRAFT, PUBLISHED = "draft", "published"
    STATES = [(DRAFT, "draft"), (PUBLISHED, "published")]

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    state = models.CharField(max_length=10, choices=STATES, default=DRAFT)
    number = models.PositiveIntegerField(null=True, blank=True, unique=True)  # assigned on publish
    data = models.JSONField(default=dict)  # Profile.as_data()
    based_on = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # Each save of a draft counts one: a publish names the revision it read, so an edit made meanwhile is
    # never published unseen, and a first approval (four eyes) is for one revision only.
    revision = models.PositiveIntegerField(default=1)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    updated_at = models.DateTimeField(auto_now=True)
    # Four eyes (PROFILE_PUBLISH_NEEDS_TWO): the first person's request to publish, confirmed by another.
    publish_requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                             on_delete=models.SET_NULL, related_name="+")
    publish_requested_at = models.DateTimeField(null=True, blank=True)
    published_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="+")
    published_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-number"]
        permissions = [("change_agent_profile", "Can edit and publish the agent profile")]
        constraints = [
            models.UniqueConstraint(fields=["state"], condition=Q(state="draft"), name="one_profile_draft"),
            models.CheckConstraint(condition=Q(state="draft", number__isnull=True)
                                   | Q(state="published", number__isnull=False, published_at__isnull=False),
                                   name="profile_numbered_when_published"),
        ]

    def __str__(self):
        return f"profile version {self.number}" if self.number else "profile draft"


class LiveProfile(models.Model):
    """The one row (pk 1) naming the live version. Moved only by a conditional UPDATE on the version it held
    (support/profiles/services.py): of two people moving it at once, one wins and the other is told."""

    version = models.ForeignKey(ProfileVersion, null=True, on_delete=models.PROTECT, related_name="+")
    changed_at = models.DateTimeField(null=True, blank=True)


class ProfileRelease(models.Model):
    """One step of making a version live, written once: a first person's request to publish (four eyes), a
    version published, or rolled back to; by whom and when (a publish also names who asked first). The
    audit's rows for the profile."""

    REQUEST, PUBLISH, ROLLBACK = "request", "publish", "rollback"
    KINDS = [(REQUEST, "asked to publish"), (PUBLISH, "published"), (ROLLBACK, "rolled back to")]

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    kind = models.CharField(max_length=10, choices=KINDS)
    version = models.ForeignKey(ProfileVersion, on_delete=models.PROTECT, related_name="releases")
    previous = models.ForeignKey(ProfileVersion, null=True, on_delete=models.PROTECT, related_name="+")
    by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    first_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="+")
    at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["-at", "-pk"]
