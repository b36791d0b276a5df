"""The copilot on the Reports page, on data with known answers: runs by kind asked in the range, drafts sent, the
share of those sent unchanged, and the copilot's cost apart from the agent's model cost.

Who: Sam and Alex (support agents) asked the copilot about Maya's conversation; one run was asked before the week."""

import re
from datetime import date, datetime
from datetime import timezone as tz
from decimal import Decimal

import pytest

from support.models import Conversation, CopilotRun, Customer, Message
from support.reports.figures import Filters, report
from tests.desk_factories import make_user

pytestmark = pytest.mark.django_db

WEEK = Filters(start=date(2026, 11, 23), end=date(2026, 11, 29), time_zone="UTC")


@pytest.fixture
def asked():
    sam, alex = make_user("sam", staff=True), make_user("alex", staff=True)
    conversation = Conversation.objects.create(customer=Customer.objects.create(name="Maya", email="m@example.com"))
    sent = Message.objects.create(conversation=conversation, seq=1, role="assistant", author=Message.STAFF,
                                  content="Hello")

    def run(kind, who, day, cost, unchanged=None):
        row = CopilotRun.objects.create(conversation=conversation, requested_by=who, kind=kind, status="done",
                                        cost_usd=Decimal(cost), sent_message=sent if unchanged is not None else None,
                                        sent_unchanged=unchanged, edit_distance=None if unchanged is None else
                                        (0 if unchanged else 12))
        CopilotRun.objects.filter(pk=row.pk).update(created_at=datetime(2026, 11, day, 10, tzinfo=tz.utc))

    run("draft", sam, 24, "0.002000", unchanged=True)
    run("draft", sam, 25, "0.003000", unchanged=False)
    run("draft", alex, 25, "0.001000", unchanged=True)
    run("draft", alex, 26, "0.001000")  # not sent
    run("summary", sam, 26, "0.000500")
    run("ask", alex, 27, "0.000250")
    run("draft", sam, 20, "0.500000", unchanged=True)  # before the week
    return sam, alex


def test_it_counts_runs_by_kind_drafts_sent_the_share_unchanged_and_their_cost(asked):
    figures = report(WEEK)["figures"]
    assert {k: figures[f"copilot_runs:{k}"]["value"] for k in ("draft", "summary", "suggest", "ask")} == {
        "draft": 4, "summary": 1, "suggest": 0, "ask": 1}
    assert figures["copilot_drafts_sent"]["value"] == 3
    assert figures["copilot_sent_unchanged"]["value"] == round(2 / 3, 4)
    assert figures["copilot_cost"] == {"group": "Copilot", "label": "Copilot cost (apart from the agent's)",
                                       "value": "0.007750", "unit": "usd", "drill": None}
    assert Decimal(figures["model_cost"]["value"]) == 0  # the agent's cost holds none of the copilot's


def test_the_staff_filter_keeps_the_runs_that_person_asked_for(asked):
    sam, _ = asked
    figures = report(Filters(start=WEEK.start, end=WEEK.end, time_zone="UTC", staff_user_id=sam.pk))["figures"]
    assert figures["copilot_runs:draft"]["value"] == 2 and figures["copilot_sent_unchanged"]["value"] == 0.5


def test_the_page_shows_the_copilots_figures(asked, client):
    sam, _ = asked
    client.force_login(sam)
    html = client.get("/console/reports/?start=2026-11-23&end=2026-11-29").content.decode()
    shown = dict(re.findall(r'data-figure="([^"]+)" data-value="([^"]*)"', html))
    assert shown["copilot_drafts_sent"] == "3" and shown["copilot_runs:draft"] == "4"


def test_the_channel_filter_keeps_runs_on_conversations_the_customer_began_that_way(asked):
    Message.objects.create(conversation=CopilotRun.objects.first().conversation, seq=0, role="user",
                           author=Message.CUSTOMER, content="Hi", channel="email")
    by_mail = report(Filters(start=WEEK.start, end=WEEK.end, time_zone="UTC", channel="email"))["figures"]
    by_widget = report(Filters(start=WEEK.start, end=WEEK.end, time_zone="UTC", channel="widget"))["figures"]
    assert by_mail["copilot_runs:draft"]["value"] == 4 and by_widget["copilot_runs:draft"]["value"] == 0
