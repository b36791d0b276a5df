"""Yesterday's provisional figures: a day that ended but is not closed yet is counted by the beat every few
minutes into provisional rows (an UPSERT per slice), report() and the charts read them instead of counting the
day on every read, with the same numbers as the live computation at the moment they were counted; today stays
live; once the day closes the roll-up answers for it. docs/reports.md: the daily roll-up."""

from __future__ import annotations

from dataclasses import replace
from datetime import date, datetime, timedelta, timezone as tz
from unittest import mock

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django.db.models import Q

from support import tasks
from support.models import Approval, Conversation, Message, ProvisionalReportDay, Rating, ReportDay, Run
from support.reports import daily, outcomes, rollup, scope, timing
from support.reports.figures import Filters, charts, conversations_behind, report
from support.web.views.reports import CHARTED
from tests.reports_dataset import Week

pytestmark = pytest.mark.django_db

YESTERDAY, TODAY = date(2026, 11, 30), date(2026, 12, 1)
NOW = datetime(2026, 12, 1, 9, tzinfo=tz.utc)  # the 30th ended 9 hours ago: not closed (REPORTS_IDLE_HOURS = 24)
TWO_DAYS = Filters(start=YESTERDAY, end=TODAY, time_zone="UTC")
SLICES = [TWO_DAYS, replace(TWO_DAYS, channel="email"), replace(TWO_DAYS, channel="widget"),
          replace(TWO_DAYS, language="de"), replace(TWO_DAYS, language="en"), replace(TWO_DAYS, profile_version=1)]


def at(d: date, hour: int, minute: int = 0) -> datetime:
    return datetime(d.year, d.month, d.day, hour, minute, tzinfo=tz.utc)


class Yesterday(Week):
    """Monday the 30th, with the edge cases a day that has not closed yet meets, and a conversation today."""

    def _build(self):
        # resolved at 00:31 on the 30th: idle (so resolved by the agent) from 00:31 on the 1st, after midnight
        c = self.conversation("idle_resolved", at(YESTERDAY, 0, 30))
        self.run(c, 60, outcome="resolved", version=self.version)
        Rating.objects.create(conversation=c, score=5, occasion=Rating.RESOLVED)
        # resolved, closed by alice, reopened by the customer after midnight: not closed, not idle
        c = self.conversation("reopened", at(YESTERDAY, 10))
        self.run(c, 10, outcome="resolved")
        Conversation.objects.filter(pk=c.pk).update(closed_at=c.created_at + timedelta(seconds=100),
                                                    closed_by=self.alice)
        self.message(c, Message.CUSTOMER, at(TODAY, 1), "It came broken.")
        # an approval asked at 22:00 on the 30th, approved by bob at 08:00 the next day; by e-mail, in German
        c = self.conversation("decided_next_day", at(YESTERDAY, 22), channel="email", language="de")
        r = self.run(c, 10, outcome="not_resolved")
        self.approval(c, r, asked={"amount": "20.00"}, ran={"amount": "20.00"}, decision=Approval.APPROVED,
                      by=self.bob, via=Approval.SLACK, after=10 * 3600 - 5)
        self.refund(c, "refund-next-day", "20.00")
        # an approval still pending; the turn limit handed it over; bob answered; rated 2
        c = self.conversation("handed", at(YESTERDAY, 12))
        r = self.run(c, 30, stop="turn_limit", outcome="handed_to_person")
        self.approval(c, r, asked={"amount": "35.00"})
        self.message(c, Message.STAFF, c.created_at + timedelta(seconds=600), "I am on it.", user=self.bob)
        Rating.objects.create(conversation=c, score=2, occasion=Rating.CLOSED)
        # today: counted live
        c = self.conversation("today", at(TODAY, 8))
        self.run(c, 10, outcome="resolved")


@pytest.fixture
def yesterday(settings):
    settings.TIME_ZONE = "UTC"
    return Yesterday()


@pytest.fixture
def clock():
    """timezone.now(), set by the test: the live figures and the beat read the same moment."""
    with mock.patch("django.utils.timezone.now", return_value=NOW) as now:
        yield now


def names(dataset: Week, filters: Filters, figure: str, conversation: str = "pk") -> set[str]:
    ids = set(conversations_behind(filters, figure).values_list(conversation, flat=True))
    return {name for name, c in dataset.c.items() if c.pk in ids}


def test_the_provisional_rows_equal_the_live_computation_for_the_same_days_for_every_slice(yesterday, clock):
    expected = {f: report(f)["figures"] for f in SLICES}
    series = {f: charts(f, CHARTED) for f in SLICES}
    day = replace(TWO_DAYS, end=YESTERDAY)
    assert names(yesterday, day, "resolved_by_agent") == {"idle_resolved"}  # idle after midnight; reopened not
    assert names(yesterday, day, "approved_as_asked", "run__conversation") == {"decided_next_day"}
    assert expected[TWO_DAYS]["approvals_asked"]["value"] == 2 and expected[TWO_DAYS]["resolved_confirmed"]["value"] == 1
    assert daily.provisional_days_refresh() == [YESTERDAY]
    for f in SLICES:
        assert rollup.rolled(f)[1] == [(TODAY, TODAY)], "yesterday is read from its rows, today counted live"
        got = report(f)
        assert got["figures"] == expected[f], f
        assert got["provisional"] == {"days": ["2026-11-30"], "as_of": NOW.isoformat()}
        assert charts(f, CHARTED) == series[f], f


