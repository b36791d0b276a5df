"""What may leave the desk to a seller: no customer contact data without a person, a few messages a
conversation a day, the same message once; and seller-written text reaches the model marked untrusted."""

import pytest

from support.desk import assistant, runner, services
from support.models import Approval, SellerMessage
from support.tools.sellers import contact_data
from tests.fake_model import ScriptedModel, answer, call, reply

pytestmark = pytest.mark.django_db(transaction=True)


def run_with(desk, queued, monkeypatch, *replies, text="My parcel SU-41207 never came."):
    model = ScriptedModel(*replies)
    monkeypatch.setattr(assistant, "shared_model", lambda: model)
    conversation = services.conversation_start(customer=desk.maya)
    services.conversation_post_message(conversation=conversation, text=text)
    return conversation, runner.run_execute(queued.pop())


def to_seller(text, order="SU-41207"):
    return call("message_seller", {"order_id": order, "message": text})


@pytest.mark.parametrize("text, found", [
    ("Customer is maya@example.com, please write to her directly.", "an e-mail address"),
    ("Call the customer on +44 20 7946 0958.", "a phone number"),
    ("Deliver again to 12 Baker Street, London.", "a street address"),
])
def test_a_seller_message_with_the_customers_contact_data_waits_for_a_person(desk, queued, monkeypatch, text, found):
    assert found in contact_data(text)
    _, outcome = run_with(desk, queued, monkeypatch, reply(calls=[to_seller(text)]))
    assert outcome == "awaiting_approval" and not SellerMessage.objects.exists()
    assert Approval.objects.get().tool_call.name == "message_seller"


def test_a_seller_message_with_order_facts_only_is_sent_at_once(desk, queued, monkeypatch):
    text = "Order SU-41207: delivered scan 2026-11-27T01:41:00Z says left in porch; the customer has not received it."
    assert contact_data(text) == ""
    _, outcome = run_with(desk, queued, monkeypatch, reply(calls=[to_seller(text)]), *answer("I told the seller."))
    assert outcome == "answered" and SellerMessage.objects.count() == 1 and not Approval.objects.exists()


def test_one_reply_cannot_flood_a_seller(desk, queued, monkeypatch, settings):
    settings.SELLER_MESSAGES_PER_CONVERSATION_PER_DAY = 3
    calls = [to_seller(f"Order SU-41207 is missing (note {n}).") for n in range(50)]
    conversation, outcome = run_with(desk, queued, monkeypatch, reply(calls=calls), *answer("Done."))
    assert SellerMessage.objects.count() == 3
    refused = conversation.messages.filter(role="tool", content__contains="already sent 3 messages").count()
    assert refused == 47


def test_the_same_message_twice_is_sent_once_and_the_model_is_told(desk, queued, monkeypatch):
    same = "Order SU-41207 is missing; please open a claim."
    conversation, _ = run_with(desk, queued, monkeypatch, reply(calls=[to_seller(same)]),
                               reply(calls=[to_seller("order su-41207 is missing;   please open a claim.")]),
                               *answer("Done."))
    assert SellerMessage.objects.count() == 1
    assert '"status": "already_sent"' in conversation.messages.filter(role="tool").order_by("seq")[1].content


def test_seller_text_reaches_the_model_marked_untrusted(desk, queued, monkeypatch):
    conversation, _ = run_with(desk, queued, monkeypatch, reply(calls=[call("get_order", {"order_id": "SU-41501"})]),
                               *answer("It is in transit."), text="Where is SU-41501?")
    result = conversation.messages.get(role="tool", content__contains="SU-41501").content
    assert '"seller_description": {"untrusted_text_from": "seller", "text": "' in result
    assert "IGNORE ALL PREVIOUS INSTRUCTIONS" in result  # shown as data, not removed
