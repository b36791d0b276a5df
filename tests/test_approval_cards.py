"""Approval cards a person can decide in seconds, and the customer told the decision in plain words.

A card (serializers.approval_json's `context`) says in one sentence what the agent asks and why, shows the
order's money, the amount's limits, the policies the agent read, the customer's words and the expiry, and
names the form's fields. A refund approved for another amount reaches the model as such, so the customer
is told the amount actually refunded; a rejection's reason is relayed as written; an expiry is explained.
Who may see what: any staff member reads cards; a card shows only the conversation customer's own order.
"""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from support.desk import gate, runner, serializers, services
from support.models import Approval, Message, Order, Refund, ToolCall
from tests.desk_factories import make_user, pending_refund_approval, start_conversation

pytestmark = pytest.mark.django_db(transaction=True)


def ask(customer, text, queued):
    conversation = services.conversation_start(customer=customer)
    services.conversation_post_message(conversation=conversation, text=text)
    return conversation, queued.pop()


def paused_refund(desk, queued, text="My parcel SU-41310 never came."):
    conversation, run_id = ask(desk.maya, text, queued)
    assert runner.run_execute(run_id) == "awaiting_approval"
    return conversation, run_id, Approval.objects.get(run_id=run_id)


def answer(conversation) -> str:
    return conversation.messages.filter(author=Message.AGENT).exclude(content="").exclude(content__isnull=True) \
        .order_by("seq").last().content


def tool_result(run_id, name) -> str:
    call_id = ToolCall.objects.get(run_id=run_id, name=name).call_id
    return Message.objects.get(run_id=run_id, role="tool", tool_call_id=call_id).content


# -- what the card says ---------------------------------------------------------------------------------

def test_a_refund_card_says_what_is_asked_and_why_in_one_sentence(desk, queued, any_shop):
    _, _, approval = paused_refund(desk, queued)
    card = serializers.approval_json(approval)["context"]
    # The customer never got it, though SU-41310's parcel was scanned delivered 120 hours before "now".
    assert card["summary"] == "Refund 64.00 EUR on SU-41310 — parcel not received, marked delivered 5 days ago"
    assert card["why"] == approval.requested_arguments["reason"]


def test_a_refund_card_shows_the_orders_money_read_afresh(desk, queued):
    _, _, approval = paused_refund(desk, queued)
    order = Order.objects.get(number="SU-41310")
    assert serializers.approval_json(approval)["context"]["order"] == {
        "number": "SU-41310", "status": order.status, "currency": "EUR", "total": "64.00", "refunded": "0.00",
        "refundable": "64.00", "seller": order.seller.name, "items": [i.title for i in order.items.all()]}
    Refund.objects.create(order=order, amount=Decimal("14.00"), reason="a colleague refunded part meanwhile")
    money = serializers.approval_json(approval)["context"]
    assert (money["order"]["refunded"], money["order"]["refundable"], money["amount"]["max"]) == (
        "14.00", "50.00", "50.00")


def test_the_amount_may_be_at_most_what_is_left_and_the_ceiling(desk, settings, queued, any_shop):
    _, _, approval = paused_refund(desk, queued)
    limits = serializers.approval_json(approval)["context"]["amount"]
    assert limits == {"min": "0.01", "max": "64.00", "ceiling": "150.00", "refundable": "64.00",
                      "max_because": "refundable", "large_refund_threshold": "100.00"}
    settings.REFUND_CEILING = Decimal("50.00")
    limits = serializers.approval_json(approval)["context"]["amount"]
    assert (limits["max"], limits["max_because"]) == ("50.00", "ceiling")


def test_the_card_lists_the_policies_the_agent_read_before_asking(desk, queued):
    _, run_id, approval = paused_refund(desk, queued)
    policies = serializers.approval_json(approval)["context"]["policies"]
    searched = json.loads(tool_result(run_id, "search_policy"))["results"]
    assert [p["doc_id"] for p in policies] == [r["doc_id"] for r in searched][:len(policies)]
    assert policies and all(p["title"] and p["excerpt"] for p in policies)
    assert "48 hours" in " ".join(p["excerpt"] for p in policies)  # the seller's rule the refund rests on


def test_the_card_quotes_what_the_customer_asked(desk, queued):
    _, _, approval = paused_refund(desk, queued)
    said = serializers.approval_json(approval)["context"]["customer_request"]
    assert [m["text"] for m in said] == ["My parcel SU-41310 never came."]


