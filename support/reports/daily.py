"""The daily roll-up, kept by the beat: each closed day's count figures, and what the other figures are made of
(parts.py: durations, rating sums, hand-over reasons, amounts, cost), per slice (all, each channel, each
customer language, each agent profile version), written once per day so a month's report reads thirty rows
instead of counting every conversation again. rollup.py reads it; docs/reports.md describes it.

Safe with two beats: a day's rows go in one INSERT that skips rows already there (the unique key), so a day
rolled twice at once still has one row per slice, and the second beat writes nothing.

A day that ended but is not closed yet (yesterday) is counted the same way into provisional rows every few
minutes, each refresh replacing them (an UPSERT), so the page reads yesterday as of the last refresh instead of
counting it on every read; today is always counted live.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Min
from django.utils import timezone

from support.models import Conversation, ProfileVersion, ProvisionalReportDay, ReportDay

from . import parts
from .figures import COUNTS, Filters, conversations_behind
from .rollup import desk_zone, last_closed_day
from .scope import CHANNELS


def report_days_roll_up(*, now: datetime | None = None) -> list[date]:
    """Roll up every closed day not rolled up yet, from the first conversation's day; returns the days written."""
    first = Conversation.objects.aggregate(first=Min("created_at"))["first"]
    if first is None:
        return []
    start, until = first.astimezone(desk_zone()).date(), last_closed_day(now)
    done = set(ReportDay.objects.filter(day__gte=start, day__lte=until, time_zone=settings.TIME_ZONE,
                                        dimension=ReportDay.ALL).values_list("day", flat=True))
    days = [start + timedelta(days=n) for n in range((until - start).days + 1)]
    written = [day for day in days if day not in done]
    for day in written:
        report_day_roll_up(day)
    return written


def report_day_roll_up(day: date) -> None:
    """One day's rows, every slice in one INSERT; rows another beat wrote first are kept, not doubled. A slice
    with nothing to count is left out (it reads as zeros); the "all" row is always written: it marks the day."""
    rows = [ReportDay(**row) for row in _day_rows(day, keep_empty=False)]
    with transaction.atomic():
        ReportDay.objects.bulk_create(rows, ignore_conflicts=True)


def provisional_days_refresh() -> list[date]:
    """Count again every day that ended but is not closed yet (yesterday; more with a longer REPORTS_IDLE_HOURS)
    and replace its provisional rows; forget the rows of days closed since (the roll-up answers for them).
    Returns the days written."""
    now = timezone.now()
    closed_until, today = last_closed_day(now), now.astimezone(desk_zone()).date()
    days = [closed_until + timedelta(days=n) for n in range(1, (today - closed_until).days)]
    for day in days:
        provisional_day_refresh(day, as_of=now)
    ProvisionalReportDay.objects.filter(day__lte=closed_until).delete()
    return days


def provisional_day_refresh(day: date, *, as_of: datetime) -> None:
    """One day's provisional rows, counted now, every slice (an empty one too, so no slice keeps an older
    count) in one UPSERT on the unique key: a row already there is replaced, so two beats at once leave one row
    per slice, the figures of whichever wrote last."""
    rows = [ProvisionalReportDay(**row, as_of=as_of) for row in _day_rows(day, keep_empty=True)]
    ProvisionalReportDay.objects.bulk_create(rows, update_conflicts=True, update_fields=["counts", "parts", "as_of"],
                                             unique_fields=["day", "time_zone", "dimension", "value"])


def _day_rows(day: date, *, keep_empty: bool) -> list[dict]:
    """Each slice's counts and parts for one day, counted live (an empty slice's only when keep_empty)."""
    rows = []
    for dimension, value in _slices():
        counts = day_counts(day, dimension, value)
        if keep_empty or dimension == ReportDay.ALL or any(counts.values()):
            rows.append({"day": day, "time_zone": settings.TIME_ZONE, "dimension": dimension, "value": value,
                         "counts": counts, "parts": parts.of(_day_filters(day, dimension, value))})
    return rows


def day_counts(day: date, dimension: str, value: str) -> dict[str, int]:
    """Every count figure for one day and one slice, counted live exactly as report() counts it."""
    filters = _day_filters(day, dimension, value)
    return {key: conversations_behind(filters, key).count() for key in COUNTS}


def _day_filters(day: date, dimension: str, value: str) -> Filters:
    narrowing = {} if dimension == ReportDay.ALL else {
        dimension: int(value) if dimension == ReportDay.PROFILE_VERSION else value}
    return Filters(start=day, end=day, time_zone=settings.TIME_ZONE, **narrowing)


def _slices() -> list[tuple[str, str]]:
    languages = Conversation.objects.order_by().values_list("language", flat=True).distinct()
    versions = ProfileVersion.objects.filter(number__isnull=False).values_list("number", flat=True).distinct()
    return [(ReportDay.ALL, ""), *((ReportDay.CHANNEL, c) for c in CHANNELS),
            *((ReportDay.LANGUAGE, lang) for lang in sorted(set(languages)) if lang),
            *((ReportDay.PROFILE_VERSION, str(v)) for v in sorted(set(versions)))]

