"""Customers who write by e-mail: each mail stored once, threaded into its own conversation, or a new one.

Who gets what: a reply lands in its conversation only when the signed reply address (or our Message-ID in
In-Reply-To / References) names it AND the sender is that conversation's customer. A forged or stale reply
address, or someone else's thread, never attaches; the mail starts a new conversation for its sender,
which sees no order until the customer gives one of theirs.
"""

from __future__ import annotations

import time

import pytest

from support.customers import reply_address
from support.customers.notify import links_revoke
from support.desk import inbound_mail, services
from support.models import Conversation, Customer, InboundEmail, Message, OutboundEmail, Run
from tests.mail_factories import mail

ADDRESS = "support@shop.example"


@pytest.fixture
def inbound(demo, settings, queued):
    settings.INBOUND_EMAIL_ADDRESS = ADDRESS
    return demo


@pytest.fixture
def maya_chat(inbound):
    """Maya's conversation (from the widget), with the agent's answer e-mailed to her."""
    conversation = services.conversation_start(customer=inbound.maya)
    services.conversation_post_message(conversation=conversation, text="Where is SU-41210?")
    Run.objects.filter(conversation=conversation).update(status=Run.STOPPED, stop_reason="answered")
    OutboundEmail.objects.create(conversation=conversation, mail_id="reply-1@desk.example", to="maya@example.com")
    return conversation


def customer_messages(conversation):
    return list(conversation.messages.filter(author=Message.CUSTOMER).order_by("seq"))


def test_it_attaches_a_reply_to_the_signed_reply_address(maya_chat):
    address = reply_address.reply_address(maya_chat)
    assert address.startswith("support+") and address.endswith("@shop.example") and len(address.split("@")[0]) <= 64
    record = inbound_mail.receive(mail(to=address, text="It still has not come."), source="imap")
    assert record.outcome == InboundEmail.ATTACHED and record.conversation == maya_chat
    last = customer_messages(maya_chat)[-1]
    assert last.content == "It still has not come." and last.channel == Message.EMAIL
    assert record.message == last
    assert Run.objects.filter(conversation=maya_chat, status__in=Run.ACTIVE).count() == 1  # handed to a run


def test_it_attaches_a_reply_by_in_reply_to_and_references(maya_chat):
    record = inbound_mail.receive(mail(in_reply_to="<reply-1@desk.example>", text="Any news?"), source="imap")
    assert record.conversation == maya_chat and record.outcome == InboundEmail.ATTACHED
    again = inbound_mail.receive(mail(references="<other@x.example> <reply-1@desk.example>", text="Hello?"),
                                 source="imap")
    assert again.conversation == maya_chat
    assert [m.content for m in customer_messages(maya_chat)][-2:] == ["Any news?", "Hello?"]


def test_the_same_message_id_twice_is_stored_once(maya_chat):
    raw = mail(in_reply_to="<reply-1@desk.example>", message_id="<same@mail.example>", text="Once, please.")
    first = inbound_mail.receive(raw, source="Postmark")
    second = inbound_mail.receive(raw, source="Postmark")  # the webhook retried
    third = inbound_mail.receive(raw, source="imap")  # and the mailbox had it too
    assert first.pk == second.pk == third.pk and InboundEmail.objects.filter(mail_id="same@mail.example").count() == 1
    assert [m.content for m in customer_messages(maya_chat)].count("Once, please.") == 1


def test_a_forged_reply_address_never_attaches(maya_chat):
    good = reply_address.reply_address(maya_chat)
    local, domain = good.split("@")
    forged = local[:-4] + ("0000" if not local.endswith("0000") else "1111") + "@" + domain
    record = inbound_mail.receive(mail(to=forged, in_reply_to="<reply-1@desk.example>", text="Let me in."),
                                  source="imap")
    assert record.outcome == InboundEmail.STARTED and record.conversation != maya_chat
    assert "Let me in." not in [m.content for m in customer_messages(maya_chat)]


def test_a_stale_reply_address_never_attaches(maya_chat, settings):
    old = reply_address.reply_address(maya_chat, now=time.time() - 2 * settings.INBOUND_REPLY_ADDRESS_MAX_AGE)
    assert inbound_mail.receive(mail(to=old, text="Old mail."), source="imap").conversation != maya_chat
    current = reply_address.reply_address(maya_chat)
    links_revoke(maya_chat)  # staff revoked the conversation's links: its reply addresses go with them
    record = inbound_mail.receive(mail(to=current, text="After revoking."), source="imap")
    assert record.conversation != maya_chat and record.outcome == InboundEmail.STARTED


