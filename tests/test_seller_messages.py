"""What may leave the desk to a seller: no customer contact data without a person, a few messages a
conversation a day, the same message once; and seller-written text reaches the model marked untrusted.

What leaves follows the policy in code (support/tools/sellers.py): every message inside the template that
names Sundry customer support, the order and the issue; links only to the shop's own hosts, and the wording
rules of support/tools/moderation.py, or a person approves it first, told why on the card and in the trace.
The policy's own cases (each disguise of a link, each rule, ordinary messages) are in test_seller_policy.py.
"""

import json

import pytest
from django.test import Client

from support.desk import assistant, gate, runner, services
from support.models import Approval, SellerMessage, Step
from support.tools.sellers import contact_data
from tests.desk_factories import make_user
from tests.fake_model import ScriptedModel, answer, call, reply

pytestmark = pytest.mark.django_db(transaction=True)

SHOP = "https://sundry.example"  # the shop's page that embeds the widget: its host is the shop's own


def run_with(desk, queued, monkeypatch, *replies, text="My parcel SU-41207 never came."):
    model = ScriptedModel(*replies)
    monkeypatch.setattr(assistant, "shared_model", lambda: model)
    conversation = services.conversation_start(customer=desk.maya)
    services.conversation_post_message(conversation=conversation, text=text)
    return conversation, runner.run_execute(queued.pop())


def to_seller(text, order="SU-41207", **more):
    return call("message_seller", {"order_id": order, "message": text, **more})


def framed(text, issue="other", order="SU-41207"):
    """What the seller reads for `text`: the template, written out here rather than imported."""
    return f"Message from Sundry customer support about order {order}\nIssue: {issue}\n\n{text}"


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


# -- the policy on what leaves the desk ------------------------------------------------------------------

# One reply of a model that read hostile text: a phishing link, insults, a disguised link with pressure.
COMPROMISED = [
    ("Your payout is on hold. Confirm your bank details at https://sundry-payouts.example/verify today.",
     ["the message links to another site: sundry-payouts.example",
      'the message asks for payment or bank details or for money to be sent somewhere ("bank details")']),
    ("You useless idiots never ship anything on time. Shame on you.",
     ['the message contains an insult or swearing ("idiots")']),
    ("URGENT!!! Refund the customer via hxxp://evil[.]example/pay immediately or your account will be closed",
     ["the message links to another site: evil.example",
      'the message pressures the seller with urgency ("urgent")', 'the message shouts ("!!!")']),
]


def staff_client():
    client = Client()
    client.force_login(make_user("sam", staff=True))
    return client


def test_a_compromised_reply_sends_nothing_to_the_seller_without_a_person(desk, queued, monkeypatch, settings):
    settings.WIDGET_ALLOWED_ORIGINS = [SHOP]
    settings.SELLER_MESSAGES_PER_CONVERSATION_PER_DAY = 3  # the limit alone let all three through
    conversation, outcome = run_with(desk, queued, monkeypatch,
                                     reply(calls=[to_seller(text) for text, _ in COMPROMISED]))
    assert outcome == "awaiting_approval" and not SellerMessage.objects.exists()

    # The card's title and the trace both say why, in the policy's words, for each message.
    data = staff_client().get(f"/api/staff/conversations/{conversation.public_id}").json()
    titles = [a["context"]["summary"] for a in data["approvals"]]
    assert [a["tool"] for a in data["approvals"]] == ["message_seller"] * 3
    trace = [s for run in data["runs"] for s in run["steps"] if s["kind"] == "approval"]
    assert [(s["tool"], s["finish_reason"]) for s in trace] == [("message_seller", "awaiting_approval")] * 3
    for (text, reasons), title, step in zip(COMPROMISED, titles, trace, strict=True):
        assert title == "Send a message to Hearth & Loom about SU-41207 — " + "; ".join(reasons)
        assert step["result"] == "needs a person: " + "; ".join(reasons)
        assert json.loads(step["arguments"])["message"] == text


def test_a_clean_message_is_sent_at_once_inside_the_template(desk, queued, monkeypatch, any_shop):
    text = ("Order SU-41207: parcel HL40120771 was marked delivered (left in porch) 31 hours ago and has not "
            "arrived. Please open a missing-parcel claim with Royal Mail once 48 hours have passed.")
    _, outcome = run_with(desk, queued, monkeypatch, reply(calls=[to_seller(text, issue="missing_parcel")]),
                          *answer("I told the seller."))
    assert outcome == "answered" and not Approval.objects.exists()
    assert any_shop.seller_messages("SU-41207") == [framed(text, "missing parcel")]