def test_the_form_has_an_amount_a_fixed_order_and_a_reason_not_json(desk, queued):
    _, _, approval = paused_refund(desk, queued)
    fields = serializers.approval_json(approval)["context"]["fields"]
    assert [(f["name"], f["kind"]) for f in fields] == [("order_id", "fixed"), ("amount", "amount"),
                                                         ("reason", "textarea")]
    assert fields[2]["max_length"] == 500 and fields[1]["label"] == "Amount (EUR)"


def test_a_handover_card_says_why_and_carries_the_agents_summary(desk, queued, settings, any_shop):
    settings.ESCALATION_NEEDS_APPROVAL = True  # the shop has a person confirm each hand-over
    conversation, run_id = ask(desk.maya, "I want a refund for SU-41533 please.", queued)
    assert runner.run_execute(run_id) == "awaiting_approval"
    approval = Approval.objects.get(run_id=run_id, tool_call__name="escalate_to_human")
    card = serializers.approval_json(approval)["context"]
    assert card["summary"] == ("Hand over to a person — Refund of 480.00 EUR on SU-41533 is above the 150.00 "
                               "limit an agent may refund")
    assert "refundable 480.00" in card["handover_summary"]
    assert card["order"]["number"] == "SU-41533" and card["amount"] is None


def test_a_card_never_shows_another_customers_order(demo):
    toms = Order.objects.filter(customer=demo.tom).first()
    approval = pending_refund_approval(start_conversation(demo.maya),
                                       {"order_id": toms.number, "amount": "5.00", "reason": "x"})
    card = serializers.approval_json(approval)["context"]
    assert card["order"] is None and card["amount"]["refundable"] is None
    assert card["summary"] == f"Refund 5.00 EUR on {toms.number}"


def test_the_expiry_shown_is_the_one_the_desk_enforces(demo, settings):
    approval = pending_refund_approval(start_conversation(demo.maya))
    expires = serializers.approval_json(approval)["context"]["expires_at"]
    assert expires == approval.expires_at.isoformat().replace("+00:00", "Z")
    settings.APPROVAL_TIMEOUT_SECONDS = 60  # shortened since it was asked: the sooner time holds
    sooner = approval.requested_at + timedelta(seconds=60)
    assert serializers.approval_json(approval)["context"]["expires_at"] == sooner.isoformat().replace("+00:00", "Z")


def test_an_expired_card_says_how_it_expired(demo):
    approval = pending_refund_approval(start_conversation(demo.maya))
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    gate.approvals_expire()
    data = serializers.approval_json(Approval.objects.get(pk=approval.pk))
    assert data["status"] == "expired" and data["reason"].startswith("no one decided within")


def test_the_staff_api_lists_cards_with_their_context(demo, client):
    client.force_login(make_user("sam", staff=True))
    pending_refund_approval(start_conversation(demo.maya))
    listed = client.get("/api/staff/approvals").json()["approvals"]
    assert listed[0]["context"]["summary"] == "Refund 64.00 EUR on SU-41310 — parcel not received"
    assert listed[0]["context"]["order"]["refundable"] == "64.00"


# -- what the customer is told --------------------------------------------------------------------------

def test_a_refund_approved_for_less_tells_the_model_and_the_customer_the_amount_refunded(desk, queued, any_shop):
    conversation, run_id, approval = paused_refund(desk, queued)
    edited = {**approval.requested_arguments, "amount": "40.00"}
    gate.approval_decide(approval=approval, user=None, approve=True, arguments=edited)
    assert runner.run_execute(queued.pop()) == "answered"
    result = json.loads(tool_result(run_id, "issue_refund"))
    assert result["amount"] == "40.00"
    assert result["staff_decision"].startswith("Approved by staff with a change: amount 40.00 instead of 64.00.")
    said = answer(conversation)
    assert "approved 40.00 EUR" in said and "64.00 EUR" in said and "refunded 40.00 EUR" in said
    assert any_shop.refunds("SU-41310") == [Decimal("40.00")]


def test_the_customer_is_told_why_a_smaller_amount_was_approved_in_the_persons_words(desk, queued, any_shop):
    conversation, run_id, approval = paused_refund(desk, queued)
    why = "Only one of the two towels sets is missing from the parcel."
    gate.approval_decide(approval=approval, user=None, approve=True, reason=why,
                         arguments={**approval.requested_arguments, "amount": "40.00"})
    assert runner.run_execute(queued.pop()) == "answered"
    assert json.loads(tool_result(run_id, "issue_refund"))["staff_reason"] == why
    said = answer(conversation)
    assert "approved 40.00 EUR" in said and why in said


