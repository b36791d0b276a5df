"""Who joins and leaves the staff: invitations to set a password, and every change a lead makes to a person
(role, team, active or not), on record for the audit (support/team/, support/desk/audit.py)."""

import uuid

from django.conf import settings
from django.db import models

from .staff import Team


class StaffInvitation(models.Model):
    """An invitation e-mailed to a person: a signed link (support/team/invitations.py) to set their name and
    password. Used once (`accepted_at`, set by one conditional UPDATE); `sends` is in the link's signature, so a
    resend makes every earlier link of it useless; a cancelled one opens nothing."""

    ROLES = [("agent", "agent"), ("lead", "lead"), ("admin", "admin")]

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    email = models.EmailField(max_length=254)
    role = models.CharField(max_length=10, choices=ROLES)
    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    invited_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField()
    sends = models.PositiveIntegerField(default=1)
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                      related_name="+")
    cancelled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"invitation {self.public_id} as {self.role}"

    @property
    def open(self) -> bool:
        return self.accepted_at is None and self.cancelled_at is None


class TeamChange(models.Model):
    """One change to the staff a person made (or a person's own joining): what, to whom, before and after."""

    INVITED, RESENT, CANCELLED, JOINED = "invited", "invitation_resent", "invitation_cancelled", "joined"
    ROLE, TEAM, DEACTIVATED, REACTIVATED = "role_changed", "team_changed", "deactivated", "reactivated"
    EVENTS = [(e, e) for e in (INVITED, RESENT, CANCELLED, JOINED, ROLE, TEAM, DEACTIVATED, REACTIVATED)]

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    at = models.DateTimeField(auto_now_add=True, db_index=True)
    by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    person = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="+")
    invitation = models.ForeignKey(StaffInvitation, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    event = models.CharField(max_length=24, choices=EVENTS)
    before = models.JSONField(default=dict, blank=True)
    after = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["at", "pk"]

    def __str__(self) -> str:
        return f"{self.event} by {self.by_id} at {self.at}"