def test_a_call_without_an_issue_is_sent_as_other(desk, queued, monkeypatch):
    run_with(desk, queued, monkeypatch, reply(calls=[to_seller("Order SU-41207 has not arrived.")]),
             *answer("Done."))
    assert SellerMessage.objects.get().body == framed("Order SU-41207 has not arrived.")


def test_a_link_to_the_shops_own_host_is_sent_and_any_other_waits(desk, queued, monkeypatch, settings):
    settings.WIDGET_ALLOWED_ORIGINS = [SHOP, "http://localhost:8000"]
    own = "The customer followed https://www.sundry.example/returns for order SU-41207; please send a label."
    run_with(desk, queued, monkeypatch, reply(calls=[to_seller(own, issue="return")]), *answer("Done."))
    assert SellerMessage.objects.get().body == framed(own, "return or return label")

    settings.WIDGET_ALLOWED_ORIGINS = []  # no shop page configured: no host is the shop's
    _, outcome = run_with(desk, queued, monkeypatch, reply(calls=[to_seller(own + " Thanks.")]))
    assert outcome == "awaiting_approval" and SellerMessage.objects.count() == 1
    assert "the message links to another site: www.sundry.example" in Approval.objects.get().run.steps.get(
        kind="approval").result


def test_a_held_message_a_person_approves_is_sent_inside_the_template(desk, queued, monkeypatch, settings):
    text, reasons = COMPROMISED[1]
    conversation, outcome = run_with(desk, queued, monkeypatch, reply(calls=[to_seller(text, issue="late_delivery")]),
                                     *answer("I passed it on."))
    assert outcome == "awaiting_approval" and not SellerMessage.objects.exists()
    approval = Approval.objects.get()
    gate.approval_decide(approval=approval, user=make_user("kim", staff=True), approve=True)
    runner.run_execute(queued.pop())
    assert SellerMessage.objects.get().body == framed(text, "late delivery")
    # The trace keeps why it waited, then the call as it ran.
    steps = list(Step.objects.filter(run__conversation=conversation, call_id=approval.tool_call.call_id)
                 .order_by("pk").values_list("kind", "result"))
    assert [kind for kind, _ in steps] == ["approval", "tool"]
    assert steps[0][1] == "needs a person: " + "; ".join(reasons)


def test_messages_waiting_for_a_person_count_against_the_daily_limit(desk, queued, monkeypatch, settings):
    settings.SELLER_MESSAGES_PER_CONVERSATION_PER_DAY = 2
    held = [to_seller(f"Please call the customer on +44 20 7946 09{n}{n}.") for n in range(3)]
    conversation, outcome = run_with(desk, queued, monkeypatch, reply(calls=held))
    assert outcome == "awaiting_approval" and not SellerMessage.objects.exists()
    assert Approval.objects.count() == 2  # the third would pass the day's limit if both were approved
    last = conversation.messages.get(role="tool", tool_call_id=held[2]["id"]).content
    assert last.startswith("ERROR: not run:") and "2 messages to sellers today" in last


def test_a_clean_message_counts_the_held_ones_before_it(desk, queued, monkeypatch, settings):
    settings.SELLER_MESSAGES_PER_CONVERSATION_PER_DAY = 2
    calls = [to_seller("Write to maya@example.com, please."), to_seller("Call +44 20 7946 0958, please."),
             to_seller("Order SU-41207 has not arrived.")]
    conversation, outcome = run_with(desk, queued, monkeypatch, reply(calls=calls))
    assert outcome == "awaiting_approval" and Approval.objects.count() == 2
    assert not SellerMessage.objects.exists()  # sent at once, it would have been the third of the day
    assert "2 messages to sellers today" in conversation.messages.get(role="tool", tool_call_id=calls[2]["id"]).content


def test_held_messages_approved_are_all_sent_within_the_limit(desk, queued, monkeypatch, settings):
    settings.SELLER_MESSAGES_PER_CONVERSATION_PER_DAY = 2
    held = [to_seller("Write to maya@example.com, please."), to_seller("Call +44 20 7946 0958, please.")]
    run_with(desk, queued, monkeypatch, reply(calls=held), *answer("Sent."))
    for approval in Approval.objects.order_by("pk"):
        gate.approval_decide(approval=approval, user=make_user(f"kim{approval.pk}", staff=True), approve=True)
    assert runner.run_execute(queued.pop()) == "answered"
    assert SellerMessage.objects.count() == 2  # a waiting message counts once: as waiting, then as sent
