"""What the console reads of the copilot (support/static/support/console-copilot.js): with the copilot turned off
the GET is refused like the POST, so the conversation page shows none of it; on, it answers the contract's shape.
Sam is staff (a support agent)."""

from __future__ import annotations

import pytest

from support.desk import permissions
from tests.desk_factories import make_user, start_conversation


@pytest.fixture
def sam(client, db):
    user = make_user("sam", staff=True)
    user.groups.add(permissions.ensure_groups()[permissions.AGENTS])
    client.force_login(user)
    return client


def test_it_answers_the_console_with_the_summary_and_this_persons_runs(sam, demo):
    conversation = start_conversation(demo.maya)
    answer = sam.get(f"/api/staff/conversations/{conversation.public_id}/copilot")
    assert answer.status_code == 200
    assert answer.json() == {"summary": None, "runs": []}


def test_it_refuses_the_console_its_runs_when_the_copilot_is_turned_off(sam, demo, settings):
    settings.COPILOT_ENABLED = False
    conversation = start_conversation(demo.maya)
    answer = sam.get(f"/api/staff/conversations/{conversation.public_id}/copilot")
    assert answer.status_code == 403
    assert "turned off" in answer.json()["error"]
