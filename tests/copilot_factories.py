"""Builders for the copilot's tests: the demo's hand-overs as a person finds them, and a copilot run worked at once.

    conversation = handed_over(queued, desk.maya, sam)   # SU-41533 above the agent's limit, taken over by Sam
    conversation = disputed(queued, desk.maya, sam)      # a refund staff declined, disputed, taken over
    run = ask(conversation, sam, "draft")                # asked and worked (no broker: `copilot_queued`)
"""

import pytest

from support import copilot
from support.desk import gate, runner, services, takeover
from support.models import Approval
from tests.desk_factories import make_user


@pytest.fixture
def sam(db):
    return make_user("sam", staff=True, first_name="Sam")


@pytest.fixture
def copilot_queued(monkeypatch):
    """Copilot runs handed to a worker (no broker here)."""
    ids = []
    monkeypatch.setattr("support.desk.queue.run_copilot", ids.append)
    return ids


def handed_over(queued, customer, person, text="I want a full refund for order SU-41533."):
    """The agent hands the conversation over (a refund above its limit) and `person` takes it."""
    conversation = services.conversation_start(customer=customer)
    services.conversation_post_message(conversation=conversation, text=text)
    runner.run_execute(queued.pop())
    takeover.conversation_take_over(conversation=conversation, user=person)
    conversation.refresh_from_db()
    return conversation


def disputed(queued, customer, person):
    """A refund the agent asked for, rejected by staff; the customer disputes it, the agent hands it over."""
    conversation = services.conversation_start(customer=customer)
    services.conversation_post_message(conversation=conversation, text="I'd like a refund for order SU-41310 please.")
    assert runner.run_execute(queued.pop()) == "awaiting_approval"
    approval = Approval.objects.get(decision="", run__conversation=conversation)
    gate.approval_decide(approval=approval, user=person, approve=False, reason="The tea towels were used.")
    runner.run_execute(queued.pop())
    services.conversation_post_message(conversation=conversation, text="That's not fair, I want my refund for SU-41310.")
    runner.run_execute(queued.pop())
    takeover.conversation_take_over(conversation=conversation, user=person)
    conversation.refresh_from_db()
    return conversation


def ask(conversation, person, kind, question=""):
    run = copilot.copilot_start(conversation=conversation, user=person, kind=kind, question=question)
    copilot.copilot_execute(run.pk)
    run.refresh_from_db()
    return run
