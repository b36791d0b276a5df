"""The conversation page's "Why this needs a person", live: what the customer wants, what the agent found
(policies by their titles, each order's balance as it is now), what people did since, and what is left: said
once each, about the matter at hand only, and read again after every change (a refund must not leave it
saying the old balance).

Who: Maya asks; the stand-in plays the agent (real runs, real tools on the demo shop). Lee is a Support lead
(refunds above the agent's ceiling); Sam a Support agent. Staff read the summary; a customer's token or a
non-staff account gets a 403 and reads nothing.
"""

from __future__ import annotations

import pytest
from django.test import Client

from support.customers import identity
from support.desk import inbox, runner, services, staff_actions, takeover
from support.desk.selectors_handover import handover_summary
from support.models import Conversation
from tests.desk_factories import make_user

pytestmark = pytest.mark.django_db(transaction=True)

CRACKED = "The monitor from order SU-41533 arrived cracked. I want a full refund."


def ask(queued, conversation, text) -> str:
    services.conversation_post_message(conversation=conversation, text=text)
    return runner.run_execute(queued.pop())


@pytest.fixture
def handed_over(desk, queued):
    """Maya's conversation: the agent handed her 480.00 refund of SU-41533 to a person."""
    conversation = services.conversation_start(customer=desk.maya)
    assert ask(queued, conversation, CRACKED) == "escalated"
    conversation.refresh_from_db()
    return conversation


def staff_read(client, conversation):
    return client.get(f"/api/staff/conversations/{conversation.public_id}/handover")


def test_it_says_what_the_customer_wants_what_was_found_and_what_is_left(handed_over):
    summary = handover_summary(handed_over)
    assert summary["wants"] == f"“{CRACKED}”"
    order, policies = summary["found"]
    assert order.startswith("SU-41533 (480.00 EUR, Brightside Electronics): delivered ")
    assert order.endswith("(DPD, Leeds); nothing refunded yet")
    assert policies == "Policies: Damaged items; Brightside Electronics: damaged goods"
    assert summary["done"] == []
    assert summary["left"] == ("Refund of 480.00 EUR on SU-41533 is above the 150.00 limit an agent may refund. "
                               "Reply to the customer here.")


def test_policies_are_named_by_their_titles_never_their_codes(handed_over):
    summary = handover_summary(handed_over)
    said = " ".join([summary["wants"], *summary["found"], summary["left"]])
    assert "POL-" not in said
    assert "POL-" not in Conversation.objects.get(pk=handed_over.pk).runs.get().summary  # the stored one too


def test_each_thing_is_said_once(handed_over):
    summary = handover_summary(handed_over)
    said = " ".join([summary["wants"], *summary["found"], summary["left"]])
    assert said.count("480.00") == 2  # the order's total, and the refund the agent may not make
    assert said.count("150.00") == 1 and said.count("Damaged items") == 1
    assert "The agent's note" not in Conversation.objects.get(pk=handed_over.pk).runs.get().summary


def test_a_refund_by_a_person_updates_the_balance_what_was_done_and_what_is_left(handed_over):
    lee = make_user("lee", staff=True, group="leads", first_name="Lee")
    staff_actions.refund_issue(conversation=handed_over, user=lee, order_id="SU-41533", amount="300.00",
                               reason="Cracked on arrival: partial refund agreed", key="k1")
    summary = handover_summary(handed_over)
    said = " ".join(summary["found"])
    assert "300.00 EUR refunded, 180.00 EUR still refundable" in said
    assert "refundable 480.00" not in said and "nothing refunded" not in said
    assert summary["done"] == ["Lee refunded 300.00 EUR on SU-41533"]
    assert "above the 150.00 limit" not in summary["left"]
    assert summary["left"].startswith("Nothing waits for an answer")

    # The customer writes; Lee takes over and answers; the customer writes again.
    services.conversation_post_message(conversation=handed_over, text="Thanks, what about the other 180?")
    assert "“Thanks, what about the other 180?”" in handover_summary(handed_over)["left"]
    takeover.conversation_take_over(conversation=handed_over, user=lee)
    takeover.conversation_staff_reply(conversation=handed_over, user=lee, text="The seller will decide on the rest.")
    summary = handover_summary(handed_over)
    assert summary["done"] == ["Lee refunded 300.00 EUR on SU-41533", "Lee replied to the customer"]
    assert summary["left"].startswith("Nothing waits for an answer")
    services.conversation_post_message(conversation=handed_over, text="OK, and when?")
    assert handover_summary(handed_over)["left"] == ("Answer the customer's latest message, “OK, and when?”; then "
                                                     "close the conversation, or hand it back to the agent.")


def test_an_earlier_question_the_agent_resolved_is_left_out(desk, queued):
    conversation = services.conversation_start(customer=desk.maya)
    assert ask(queued, conversation, "Where is my order SU-41210?") == "answered"
    assert ask(queued, conversation, CRACKED) == "escalated"
    conversation.refresh_from_db()
    summary = handover_summary(conversation)
    said = " ".join([summary["wants"], *summary["found"], summary["left"]])
    assert "SU-41210" not in said
    assert summary["wants"] == f"“{CRACKED}”"
    assert "SU-41210" not in conversation.runs.order_by("-created_at").first().summary  # the stored one too


def test_what_a_person_dealt_with_before_the_agent_was_back_is_left_out(desk, queued):
    sam = make_user("sam", staff=True, first_name="Sam")
    conversation = services.conversation_start(customer=desk.maya)
    assert ask(queued, conversation, CRACKED) == "escalated"
    takeover.conversation_take_over(conversation=conversation, user=sam)
    takeover.conversation_staff_reply(conversation=conversation, user=sam, text="Refunded in full, sorry!")
    takeover.conversation_hand_back(conversation=conversation, user=sam)
    assert ask(queued, conversation, "I received the wrong item in order SU-41210.") == "escalated"
    conversation.refresh_from_db()
    summary = handover_summary(conversation)
    said = " ".join([summary["wants"], *summary["found"], summary["left"]])
    assert "SU-41533" not in said and "480.00" not in said and "Sam" not in said
    assert summary["wants"] == "“I received the wrong item in order SU-41210.”"
    assert summary["left"].startswith("Wrong item received on Sundry-fulfilled order SU-41210")


def test_nothing_is_shown_when_nobody_is_needed_or_the_conversation_is_closed(handed_over):
    sam = make_user("sam", staff=True, first_name="Sam")
    assert handover_summary(handed_over) is not None
    inbox.conversation_close(conversation=handed_over, actor=sam)
    assert handover_summary(handed_over) is None
    services.conversation_post_message(conversation=handed_over, text="Sorry, one more thing")  # reopened
    assert handover_summary(handed_over) is not None
    takeover.conversation_hand_back(conversation=handed_over, user=sam)  # the agent has it again
    handed_over.refresh_from_db()
    assert handover_summary(handed_over) is None


def test_staff_read_it_and_nobody_else_does(handed_over, client):
    staff = Client()
    staff.force_login(make_user("sam", staff=True, first_name="Sam"))
    response = staff_read(staff, handed_over)
    assert response.status_code == 200 and response.json()["handover"]["wants"] == f"“{CRACKED}”"
    assert staff_read(Client(), handed_over).status_code == 403
    customer = Client()
    customer.force_login(make_user("chris", staff=False))
    assert staff_read(customer, handed_over).status_code == 403
    token = identity.conversation_token(handed_over)
    assert client.get(f"/api/staff/conversations/{handed_over.public_id}/handover",
                      HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 403