def test_another_customers_thread_never_attaches(maya_chat, inbound):
    """Tom has Maya's reply address and our Message-ID (she forwarded the mail): his mail is his own."""
    address = reply_address.reply_address(maya_chat)
    by_address = inbound_mail.receive(mail(sender="tom@example.com", to=address, text="Refund Maya to me."),
                                      source="imap")
    by_reference = inbound_mail.receive(mail(sender="tom@example.com", in_reply_to="<reply-1@desk.example>",
                                             text="Me again."), source="imap")
    for record in (by_address, by_reference):
        assert record.conversation != maya_chat and record.conversation.customer == inbound.tom
    assert len(customer_messages(maya_chat)) == 1


def test_a_known_customer_writing_anew_gets_a_new_conversation_that_sees_no_order_yet(inbound):
    record = inbound_mail.receive(mail(sender="Maya <MAYA@example.com>", text="Hello, a question."), source="imap")
    conversation = record.conversation
    assert record.outcome == InboundEmail.STARTED and conversation.customer == inbound.maya
    # The From line proves nothing: like the widget's e-mail + order way in, no order until one is given.
    assert conversation.order_scope == Conversation.UNVERIFIED
    assert conversation.messages.filter(author=Message.SYSTEM).count() == 1  # the prompt, as any conversation


def test_a_stranger_gets_a_new_unverified_customer(inbound):
    record = inbound_mail.receive(mail(sender="Nina Park <nina@elsewhere.example>", text="Do you ship to Oslo?"),
                                  source="imap")
    nina = Customer.objects.get(email="nina@elsewhere.example")
    assert record.conversation.customer == nina and nina.name == "Nina Park"
    assert record.conversation.order_scope == Conversation.UNVERIFIED and nina.orders.count() == 0


def test_an_unverified_email_conversation_reads_no_order(inbound):
    from support.agent.tools import ToolContext
    from support.tools import common

    conversation = inbound_mail.receive(mail(text="Where is my parcel?"), source="imap").conversation
    ctx = ToolContext(customer_id=inbound.maya.pk, conversation_id=str(conversation.public_id), run_id="r",
                      call_id="c", idempotency_key="r:c")
    assert common.customer_orders(ctx) == [] and common.customer_order(ctx, "SU-41210") is None


def test_naming_an_order_of_theirs_opens_that_order_alone(inbound):
    """As the widget's e-mail + order number way in: the sender's address owns the order named."""
    first = inbound_mail.receive(mail(text="Hi, my parcel is late."), source="imap")
    assert first.conversation.order_scope == Conversation.UNVERIFIED
    again = inbound_mail.receive(mail(in_reply_to=f"<{first.mail_id}>", text="It is order su-41210."), source="imap")
    assert again.conversation == first.conversation
    assert Conversation.objects.get(pk=first.conversation.pk).order_scope == "SU-41210"


def test_naming_someone_elses_order_opens_nothing(inbound):
    tom_order = next(n for n, o in inbound.orders.items() if o.customer == inbound.tom)
    record = inbound_mail.receive(mail(text=f"Where is {tom_order}?"), source="imap")  # Maya names Tom's order
    assert Conversation.objects.get(pk=record.conversation.pk).order_scope == Conversation.UNVERIFIED


@pytest.mark.django_db(transaction=True)
def test_the_same_mail_by_four_ways_at_once_is_stored_once(demo, settings, queued):
    """A webhook retried while the mailbox is read: four deliveries of one mail at the same moment."""
    import threading

    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("SQLite serialises writers: no race to lose")
    settings.INBOUND_EMAIL_ADDRESS = ADDRESS
    settings.INBOUND_EMAILS_PER_SENDER_PER_HOUR = 1000  # the limit is not what this test is about
    for trial in range(10):
        raw = mail(text=f"Once only, trial {trial}.", message_id=f"<race-{trial}@mail.example>")
        records, barrier = [], threading.Barrier(4)

        def one():
            barrier.wait()
            try:
                records.append(inbound_mail.receive(raw, source="race").pk)
            finally:
                connection.close()

        threads = [threading.Thread(target=one) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(records) == 4 and len(set(records)) == 1
        assert InboundEmail.objects.filter(mail_id=f"race-{trial}@mail.example").count() == 1
        assert Message.objects.filter(content=f"Once only, trial {trial}.").count() == 1
