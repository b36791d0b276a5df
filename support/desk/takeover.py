"""Staff taking a conversation over from the agent, writing to the customer, and handing it back (the lock
order is services.py's)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from support.customers import languages
from support.desk import serializers
from support.desk.selectors_inbox import person_json
from support.desk.services import message_append, message_clean, run_start_if_idle
from support.live import events
from support.models import Approval, Conversation, Message, Run, ToolCall
from support.models.desk import InboxEvent

# -- staff taking a conversation over ----------------------------------------------------------------

TAKEN_OVER = "a staff member took the conversation over"
TAKEN_OVER_RESULT = f"ERROR: not run: {TAKEN_OVER}"
HANDED_BACK = "a person had the conversation before it was handed back"


class _RunStartedMeanwhile(Exception):
    """A customer's message created a run after the runs were locked and before the conversation was."""


def _with_runs_then_conversation(conversation: Conversation, work):
    """work(runs) in a transaction that holds every run of the conversation, then the conversation.

    Runs are created only under the conversation's lock: one that appears between the two steps was
    committed by a message that got the lock first, and locking it now, after the conversation, could
    deadlock with a worker claiming it. So start over; the next attempt locks it in order.
    """
    for attempt in range(5):
        try:
            with transaction.atomic():
                runs = list(Run.objects.select_for_update().filter(conversation=conversation).order_by("pk"))
                list(Conversation.objects.select_for_update().filter(pk=conversation.pk).values_list("pk"))
                if Run.objects.filter(conversation=conversation).exclude(pk__in=[r.pk for r in runs]).exists():
                    raise _RunStartedMeanwhile()
                return work(runs)
        except _RunStartedMeanwhile:
            if attempt == 4:
                raise


class AlreadyAssigned(Exception):
    """Someone else has the conversation (conversation_take_over with only_if_free)."""

    def __init__(self, assignee, since):
        super().__init__(f"{serializers.staff_name(assignee)} has the conversation")
        self.assignee, self.since = assignee, since


def record_inbox_event(conversation: Conversation, kind: str, actor, assignee=None) -> None:
    """Who did what to the conversation's ownership (InboxEvent), told to every staff console after the
    commit (`inbox.changed`)."""
    InboxEvent.objects.create(conversation=conversation, kind=kind, actor=actor, assignee=assignee)
    now = timezone.now()
    event = {"type": "inbox.changed", "conversation": str(conversation.public_id), "seq": conversation.last_seq,
             "change": kind, "by": person_json(actor), "assignee": person_json(assignee) if kind == "assigned"
             else None, "at": now.isoformat().replace("+00:00", "Z")}
    groups = [events.STAFF_GROUP, events.staff_conversation_group(conversation.public_id)]
    transaction.on_commit(lambda: events.publisher.send(groups, event))


def conversation_take_over(*, conversation: Conversation, user, actor=None, only_if_free: bool = False) -> Conversation:
    """Assign the conversation to `user` (by `actor`, the user themself by default): one model of ownership,
    so a person who has the conversation answers it and the agent is silent. The active run stops now,
    whatever it is doing: a worker on it finds its lease gone at its next write and saves nothing more (a
    tool transaction in progress holds the run's lock, so this waits for it and sees its result). Every
    call of the history without a result is answered as not run, so nothing asked for before (pending,
    approved, half-run) runs after. only_if_free: raise AlreadyAssigned if a colleague has it (the first of
    two people to act gets it)."""
    actor = actor or user

    def take_over(runs: list[Run]) -> None:
        assignee_id, assigned_at = Conversation.objects.filter(pk=conversation.pk).values_list(
            "assignee_id", "assigned_at").get()  # locked
        if only_if_free and assignee_id not in (None, user.pk):
            raise AlreadyAssigned(get_user_model().objects.get(pk=assignee_id), assigned_at)
        now = timezone.now()
        if not Conversation.objects.filter(pk=conversation.pk).exclude(
                status=Conversation.TAKEN_OVER, assignee=user).update(
                status=Conversation.TAKEN_OVER, assignee=user, attention_reason="", updated_at=now,
                **({} if assignee_id == user.pk and assigned_at else {"assigned_at": now})):
            return  # already this person's
        conversation.refresh_from_db()
        for run in runs:
            if run.status in Run.ACTIVE:
                _stop_taken_over_run(run)
        tool_calls_close_open(conversation, runs, TAKEN_OVER)
        # One notice, after the open calls' results (the model's history stays valid), in both transcripts.
        message_append(conversation=conversation, author=Message.SYSTEM, user=user,
                       wire={"role": "assistant", "content": joined_notice(user, conversation=conversation)})
        if assignee_id != user.pk:
            record_inbox_event(conversation, InboxEvent.ASSIGNED, actor, user)
        transaction.on_commit(lambda: serializers.publish_conversation(conversation, "conversation.assigned"))

    _with_runs_then_conversation(conversation, take_over)
    return conversation


def _stop_taken_over_run(run: Run) -> None:
    """Stop a run whose lock is held. Clearing the lease fences its worker, if it has one, out."""
    Run.objects.filter(pk=run.pk).update(status=Run.STOPPED, stop_reason="taken_over", lease="",
                                         finished_at=timezone.now(), detail=TAKEN_OVER)
    run.refresh_from_db()
    transaction.on_commit(lambda: serializers.publish_run(run))


