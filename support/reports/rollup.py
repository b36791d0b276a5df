"""Reading the daily roll-up (support/models/reports.py, kept by daily.py): a range's count figures summed over
its closed days that are rolled up, and which of its days must still be counted live.

A day is closed once REPORTS_IDLE_HOURS have passed since its end in the desk's time zone: by then every
conversation started in it is done (closed, idle or with a person) as the definitions count it, so its counts
stop moving. Days after that (yesterday, today) are always counted live. The roll-up serves the filters it
keeps slices for: none, or one of channel, language and profile version, in the desk's time zone; other
filters (a team member, two dimensions, another time zone) are counted live.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from support.models import ReportDay

from .scope import Filters


def desk_zone() -> ZoneInfo:
    return ZoneInfo(settings.TIME_ZONE)


def last_closed_day(now: datetime | None = None) -> date:
    """The newest day whose end lies REPORTS_IDLE_HOURS or more in the past, in the desk's time zone."""
    now = (now or timezone.now()).astimezone(desk_zone())
    day = now.date()
    while datetime.combine(day + timedelta(days=1), time.min, tzinfo=desk_zone()) \
            > now - timedelta(hours=settings.REPORTS_IDLE_HOURS):
        day -= timedelta(days=1)
    return day


def slice_of(filters: Filters) -> tuple[str, str] | None:
    """The roll-up's slice (dimension, value) that answers these filters, or None when it keeps none."""
    if filters.staff_user_id is not None or filters.time_zone != settings.TIME_ZONE:
        return None
    dimensions = [(ReportDay.CHANNEL, filters.channel), (ReportDay.LANGUAGE, filters.language),
                  (ReportDay.PROFILE_VERSION, filters.profile_version)]
    chosen = [(d, str(v)) for d, v in dimensions if v not in (None, "")]
    if len(chosen) > 1:
        return None
    return chosen[0] if chosen else (ReportDay.ALL, "")


def rolled(filters: Filters, now: datetime | None = None) -> tuple[dict[str, int], list[tuple[date, date]]]:
    """({figure: count summed over the range's rolled-up days}, [the (start, end) runs of days to count live])."""
    per_day, live = rolled_days(filters, now)
    sums: dict[str, int] = {}
    for counts in per_day.values():
        for key, n in counts.items():
            sums[key] = sums.get(key, 0) + n
    return sums, live


def rolled_days(filters: Filters, now: datetime | None = None) -> tuple[dict[date, dict], list[tuple[date, date]]]:
    """({rolled-up day: its counts for the filters' slice ({} for a slice with nothing that day)}, [the (start,
    end) runs of days to count live]), in one query: the days' "all" rows (they mark a day rolled up) and the
    slice's rows together."""
    where = slice_of(filters)
    if where is None:
        return {}, [(filters.start, filters.end)]
    rows = list(_rows(filters, now).filter(Q(dimension=ReportDay.ALL) | Q(dimension=where[0], value=where[1]))
                .values_list("day", "dimension", "value", "counts"))
    per_day: dict[date, dict] = {day: {} for day, dimension, _, _ in rows if dimension == ReportDay.ALL}
    per_day.update((day, counts) for day, dimension, value, counts in rows if (dimension, value) == where)
    return per_day, _runs(filters.start, filters.end, set(per_day))


def rolled_parts(filters: Filters, days: set[date]) -> list[dict]:
    """The parts (parts.py) the roll-up keeps for these days and the filters' slice, one query; a slice with
    nothing on a day has no row and adds nothing."""
    dimension, value = slice_of(filters)
    return list(ReportDay.objects.filter(day__in=days, time_zone=settings.TIME_ZONE, dimension=dimension,
                                         value=value).values_list("parts", flat=True))


def _rows(filters: Filters, now: datetime | None):
    until = min(filters.end, last_closed_day(now))
    return ReportDay.objects.filter(day__gte=filters.start, day__lte=until, time_zone=settings.TIME_ZONE)


def _runs(start: date, end: date, skip: set[date]) -> list[tuple[date, date]]:
    """The runs of consecutive days from start to end not in skip."""
    runs, day, first = [], start, None
    while day <= end:
        if day in skip:
            if first:
                runs.append((first, day - timedelta(days=1)))
            first = None
        elif first is None:
            first = day
        day += timedelta(days=1)
    if first:
        runs.append((first, end))
    return runs
