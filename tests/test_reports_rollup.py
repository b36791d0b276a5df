"""The daily roll-up: each closed day's count figures per slice (all, channel, language, agent version), written
by the beat once per day, and report() reading closed days from it and the other days live, with the same numbers
as counting everything live (tests/reports_dataset.py's week)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import date, datetime, timedelta, timezone as tz
from decimal import Decimal
from unittest import mock

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext

from support.models import Message, ReportDay
from support.reports import daily, figures, parts, rollup, scope
from support.reports.figures import COUNTS, Filters, charts, conversations_behind, count_figures, report, series
from support.reports.stats import counted_percentile, percentile
from support.web.views.reports import CHARTED
from tests.reports_dataset import Week

pytestmark = pytest.mark.django_db

WEEK = Filters(start=date(2026, 11, 23), end=date(2026, 11, 29), time_zone="UTC")
SLICES = [WEEK, replace(WEEK, channel="email"), replace(WEEK, channel="widget"), replace(WEEK, language="de"),
          replace(WEEK, language="en"), replace(WEEK, profile_version=1), replace(WEEK, profile_version=7)]
LATER = datetime(2026, 12, 5, 9, tzinfo=tz.utc)


@pytest.fixture
def week(settings):
    settings.TIME_ZONE = "UTC"
    return Week()


def live(filters: Filters) -> dict[str, int]:
    return {key: conversations_behind(filters, key).count() for key in COUNTS}


def test_the_figures_from_the_roll_up_equal_the_live_computation_for_every_slice(week):
    expected = {f: live(f) for f in SLICES}
    reports = {f: report(f)["figures"] for f in SLICES}
    assert any(expected[WEEK].values()) and expected[replace(WEEK, language="de")]["abandoned"] == 1
    daily.report_days_roll_up(now=LATER)
    rolled_days = set(ReportDay.objects.filter(dimension=ReportDay.ALL).values_list("day", flat=True))
    assert {WEEK.start + timedelta(days=n) for n in range(7)} <= rolled_days
    assert max(rolled_days) == date(2026, 12, 3)  # the 4th ended 9 hours before LATER: not closed yet
    for f in SLICES:
        assert rollup.rolled(f)[1] == [], "every day of the week is read from the roll-up"
        assert count_figures(f) == expected[f], f
        assert report(f)["figures"] == reports[f], f


def test_report_reads_the_closed_days_from_the_roll_up_rows(week):
    daily.report_days_roll_up(now=LATER)
    row = ReportDay.objects.get(day=date(2026, 11, 23), dimension=ReportDay.ALL)
    row.counts["new_conversations"] += 100
    row.save()
    assert report(WEEK)["figures"]["new_conversations"]["value"] == live(WEEK)["new_conversations"] + 100
    with CaptureQueriesContext(connection) as rolled:
        count_figures(WEEK)
    assert len(rolled) == 1  # the days rolled up with the slice's rows: no counting


def test_a_day_is_rolled_up_only_once_it_is_closed_and_the_rest_is_counted_live(week):
    # 01:00 on the 30th: the 29th ended 1 hour ago, the 28th 25 hours ago (REPORTS_IDLE_HOURS = 24)
    written = daily.report_days_roll_up(now=datetime(2026, 11, 30, 1, tzinfo=tz.utc))
    assert date(2026, 11, 23) in written and written[-1] == date(2026, 11, 28)
    assert not ReportDay.objects.filter(day=date(2026, 11, 29)).exists()
    assert rollup.rolled(WEEK)[1] == [(date(2026, 11, 29), date(2026, 11, 29))]
    assert count_figures(WEEK) == live(WEEK)


def test_a_second_beat_writes_nothing_and_rolling_a_day_twice_keeps_one_row_per_slice(week):
    daily.report_days_roll_up(now=LATER)
    rows = sorted(ReportDay.objects.values_list("day", "dimension", "value", "counts"))
    assert daily.report_days_roll_up(now=LATER) == []
    daily.report_day_roll_up(date(2026, 11, 25))  # a beat that started before the other finished the day
    assert sorted(ReportDay.objects.values_list("day", "dimension", "value", "counts")) == rows


def test_filters_the_roll_up_keeps_no_slice_for_are_counted_live(week):
    daily.report_days_roll_up(now=LATER)
    for f in (replace(WEEK, staff_user_id=week.bob.pk), replace(WEEK, channel="email", language="de"),
              replace(WEEK, time_zone="Europe/Berlin")):
        assert rollup.rolled(f) == ({}, [(f.start, f.end)])
        assert count_figures(f) == live(f)


def test_the_beat_rolls_up_hourly_so_the_first_run_after_a_day_closes_writes_it():
    assert settings.CELERY_BEAT_SCHEDULE["reports-roll-up"] == {"task": "support.tasks.roll_up_reports",
                                                                "schedule": 3600}


def test_nothing_to_roll_up_on_an_empty_desk():
    assert daily.report_days_roll_up(now=LATER) == []


def test_the_charts_series_from_the_roll_up_equal_the_live_series(week):
    expected = {(f, key, by): series(f, key, by) for f in SLICES[:4] for key in COUNTS for by in ("day", "week")}
    daily.report_days_roll_up(now=LATER)
    assert any(n for points in expected.values() for _, n in points)
    for (f, key, by), points in expected.items():
        assert series(f, key, by) == points, (f, key, by)
    row = ReportDay.objects.get(day=date(2026, 11, 23), dimension=ReportDay.ALL)
    row.counts["new_conversations"] += 100
    row.save()
    assert series(WEEK, "new_conversations")[0] == (date(2026, 11, 23), 102)  # read from the row


ROLLED_UP_PARTS = ("first_response:", "time_to_resolution:", "csat_", "handover_reason:", "refunds_automatic_amount",
                   "refunds_by_approval_amount", "refunds_by_staff_amount", "model_cost", "cost_per_")


def parts_of(figures: dict) -> dict:
    return {key: row for key, row in figures.items() if key.startswith(ROLLED_UP_PARTS)}


@pytest.mark.parametrize("closed_until", [LATER, datetime(2026, 11, 30, 1, tzinfo=tz.utc)],
                         ids=["every day rolled up", "the last day counted live"])
def test_times_satisfaction_reasons_refund_amounts_and_cost_from_the_roll_up_equal_the_live_ones_for_every_slice(
        week, closed_until):
    expected = {f: parts_of(report(f)["figures"]) for f in SLICES}
    shown = [row["value"] for rows in expected.values() for row in rows.values()]
    assert len(expected[WEEK]) > 18 and None in shown and "0.00" in shown  # 18 and the reasons; empty slices too
    assert all(any(row["value"] not in (None, 0, "0.00", "0.000000") for key, row in expected[WEEK].items()
                   if key.startswith(prefix)) for prefix in ROLLED_UP_PARTS)
    daily.report_days_roll_up(now=closed_until)
    for f in SLICES:
        assert parts_of(report(f)["figures"]) == expected[f], f


def test_report_reads_times_ratings_reasons_amounts_and_cost_of_closed_days_from_the_roll_up_alone(week):
    before = report(WEEK)["figures"]
    daily.report_days_roll_up(now=LATER)
    row = ReportDay.objects.get(day=date(2026, 11, 23), dimension=ReportDay.ALL)
    row.parts["refund_amounts"]["refunds_by_staff"] = str(Decimal(row.parts["refund_amounts"]["refunds_by_staff"])
                                                          + 100)
    row.parts["model_cost"] = str(Decimal(row.parts["model_cost"]) + 1)
    row.parts["handover_reasons"]["escalated"] = row.parts["handover_reasons"].get("escalated", 0) + 5
    row.parts["ratings"]["agent_only"] = {"n": 1000, "good": 0, "sum": 1000}
    row.parts["first_response"]["agent"] = [[86400.0, 1000]]
    row.save()
    with CaptureQueriesContext(connection) as queries:
        after = report(WEEK)["figures"]
    assert Decimal(after["refunds_by_staff_amount"]["value"]) == Decimal(before["refunds_by_staff_amount"]["value"]) + 100
    assert Decimal(after["model_cost"]["value"]) == Decimal(before["model_cost"]["value"]) + 1
    assert after["handover_reason:escalated"]["value"] == before.get("handover_reason:escalated", {"value": 0})[
        "value"] + 5
    assert after["csat_agent_only"]["value"] < 0.01 and after["first_response:by_who:agent:p50"]["value"] == 86400.0
    read = " ".join(q["sql"] for q in queries)
    for table in ("support_message", "support_rating", "support_shopeffect", "support_run\"", "support_conversation"):
        assert table not in read, table  # nothing counted live: only the roll-up (and the approvals' decision times)


def test_the_four_charts_read_the_closed_days_from_the_roll_up_in_one_query(week):
    expected = {key: series(WEEK, key) for key in CHARTED}
    daily.report_days_roll_up(now=LATER)
    with CaptureQueriesContext(connection) as queries:
        assert charts(WEEK, CHARTED) == expected
    assert len(queries) == 1


def test_a_percentile_of_days_kept_as_counted_durations_equals_the_percentile_of_every_duration():
    days = [[1.5, 2.0, 2.0, 90.25], [], [2.0, 7.0, 7.0, 7.0, 3600.0], [0.0]]
    every = [value for day in days for value in day]
    merged = parts.merged([{**parts_empty(), "first_response": {"agent": [[v, n] for v, n in sorted(
        Counter(day).items())], "people": []}} for day in days])["first_response"]["agent"]
    for fraction in (0.0, 0.1, 0.5, 0.9, 0.95, 1.0):
        assert counted_percentile(merged, fraction) == percentile(every, fraction)
    assert counted_percentile([], 0.5) is None


def parts_empty() -> dict:
    return {"first_response": {}, "time_to_resolution": {}, "handover_reasons": {},
            "ratings": {key: {"n": 0, "good": 0, "sum": 0} for key in parts.RATED},
            "refund_amounts": {key: "0" for key in parts.REFUND_KINDS}, "model_cost": "0"}


def test_confirmed_resolutions_look_up_each_conversations_rating_rather_than_joining_every_rating(week):
    sql = str(conversations_behind(WEEK, "resolved_confirmed").query)
    assert 'JOIN "support_rating"' not in sql and 'FROM "support_rating"' in sql


def test_whether_a_person_wrote_in_a_conversation_is_answered_by_a_partial_index_of_the_same_condition():
    indexes = {index.name: index for index in Message._meta.indexes}
    by_a_person = indexes["message_conv_by_a_person"]
    assert by_a_person.fields == ["conversation"] and by_a_person.condition == scope.WRITTEN_BY_A_PERSON
