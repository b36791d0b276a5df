"""`manage.py reset_demo` (`./dev reset`): a walk-through's conversations, refunds and rate-limit counters go,
and the demo is as first seeded. Refused with DEBUG off: it deletes conversations."""

from __future__ import annotations

import io
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from support.desk import services
from support.models import Conversation, Message, Refund, Run
from support.ops import limits
from tests.desk_factories import pending_refund_approval, start_conversation


@pytest.mark.django_db
def test_reset_demo_deletes_the_walk_throughs_conversations_refunds_and_limit_counters(demo, settings):
    settings.DEBUG = True
    conversation = start_conversation(demo.maya)
    services.conversation_post_message(conversation=conversation, text="My parcel SU-41310 never came.")
    pending_refund_approval(start_conversation(demo.tom))
    Refund.objects.create(order=demo.orders["SU-41310"], amount=Decimal("64.00"), reason="missing")
    limits.hit(limits.Limit("messages:conversation:x", 5, 60))
    out = io.StringIO()
    call_command("reset_demo", stdout=out)
    assert not Conversation.objects.exists() and not Run.objects.exists() and not Message.objects.exists()
    assert not Refund.objects.filter(order__number="SU-41310").exists()
    assert not list(limits.store().scan_iter(match=limits.KEY_PREFIX + "*"))
    assert "Demo reset" in out.getvalue()
    call_command("reset_demo", stdout=io.StringIO())  # again: nothing left to delete, still fine


@pytest.mark.django_db
def test_reset_demo_is_refused_with_debug_off(demo, settings):
    settings.DEBUG = False
    start_conversation(demo.maya)
    with pytest.raises(CommandError, match="demo site only"):
        call_command("reset_demo")
    assert Conversation.objects.count() == 1
