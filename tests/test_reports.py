"""The Reports figures against a week whose answers are known (tests/reports_dataset.py), each as
docs/reports.md defines it, and the page, its drill-downs and its CSV: staff only, escaped, equal to each other.
"""

from __future__ import annotations

import csv
import io
import re
from datetime import date, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from support.reports import decisions, money, outcomes, scope
from support.reports.figures import COUNTS, Filters, conversations_behind, report, series
from support.reports.formats import HANDOVER_REASONS
from support.web.views import reports as reports_views
from tests.desk_factories import make_user
from tests.reports_dataset import Week

pytestmark = pytest.mark.django_db

WEEK = Filters(start=date(2026, 11, 23), end=date(2026, 11, 29), time_zone="UTC")


@pytest.fixture
def week():
    return Week()


def values(filters: Filters = WEEK) -> dict:
    return {key: row["value"] for key, row in report(filters)["figures"].items()}


def names(week, filters: Filters, figure: str) -> set[str]:
    pks = set(conversations_behind(filters, figure).values_list("pk", flat=True))
    return {name for name, c in week.c.items() if c.pk in pks}


def test_it_counts_the_new_conversations_of_the_range_and_those_the_agent_worked(week):
    got = values()
    assert got["new_conversations"] == 12 and got["agent_involved"] == 11
    assert got["involvement_rate"] == round(11 / 12, 4)


def test_resolved_by_the_agent_needs_it_done_with_no_person_and_a_last_outcome_resolved(week):
    assert names(week, WEEK, "resolved_by_agent") == {"resolved", "hand_back", "reopened", "approved", "automatic"}
    assert values()["resolution_rate"] == round(5 / 11, 4)


def test_a_hand_back_then_resolved_counts_for_the_agent_and_as_a_hand_over(week):
    assert "hand_back" in names(week, WEEK, "resolved_by_agent") and "hand_back" in names(week, WEEK, "handed_over")


def test_a_reopened_conversation_counts_once_and_only_once_done_again(week):
    assert "reopened" in names(week, WEEK, "resolved_by_agent")
    week.message(week.c["reopened"], "customer", timezone.now() - timedelta(hours=1), "Still broken.")  # lately
    assert "reopened" not in names(week, WEEK, "resolved_by_agent")


def test_a_person_approving_a_refund_is_not_taking_part(week):
    assert "approved" in names(week, WEEK, "resolved_by_agent")


def test_customer_confirmed_resolutions_are_counted_apart(week):
    assert names(week, WEEK, "resolved_confirmed") == {"resolved"}  # "reopened" was rated 3


def test_hand_overs_and_their_reasons_ranked(week):
    got = values()
    assert names(week, WEEK, "handed_over") == {"hand_back", "person", "expired"}
    assert got["handover_rate"] == round(3 / 11, 4)
    reasons = [(k.split(":", 1)[1], v) for k, v in got.items() if k.startswith("handover_reason:")]
    assert reasons == [("approval_expired", 1), ("escalated", 1), ("turn_limit", 1)]


def test_an_expired_approval_hands_over_and_counts_as_expired_not_decided(week):
    got = values()
    assert got["expired"] == 1 and "expired" in names(week, WEEK, "handed_over")
    assert got["time_to_decision:all:all:p50"] == 120.0  # 60, 120, 300: the expired one is not a decision


def test_approvals_asked_and_how_each_ended(week):
    got = values()
    assert (got["approvals_asked"], got["approved_as_asked"], got["approved_changed"], got["rejected"],
            got["expired"]) == (4, 1, 1, 1, 1)  # the policy's automatic approval was asked of nobody


def test_time_to_decision_p50_and_p90_by_decider_and_by_channel(week):
    got = values()
    assert got["time_to_decision:all:all:p90"] == 264.0
    assert (got["time_to_decision:by_decider:alice:p50"], got["time_to_decision:by_decider:alice:p90"]) == (90.0, 114.0)
    assert got["time_to_decision:by_decider:bob:p50"] == 300.0
    assert (got["time_to_decision:by_channel:console:p50"], got["time_to_decision:by_channel:slack:p50"],
            got["time_to_decision:by_channel:email:p50"]) == (60.0, 300.0, 120.0)


def test_time_to_decision_reads_one_duration_per_approval_not_two_datetimes(week):
    with CaptureQueriesContext(connection) as queries:
        decisions.decision_times(scope.approvals(WEEK))
    select = queries[0]["sql"].split(" FROM ")[0]
    assert '"took"' in select and select.count("requested_at") == 1 and select.count("decided_at") == 1


def test_refunds_count_and_amount_automatic_by_approval_and_by_staff(week):
    got = values()
    assert (got["refunds_automatic"], got["refunds_automatic_amount"]) == (1, "10.00")
    assert (got["refunds_by_approval"], got["refunds_by_approval_amount"]) == (2, "50.00")
    assert (got["refunds_by_staff"], got["refunds_by_staff_amount"]) == (1, "15.00")


