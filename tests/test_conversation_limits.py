"""Limits that hold for a whole conversation, not one run: a rejected action stays rejected however it is
reworded, and a conversation's daily budget cannot be renewed by writing again."""

import pytest

from support.desk import assistant, gate, runner, services
from support.models import Approval, Conversation, Message, Run, ToolCall
from tests.fake_model import ScriptedModel, answer, call, reply

pytestmark = pytest.mark.django_db(transaction=True)


def script(monkeypatch, *replies):
    model = ScriptedModel(*replies)
    monkeypatch.setattr(assistant, "shared_model", lambda: model)
    return model


def refund(amount, reason="parcel lost", order="SU-41310"):
    return call("issue_refund", {"order_id": order, "amount": amount, "reason": reason})


def results(conversation):
    return [m.content for m in conversation.messages.filter(role="tool").order_by("seq")]


def start_rejected(desk, queued, monkeypatch):
    """Maya asks for a refund on SU-41310; staff reject it."""
    script(monkeypatch, reply(calls=[refund("64.00")]))
    conversation = services.conversation_start(customer=desk.maya)
    services.conversation_post_message(conversation=conversation, text="My parcel SU-41310 never came.")
    assert runner.run_execute(queued.pop()) == "awaiting_approval"
    gate.approval_decide(approval=Approval.objects.get(), user=None, approve=False, reason="we need a photo")
    return conversation


def test_asking_again_for_a_rejected_refund_is_refused_without_paging_staff(desk, queued, monkeypatch):
    conversation = start_rejected(desk, queued, monkeypatch)
    model = script(monkeypatch, reply(calls=[refund("65.00", reason="please reconsider")]),
                   *answer("Staff declined the refund; a photo is needed.", "not_resolved"))
    assert runner.run_execute(queued.pop()) == "answered"
    model.assert_complete()
    assert Approval.objects.count() == 1  # no second card
    last = results(conversation)[-2]
    assert last.startswith("ERROR: not run: staff already rejected this action") and "we need a photo" in last


def test_insisting_past_the_limit_stops_the_run_and_tells_the_customer(desk, queued, monkeypatch, settings):
    settings.AGENT_ASKS_AFTER_REJECTION = 1
    conversation = start_rejected(desk, queued, monkeypatch)
    script(monkeypatch, reply(calls=[refund("64.00")]), reply(calls=[refund("63.00", reason="reworded")]))
    assert runner.run_execute(queued.pop()) == "rejected_again"
    assert Approval.objects.count() == 1
    conversation.refresh_from_db()
    assert conversation.status == Conversation.NEEDS_ATTENTION
    assert conversation.messages.last().author == Message.SYSTEM


def test_a_rejection_holds_in_the_next_run_of_the_conversation(desk, queued, monkeypatch):
    conversation = start_rejected(desk, queued, monkeypatch)
    script(monkeypatch, *answer("Staff declined it.", "not_resolved"))
    assert runner.run_execute(queued.pop()) == "answered"
    model = script(monkeypatch, reply(calls=[refund("64.00")]), *answer("I can't refund that.", "not_resolved"))
    services.conversation_post_message(conversation=conversation, text="Please refund me anyway!")
    assert runner.run_execute(queued.pop()) == "answered"
    model.assert_complete()
    assert Approval.objects.count() == 1 and "staff already rejected" in results(conversation)[-2]


def test_a_refund_on_another_order_is_not_the_rejected_action(desk, queued, monkeypatch):
    start_rejected(desk, queued, monkeypatch)
    script(monkeypatch, reply(calls=[refund("4.99", order="SU-41388")]))
    assert runner.run_execute(queued.pop()) == "awaiting_approval"
    assert Approval.objects.filter(decided_at__isnull=True).count() == 1


def test_writing_again_does_not_renew_the_conversations_daily_budget(desk, queued, monkeypatch, settings):
    settings.CONVERSATION_MAX_STEPS_PER_DAY = 3
    conversation = services.conversation_start(customer=desk.maya)
    outcomes = []
    for n in range(3):
        script(monkeypatch, reply(calls=[call("get_order", {"order_id": "SU-41210"})]), *answer("Delivered."))
        services.conversation_post_message(conversation=conversation, text=f"Where is SU-41210? ({n})")
        outcomes.append(runner.run_execute(queued.pop()))
        if outcomes[-1] != "answered":
            break
    assert outcomes == ["answered", "conversation_budget"]
    assert sum(Run.objects.filter(conversation=conversation).values_list("turns", flat=True)) == 3
    conversation.refresh_from_db()
    assert conversation.status == Conversation.NEEDS_ATTENTION
    assert "budget" in Run.objects.filter(conversation=conversation).first().detail