def test_the_change_reason_can_be_given_with_an_edited_approval_in_the_api(demo, client):
    client.force_login(make_user("sam", staff=True))
    approval = pending_refund_approval(start_conversation(demo.maya))
    response = client.post(f"/api/staff/approvals/{approval.public_id}/approve", json.dumps(
        {"arguments": {**approval.requested_arguments, "amount": "40.00"}, "reason": "One set arrived."}),
        content_type="application/json")
    assert response.status_code == 200 and Approval.objects.get(pk=approval.pk).reason == "One set arrived."
    refused = client.post(f"/api/staff/approvals/{approval.public_id}/approve", json.dumps({"reason": 3}),
                          content_type="application/json")
    assert refused.status_code == 400


def test_a_refund_approved_as_asked_carries_no_note(desk, queued, any_shop):
    conversation, run_id, approval = paused_refund(desk, queued)
    gate.approval_decide(approval=approval, user=None, approve=True)
    runner.run_execute(queued.pop())
    assert "staff_decision" not in json.loads(tool_result(run_id, "issue_refund"))
    assert "I've refunded 64.00 EUR" in answer(conversation)
    assert any_shop.refunds("SU-41310") == [Decimal("64.00")]


@pytest.mark.parametrize("reason", ["we need a photo of the packaging first.", "we need a photo first"])
def test_a_rejection_reason_is_relayed_with_one_full_stop(desk, queued, reason, any_shop):
    conversation, run_id, approval = paused_refund(desk, queued)
    gate.approval_decide(approval=approval, user=None, approve=False, reason=reason)
    runner.run_execute(queued.pop())
    assert tool_result(run_id, "issue_refund") == f"ERROR: rejected by staff: {reason}"
    said = answer(conversation)
    assert reason.rstrip(".") + ". I'm sorry" in said and ".." not in said


def test_an_expired_refund_is_explained_as_not_reviewed_in_time(desk, queued, any_shop):
    conversation, run_id, approval = paused_refund(desk, queued)
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    gate.approvals_expire()
    runner.run_execute(queued.pop())
    result = tool_result(run_id, "issue_refund")
    assert result.startswith("ERROR: not run: the request expired before anyone on the team decided (no one "
                             "decided within")
    said = answer(conversation)
    assert "couldn't be reviewed in time" in said and "rejected by" not in said
    assert any_shop.refunds("SU-41310") == []


def photo_sent(conversation) -> Message:
    """A customer message carrying one photo (kept in memory: the test's settings say where)."""
    from django.core.files.base import ContentFile

    from support.customers import attachments
    from support.models import Attachment

    photo = services.message_append(conversation=conversation, author=Message.CUSTOMER,
                                    wire={"role": "user", "content": attachments.placeholder([Attachment.IMAGE])})
    storage = attachments.attachment_storage()
    Attachment.objects.create(
        conversation=conversation, message=photo, kind=Attachment.IMAGE, content_type="image/jpeg", name="mug.jpg",
        size=3, uploaded_size=3, width=40, height=30, sha256="0" * 64,
        file=storage.save("c/mug.jpg", ContentFile(b"jpg")), thumbnail=storage.save("c/mug-t.jpg", ContentFile(b"t")),
        preview=storage.save("c/mug-p.jpg", ContentFile(b"p")))
    return photo


def test_the_card_shows_the_photos_the_customer_sent_with_their_request(demo, settings):
    from support.desk import selectors_approvals

    settings.STORAGES = {**settings.STORAGES, "attachments": {"BACKEND": "django.core.files.storage.InMemoryStorage"}}
    conversation = start_conversation(demo.maya)
    services.message_append(conversation=conversation, author=Message.CUSTOMER,
                            wire={"role": "user", "content": "My mug from SU-41310 arrived broken."})
    photo = photo_sent(conversation)
    approval = pending_refund_approval(conversation)

    said = selectors_approvals.approval_context(approval)["customer_request"]
    assert said[-1]["seq"] == photo.seq and said[-1]["attachments_only"] is True
    (shown,) = said[-1]["attachments"]
    assert shown["kind"] == "image" and shown["thumbnail_url"] and shown["url"] != shown["thumbnail_url"]
    assert said[-2]["text"] == "My mug from SU-41310 arrived broken." and "attachments" not in said[-2]


# -- the case in the title, the policies relied on --------------------------------------------------------

_looked = iter(range(1, 10**6))


def agent_looked(conversation, tool: str, arguments: dict, result: dict, said: str | None = None) -> None:
    """One call the agent made before asking and the result it read (optionally with words it wrote)."""
    call_id = f"call_look_{next(_looked)}"
    services.message_append(conversation=conversation, author=Message.AGENT, wire={
        "role": "assistant", "content": said,
        "tool_calls": [{"id": call_id, "type": "function",
                        "function": {"name": tool, "arguments": json.dumps(arguments)}}]})
    services.message_append(conversation=conversation, author=Message.AGENT,
                            wire={"role": "tool", "tool_call_id": call_id, "content": json.dumps(result)})