def test_csat_for_the_agent_alone_against_conversations_with_a_person(week):
    got = values()
    assert (got["rated_agent_only"], got["csat_agent_only"], got["csat_agent_only_average"]) == (2, 0.5, 4.0)
    assert (got["rated_with_person"], got["csat_with_person"], got["csat_with_person_average"]) == (1, 0.0, 2.0)


def test_first_response_and_time_to_resolution_agent_against_people(week):
    got = values()
    assert (got["first_response:by_who:agent:p50"], got["first_response:by_who:agent:p90"]) == (10.0, 30.0)
    assert got["first_response:by_who:people:p50"] == 600.0
    assert (got["time_to_resolution:by_who:agent:p50"], got["time_to_resolution:by_who:agent:p90"]) == (10.0, 4404.0)
    assert got["time_to_resolution:by_who:people:p50"] == 3600.0


def test_model_cost_per_conversation_and_per_resolution(week):
    got = values()
    assert got["model_cost"] == "0.130000"
    assert got["cost_per_conversation"] == round(0.13 / 11, 4) and got["cost_per_resolution"] == 0.026


def test_abandoned_means_the_customer_never_answered_the_agents_question(week):
    assert names(week, WEEK, "abandoned") == {"abandoned"}


def test_each_drill_down_lists_exactly_what_its_number_counts(week):
    got = values()
    for key in COUNTS:
        assert conversations_behind(WEEK, key).count() == got[key], key


def test_filters_narrow_by_channel_language_version_and_team_member(week):
    def new(**kw):
        return names(week, Filters(start=WEEK.start, end=WEEK.end, time_zone="UTC", **kw), "new_conversations")

    assert new(channel="email") == {"abandoned", "rejected"}
    assert new(language="de") == {"abandoned"}
    assert new(profile_version=1) == {"resolved"}
    assert new(staff_user_id=week.alice.pk) == {"reopened", "approved", "rejected", "no_run"}
    assert values(Filters(start=WEEK.start, end=WEEK.end, staff_user_id=week.bob.pk))["approvals_asked"] == 1


def test_the_range_is_read_in_the_leads_time_zone(week):
    berlin = Filters(start=WEEK.start, end=WEEK.end, time_zone="Europe/Berlin")
    assert "before" in names(week, berlin, "new_conversations")
    assert "before" not in names(week, WEEK, "new_conversations")


def test_a_series_over_days_and_weeks_adds_up_to_the_figure(week):
    days = series(WEEK, "new_conversations", by="day")
    assert [n for _, n in days] == [2, 2, 2, 2, 2, 1, 1] and days[0][0] == date(2026, 11, 23)
    assert series(WEEK, "approvals_asked", by="week") == [(date(2026, 11, 23), 4)]


# -- the page, its drill-downs and its CSV: staff read them; a customer or a signed-out visitor does not -------

PAGE, CSV = "/console/reports/", "/console/reports/export.csv"
QUERY = "?start=2026-11-23&end=2026-11-29"


@pytest.fixture
def lead(client, week):
    client.force_login(week.alice)
    return client


def page_figures(html: str) -> dict[str, str]:
    return dict(re.findall(r'data-figure="([^"]+)" data-value="([^"]*)"', html))


def test_only_staff_may_read_the_reports_page_its_drill_downs_and_its_csv(client, week):
    for url in (PAGE, CSV, "/console/reports/new_conversations/"):
        assert client.get(url).status_code == 302  # signed out: to the login page
    client.force_login(make_user("pat", staff=False))
    for url in (PAGE, CSV, "/console/reports/new_conversations/"):
        response = client.get(url)
        assert response.status_code == 302 and "/login" in response["Location"]


def test_the_page_shows_every_figure_and_the_csv_equals_it(lead):
    html = lead.get(PAGE + QUERY).content.decode()
    shown = page_figures(html)
    assert shown["new_conversations"] == "12" and shown["resolved_by_agent"] == "5"
    rows = list(csv.DictReader(io.StringIO(lead.get(CSV + QUERY).content.decode())))
    assert {r["figure"]: r["value"] for r in rows} == {k.replace("&#x27;", "'"): v for k, v in shown.items()}
    assert set(shown) == set(report(WEEK)["figures"])


def test_the_page_defaults_to_the_last_seven_days(lead):
    html = lead.get(PAGE).content.decode()
    today = timezone.localdate()
    last_week = Filters(start=today - timedelta(days=6), end=today)
    assert f"{last_week.start:%-d %b %Y} to {today:%-d %b %Y}" in html
    assert page_figures(html)["new_conversations"] == str(values(last_week)["new_conversations"])


def test_a_wrong_range_is_said_and_the_last_seven_days_shown(lead):
    response = lead.get(PAGE + "?start=2026-11-29&end=2026-11-23")
    assert response.status_code == 400 and "must not come after" in response.content.decode()


