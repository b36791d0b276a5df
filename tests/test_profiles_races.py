"""Two people moving the agent profile's live pointer at once, tried many times: one wins, the other is told and
nothing of theirs is written (no second number, no release row, the pointer where the winner put it).

Each trial releases both with a barrier, each in its own thread and so its own database connection. On SQLite a
write transaction takes the whole database, so the calls run one after the other there and no race is lost:
the file runs on PostgreSQL only (tests/test_races.py says the same).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from support import profiles
from support.desk import permissions
from support.models import ProfileRelease, ProfileVersion
from support.profiles import ProfileRefused
from tests.test_races import at_once, pytestmark  # noqa: F401  (PostgreSQL only, as there)
from tests.test_staff_permissions import member

TRIALS = 15


@pytest.fixture
def leads(demo):
    return member("lee", permissions.LEADS), member("kim", permissions.LEADS)


def test_two_people_publishing_the_same_draft_at_once_make_one_version(leads):
    lee, kim = leads
    for trial in range(TRIALS):
        profiles.draft_save(data=replace(profiles.live(), agent_name=f"Mila {trial}").as_data(), by=lee)
        before = ProfileRelease.objects.count()
        outcomes = at_once(lambda: profiles.draft_publish(by=lee), lambda: profiles.draft_publish(by=kim))
        won = [o for o in outcomes if isinstance(o, profiles.services.Released)]
        lost = [o for o in outcomes if isinstance(o, ProfileRefused)]
        assert len(won) == 1 and len(lost) == 1, outcomes
        assert lost[0].status in (404, 409)  # found it published, or found no draft left
        assert ProfileRelease.objects.count() == before + 1
        assert profiles.live().agent_name == f"Mila {trial}" and profiles.live().version == won[0].version.number
    numbers = sorted(ProfileVersion.objects.filter(state="published").values_list("number", flat=True))
    assert numbers == list(range(1, TRIALS + 2))  # gapless: a loser never took a number


def test_two_rollbacks_at_once_leave_the_pointer_where_the_one_that_won_put_it(leads):
    lee, kim = leads
    for name in ("Two", "Three"):
        profiles.draft_save(data=replace(profiles.live(), agent_name=name).as_data(), by=lee)
        profiles.draft_publish(by=lee)
    for _ in range(TRIALS):
        before = ProfileRelease.objects.count()
        outcomes = at_once(lambda: profiles.version_rollback(number=1, by=lee),
                           lambda: profiles.version_rollback(number=2, by=kim))
        won = [o for o in outcomes if isinstance(o, ProfileRelease)]
        # Serially both may succeed (one after the other, each from what the other left); at once, one is told.
        assert 1 <= len(won) <= 2 and all(isinstance(o, (ProfileRelease, ProfileRefused)) for o in outcomes)
        assert ProfileRelease.objects.count() == before + len(won)
        mine = list(ProfileRelease.objects.order_by("-pk")[:len(won)])
        assert profiles.live().version == mine[0].version.number
        if len(mine) == 2:  # one after the other: the later one moved the pointer from where the first left it
            assert mine[0].previous_id == mine[1].version_id
        profiles.version_rollback(number=3, by=lee)  # the next trial starts from version 3
