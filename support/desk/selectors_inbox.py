"""Reads for the staff inbox: one row per conversation with what a support agent sorts and picks by, for one
viewer (their unread counts), filtered and searched in the database, in a fixed number of queries.

A row's status is derived, never stored (INBOX_STATUSES): closed (a staff member closed it and the customer
has not written since), with a person (assigned: the agent is silent; the words name the person), needs a
person, waiting for approval, resolved (the agent's last run ended resolved and nothing new came), the agent
working (a run is active), else with the agent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import (BooleanField, Count, DateTimeField, Exists, ExpressionWrapper, F, IntegerField, OuterRef,
                              Q, Subquery, TextField, Value)
from django.db.models.functions import Cast, Coalesce, Least

from support.desk import routing
from support.desk.feedback import rating_json
from support.desk.serializers import waiting_json
from support.models import Approval, Conversation, Message, Order, Rating, Run, ToolCall
from support.models.desk import ConversationRead, InboxEvent

AGENT_WORKING, WITH_AGENT = "agent_working", "with_agent"
WAITING_APPROVAL, NEEDS_PERSON = "waiting_approval", "needs_person"
WITH_PERSON, RESOLVED, CLOSED = "with_person", "resolved", "closed"
WAITING = "waiting"  # on something with a time (support/desk/waiting.py): the seller's answer
INBOX_STATUSES = {  # code -> the words staff read ("With a person" is "With Sam" on a row: status_words)
    AGENT_WORKING: "Agent working", WITH_AGENT: "With the agent", WAITING_APPROVAL: "Waiting for approval",
    NEEDS_PERSON: "Needs a person", WITH_PERSON: "With a person", WAITING: "Waiting", RESOLVED: "Resolved",
    CLOSED: "Closed",
}
# "" is every conversation that is not closed; "all" includes the closed ones. "routed_to_me": in the viewer's
# queue by routing (support/desk/routing.py), nobody assigned.
ROUTED_TO_ME = "routed_to_me"
FILTERS = ("", "mine", ROUTED_TO_ME, "unassigned", NEEDS_PERSON, WAITING_APPROVAL, WITH_PERSON, WAITING, CLOSED,
           "all")
SORTS = ("updated", "waiting", "expiring")  # expiring: least time left on a pending approval first
DEFAULT_LIMIT, MAX_LIMIT = 50, 200
PREVIEW_CHARS = 160
ORDER_NUMBER = re.compile(r"\b[A-Z]{2}-\d{3,}\b", re.IGNORECASE)


@dataclass(frozen=True)
class InboxPage:
    rows: list[dict]
    count: int  # every conversation matching the filter and search, of which `rows` is one page


def _answered(conversation_ref) -> Message:
    """The agent's or a staff member's answers in a conversation (not tool calls, not the desk's notices)."""
    return (Message.objects.filter(conversation=conversation_ref, role="assistant",
                                   author__in=(Message.AGENT, Message.STAFF))
            .exclude(content__isnull=True).exclude(content=""))


def said_anything(conversation_ref) -> Exists:
    """A conversation with more than its system prompt: someone wrote. An empty one (the widget no longer
    makes them, API clients still may) is never listed nor counted, and services.conversations_empty_delete
    removes it after a day."""
    return Exists(Message.objects.filter(conversation=conversation_ref).exclude(role="system"))


def _annotated(viewer):
    conv = OuterRef("pk")
    customer_messages = Message.objects.filter(conversation=conv, author=Message.CUSTOMER)
    pending = (Approval.objects.filter(run__conversation=conv, decided_at__isnull=True).order_by()
               .values("run__conversation").annotate(n=Count("pk")).values("n"))
    read_seq = ConversationRead.objects.filter(conversation=conv, user=viewer).values("last_read_seq")[:1]
    # The nearest expiry of its pending approvals: stamped when asked, or sooner when the timeout was shortened
    # since (selectors_approvals.effective_expiry reads the same two).
    by_timeout = ExpressionWrapper(F("requested_at") + timedelta(seconds=settings.APPROVAL_TIMEOUT_SECONDS),
                                   output_field=DateTimeField())
    nearest_expiry = (Approval.objects.filter(run__conversation=conv, decided_at__isnull=True)
                      .annotate(at=Least("expires_at", by_timeout)).order_by("at").values("at")[:1])
    unread = (Message.objects.filter(conversation=conv, author=Message.CUSTOMER,
                                     seq__gt=Coalesce(OuterRef("read_seq"), 0))
              .order_by().values("conversation").annotate(n=Count("pk")).values("n"))
    shown = (Message.objects.filter(conversation=conv, role__in=("user", "assistant"))
             .exclude(content__isnull=True).exclude(content=""))
    return (
        Conversation.objects.select_related("customer", "assignee", "closed_by", "rating", "routed_to")
        .filter(said_anything(conv))  # a chat opened and never written to is not a conversation yet
        .annotate(
            pending_approvals=Coalesce(Subquery(pending, output_field=IntegerField()), 0),
            nearest_expiry=Subquery(nearest_expiry, output_field=DateTimeField()),
            latest_run_id=Subquery(Run.objects.filter(conversation=conv).order_by("-created_at", "-pk")
                                   .values("pk")[:1]),
            last_customer_at=Subquery(customer_messages.order_by("-seq").values("created_at")[:1]),
            last_answer_seq=Subquery(_answered(conv).order_by("-seq").values("seq")[:1]),
            # The oldest customer message nobody has answered yet: how long the customer has waited.
            waiting_since=Subquery(customer_messages.filter(seq__gt=Coalesce(OuterRef("last_answer_seq"), 0))
                                   .order_by("seq").values("created_at")[:1]),
            last_message_id=Subquery(shown.order_by("-seq").values("pk")[:1]),
            read_seq=Subquery(read_seq),
            # When the customer first wrote to us: the shop keeps no sign-up date.
            customer_since=Subquery(Conversation.objects.filter(customer=OuterRef("customer"))
                                    .order_by("created_at").values("created_at")[:1]),
            unread=Coalesce(Subquery(unread, output_field=IntegerField()), Value(0)),
            # How the customer last wrote: widget / e-mail.
            channel=Subquery(customer_messages.order_by("-seq").values("channel")[:1]),
        )
    )


def _is_open() -> Q:
    return Q(closed_at__isnull=True) | Q(last_customer_at__gt=F("closed_at"))


def _is_closed() -> Q:
    return Q(closed_at__isnull=False) & (Q(last_customer_at__isnull=True) | Q(last_customer_at__lte=F("closed_at")))


def _filtered(queryset, filter_: str, viewer):
    if filter_ == "all":
        return queryset
    if filter_ == CLOSED:
        return queryset.filter(_is_closed())
    queryset = queryset.filter(_is_open())
    if filter_ == "mine":
        return queryset.filter(assignee=viewer)
    if filter_ == "unassigned":
        return queryset.filter(assignee__isnull=True)
    if filter_ == ROUTED_TO_ME:
        return queryset.filter(routing.routed_filter(viewer))
    if filter_ == NEEDS_PERSON:
        return queryset.filter(status=Conversation.NEEDS_ATTENTION)
    if filter_ == WITH_PERSON:
        return queryset.filter(status=Conversation.TAKEN_OVER)
    if filter_ == WAITING_APPROVAL:
        return queryset.filter(pending_approvals__gt=0)
    if filter_ == WAITING:
        return queryset.filter(waiting_until__isnull=False, status=Conversation.OPEN)
    return queryset


def _searched(queryset, q: str):
    """Customer name or e-mail, one of the customer's order numbers, or words of the conversation. For an order
    number, `about_order` marks the conversations about it: its scope, a message or a tool call names it."""
    q = q.strip()
    if not q:
        return queryset
    orders = Order.objects.filter(customer=OuterRef("customer"), number__icontains=q)
    said = Message.objects.filter(conversation=OuterRef("pk"), role__in=("user", "assistant"), content__icontains=q)
    found = queryset.filter(Q(customer__name__icontains=q) | Q(customer__email__icontains=q)
                            | Exists(orders) | Exists(said))
    if not ORDER_NUMBER.fullmatch(q):
        return found
    called = (ToolCall.objects.annotate(text=Cast("arguments", TextField()))
              .filter(run__conversation=OuterRef("pk"), text__icontains=q))
    about = Q(order_scope__iexact=q) | Exists(said) | Exists(called)
    return found.annotate(about_order=ExpressionWrapper(about, output_field=BooleanField()))


def inbox(viewer, *, filter_: str = "", q: str = "", sort: str = "updated", limit: int = DEFAULT_LIMIT,
          offset: int = 0, ids: list | None = None) -> InboxPage:
    """One page of the viewer's inbox. `ids` (public ids) narrows it to those conversations, for refreshing
    rows a live event named: a conversation that no longer matches the filter is simply not returned."""
    if filter_ not in FILTERS:
        raise ValueError(f"filter must be one of: {', '.join(f or '(none)' for f in FILTERS)}")
    if sort not in SORTS:
        raise ValueError(f"sort must be one of: {', '.join(SORTS)}")
    queryset = _searched(_filtered(_annotated(viewer), filter_, viewer), q)
    if ids is not None:
        queryset = queryset.filter(public_id__in=ids)
    first = ["-about_order"] if "about_order" in queryset.query.annotations else []  # an order's own, first
    if sort == "waiting":  # longest-waiting customer first; those not waiting after them, newest first
        queryset = queryset.order_by(*first, F("waiting_since").asc(nulls_last=True), "-updated_at", "-pk")
    elif sort == "expiring":  # least time left on a pending approval first; the rest after them, newest first
        queryset = queryset.order_by(*first, F("nearest_expiry").asc(nulls_last=True), "-updated_at", "-pk")
    else:
        queryset = queryset.order_by(*first, "-updated_at", "-pk")
    limit = max(1, min(limit, MAX_LIMIT))
    conversations = list(queryset[offset:offset + limit])
    count = len(conversations) if ids is not None or (offset == 0 and len(conversations) < limit) \
        else queryset.count()
    return InboxPage(rows=_rows(conversations), count=count)


def _rows(conversations: list[Conversation]) -> list[dict]:
    runs = Run.objects.in_bulk([c.latest_run_id for c in conversations if c.latest_run_id])
    last = Message.objects.select_related("author_user").in_bulk(
        [c.last_message_id for c in conversations if c.last_message_id])
    orders = _orders_of(conversations)
    return [row_json(c, run=runs.get(c.latest_run_id), last=last.get(c.last_message_id),
                     orders=orders.get(c.pk, [])) for c in conversations]


def _orders_of(conversations: list[Conversation]) -> dict[int, list[str]]:
    """The orders a conversation is about: its scope, else the customer's orders named in it (by anyone)."""
    found: dict[int, list[str]] = {}
    # An e-mail conversation's "unverified" scope names no order: like none, its orders are the ones named in it.
    unscoped = [c for c in conversations if c.order_scope in ("", Conversation.UNVERIFIED)]
    for c in conversations:
        if c.order_scope not in ("", Conversation.UNVERIFIED):
            found[c.pk] = [c.order_scope]
    if not unscoped:
        return found
    named: dict[int, list[str]] = {}
    for conversation_id, content in (Message.objects.filter(conversation__in=unscoped,
                                                            role__in=("user", "assistant"))
                                     .exclude(content__isnull=True).order_by("seq")
                                     .values_list("conversation_id", "content")):
        for number in ORDER_NUMBER.findall(content):
            numbers = named.setdefault(conversation_id, [])
            if number.upper() not in numbers:
                numbers.append(number.upper())
    wanted = {n for numbers in named.values() for n in numbers}
    owned = set(Order.objects.filter(number__in=wanted, customer__in={c.customer_id for c in unscoped})
                .values_list("customer_id", "number")) if wanted else set()
    for c in unscoped:
        found[c.pk] = [n for n in named.get(c.pk, []) if (c.customer_id, n) in owned]
    return found


def inbox_status(conversation: Conversation, run: Run | None) -> str:
    """The row's status (INBOX_STATUSES), from the annotations of _annotated."""
    if conversation.closed_at and not (conversation.last_customer_at and
                                       conversation.last_customer_at > conversation.closed_at):
        return CLOSED
    if conversation.status == Conversation.TAKEN_OVER:
        return WITH_PERSON
    if conversation.status == Conversation.NEEDS_ATTENTION:
        return NEEDS_PERSON
    if conversation.pending_approvals:
        return WAITING_APPROVAL
    if conversation.waiting_until is not None and not (run is not None and run.status in Run.ACTIVE):
        return WAITING
    if run is not None and run.status == Run.STOPPED and run.outcome == "resolved" \
            and conversation.waiting_since is None:
        return RESOLVED
    return AGENT_WORKING if run is not None and run.status in (Run.QUEUED, Run.RUNNING) else WITH_AGENT


def status_words(status: str, conversation: Conversation) -> str:
    """What staff read for a status: the person's name when a person has it ("With Sam")."""
    if status == WITH_PERSON and conversation.assignee_id:
        return f"With {person_json(conversation.assignee)['name']}"
    if status == WAITING:
        return f"Waiting for {conversation.get_waiting_for_display()}"
    return INBOX_STATUSES[status]


def _ts(value) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def person_json(user) -> dict | None:
    if user is None:
        return None
    return {"username": user.get_username(), "name": user.get_short_name() or user.get_username()}


def _excerpt(text: str) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[:PREVIEW_CHARS - 1] + "…"


def row_json(conversation: Conversation, *, run: Run | None, last: Message | None, orders: list[str]) -> dict:
    status = inbox_status(conversation, run)
    customer = conversation.customer
    last_message = None
    if last is not None:
        last_message = {"author": last.author, "text": _excerpt(last.content), "at": _ts(last.created_at),
                        "seq": last.seq}
        if last.author == Message.STAFF and last.author_user_id:
            last_message["staff_name"] = person_json(last.author_user)["name"]
    return {
        "id": str(conversation.public_id),
        "customer": {"name": customer.name, "email": customer.email, "since": _ts(conversation.customer_since)},
        "channel": conversation.channel or Message.WIDGET,
        "subject": conversation.email_subject or None,
        "language": conversation.language,
        "orders": orders,
        "last_message": last_message,
        "created_at": _ts(conversation.created_at),
        "updated_at": _ts(conversation.updated_at),
        "last_seq": conversation.last_seq,
        "waiting_since": _ts(conversation.waiting_since),
        "unread": conversation.unread,
        "read_seq": conversation.read_seq or 0,
        "status": status,
        "status_label": status_words(status, conversation),
        "conversation_status": conversation.status,  # the desk's own code: open / needs_attention / taken_over
        "attention_reason": conversation.attention_reason,
        "pending_approvals": conversation.pending_approvals,
        # When the first of them expires (no decision after it): the "Least time left first" sort's key.
        "nearest_expiry": _ts(conversation.nearest_expiry) if conversation.pending_approvals else None,
        "run": {"id": str(run.public_id), "status": run.status, "stop_reason": run.stop_reason or None,
                "outcome": run.outcome or None} if run is not None else None,
        "assignee": person_json(conversation.assignee) if conversation.assignee_id else None,
        "assigned_at": _ts(conversation.assigned_at) if conversation.assignee_id else None,
        # Whose queue it is in while it needs a person and nobody has it (support/desk/routing.py).
        "routed_to": person_json(conversation.routed_to) if _routed(conversation) else None,
        "routed_at": _ts(conversation.routed_at) if _routed(conversation) else None,
        "closed_at": _ts(conversation.closed_at) if status == CLOSED else None,
        "closed_by": person_json(conversation.closed_by) if status == CLOSED and conversation.closed_by_id else None,
        "rating": _rating(conversation),  # the customer's 1-5 and comment (support/desk/feedback.py)
        # What the case waits for and until when (support/desk/waiting.py); the console shows the deadline.
        "waiting": waiting_json(conversation) if status == WAITING else None,
    }


def _routed(conversation: Conversation) -> bool:
    return bool(conversation.routed_to_id and not conversation.assignee_id
                and conversation.status == Conversation.NEEDS_ATTENTION)


def _rating(conversation: Conversation) -> dict | None:
    try:
        return rating_json(conversation.rating)  # joined by _annotated: no query
    except Rating.DoesNotExist:
        return None


def inbox_row(viewer, public_id) -> dict | None:
    page = inbox(viewer, filter_="all", ids=[public_id])
    return page.rows[0] if page.rows else None


def inbox_counts(viewer) -> dict:
    """What the console's title, tabs and alerts count, in a few queries: open conversations needing a person
    (and those of them nobody has taken), waiting for approval, the viewer's, routed to the viewer, the
    unassigned."""
    open_ = _annotated(viewer).filter(_is_open())
    counts = open_.aggregate(
        needs_person=Count("pk", filter=Q(status=Conversation.NEEDS_ATTENTION)),
        needs_person_unassigned=Count("pk", filter=Q(status=Conversation.NEEDS_ATTENTION, assignee__isnull=True)),
        waiting_approval=Count("pk", filter=Q(pending_approvals__gt=0)),
        mine=Count("pk", filter=Q(assignee=viewer)),
        unassigned=Count("pk", filter=Q(assignee__isnull=True)),
    )
    counts["routed_to_me"] = open_.filter(routing.routed_filter(viewer)).count()  # apart: Exists in a count
    counts["needs_person_unassigned_ids"] = [str(p) for p in open_.filter(
        status=Conversation.NEEDS_ATTENTION, assignee__isnull=True).order_by("-updated_at")
        .values_list("public_id", flat=True)[:MAX_LIMIT]]
    return counts


def colleagues() -> list[dict]:
    """Everyone a conversation may be assigned to: the active staff accounts."""
    users = get_user_model().objects.filter(is_active=True, is_staff=True).order_by("first_name", "username")
    return [person_json(u) for u in users]


def inbox_events(conversation: Conversation) -> list[dict]:
    events = InboxEvent.objects.filter(conversation=conversation).select_related("actor", "assignee")
    return [{"kind": e.kind, "by": person_json(e.actor), "assignee": person_json(e.assignee),
             "at": _ts(e.created_at)} for e in events.order_by("created_at", "pk")]