def test_a_refresh_replaces_the_rows_so_yesterday_moves_until_it_closes(yesterday, clock):
    clock.return_value = at(TODAY, 0, 20)  # idle_resolved's last message is 23 h 49 min old: not idle yet
    daily.provisional_days_refresh()
    rows = ProvisionalReportDay.objects.count()
    assert report(TWO_DAYS)["figures"]["resolved_by_agent"]["value"] == 0
    clock.return_value = NOW
    daily.provisional_days_refresh()
    daily.provisional_days_refresh()  # a second beat: the same rows replaced again, not doubled
    assert ProvisionalReportDay.objects.count() == rows == 6  # all, 2 channels, en and de, version 1
    assert set(ProvisionalReportDay.objects.values_list("as_of", flat=True)) == {NOW}
    assert report(TWO_DAYS)["figures"]["resolved_by_agent"]["value"] == 1


def test_report_reads_yesterday_from_its_provisional_rows_and_counts_only_today(yesterday, clock):
    daily.provisional_days_refresh()
    row = ProvisionalReportDay.objects.get(day=YESTERDAY, dimension=ReportDay.ALL)
    row.counts["new_conversations"] += 100
    row.parts["model_cost"] = "5"
    row.save()
    with CaptureQueriesContext(connection) as queries:
        figures = report(replace(TWO_DAYS, end=YESTERDAY))["figures"]
    assert figures["new_conversations"]["value"] == 104 and figures["model_cost"]["value"] == "5.000000"
    read = " ".join(q["sql"] for q in queries)
    for table in ("support_message", "support_rating", "support_shopeffect", "support_run\"", "support_conversation"):
        assert table not in read, table  # yesterday is not counted (the approvals' decision times are read live)
    assert report(TWO_DAYS)["figures"]["new_conversations"]["value"] == 105  # and today is


def test_once_the_day_closes_the_roll_up_answers_for_it_and_its_provisional_rows_go(yesterday, clock):
    daily.provisional_days_refresh()
    clock.return_value = later = NOW + timedelta(days=1)  # the 30th closed; the 1st ended
    expected = report(TWO_DAYS)["figures"]
    assert daily.report_days_roll_up(now=later)[-1] == YESTERDAY
    assert daily.provisional_days_refresh() == [TODAY]
    assert set(ProvisionalReportDay.objects.values_list("day", flat=True)) == {TODAY}
    got = report(TWO_DAYS)
    assert got["figures"] == expected and got["provisional"]["days"] == ["2026-12-01"]
    assert rollup.rolled(TWO_DAYS)[1] == []


def test_without_provisional_rows_yesterday_is_counted_live(yesterday, clock):
    got = report(TWO_DAYS)
    assert got["provisional"] is None and rollup.rolled(TWO_DAYS)[1] == [(YESTERDAY, TODAY)]


def test_the_beat_counts_yesterday_again_every_five_minutes(yesterday, clock):
    assert settings.CELERY_BEAT_SCHEDULE["reports-provisional"] == {
        "task": "support.tasks.refresh_provisional_reports", "schedule": 300}
    assert tasks.refresh_provisional_reports() == 1  # the 30th
    assert ProvisionalReportDay.objects.filter(day=YESTERDAY, dimension=ReportDay.ALL).exists()


def test_the_page_says_as_of_when_yesterdays_figures_were_counted(client, yesterday, clock):
    daily.provisional_days_refresh()
    client.force_login(yesterday.alice)
    html = client.get("/console/reports/?start=2026-11-30&end=2026-12-01").content.decode()
    assert "Figures for 30 Nov as of 09:00" in html
    assert "as of" not in client.get("/console/reports/?start=2026-11-23&end=2026-11-29").content.decode()


# -- today is counted live, over indexed columns: what the planner needs to read only today's rows ------------

def test_the_runs_that_handed_over_and_the_expired_approvals_are_partial_indexes_of_the_figures_conditions():
    runs = {index.name: index for index in Run._meta.indexes}
    assert runs["run_conv_handed_over"].condition == Run.HANDED_OVER and outcomes.HANDOVER_STOPS is Run.HANDOVER_STOPS
    assert str(outcomes._handover_runs().query) == str(Run.objects.filter(Run.HANDED_OVER).query)
    assert runs["run_conv_taken_over"].condition == Q(stop_reason="taken_over")
    assert runs["run_conv_id"].fields == ["conversation", "id"]  # a conversation's runs, probed by index alone
    expired = {index.name: index for index in Approval._meta.indexes}["approval_run_expired"]
    assert expired.fields == ["run"] and expired.condition == Q(decision=Approval.EXPIRED)


def test_handed_over_asks_one_exists_over_the_conversations_runs_not_a_join_of_every_expired_approval():
    sql = str(conversations_behind(TWO_DAYS, "handed_over").query)
    assert sql.count('FROM "support_run"') == 1 and 'JOIN "support_run"' not in sql
    reasons = str(Run.objects.filter(outcomes._expired_approval()).query)
    assert 'FROM "support_approval"' in reasons and "JOIN" not in reasons


def test_first_response_looks_up_each_first_message_rather_than_grouping_every_message():
    with CaptureQueriesContext(connection) as queries:
        timing.first_response_seconds(scope.conversations(TWO_DAYS))
    sql = queries[0]["sql"]
    assert "GROUP BY" not in sql and "JOIN" not in sql and sql.count('FROM "support_message"') == 3


def test_a_charts_live_days_are_read_by_their_date_not_by_scanning_every_row():
    with CaptureQueriesContext(connection) as queries:
        charts(TWO_DAYS, ("new_conversations",))
    outer = queries[-1]["sql"].split(" IN (SELECT")[0]
    assert '"support_conversation"."created_at" >=' in outer and '"support_conversation"."created_at" <' in outer
