"""The morning digest: to the leads who opted in, once a day from REPORTS_DIGEST_HOUR, by e-mail and in Slack when
linked; its figures are the Reports page's for the same days, and it names the conversations most worth a look.

Who gets it: leads (the Support leads group) who opted in and have an address. Not: a lead who did not opt in,
an agent who opted in (not a lead), anyone before the hour or a second time the same day."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone as tz

import pytest
from django.conf import settings
from django.core import mail

from support.models import DigestOptIn, DigestSent, Rating, SlackAccount
from support.reports import digest
from support.reports.figures import Filters, report
from tests.desk_factories import make_user
from tests.reports_dataset import Week
from tests.slack_fixture import announced, slack_api  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db

FRIDAY = date(2026, 11, 27)  # yesterday: Thursday the 26th; a week before: the 19th; the week before: 19th-25th
EIGHT_ON_FRIDAY = datetime(2026, 11, 27, 8, tzinfo=tz.utc)


@pytest.fixture
def week(settings):
    settings.TIME_ZONE = "UTC"
    settings.REPORTS_DIGEST_HOUR = 7
    return Week()


@pytest.fixture
def lead(week):
    user = make_user("lena", staff=True, group="leads")
    user.email = "lena@sundry.example"
    user.save()
    DigestOptIn.objects.create(user=user)
    return user


def page(start: date, end: date) -> dict:
    return {k: row["value"] for k, row in report(Filters(start=start, end=end, time_zone="UTC"))["figures"].items()}


def test_the_digests_figures_equal_the_pages_for_the_same_days(week):
    rows = digest.digest_figures(FRIDAY)
    yesterday, week_ago = page(date(2026, 11, 26), date(2026, 11, 26)), page(date(2026, 11, 19), date(2026, 11, 19))
    week_before = page(date(2026, 11, 19), date(2026, 11, 25))
    assert [r["key"] for r in rows] == list(digest.FIGURES)
    for r in rows:
        assert (r["yesterday"], r["week_ago"], r["week_before"]) == (
            yesterday[r["key"]], week_ago[r["key"]], week_before[r["key"]]), r["key"]
    assert yesterday["new_conversations"] == 2 and week_before["new_conversations"] == 7


def test_a_lead_who_opted_in_gets_one_email_a_day_however_many_beats_run(lead):
    assert digest.digests_send(now=EIGHT_ON_FRIDAY) == ["lena@sundry.example"]
    assert digest.digests_send(now=EIGHT_ON_FRIDAY + timedelta(minutes=5)) == []
    assert len(mail.outbox) == 1 and DigestSent.objects.get(user=lead).sent_at is not None
    [sent] = mail.outbox
    assert sent.to == ["lena@sundry.example"] and "Thursday 26 November 2026" in sent.subject
    new = next(r for r in digest.digest_figures(FRIDAY) if r["key"] == "new_conversations")
    assert f"New conversations: {new['yesterday']} · {new['week_ago']} · {new['week_before']}" in sent.body
    assert digest.digests_send(now=EIGHT_ON_FRIDAY + timedelta(days=1)) == ["lena@sundry.example"]


def test_a_second_beat_that_finds_the_digest_claimed_sends_nothing(lead):
    DigestSent.objects.create(user=lead, day=FRIDAY)  # the other beat claimed it a moment ago
    assert digest.digests_send(now=EIGHT_ON_FRIDAY) == [] and mail.outbox == []


def test_nothing_is_sent_before_the_digest_hour(lead):
    assert digest.digests_send(now=EIGHT_ON_FRIDAY - timedelta(hours=1, seconds=1)) == []
    assert not DigestSent.objects.exists()


def test_only_leads_who_opted_in_get_it(lead):
    agent = make_user("aaron", staff=True)
    agent.email = "aaron@sundry.example"
    agent.save()
    DigestOptIn.objects.create(user=agent)
    quiet = make_user("quinn", staff=True, group="leads")
    quiet.email = "quinn@sundry.example"
    quiet.save()
    assert digest.digests_send(now=EIGHT_ON_FRIDAY) == ["lena@sundry.example"]


def test_it_names_the_conversations_most_worth_a_look_with_links(week):
    # yesterday (the 24th, for a Wednesday digest): "person" rated 2; add a repeated hand-over and a 1-star rating
    again = week.conversation("twice", week.day(24, 15))
    week.run(again, 10, stop="escalated", outcome="handed_to_person")
    week.run(again, 900, stop="turn_limit", outcome="handed_to_person")
    angry = week.conversation("angry", week.day(24, 16))
    week.run(angry, 10, outcome="resolved")
    Rating.objects.create(conversation=angry, score=1, occasion=Rating.RESOLVED)
    looks = digest.worth_a_look(date(2026, 11, 25))
    assert [(look.public_id, look.why) for look in looks] == [
        (str(angry.public_id), "rated 1 of 5"), (str(again.public_id), "handed over 2 times"),
        (str(week.c["person"].public_id), "rated 2 of 5")]
    assert looks[0].url == f"{settings.DESK_PUBLIC_URL.rstrip('/')}/console/conversations/{angry.public_id}/"


def test_the_longest_approval_waits_are_worth_a_look(week):
    looks = digest.worth_a_look(FRIDAY)  # the 26th: approvals decided after 300 s and after 60 s
    assert [look.why for look in looks] == ["an approval waited 5 min", "an approval waited 1 min"]
    assert looks[0].public_id == str(week.c["changed"].public_id)


def test_a_lead_with_a_linked_slack_account_gets_it_in_slack_too(lead, slack_api):
    SlackAccount.objects.create(user=lead, slack_user_id="U0LENA")
    digest.digests_send(now=EIGHT_ON_FRIDAY)
    [posted] = slack_api.calls_to("chat.postMessage")
    assert posted["channel"] == "U0LENA"
    assert "Thursday 26 November 2026" in posted["text"] and "/console/reports/" in posted["text"]
    assert len(mail.outbox) == 1


def test_the_beat_sends_digests_every_five_minutes():
    assert settings.CELERY_BEAT_SCHEDULE["reports-digest"] == {"task": "support.tasks.send_report_digests",
                                                               "schedule": 300}


# -- the switch on the Reports page: a lead's own, nobody else's -----------------------------------------------

def test_a_lead_turns_their_digest_on_and_off_on_the_reports_page(client, week):
    lead = make_user("lara", staff=True, group="leads")
    client.force_login(lead)
    assert b'data-testid="reports-digest"' in client.get("/console/reports/").content
    assert client.post("/console/reports/digest/", {"digest": "on"}).status_code == 302
    assert DigestOptIn.objects.filter(user=lead).exists()
    assert b"Turn off" in client.get("/console/reports/").content
    client.post("/console/reports/digest/", {"digest": "off"})
    assert not DigestOptIn.objects.filter(user=lead).exists()


def test_you_may_not_turn_the_digest_on_unless_you_are_a_lead(client, week):
    agent = make_user("aaron", staff=True)
    client.force_login(agent)
    assert b'data-testid="reports-digest"' not in client.get("/console/reports/").content
    assert client.post("/console/reports/digest/", {"digest": "on"}).status_code == 403
    assert not DigestOptIn.objects.exists()


def test_you_may_not_turn_it_on_without_a_staff_session_or_with_a_get(client, week):
    assert client.post("/console/reports/digest/", {"digest": "on"}).status_code in (302, 403)
    client.force_login(make_user("lara", staff=True, group="leads"))
    assert client.get("/console/reports/digest/?digest=on").status_code == 405
    assert not DigestOptIn.objects.exists()