def tool_calls_close_open(conversation: Conversation, runs: list[Run], why: str) -> None:
    """Answer every call of the history that has no result as not run, and mark its rows: the tool call
    rejected, a pending approval expired, an approved one kept as decided but marked not run. Call holding
    the runs' and the conversation's locks: no worker can add a result meanwhile."""
    messages = list(conversation.messages.filter(role__in=("assistant", "tool")).order_by("seq").only(
        "role", "tool_calls", "tool_call_id", "run_id"))
    answered = {m.tool_call_id for m in messages if m.role == "tool"}
    open_calls = [(m.run_id, c["id"]) for m in messages if m.role == "assistant" for c in m.tool_calls or []
                  if c.get("id") and c["id"] not in answered]
    if not open_calls:
        return
    by_pk, now, result = {r.pk: r for r in runs}, timezone.now(), f"ERROR: not run: {why}"
    for run_id, call_id in open_calls:
        message_append(conversation=conversation, author=Message.TOOL, run=by_pk.get(run_id),
                       wire={"role": "tool", "tool_call_id": call_id, "content": result})
    calls = ToolCall.objects.filter(run__conversation=conversation, call_id__in=[c for _, c in open_calls])
    approvals = Approval.objects.filter(tool_call__in=calls)
    changed = list(approvals.filter(Q(decided_at__isnull=True) | Q(decision=Approval.APPROVED, not_run_reason=""))
                   .values_list("pk", flat=True))
    approvals.filter(decided_at__isnull=True).update(decided_at=now, decision=Approval.EXPIRED, reason=why,
                                                     not_run_reason=why)
    approvals.filter(decision=Approval.APPROVED, not_run_reason="").update(not_run_reason=why)
    calls.exclude(status__in=(ToolCall.EXECUTED, ToolCall.FAILED, ToolCall.REJECTED)).update(
        status=ToolCall.REJECTED, result=result, updated_at=now)
    for pk in changed:
        transaction.on_commit(lambda pk=pk: serializers.publish_approval(Approval.objects.get(pk=pk)))


class NotTakenOver(Exception):
    pass


def conversation_staff_reply(*, conversation: Conversation, user, text) -> Message:
    """A staff member's reply, shown to the customer live and read by the agent if it is handed back."""
    text = message_clean(text)
    with transaction.atomic():
        current = Conversation.objects.select_for_update().get(pk=conversation.pk)
        if current.status != Conversation.TAKEN_OVER:
            raise NotTakenOver("Take the conversation over before replying.")
        return message_append(conversation=conversation, wire={"role": "assistant", "content": text},
                              author=Message.STAFF, user=user)


def joined_notice(user, *, conversation: Conversation | None = None) -> str:
    """What the customer (and the model) read when a staff member takes the conversation over, in the
    conversation's language."""
    name = serializers.staff_name(user)
    if not name:
        return languages.say(conversation, _("A member of our team has joined the conversation."))
    return languages.say(conversation, _("%(name)s from our team has joined the conversation."), name=name)


def handed_back_notice(user, *, joined: bool = True, conversation: Conversation | None = None) -> str:
    """What the customer (and the model) read on hand-back. The model reads it as its own words, so it also
    tells the model that a person took care of everything above: only what the customer writes after it
    is the agent's to answer (a "Thanks Sam" before it was meant for the person). joined=False: nobody had
    joined (a conversation waiting for a person, handed back from the queue)."""
    if not joined:
        return languages.say(conversation, _("Our assistant is back on this conversation and will answer "
                                             "anything new you write here."))
    name = serializers.staff_name(user)
    if not name:
        return languages.say(conversation, _("A member of our team took care of the conversation above and has "
                                             "handed it back to our assistant, which will answer anything new "
                                             "you write here."))
    return languages.say(conversation, _("%(name)s from our team took care of the conversation above and has "
                                         "handed it back to our assistant, which will answer anything new you "
                                         "write here."), name=name)


def conversation_hand_back(*, conversation: Conversation, user) -> Run | None:
    """The agent answers again. Calls still without a result (a run that stalled inside a tool) are answered
    as not run first: a person had the conversation, so nothing asked for before it runs now.

    From a person who had joined (taken over): one notice, and no run: what the customer wrote to the person
    was for the person, so the agent starts when the customer next writes. From the queue (nobody joined):
    the customer's unanswered message is the agent's to answer, so a run starts for it; with nothing
    unanswered, one notice says the assistant is back."""
    def hand_back(runs: list[Run]) -> Run | None:
        was, previous = Conversation.objects.filter(pk=conversation.pk).values_list(
            "status", "assignee").get()  # locked
        if not Conversation.objects.filter(pk=conversation.pk).exclude(status=Conversation.OPEN).update(
                status=Conversation.OPEN, assignee=None, assigned_at=None, attention_reason="",
                updated_at=timezone.now()):
            return None
        conversation.refresh_from_db()
        if previous is not None:
            record_inbox_event(conversation, InboxEvent.UNASSIGNED, user,
                               get_user_model().objects.get(pk=previous))
        if not any(run.status in Run.ACTIVE for run in runs):  # an active run answers its own calls
            tool_calls_close_open(conversation, runs, HANDED_BACK)
        last = conversation.messages.exclude(role__in=("tool", "system")).order_by("-seq").first()
        run = None
        if was != Conversation.TAKEN_OVER and last is not None and last.role == "user":
            run = run_start_if_idle(conversation_id=conversation.pk)
        else:
            message_append(conversation=conversation, author=Message.SYSTEM, user=user,
                           wire={"role": "assistant",
                                 "content": handed_back_notice(user, joined=was == Conversation.TAKEN_OVER,
                                                               conversation=conversation)})
        transaction.on_commit(lambda: serializers.publish_conversation(conversation, "conversation.assigned"))
        return run

    return _with_runs_then_conversation(conversation, hand_back)
