"""A case that waits on something with a time: what it waits for, until when, and what happens when the time
is up.

The desk learns it from its own tools, never from the model's words: a tool of WAIT_TOOLS whose result carries
`waiting` ({"for": ..., "within_hours": n}, written by the tool in server code: message_seller gives the seller
SELLER_ANSWER_HOURS) makes the answer of its run a wait, until the call's time plus those hours. The run's outcome is then `waiting` (whatever the model
recorded), and the conversation keeps `waiting_for` and `waiting_until`. The customer's next message clears it.

When the time is up with nothing new, the beat (support.tasks.end_waits) gives the case back, once: to the
agent (a note the customer and the model read, and a run that checks and tells the customer) or to a person
(needs a person, routed), by WAITING_RETURNS_TO. The claim is a conditional UPDATE clearing the wait it read,
in the same transaction as what follows: of two beats, one finds it; a failure leaves it for the next.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from support.customers import languages
from support.desk import services
from support.models import Conversation, Message, Run, ToolCall
from support.tools.sellers import MESSAGE_SELLER_NAME

log = logging.getLogger(__name__)

# The desk's own tools whose results may carry a wait. A tool from elsewhere (an MCP server) is third-party
# text: a `waiting` in its result means nothing.
WAIT_TOOLS = (MESSAGE_SELLER_NAME,)
WAITS_FOR_WORDS = {"seller": _("the seller")}
AGENT, PERSON = "agent", "person"
MAX_HOURS = 24 * 60  # no wait longer than this is believed
# What the customer and the model read when the agent takes a case back (the model reads it as the next turn).
BACK_TO_AGENT = _("The time we gave %(whom)s to answer has passed. Our assistant is checking where things "
                  "stand and will tell you here.")


@dataclass(frozen=True)
class Wait:
    waits_for: str  # a code of Conversation.WAITS_FOR
    until: datetime


def wait_of_run(run: Run) -> Wait | None:
    """The latest deadline a trusted tool of this run carried, if any."""
    waits = []
    for result, at in ToolCall.objects.filter(run=run, name__in=WAIT_TOOLS, status=ToolCall.EXECUTED) \
            .values_list("result", "created_at"):
        try:
            found = json.loads(result).get("waiting") or {}
            hours = float(found.get("within_hours"))
        except (TypeError, ValueError, AttributeError):
            continue
        if found.get("for") in WAITS_FOR_WORDS and 0 < hours <= MAX_HOURS:
            waits.append(Wait(found["for"], at + timedelta(hours=hours)))
    return max(waits, key=lambda w: w.until, default=None)


def wait_start(*, conversation: Conversation, wait: Wait) -> None:
    Conversation.objects.filter(pk=conversation.pk).update(waiting_for=wait.waits_for, waiting_until=wait.until)
    conversation.waiting_for, conversation.waiting_until = wait.waits_for, wait.until


def waits_end(*, now: datetime | None = None) -> list[str]:
    """Give back every case whose wait is over; the public ids of those this call gave back."""
    now = now or timezone.now()
    done = []
    for conversation in Conversation.objects.filter(waiting_until__lte=now):
        try:
            with transaction.atomic():
                if _claim(conversation):
                    _give_back(conversation)
                    done.append(str(conversation.public_id))
        except Exception:  # one case never stops the others; its wait stands and the next beat tries again
            log.exception("conversation %s: its ended wait not handed back", conversation.public_id)
    return done


def _claim(conversation: Conversation) -> bool:
    return bool(Conversation.objects.filter(pk=conversation.pk, waiting_until=conversation.waiting_until)
                .update(waiting_for="", waiting_until=None))


def _give_back(conversation: Conversation) -> None:
    whom = WAITS_FOR_WORDS.get(conversation.waiting_for, _("them"))
    if conversation.is_closed() or conversation.status != Conversation.OPEN:
        return  # closed, or a person has it already: nothing to give back
    if settings.WAITING_RETURNS_TO == PERSON:
        services.conversation_flag(conversation_id=conversation.pk,
                                   reason=f"The wait for {whom} ended with no news: check and tell the customer.")
        return
    note = languages.say(conversation, BACK_TO_AGENT, whom=whom)
    services.message_append(conversation=conversation, wire={"role": "user", "content": note},
                            author=Message.SYSTEM)
    services.run_start_if_idle(conversation_id=conversation.pk)