def test_each_number_on_the_page_links_to_a_list_as_long_as_it(lead):
    html = lead.get(PAGE + QUERY).content.decode()
    for key in COUNTS:
        assert f'href="/console/reports/{key}/{QUERY}' in html.replace("&amp;", "&"), key
        drill = lead.get(f"/console/reports/{key}/{QUERY}").content.decode()
        assert drill.count('data-testid="drill-row"') == int(page_figures(html)[key]), key


def test_the_drill_down_links_each_conversation_and_an_unknown_figure_is_404(lead, week):
    drill = lead.get(f"/console/reports/abandoned/{QUERY}").content.decode()
    assert f'/console/conversations/{week.c["abandoned"].public_id}/' in drill
    assert lead.get("/console/reports/nothing/").status_code == 404


def test_names_on_the_page_and_in_the_csv_are_data(lead, week):
    week.bob.username = "=HYPERLINK(\"x\")<b>"
    week.bob.save()
    html = lead.get(PAGE + QUERY).content.decode()
    assert "<b>" not in html.split("<main")[1] and "&lt;b&gt;" in html
    drill = lead.get(f"/console/reports/new_conversations/{QUERY}").content.decode()
    assert "Customer abandoned &lt;b&gt;" in drill
    cells = [cell for line in csv.reader(io.StringIO(lead.get(CSV + QUERY).content.decode())) for cell in line]
    assert any(cell.startswith('Decided by =HYPERLINK("x")<b>') for cell in cells)
    assert not any(cell.startswith(("=", "+", "-", "@")) for cell in cells)


def test_the_reasons_are_next_to_the_hand_overs_and_the_decision_times_next_to_the_approvals(lead):
    headings = re.findall(r'<h2 id="group-\d+">([^<]+)</h2>', lead.get(PAGE + QUERY).content.decode())
    assert headings[:6] == ["Conversations", "Resolution", "Hand-overs", "Hand-over reasons", "Approvals",
                            "Time to decision"]


def test_a_series_counts_each_day_in_the_leads_time_zone(week):
    berlin = Filters(start=WEEK.start, end=WEEK.end, time_zone="Europe/Berlin")
    assert series(berlin, "new_conversations")[0] == (date(2026, 11, 23), 3)  # Sunday 23:30 UTC is Monday there


def test_a_take_over_handed_back_without_a_word_is_still_a_person_taking_part(week):
    c = week.c["automatic"]  # resolved by the agent; then someone took it over and handed it back, silently
    week.message(c, "system", c.created_at + timedelta(seconds=60), "Sam joined the conversation.", user=week.bob)
    assert "automatic" not in names(week, WEEK, "resolved_by_agent")


def test_the_pages_filters_narrow_the_cards_the_drill_downs_and_the_csv_alike(lead, week):
    query = QUERY + f"&channel=email&member={week.alice.pk}"
    assert page_figures(lead.get(PAGE + query).content.decode())["new_conversations"] == "1"  # "rejected"
    drill = lead.get(f"/console/reports/new_conversations/{query}").content.decode()
    assert drill.count('data-testid="drill-row"') == 1 and str(week.c["rejected"].public_id) in drill
    rows = {r["figure"]: r["value"] for r in csv.DictReader(io.StringIO(lead.get(CSV + query).content.decode()))}
    assert rows["new_conversations"] == "1" and rows["rejected"] == "1"


def test_a_long_drill_down_is_paged_and_says_its_whole_count(lead, monkeypatch):
    monkeypatch.setattr(reports_views, "PER_PAGE", 5)
    first = lead.get(f"/console/reports/new_conversations/{QUERY}").content.decode()
    assert first.count('data-testid="drill-row"') == 5 and "12 conversations" in first
    last = lead.get(f"/console/reports/new_conversations/{QUERY}&page=3").content.decode()
    assert last.count('data-testid="drill-row"') == 2 and "Page 3 of 3" in last


def test_hand_over_reasons_are_shown_in_plain_words_and_their_codes_stay_exact_in_the_csv(lead):
    html = lead.get(PAGE + QUERY).content.decode()
    assert "Step limit reached" in html and "An approval nobody decided in time" in html
    assert "turn limit" not in html and "approval expired" not in html
    rows = {r["figure"]: r for r in csv.DictReader(io.StringIO(lead.get(CSV + QUERY).content.decode()))}
    assert rows["handover_reason:turn_limit"]["label"] == "Step limit reached"
    assert rows["handover_reason:escalated"]["label"] == "The agent asked for a person"


def test_every_hand_over_reason_has_words():
    assert set(HANDOVER_REASONS) == {*outcomes.HANDOVER_STOPS, "handed_to_person", outcomes.APPROVAL_EXPIRED}


def test_model_cost_sums_each_conversations_runs_rather_than_joining_every_run(week):
    with CaptureQueriesContext(connection) as queries:
        assert str(money.model_cost(scope.conversations(WEEK))) == values()["model_cost"] == "0.130000"
    assert '"conversation_id" IN (SELECT' not in queries[0]["sql"]
