"""The agent profile in a real worker process: a version published here, in another process, reaches the worker's
next run at once (no restart, no stale copy), and an earlier run keeps the version it was queued with."""

from dataclasses import replace

import pytest

from support import profiles
from support.desk import permissions
from support.models import Approval, Run
from support.profiles import Limits
from tests.test_staff_permissions import member

from .conftest import ask, wait_run

pytestmark = pytest.mark.django_db(transaction=True)

WHERE = "Where is my order SU-41210?"


def test_a_version_published_elsewhere_reaches_the_workers_next_run(demo, worker):
    worker()
    _, _, first = ask(demo.maya, WHERE)
    first = wait_run(first, Run.STOPPED)
    assert first.stop_reason == "answered" and first.profile_version.number == 1

    lee = member("lee", permissions.LEADS)
    gated = replace(profiles.live(), limits=Limits(gated_tools=("get_order",)))
    profiles.draft_save(data=gated.as_data(), by=lee)
    assert profiles.draft_publish(by=lee).version.number == 2

    conversation, _, second = ask(demo.maya, WHERE)
    second = wait_run(second, Run.AWAITING_APPROVAL)  # the worker read version 2: get_order waits for a person
    assert second.profile_version.number == 2
    assert Approval.objects.get(run=second).tool_name == "get_order"
    assert Run.objects.get(pk=first.pk).profile_version.number == 1
