"""Writes of the staff inbox: taking, assigning and unassigning a conversation, closing and reopening it, and
each staff member's read marker. Each change is recorded (InboxEvent: who, when, what) and told to every
staff console after the commit (`inbox.changed`; a read marker only to the reader's own consoles).

Lock order (services.py's comment): these lock the conversation's row and no run's, so they never take a
run's lock after the conversation's. Closing reads the runs (no lock) while holding the conversation's row:
runs are created only under that lock, so none can start meanwhile.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from support.customers import languages
from support.customers.words import staff_name
from support.desk import feedback, permissions, takeover
from support.desk.selectors_inbox import person_json
from support.desk.services import message_append
from support.live import events
from support.models import Conversation, Message, Run
from support.models.desk import ConversationRead, InboxEvent


class InboxConflict(Exception):
    """Someone else got there first, or the conversation's state forbids the change; the text says which."""


class NotStaff(ValueError):
    """The person to assign is not an active staff member."""


def _at(value) -> str:
    return value.astimezone(timezone.get_current_timezone()).strftime("%H:%M")


def _record(conversation: Conversation, kind: str, actor, assignee=None) -> None:
    takeover.record_inbox_event(conversation, kind, actor, assignee)


def _locked(conversation: Conversation) -> Conversation:
    # The assignee read apart: FOR UPDATE cannot take the nullable side of an outer join (PostgreSQL).
    current = Conversation.objects.select_for_update(of=("self",)).get(pk=conversation.pk)
    current.assignee  # noqa: B018  (loaded now, for the names in errors and events)
    return current


# One model of ownership: a conversation assigned to a person is theirs to answer and the agent is silent
# (takeover.conversation_take_over); unassigning it hands it back to the agent.

def conversation_take(*, conversation: Conversation, user) -> Conversation:
    """Assign to me, if nobody has it: the first of two people to act gets it, the second is told who did
    (InboxConflict). Taking it again is a no-op."""
    try:
        return takeover.conversation_take_over(conversation=conversation, user=user, only_if_free=True)
    except takeover.AlreadyAssigned as e:
        since = f" at {_at(e.since)}" if e.since else ""
        raise InboxConflict(f"{person_json(e.assignee)['name']} already has this conversation (assigned{since}).") \
            from None


def conversation_assign(*, conversation: Conversation, actor, assignee_username: str) -> Conversation:
    """Give the conversation to a colleague (or to oneself), whoever has it now: a deliberate hand-on. The
    agent stops, as when that person assigns it to themself."""
    assignee = get_user_model().objects.filter(username=assignee_username, is_active=True, is_staff=True).first()
    if assignee is None:
        raise NotStaff("Conversations can be assigned to active staff members only.")
    return takeover.conversation_take_over(conversation=conversation, user=assignee, actor=actor)


def conversation_unassign(*, conversation: Conversation, actor) -> Conversation:
    """Nobody has it any more: the agent answers again (takeover.conversation_hand_back)."""
    takeover.conversation_hand_back(conversation=conversation, user=actor)
    conversation.refresh_from_db()
    return conversation


def closed_notice(user, *, conversation: Conversation) -> str:
    """The line the customer (and the model, should they write again) reads when a person closes the
    conversation, in the conversation's language."""
    name = staff_name(user) if user is not None else ""
    if not name:
        return languages.say(conversation, _("Our team has closed this conversation. If you need anything else, "
                                             "just write here."))
    return languages.say(conversation, _("%(name)s from our team has closed this conversation. If you need "
                                         "anything else, just write here."), name=name)


def conversation_close(*, conversation: Conversation, actor) -> Conversation:
    """Done with. Not while the agent works on it or an approval waits (decide it, or take it over first).
    The customer is told in one line, then their widget offers the rating (the line is published first: both
    go out after the commit, in this order). A customer who writes afterwards reopens it (selectors_inbox
    derives that from their message)."""
    with transaction.atomic():
        current = _locked(conversation)
        if current.is_closed():
            return current  # closed already
        if Run.objects.filter(conversation=current, status__in=Run.ACTIVE).exists():
            raise InboxConflict("The agent is still working on this conversation or waiting for an approval: "
                                "decide the approval or take the conversation over before closing it.")
        now = timezone.now()
        Conversation.objects.filter(pk=current.pk).update(closed_at=now, closed_by=actor)
        current.closed_at, current.closed_by = now, actor
        message_append(conversation=current, author=Message.SYSTEM, user=actor,
                       wire={"role": "assistant", "content": closed_notice(actor, conversation=current)})
        _record(current, InboxEvent.CLOSED, actor)
        transaction.on_commit(lambda: feedback.publish_closed(current))  # the widget offers a rating
    return current


def conversation_reopen(*, conversation: Conversation, actor) -> Conversation:
    with transaction.atomic():
        current = _locked(conversation)
        if current.closed_at is None:
            return current
        Conversation.objects.filter(pk=current.pk).update(closed_at=None, closed_by=None)
        current.closed_at, current.closed_by = None, None
        _record(current, InboxEvent.REOPENED, actor)
    return current


def conversation_mark_read(*, conversation: Conversation, user, seq: int) -> int:
    """The user has read the conversation up to `seq` (never past its last seq, never backwards). Returns the
    marker now; the user's consoles are told (`inbox.read`), so their other tabs update the unread count."""
    last_seq = Conversation.objects.values_list("last_seq", flat=True).get(pk=conversation.pk)
    seq = max(0, min(int(seq), last_seq))
    rows = ConversationRead.objects.filter(user=user, conversation=conversation)
    if not rows.filter(last_read_seq__lt=seq).update(last_read_seq=seq, read_at=timezone.now()):
        if not rows.exists():
            try:
                with transaction.atomic():
                    ConversationRead.objects.create(user=user, conversation=conversation, last_read_seq=seq)
            except IntegrityError:  # another tab of the same person, at the same moment
                rows.filter(last_read_seq__lt=seq).update(last_read_seq=seq, read_at=timezone.now())
    marker = rows.values_list("last_read_seq", flat=True).first() or 0
    event = {"type": "inbox.read", "conversation": str(conversation.public_id), "seq": last_seq,
             "read_seq": marker}
    events.publisher.send([permissions.staff_user_group(user.pk)], event)
    return marker
