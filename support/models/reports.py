"""The reports' own rows: each closed day's counts kept by the beat (the roll-up), the days that ended but are
not closed yet (counted again every few minutes), the leads who asked for the morning digest, and the digests
sent (one per lead per day)."""

from django.conf import settings
from django.db import models


class DayFigures(models.Model):
    """One day's count figures and parts for one slice: all conversations (dimension "all", value ""), or one
    channel, one customer language, or one agent profile version (its number, as text). `time_zone` is the
    desk's when it was counted: a day is a day in that zone."""

    ALL, CHANNEL, LANGUAGE, PROFILE_VERSION = "all", "channel", "language", "profile_version"
    DIMENSIONS = [(ALL, "all"), (CHANNEL, "channel"), (LANGUAGE, "language"), (PROFILE_VERSION, "profile version")]

    day = models.DateField()
    time_zone = models.CharField(max_length=64)
    dimension = models.CharField(max_length=16, choices=DIMENSIONS)
    value = models.CharField(max_length=32, blank=True)
    counts = models.JSONField(default=dict)  # {figure key: count}, as report() counts it for that day and slice
    parts = models.JSONField(default=dict)  # what the other figures are made of that day (reports/parts.py)

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.day} {self.dimension}={self.value or '*'}"


class ReportDay(DayFigures):
    """A closed day's figures for one slice. Written once by the beat (support/reports/daily.py); the unique
    key makes a second beat's insert a no-op."""

    rolled_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["day", "time_zone", "dimension", "value"],
                                               name="one_report_day_per_slice")]


class ProvisionalReportDay(DayFigures):
    """A day that ended but is not closed yet (yesterday), counted again by the beat every few minutes
    (support/reports/daily.py) so the page reads it instead of counting it: every slice's row is replaced in
    place (an UPSERT on the unique key), so two beats leave one row per slice. `as_of`: the moment its
    figures were counted at; the page shows it."""

    as_of = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["day", "time_zone", "dimension", "value"],
                                               name="one_provisional_day_per_slice")]


class DigestOptIn(models.Model):
    """This lead is sent the morning digest (e-mail, and Slack when their account is linked)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="report_digest")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"morning digest to {self.user}"


class DigestSent(models.Model):
    """A morning digest claimed for one lead and one day before it is sent, so a second beat sends none."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    day = models.DateField()  # the desk's local day it was sent on
    claimed_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "day"], name="one_digest_per_lead_per_day")]

    def __str__(self) -> str:
        return f"digest of {self.day} to {self.user}"
