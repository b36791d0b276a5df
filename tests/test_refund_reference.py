"""Words and numbers for people: a refund's short reference (RF-7K2M9) wherever the customer or the agent
reads about it, and waits said as a person says them."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from support.customers import words
from support.desk import services, staff_actions
from support.models import Message, Refund
from support.models.shop import REFERENCE_ALPHABET, new_refund_reference
from support.tools.refunds import issue_refund

REFERENCE = re.compile(rf"RF-[{REFERENCE_ALPHABET}]{{5}}")


def test_the_alphabet_has_no_look_alikes():
    assert not set("01OILUV") & set(REFERENCE_ALPHABET)
    assert all(REFERENCE.fullmatch(new_refund_reference()) for _ in range(200))


def test_the_agents_refund_result_gives_the_short_reference_not_the_uuid(ctx_for):
    result = issue_refund(ctx_for("maya@example.com", call_id="call_ref"), order_id="SU-41310", amount="10.00",
                          reason="test")
    refund = Refund.objects.get(tool_call_id="run-test:call_ref")
    assert REFERENCE.fullmatch(result["refund_id"]) and result["refund_id"] == refund.reference
    assert str(refund.public_id) not in str(result)


def test_every_refund_gets_its_own_reference_even_when_one_is_drawn_twice(demo, monkeypatch):
    order = demo.orders["SU-41310"]
    first = Refund.objects.create(order=order, amount=Decimal("1.00"), reason="one")
    drawn = iter([first.reference, "RF-ABCDE"])  # the next draws: taken again, then a free one
    monkeypatch.setattr("support.models.shop.new_refund_reference", lambda: next(drawn))
    second = Refund.objects.create(order=order, amount=Decimal("1.00"), reason="two", reference=first.reference)
    assert second.reference == "RF-ABCDE"
    assert Refund.objects.filter(reference=first.reference).count() == 1


def test_the_seeded_refunds_have_distinct_references(demo):
    references = list(Refund.objects.values_list("reference", flat=True))
    assert references and all(REFERENCE.fullmatch(r) for r in references)
    assert len(set(references)) == len(references)


def test_a_person_refunding_tells_the_customer_the_reference(demo, django_user_model, monkeypatch):
    monkeypatch.setattr("support.desk.queue.run_agent", lambda run_id, **ids: None)
    lead = django_user_model.objects.create_user("lea", is_staff=True, first_name="Lea")
    from django.core.management import call_command

    call_command("migrate", "support", verbosity=0)  # the staff groups exist (created by a migration)
    lead.groups.add(Group.objects.get(name="Support leads"))
    conversation = services.conversation_start(customer=demo.maya)
    action = staff_actions.refund_issue(conversation=conversation, user=lead, order_id="SU-41310", amount="5.00",
                                        reason="goodwill")
    refund = Refund.objects.get(public_id=action.result["refund_id"])
    notice = conversation.messages.filter(author=Message.SYSTEM).order_by("-seq").first().content
    assert f"(refund reference {refund.reference})" in notice
    assert action.result["reference"] == refund.reference
    client = Client()
    client.force_login(lead)
    context = client.get(f"/api/staff/conversations/{conversation.public_id}/context").json()
    listed = [r for o in context["orders"] for r in o.get("refunds", [])]
    assert refund.reference in [r["reference"] for r in listed]


@pytest.mark.parametrize("seconds, said", [(3, "a few seconds"), (42, "42 seconds"), (60, "about a minute"),
                                           (61, "about a minute"), (125, "3 minutes"), (3600, "60 minutes")])
def test_waits_are_said_as_a_person_says_them(seconds, said):
    assert words.wait_words(seconds) == said



def test_a_reason_ending_in_a_full_stop_is_not_given_a_second_one():
    from support.agent.summary import handoff_summary
    from tests.test_summary import HISTORY, call

    history = [*HISTORY[:-2], {"role": "assistant", "content": "", "tool_calls": [call(
        "c4", "escalate_to_human", reason="The customer wants a person first.", summary="Asked for a person.")]},
        {"role": "tool", "tool_call_id": "c4", "content": '{"status": "escalated"}'}]
    left = handoff_summary(history, "escalated", "").splitlines()[-1]
    assert left == "Left for you: The customer wants a person first. Reply to the customer here."
