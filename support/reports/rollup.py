"""Reading the daily roll-up (support/models/reports.py, kept by daily.py): a range's count figures summed over
its closed days that are rolled up, and which of its days must still be counted live.

A day is closed once REPORTS_IDLE_HOURS have passed since its end in the desk's time zone: by then every
conversation started in it is done (closed, idle or with a person) as the definitions count it, so its counts
stop moving. A day that ended but is not closed yet (yesterday) is read from its provisional rows, counted again
by the beat every few minutes, when there are any; today is always counted live. The roll-up serves the filters it
keeps slices for: none, or one of channel, language and profile version, in the desk's time zone; other
filters (a team member, two dimensions, another time zone) are counted live.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import NamedTuple
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from support.models import ProvisionalReportDay, ReportDay

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


class Rolled(NamedTuple):
    """What the roll-up answers of a range: {day: its counts for the filters' slice ({} for a slice with nothing
    that day)} for its closed days rolled up and its provisional days, the (start, end) runs of days to count
    live, and {provisional day: the moment its figures were counted at}."""

    per_day: dict[date, dict]
    live: list[tuple[date, date]]
    provisional: dict[date, datetime]


def rolled(filters: Filters, now: datetime | None = None) -> tuple[dict[str, int], list[tuple[date, date]]]:
    """({figure: count summed over the range's rolled-up days}, [the (start, end) runs of days to count live])."""
    per_day, live, _ = rolled_days(filters, now)
    sums: dict[str, int] = {}
    for counts in per_day.values():
        for key, n in counts.items():
            sums[key] = sums.get(key, 0) + n
    return sums, live


def rolled_days(filters: Filters, now: datetime | None = None) -> Rolled:
    """The range's closed days from the roll-up and its provisional days (ended, not closed: yesterday) from
    their rows, one query each (the second only when the range reaches past the closed days): the days' "all"
    rows (they mark a day counted) and the slice's rows together. Days with neither, and today, count live."""
    where = slice_of(filters)
    if where is None:
        return Rolled({}, [(filters.start, filters.end)], {})
    closed_until = last_closed_day(now)
    per_day, _ = _slice_rows(ReportDay, where, filters.start, min(filters.end, closed_until))
    provisional: dict[date, datetime] = {}
    yesterday = (now or timezone.now()).astimezone(desk_zone()).date() - timedelta(days=1)
    first, last = max(filters.start, closed_until + timedelta(days=1)), min(filters.end, yesterday)
    if first <= last:
        counted, provisional = _slice_rows(ProvisionalReportDay, where, first, last)
        per_day.update(counted)
    return Rolled(per_day, _runs(filters.start, filters.end, set(per_day)), provisional)


def _slice_rows(model, where: tuple[str, str], start: date, end: date) -> tuple[dict[date, dict], dict]:
    """({day with an "all" row: the slice's counts}, {that day: as_of, for provisional rows})."""
    fields = ["day", "dimension", "value", "counts"] + (["as_of"] if model is ProvisionalReportDay else [])
    rows = list(model.objects.filter(Q(dimension=ReportDay.ALL) | Q(dimension=where[0], value=where[1]),
                                     day__gte=start, day__lte=end, time_zone=settings.TIME_ZONE)
                .values(*fields))
    marked = [row for row in rows if row["dimension"] == ReportDay.ALL]
    per_day: dict[date, dict] = {row["day"]: {} for row in marked}
    per_day.update((row["day"], row["counts"]) for row in rows if (row["dimension"], row["value"]) == where)
    return per_day, {row["day"]: row["as_of"] for row in marked if "as_of" in row}


def rolled_parts(filters: Filters, rolled_up: Rolled) -> list[dict]:
    """The parts (parts.py) the roll-up keeps for the rolled-up and provisional days of the filters' slice, one
    query per table; a slice with nothing on a day has no row and adds nothing."""
    dimension, value = slice_of(filters)
    found = []
    for model, days in ((ReportDay, set(rolled_up.per_day) - set(rolled_up.provisional)),
                        (ProvisionalReportDay, set(rolled_up.provisional))):
        if days:
            found += model.objects.filter(day__in=days, time_zone=settings.TIME_ZONE, dimension=dimension,
                                          value=value).values_list("parts", flat=True)
    return found


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