def said_by(conversation, text: str) -> None:
    services.message_append(conversation=conversation, author=Message.CUSTOMER,
                            wire={"role": "user", "content": text})


DELIVERED = {"order_id": "SU-41310", "parcels": [{"tracking": "TRK1", "status": "delivered"}]}


@pytest.mark.parametrize(("reason", "customer", "title"), [
    ("Item arrived damaged", "My mug came in pieces", "item arrived damaged"),
    ("Customer asked for a refund", "The lamp is broken, the glass is cracked", "item arrived damaged"),
    ("Wrong item received", "I got a blue one", "wrong item received"),
    ("Parcel marked delivered but not received", "Where is it?", "parcel not received, marked delivered"),
    ("Weather delay over 5 days: shipping fee refunded", "Still waiting", "delivery delayed"),
    ("Customer asked for a refund", "I changed my mind", "parcel marked delivered"),
    ("Customer asked for a refund", "The chocolate was not to my taste, a student told me", "parcel marked delivered"),
])
def test_a_refund_card_title_says_what_the_case_is(demo, reason, customer, title):
    conversation = start_conversation(demo.maya)
    said_by(conversation, customer)
    agent_looked(conversation, "get_order", {"order_id": "SU-41310"}, DELIVERED)
    approval = pending_refund_approval(conversation, {"order_id": "SU-41310", "amount": "64.00", "reason": reason})
    card = serializers.approval_json(approval)["context"]
    assert card["summary"] == f"Refund 64.00 EUR on SU-41310 — {title}"


def test_a_damage_claim_with_a_photo_says_so_and_never_reads_as_a_delivery(demo, settings):
    settings.STORAGES = {**settings.STORAGES, "attachments": {"BACKEND": "django.core.files.storage.InMemoryStorage"}}
    conversation = start_conversation(demo.maya)
    said_by(conversation, "My mug from SU-41310 arrived broken.")
    photo_sent(conversation)
    agent_looked(conversation, "get_order", {"order_id": "SU-41310"}, DELIVERED)
    approval = pending_refund_approval(conversation, {"order_id": "SU-41310", "amount": "64.00",
                                                      "reason": "Customer sent a photo"})
    summary = serializers.approval_json(approval)["context"]["summary"]
    assert summary == "Refund 64.00 EUR on SU-41310 — item arrived damaged (photo sent)"
    assert "delivered" not in summary


def search_result(*docs) -> dict:
    return {"results": [{"doc_id": d, "title": t, "excerpt": f"{t} says…", "scope": "", "version": 1}
                        for d, t in docs]}


def test_the_card_lists_the_top_hit_of_each_search_and_folds_the_rest(demo):
    conversation = start_conversation(demo.maya)
    said_by(conversation, "My parcel SU-41310 never came.")
    agent_looked(conversation, "search_policy", {"query": "lost parcel"},
                 search_result(("POL-LOSS", "Lost parcels"), ("POL-REFUND", "Refunds"), ("POL-FEES", "Fees")))
    agent_looked(conversation, "search_policy", {"query": "refund limit"},
                 search_result(("POL-REFUND", "Refunds"), ("POL-LOSS", "Lost parcels"), ("POL-GIFT", "Gift cards")))
    approval = pending_refund_approval(conversation)
    card = serializers.approval_json(approval)["context"]
    assert [p["doc_id"] for p in card["policies"]] == ["POL-LOSS", "POL-REFUND"]
    assert [p["doc_id"] for p in card["policies_more"]] == ["POL-FEES", "POL-GIFT"]


def test_the_card_lists_the_policies_the_agent_cited_before_the_top_hits(demo):
    conversation = start_conversation(demo.maya)
    said_by(conversation, "My parcel SU-41310 never came.")
    agent_looked(conversation, "search_policy", {"query": "lost parcel"},
                 search_result(("POL-REFUND", "Refunds"), ("POL-LOSS", "Lost parcels"), ("POL-FEES", "Fees")))
    agent_looked(conversation, "get_order", {"order_id": "SU-41310"}, DELIVERED,
                 said="Per our Lost parcels policy, I'll check the order.")
    approval = pending_refund_approval(conversation, {"order_id": "SU-41310", "amount": "64.00",
                                                      "reason": "Not received; see POL-FEES for the fee"})
    card = serializers.approval_json(approval)["context"]
    assert [p["doc_id"] for p in card["policies"]] == ["POL-LOSS", "POL-FEES"]  # cited: in a reply, by id
    assert [p["doc_id"] for p in card["policies_more"]] == ["POL-REFUND"]
