"""Reads for the API: what a customer or a staff member is shown, fetched in a fixed number of queries."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Exists, IntegerField, OuterRef, Prefetch, Subquery
from django.db.models.functions import Coalesce

from support.customers.identity import parse_uuid
from support.desk import serializers
from support.ops.prepared import Prepared
from support.models import Approval, Conversation, Message, Run, Step

APPROVAL_STATUSES = ("pending", "decided", "all")
CONVERSATION_STATUSES = tuple(value for value, _ in Conversation.STATUSES)
STAFF_LIST_LIMIT = 200  # the most recently updated conversations; the console has no paging yet


# -- lookups by public id -------------------------------------------------------------------------------

def conversation_by_public_id(public_id) -> Conversation | None:
    wanted = parse_uuid(public_id)
    if wanted is None:
        return None
    return Conversation.objects.select_related("customer", "assignee", "closed_by").filter(public_id=wanted).first()


def approval_by_public_id(public_id) -> Approval | None:
    wanted = parse_uuid(public_id)
    if wanted is None:
        return None
    return _approvals().filter(public_id=wanted).first()


# -- messages and runs ----------------------------------------------------------------------------------

def messages_after(conversation: Conversation, after_seq: int, *, staff: bool) -> list[Message]:
    """Messages with seq > after_seq in order; a customer sees only what serializers.customer_can_see allows."""
    if not staff:
        # Narrowed in the database, then the one rule applied, so the two can never disagree. No run: a
        # customer is not shown which run wrote what.
        messages = _customer_visible(conversation.messages.filter(seq__gt=after_seq)).select_related(
            "author_user").prefetch_related("attachments")
        return [m for m in messages.order_by("seq") if serializers.customer_can_see(m)]
    messages = conversation.messages.filter(seq__gt=after_seq).select_related("author_user", "run").prefetch_related(
        "attachments")
    return list(messages.order_by("seq"))


def _customer_visible(messages):
    return messages.filter(role__in=("user", "assistant")).exclude(content__isnull=True).exclude(content="")


def latest_run(conversation: Conversation) -> Run | None:
    """The conversation's newest run: the active one when there is one (a new run starts only when none is)."""
    return conversation.runs.order_by("-created_at", "-pk").first()


def run_summary(run: Run | None, *, staff: bool = False) -> dict | None:
    if run is None:
        return None
    summary = {"id": str(run.public_id), "status": run.status, "stop_reason": run.stop_reason or None,
               "outcome": run.outcome or None}
    if staff:  # what a run cost is the desk's business, not the customer's
        summary.update(cost_usd=str(run.cost_usd),
                       created_at=run.created_at.isoformat().replace("+00:00", "Z") if run.created_at else None)
    return summary


RUN_STATE = ("public_id", "status", "stop_reason", "outcome")  # what run_summary shows a customer


def conversation_state(conversation: Conversation, *, newer_than: int | None = None, staff: bool = False) -> dict:
    """What a client needs besides the messages after it (re)connects: who answers, and what the run is at.

    One statement: the conversation's row (`conversation` is refreshed with its status, assignee and last seq),
    its newest run's state, its count of approvals waiting and the seq of the last message the client sees
    (`staff`, or a customer), as correlated subqueries, compiled once per process (support/ops/prepared.py).
    `newer_than`: the dict also says, as "newer", whether a message after that seq is one the client sees (a
    replay with nothing to send reads no messages)."""
    found = _STATE[staff].rows(pk=conversation.pk)
    if not found:
        raise Conversation.DoesNotExist(f"conversation {conversation.pk} is gone")
    row = found[0]
    conversation.status, conversation.last_seq = row["status"], row["last_seq"]
    conversation.assignee_id = row["assignee_id"]  # a different id drops a cached assignee
    run = Run(**{name: row[f"run_{name}"] for name in RUN_STATE}) if row["run_public_id"] else None
    state = {
        "status": conversation.status,
        "assignee": (row["assignee__first_name"] or row["assignee__username"]) if row["assignee_id"] else None,
        "run": run_summary(run),
        "pending_approvals": row["pending_approvals"],
    }
    if newer_than is not None:
        last_seen = row["last_seq"] if staff else row["last_seen"]
        state["newer"] = last_seen is not None and last_seen > newer_than
    return state