def test_the_daily_budget_counts_the_last_24_hours_by_the_databases_clock(desk, queued, monkeypatch, settings):
    """run_read sums the conversation's other runs created in the last 24 hours (Now() in the statement): a run of
    25 hours ago does not count, one of 23 hours ago does."""
    from datetime import timedelta

    from django.utils import timezone

    from support.desk import run_start

    settings.CONVERSATION_MAX_STEPS_PER_DAY = 3
    conversation = services.conversation_start(customer=desk.maya)
    for hours, turns in ((25, 40), (23, 2)):
        old = Run.objects.create(conversation=conversation, status=Run.STOPPED, turns=turns, prompt_tokens=10 * turns,
                                 cost_usd="0.5")
        Run.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(hours=hours))
    script(monkeypatch, reply(calls=[call("get_order", {"order_id": "SU-41210"})]), *answer("Delivered."))
    services.conversation_post_message(conversation=conversation, text="Where is SU-41210?")
    run_id = queued[-1]
    Run.objects.filter(pk=run_id).update(status=Run.RUNNING)
    spent = run_start.spent_today(run_start.run_read(run_id))
    assert (spent.turns, spent.prompt_tokens, float(spent.cost_usd)) == (2, 20, 0.5)
    Run.objects.filter(pk=run_id).update(status=Run.QUEUED)
    assert runner.run_execute(queued.pop()) == "conversation_budget"  # 2 before + 1 of its own reach 3


# -- requests waiting for a person -------------------------------------------------------------------------

def held_to_seller(n):
    """A seller message that waits for a person (it carries the customer's e-mail address)."""
    return call("message_seller", {"order_id": "SU-41207", "message": f"Write to maya@example.com (note {n})."})


def hand_over(n):
    return call("escalate_to_human", {"reason": f"reason {n}", "summary": "the case"})


def test_one_reply_cannot_flood_the_approval_queue(desk, queued, monkeypatch, settings):
    settings.ESCALATION_NEEDS_APPROVAL = True  # every hand-over waits for a person too
    settings.SELLER_MESSAGES_PER_CONVERSATION_PER_DAY = 100  # this limit alone would let 50 wait
    flagged = []
    monkeypatch.setattr(services, "conversation_flag", _recording(services.conversation_flag, flagged))
    calls = [held_to_seller(n) for n in range(50)] + [hand_over(n) for n in range(20)]
    script(monkeypatch, reply(calls=calls))
    conversation = services.conversation_start(customer=desk.maya)
    services.conversation_post_message(conversation=conversation, text="My parcel SU-41207 never came.")
    assert runner.run_execute(queued.pop()) == "awaiting_approval"
    assert Approval.objects.count() == settings.APPROVALS_WAITING_PER_CONVERSATION == 3
    refused = [r for r in results(conversation) if "requests already wait for a person" in r]
    assert len(refused) == 70 - 3
    assert all(r.startswith("ERROR: not run:") for r in refused)
    conversation.refresh_from_db()
    assert conversation.status == Conversation.NEEDS_ATTENTION
    assert len(flagged) == 1 and "waiting for a person" in flagged[0]


def test_a_card_still_waiting_from_another_run_counts(desk, queued, monkeypatch, settings):
    settings.APPROVALS_WAITING_PER_CONVERSATION = 2
    settings.SELLER_MESSAGES_PER_CONVERSATION_PER_DAY = 100
    flagged = []
    monkeypatch.setattr(services, "conversation_flag", _recording(services.conversation_flag, flagged))
    script(monkeypatch, reply(calls=[held_to_seller(1)]))
    conversation = services.conversation_start(customer=desk.maya)
    services.conversation_post_message(conversation=conversation, text="Please write to the seller.")
    assert runner.run_execute(queued.pop()) == "awaiting_approval"
    # Its run stopped with the call answered and the card left waiting (the database may hold such a card).
    services.message_append(conversation=conversation, author=Message.SYSTEM, run=Run.objects.get(),
                            wire={"role": "tool", "tool_call_id": ToolCall.objects.get().call_id, "content": "-"})
    Run.objects.update(status=Run.STOPPED)
    script(monkeypatch, reply(calls=[held_to_seller(2), held_to_seller(3)]), *answer("A person will check."))
    services.conversation_post_message(conversation=conversation, text="Two more please.")
    assert runner.run_execute(queued.pop()) == "awaiting_approval"
    assert Approval.objects.filter(decided_at__isnull=True).count() == 2
    assert sum("requests already wait for a person" in r for r in results(conversation)) == 1
    assert len(flagged) == 1


def _recording(flag, into):
    def recording(*, conversation_id, reason):
        into.append(reason)
        flag(conversation_id=conversation_id, reason=reason)
    return recording
