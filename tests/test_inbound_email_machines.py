"""Mail that is not a person never starts a run: auto-replies and out-of-office (RFC 3834 Auto-Submitted,
X-Autoreply, Precedence bulk/list), bounces (delivery status notifications) and our own mail coming back.
A bounce that quotes the Message-ID of a mail the desk sent to the address it names marks that address
undeliverable (no more e-mail; staff see it); a forged one (about an address we never wrote to, or quoting no
mail of ours to that address) changes nothing. Size and per-sender rate limits keep the mail and
start nothing."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from support.desk import inbound_mail, services
from support.desk.selectors_context import conversation_context
from support.models import InboundEmail, Message, OutboundEmail, Run, UndeliverableAddress
from tests.mail_factories import bounce, mail


@pytest.fixture
def inbound(demo, settings, queued):
    settings.INBOUND_EMAIL_ADDRESS = "support@shop.example"
    return demo


@pytest.fixture
def maya_chat(inbound):
    conversation = services.conversation_start(customer=inbound.maya)
    OutboundEmail.objects.create(conversation=conversation, mail_id="reply-1@desk.example", to="maya@example.com")
    return conversation


def nothing_started():
    return not Message.objects.filter(channel=Message.EMAIL).exists() and not Run.objects.exists()


@pytest.mark.parametrize("headers", [
    {"Auto-Submitted": "auto-replied"},
    {"Auto-Submitted": "auto-generated; type=vacation"},
    {"X-Autoreply": "yes"},
    {"Precedence": "bulk"},
    {"Precedence": "list"},
])
def test_an_automatic_reply_is_kept_and_starts_nothing(maya_chat, headers):
    record = inbound_mail.receive(mail(subject="Out of office", text="I am away until Monday.", headers=headers,
                                       in_reply_to="<reply-1@desk.example>"), source="imap")
    assert record.outcome == InboundEmail.AUTO_REPLY and record.conversation == maya_chat  # staff can find it
    assert nothing_started()


def test_auto_submitted_no_is_a_person(maya_chat):
    record = inbound_mail.receive(mail(headers={"Auto-Submitted": "no"}, in_reply_to="<reply-1@desk.example>"),
                                  source="imap")
    assert record.outcome == InboundEmail.ATTACHED


def test_our_own_mail_coming_back_is_a_loop_and_starts_nothing(maya_chat):
    record = inbound_mail.receive(mail(message_id="<reply-1@desk.example>", sender="maya@example.com"), source="imap")
    assert record.outcome == InboundEmail.LOOP and nothing_started()
    from_us = inbound_mail.receive(mail(sender="Sundry <support@shop.example>"), source="imap")
    assert from_us.outcome == InboundEmail.LOOP and nothing_started()


def test_a_bounce_marks_the_address_undeliverable_and_staff_see_it(maya_chat, inbound):
    record = inbound_mail.receive(bounce(failed="maya@example.com", original_id="reply-1@desk.example"),
                                  source="imap")
    assert record.outcome == InboundEmail.BOUNCE and record.conversation == maya_chat and nothing_started()
    marked = UndeliverableAddress.objects.get(customer=inbound.maya)
    assert "5.1.1" in marked.reason and "User unknown" in marked.reason
    staff = get_user_model().objects.create_user("sam", is_staff=True)
    shown = conversation_context(maya_chat, staff)["customer"]["undeliverable"]
    assert shown["reason"] == marked.reason


def test_a_bounce_about_an_address_we_never_wrote_to_changes_nothing(maya_chat, inbound):
    record = inbound_mail.receive(bounce(failed="tom@example.com", original_id="made-up@desk.example"), source="imap")
    assert record.outcome == InboundEmail.BOUNCE and not UndeliverableAddress.objects.exists()


def test_a_forged_bounce_naming_a_customer_we_wrote_to_without_our_message_id_changes_nothing(maya_chat, inbound):
    """The desk wrote to Maya (reply-1) and to Tom (reply-2). A report about Maya that quotes no mail of ours,
    or quotes the mail we sent to Tom, is kept for staff and silences no one."""
    OutboundEmail.objects.create(conversation=services.conversation_start(customer=inbound.tom),
                                 mail_id="reply-2@desk.example", to="tom@example.com")
    for quoted in ("made-up@desk.example", "reply-2@desk.example"):
        record = inbound_mail.receive(bounce(failed="maya@example.com", original_id=quoted), source="imap")
        assert record.outcome == InboundEmail.BOUNCE and nothing_started()
    assert not UndeliverableAddress.objects.exists()
    inbound_mail.receive(bounce(failed="maya@example.com", original_id="reply-1@desk.example"), source="imap")
    assert list(UndeliverableAddress.objects.values_list("customer__email", flat=True)) == ["maya@example.com"]


def test_no_reply_email_goes_to_an_undeliverable_address(maya_chat, inbound, settings):
    from datetime import timedelta

    from django.utils import timezone

    from support.customers import notify

    services.message_append(conversation=maya_chat, author=Message.AGENT,
                            wire={"role": "assistant", "content": "Your parcel is on its way."})
    later = timezone.now() + timedelta(minutes=settings.REPLY_EMAIL_AFTER_MINUTES + 1)
    assert maya_chat.pk in notify.due_conversations(later)
    UndeliverableAddress.objects.create(customer=inbound.maya, reason="5.1.1")
    assert maya_chat.pk not in notify.due_conversations(later)


def test_a_mail_over_the_size_limit_is_kept_without_its_body_and_starts_nothing(inbound, settings):
    settings.INBOUND_EMAIL_MAX_BYTES = 2048
    raw = mail(text="x" * 5000, message_id="<big@mail.example>")
    record = inbound_mail.receive(raw, source="imap")
    assert record.outcome == InboundEmail.TOO_LARGE and record.mail_id == "big@mail.example"
    assert record.sender == "maya@example.com" and bytes(record.raw) == b"" and record.size == len(raw)
    assert nothing_started()
    assert inbound_mail.receive(raw, source="imap").pk == record.pk  # and stored once


def test_a_sender_over_the_hourly_limit_is_kept_and_not_answered(inbound, settings):
    settings.INBOUND_EMAILS_PER_SENDER_PER_HOUR = 2
    outcomes = [inbound_mail.receive(mail(sender="nina@elsewhere.example", text=f"Mail {i}"), source="imap").outcome
                for i in range(3)]
    assert outcomes == [InboundEmail.STARTED, InboundEmail.STARTED, InboundEmail.RATE_LIMITED]
    assert not Message.objects.filter(content="Mail 2").exists()
    # Another sender is not held back by Nina's mail.
    assert inbound_mail.receive(mail(sender="tom@example.com"), source="imap").outcome == InboundEmail.STARTED


def test_conversations_started_by_mail_are_capped_per_hour_across_all_senders(maya_chat, inbound, settings):
    settings.INBOUND_EMAIL_CONVERSATIONS_PER_HOUR = 3
    outcomes = [inbound_mail.receive(mail(sender=f"stranger{i}@elsewhere.example", text=f"Mail {i}"),
                                     source="imap").outcome for i in range(5)]
    assert outcomes == [InboundEmail.STARTED] * 3 + [InboundEmail.RATE_LIMITED] * 2
    assert not Message.objects.filter(content__in=["Mail 3", "Mail 4"]).exists()
    assert "conversations started by e-mail" in InboundEmail.objects.get(sender="stranger4@elsewhere.example").detail
    # A reply in a conversation that exists starts none: it is not held back.
    reply = inbound_mail.receive(mail(text="Any news?", in_reply_to="<reply-1@desk.example>"), source="imap")
    assert reply.outcome == InboundEmail.ATTACHED and reply.conversation == maya_chat


def test_staff_see_that_an_email_conversation_has_no_order_yet(inbound):
    conversation = inbound_mail.receive(mail(), source="imap").conversation
    staff = get_user_model().objects.create_user("sam", is_staff=True)
    context = conversation_context(conversation, staff)
    assert context["unverified"] is True and context["scope"] is None
    assert all(not order["in_scope"] for order in context["orders"])  # no action on an order until one is given