def _state_query(*, staff: bool):
    def build(pk):
        newest = Run.objects.filter(conversation=OuterRef("pk")).order_by("-created_at", "-pk")
        pending = (Approval.objects.filter(run__conversation=OuterRef("pk"), decided_at__isnull=True).order_by()
                   .values("run__conversation").annotate(n=Count("pk")).values("n"))
        seen = {}
        if not staff:  # staff see every message: the last seq is the conversation's own
            visible = _customer_visible(Message.objects.filter(conversation=OuterRef("pk")))
            seen["last_seen"] = Subquery(visible.order_by("-seq").values("seq")[:1])
        return (Conversation.objects.filter(pk=pk)
                .annotate(pending_approvals=Coalesce(Subquery(pending, output_field=IntegerField()), 0),
                          **{f"run_{name}": Subquery(newest.values(name)[:1]) for name in RUN_STATE}, **seen)
                .values("status", "last_seq", "assignee_id", "assignee__first_name", "assignee__username",
                        "pending_approvals", *(f"run_{name}" for name in RUN_STATE), *seen))

    return Prepared(Conversation, build, "pk")


_STATE = {staff: _state_query(staff=staff) for staff in (False, True)}


# -- approvals ------------------------------------------------------------------------------------------

def _approvals():
    return Approval.objects.select_related("tool_call", "run__conversation", "decided_by", "requested_by",
                                           "first_approved_by", "routed_to", "staff_action__conversation",
                                           "staff_action__user")


def approvals_list(status: str = "pending") -> list[Approval]:
    """Approvals oldest first: "pending", "decided" or "all" (anything else is a ValueError)."""
    if status not in APPROVAL_STATUSES:
        raise ValueError(f"status must be one of {', '.join(APPROVAL_STATUSES)}")
    approvals = _approvals().order_by("requested_at", "pk")
    if status == "pending":
        approvals = approvals.filter(decided_at__isnull=True)
    elif status == "decided":
        approvals = approvals.filter(decided_at__isnull=False)
    return list(approvals)


# -- the staff's conversations --------------------------------------------------------------------------

def conversations_for_staff(status: str | None = None) -> list[Conversation]:
    """Recently updated conversations, each with .latest_run (or None) and .pending_approvals; three queries."""
    if status is not None and status not in CONVERSATION_STATUSES:
        raise ValueError(f"status must be one of {', '.join(CONVERSATION_STATUSES)}")
    newest_run = Run.objects.filter(conversation=OuterRef("pk")).order_by("-created_at", "-pk").values("pk")[:1]
    # Correlated subqueries rather than a join + GROUP BY: the same SQL is valid on SQLite and PostgreSQL.
    pending = (Approval.objects.filter(run__conversation=OuterRef("pk"), decided_at__isnull=True).order_by()
               .values("run__conversation").annotate(n=Count("pk")).values("n"))
    conversations = (
        Conversation.objects.select_related("customer", "assignee")
        .filter(Exists(Message.objects.filter(conversation=OuterRef("pk")).exclude(role="system")))  # not empty
        .annotate(pending_approvals=Coalesce(Subquery(pending, output_field=IntegerField()), 0),
                  latest_run_id=Subquery(newest_run))
        .order_by("-updated_at", "-pk")
    )
    if status is not None:
        conversations = conversations.filter(status=status)
    conversations = list(conversations[:STAFF_LIST_LIMIT])
    runs = Run.objects.in_bulk([c.latest_run_id for c in conversations if c.latest_run_id])
    for conversation in conversations:
        conversation.latest_run = runs.get(conversation.latest_run_id)
    return conversations


@dataclass(frozen=True)
class ConversationDetail:
    conversation: Conversation
    messages: list[Message]
    runs: list[Run]  # oldest first, each with its steps prefetched
    approvals: list[Approval]


def conversation_detail_for_staff(conversation: Conversation) -> ConversationDetail:
    """Everything a staff member sees of one conversation: all messages, the runs with their trace, approvals."""
    runs = (
        conversation.runs.select_related("conversation", "profile_version").order_by("created_at", "pk")
        .prefetch_related(Prefetch("steps", queryset=Step.objects.order_by("pk")))
    )
    approvals = _approvals().filter(run__conversation=conversation).order_by("requested_at", "pk")
    return ConversationDetail(conversation=conversation, messages=messages_after(conversation, 0, staff=True),
                              runs=list(runs), approvals=list(approvals))
