"""Routing under races: hand-overs flagged at the same moment, each in its own thread, database connection and
transaction (tests/test_races.py's at_once), still spread over the team as some serial order would: each
routing counts what the ones before it wrote. Without the routing lock both would read the same loads and pick
the same person.

Who: Sam and Alex are Support agents with a console open (marked online).
"""

from __future__ import annotations

import time
from collections import Counter

import pytest
from django.conf import settings
from django.db import transaction

from support.desk import services
from support.live import presence
from support.models import Conversation
from tests.desk_factories import make_user, start_conversation
from tests.test_races import at_once

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql",
                       reason="SQLite runs write transactions one at a time (BEGIN IMMEDIATE): no race to lose"),
]

TRIALS = 10


@pytest.fixture
def team(db):
    people = [make_user("sam", staff=True, first_name="Sam"), make_user("alex", staff=True, first_name="Alex")]
    for person in people:
        presence.mark_online(person.pk, "tab-1")
    return people


def flag(conversation):
    """A hand-over as the runner makes it: flagged inside a transaction that goes on a little after routing
    (its notice and run), so a second routing meanwhile cannot see what this one wrote until it commits."""
    def call():
        with transaction.atomic():
            services.conversation_flag(conversation_id=conversation.pk, reason="the agent handed this over")
            time.sleep(0.05)  # the rest of the runner's transaction; widens the window, asserts nothing
        return Conversation.objects.get(pk=conversation.pk).routed_to_id
    return call


def give_back(conversations):
    """Everyone back at no open work, so the next trial starts even."""
    Conversation.objects.filter(pk__in=[c.pk for c in conversations]).update(status=Conversation.OPEN)


def test_two_hand_overs_at_once_go_to_two_different_people(demo, team):
    for _ in range(TRIALS):
        conversations = [start_conversation(demo.maya) for _ in range(2)]
        outcomes = at_once(*(flag(c) for c in conversations))
        assert sorted(outcomes) == sorted(p.pk for p in team)
        give_back(conversations)


def test_four_hand_overs_at_once_give_each_of_two_people_two(demo, team):
    for _ in range(TRIALS // 2):
        conversations = [start_conversation(demo.maya) for _ in range(4)]
        outcomes = at_once(*(flag(c) for c in conversations))
        assert Counter(outcomes) == {team[0].pk: 2, team[1].pk: 2}
        give_back(conversations)
