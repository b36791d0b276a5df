"""The support desk: conversations, their messages, runs of the agent, the trace, tool calls and approvals."""

import uuid
from datetime import timedelta

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from support.agent import types as agent

from .shop import Customer


class Conversation(models.Model):
    OPEN = "open"  # the agent answers the customer
    NEEDS_ATTENTION = "needs_attention"  # handed to a person: escalated, a limit hit, an approval expired
    TAKEN_OVER = "taken_over"  # a staff member answers
    STATUSES = [(OPEN, "Open"), (NEEDS_ATTENTION, "Needs a person"), (TAKEN_OVER, "Taken over by staff")]

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    customer = models.ForeignKey(Customer, on_delete=models.PROTECT, related_name="conversations")
    # Opened with an e-mail and an order number, the conversation sees that order only (its tools too);
    # null: every order of the customer (the shop's signed token, or a code sent to their e-mail).
    # The order's number as the shop knows it ("" for none): any shop backend, not only the demo's tables.
    order_scope = models.CharField(max_length=64, blank=True, default="")
    # The scope of a conversation started by an e-mail: a From line proves nothing, so it sees no order until
    # the customer gives an order number of theirs (lower case: no order number ever matches it).
    UNVERIFIED = "unverified"
    status = models.CharField(max_length=20, choices=STATUSES, default=OPEN)
    attention_reason = models.CharField(max_length=300, blank=True)
    assignee = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    # The last seq handed out; bumped with a conditional UPDATE, which also serialises appends.
    last_seq = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # Closed by a staff member (support/desk/inbox.py). A customer message written after closed_at reopens it:
    # the inbox derives that, so the customer's path needs no extra write.
    closed_at = models.DateTimeField(null=True, blank=True)
    closed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                  related_name="+")
    assigned_at = models.DateTimeField(null=True, blank=True)  # when the current assignee got it
    # The customer's language (a code of settings.LANGUAGES, from the widget): the desk's fixed texts to
    # them are written in it, and the model is told it (support/customers/languages.py).
    language = models.CharField(max_length=8, default="en")
    # Whose queue it is in (support/desk/routing.py): a lighter mark than the assignee, which silences the
    # agent. Set when the conversation is handed to a person and someone of the team is online.
    routed_to = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                  related_name="+")
    routed_at = models.DateTimeField(null=True, blank=True)
    # What the case waits for and until when (support/desk/waiting.py): set from a desk tool's result when a run
    # answers, cleared by the customer's next message or by the beat when the time is up.
    WAITS_FOR = [("seller", "the seller")]
    waiting_for = models.CharField(max_length=16, choices=WAITS_FOR, blank=True)
    waiting_until = models.DateTimeField(null=True, blank=True, db_index=True)
    # The subject of the customer's latest e-mail in it (support/desk/inbound_mail.py), for the console.
    email_subject = models.CharField(max_length=250, blank=True)

    class Meta:
        ordering = ["-updated_at"]
        # Reports (support/reports/) read conversations by the day they started.
        indexes = [models.Index(fields=["created_at"], name="conversation_created_at")]

    def __str__(self) -> str:
        return f"Conversation {self.public_id} ({self.customer.email})"

    def is_closed(self) -> bool:
        """Closed by a staff member, and the customer has not written since (a query only when it was closed)."""
        return self.closed_at is not None and not self.messages.filter(
            author=Message.CUSTOMER, created_at__gt=self.closed_at).exists()


class ConversationRead(models.Model):
    """How far one staff member has read a conversation: its unread count in their inbox is the customer's
    messages after last_read_seq."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="reads")
    last_read_seq = models.PositiveIntegerField(default=0)
    read_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "conversation"], name="conversation_read_unique")]


class InboxEvent(models.Model):
    """The record of who assigned, unassigned, closed or reopened a conversation, and when."""

    ASSIGNED, UNASSIGNED, CLOSED, REOPENED = "assigned", "unassigned", "closed", "reopened"
    KINDS = [(k, k) for k in (ASSIGNED, UNASSIGNED, CLOSED, REOPENED)]

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="inbox_events")
    kind = models.CharField(max_length=12, choices=KINDS)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    assignee = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="+")  # assigned: to whom; unassigned: from whom
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["created_at", "pk"]


class Message(models.Model):
    """One message of a conversation, immutable once saved, in the wire shape the model reads."""

    CUSTOMER, AGENT, TOOL, STAFF, SYSTEM = "customer", "agent", "tool", "staff", "system"
    AUTHORS = [(a, a) for a in (CUSTOMER, AGENT, TOOL, STAFF, SYSTEM)]
    ROLES = [(r, r) for r in ("system", "user", "assistant", "tool")]

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages")
    seq = models.PositiveIntegerField()
    role = models.CharField(max_length=10, choices=ROLES)
    author = models.CharField(max_length=10, choices=AUTHORS)
    author_user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    content = models.TextField(null=True, blank=True)
    tool_calls = models.JSONField(null=True, blank=True)
    tool_call_id = models.CharField(max_length=128, blank=True)
    run = models.ForeignKey("Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="messages")
    # A customer's own id for the message, so a retried POST is saved once.
    client_id = models.CharField(max_length=64, null=True, blank=True)
    # How a customer's message came: typed in the widget, or an e-mail (support/desk/inbound_mail.py).
    WIDGET, EMAIL = "widget", "email"
    CHANNELS = [(WIDGET, "the widget"), (EMAIL, "e-mail")]
    channel = models.CharField(max_length=8, choices=CHANNELS, default=WIDGET)
    # On a reply of the agent's: the desk's note its model call read right before it (the customer's local time,
    # the orders the desk knew), {"messages": [...], "zone": ..., "orders": ...}; every later request sends it
    # again at the same place, never shown to anyone (support/desk/assistant.py run_context).
    note = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["conversation", "seq"]
        # Reports: a conversation's first customer, agent and staff messages, and whether one came after a time;
        # whether a person wrote in it (reports/scope.py: person_involved), without reading its other messages.
        indexes = [models.Index(fields=["conversation", "author", "created_at"], name="message_conv_author_at"),
                   models.Index(fields=["conversation"], condition=Q(author="staff") | Q(author_user__isnull=False),
                                name="message_conv_by_a_person")]
        constraints = [
            models.UniqueConstraint(fields=["conversation", "seq"], name="message_seq_unique"),
            models.UniqueConstraint(fields=["conversation", "client_id"], condition=Q(client_id__isnull=False),
                                    name="message_client_id_unique"),
        ]

    def wire(self) -> dict:
        """The message as the model receives it, its keys in the order the loop wrote them when it first sent it
        (agent/loop.py), so a later run's request repeats the earlier one byte for byte: a prompt-cache prefix."""
        if self.role == "tool":
            return {"role": self.role, "tool_call_id": self.tool_call_id, "content": self.content}
        m = {"role": self.role, "content": self.content}
        if self.tool_calls:
            m["tool_calls"] = self.tool_calls
        return m


# A run that gave its conversation to a person (docs/reports.md): it stopped for any reason but an answer or a
# take-over (the desk's "stalled" included), or it answered saying it handed over.
HANDOVER_STOPS = tuple(r for r in (*agent.STOP_REASONS, "stalled") if r not in (agent.ANSWERED, agent.TAKEN_OVER))
HANDED_OVER = Q(stop_reason__in=HANDOVER_STOPS) | Q(outcome=agent.HANDED_TO_PERSON)


class Run(models.Model):
    QUEUED, RUNNING, AWAITING_APPROVAL, STOPPED = "queued", "running", agent.AWAITING_APPROVAL, agent.STOPPED
    STATUSES = [(s, s) for s in (QUEUED, RUNNING, AWAITING_APPROVAL, STOPPED)]
    ACTIVE = (QUEUED, RUNNING, AWAITING_APPROVAL)
    # The loop's stop reasons, and one of the desk's: the worker kept dying and recovery gave up.
    STALLED = "stalled"
    STOP_REASONS = [(r, r) for r in (*agent.STOP_REASONS, STALLED)]
    HANDOVER_STOPS, HANDED_OVER = HANDOVER_STOPS, HANDED_OVER

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="runs")
    status = models.CharField(max_length=20, choices=STATUSES, default=QUEUED, db_index=True)
    stop_reason = models.CharField(max_length=20, choices=STOP_REASONS, blank=True)
    outcome = models.CharField(max_length=24, blank=True)
    outcome_summary = models.TextField(blank=True)
    summary = models.TextField(blank=True)  # for a person, when it stopped without an answer
    detail = models.TextField(blank=True)
    attempts = models.PositiveIntegerField(default=0)  # claims by a worker
    lease = models.CharField(max_length=40, blank=True)  # the claim that may write; a stale worker's is not
    heartbeat_at = models.DateTimeField(null=True, blank=True, db_index=True)
    turns = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The W3C traceparent of the run's first span when tracing is on (support/ops/tracing.py): the approval
    # wait and the resumed run join that trace.
    trace_parent = models.CharField(max_length=64, blank=True)
    # The agent profile version the run works with, the live one when it was queued (support/profiles/): its
    # id, never a copy. None: no version was published yet (the built-in defaults).
    profile_version = models.ForeignKey("support.ProfileVersion", null=True, blank=True, on_delete=models.PROTECT,
                                        related_name="+")

    class Meta:
        ordering = ["-created_at"]
        # Reports: a conversation's last run (its outcome, stop reason, end); the runs that handed over (with
        # the reason) and those a take-over stopped: partial, a few in a hundred runs, so today's reports read
        # them without reading every run.
        indexes = [models.Index(fields=["conversation", "created_at"], name="run_conv_created_at"),
                   models.Index(fields=["conversation", "stop_reason"], condition=HANDED_OVER,
                                name="run_conv_handed_over"),
                   models.Index(fields=["conversation"], condition=Q(stop_reason=agent.TAKEN_OVER),
                                name="run_conv_taken_over"),
                   # a conversation's runs by key alone, so "has a run with an expired approval" probes two
                   # indexes per conversation instead of joining every run to every expired approval
                   models.Index(fields=["conversation", "id"], name="run_conv_id")]
        constraints = [
            # One active run per conversation, whatever races the application code loses.
            models.UniqueConstraint(fields=["conversation"], condition=Q(status__in=["queued", "running",
                                    "awaiting_approval"]), name="one_active_run_per_conversation"),
        ]

    def spent(self) -> agent.Spent:
        return agent.Spent(turns=self.turns, prompt_tokens=self.prompt_tokens,
                           completion_tokens=self.completion_tokens, cost_usd=float(self.cost_usd))


class Step(models.Model):
    """One row of the trace: a model call or a tool call, with what it cost."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="steps")
    kind = models.CharField(max_length=8)  # "model" | "tool"
    turn = models.PositiveIntegerField()
    label = models.CharField(max_length=80, blank=True)
    model = models.CharField(max_length=120, blank=True)
    tool = models.CharField(max_length=64, blank=True)
    call_id = models.CharField(max_length=128, blank=True)
    arguments = models.TextField(blank=True)
    result = models.TextField(blank=True)  # an excerpt
    error = models.TextField(blank=True)
    finish_reason = models.CharField(max_length=20, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    cached_tokens = models.PositiveIntegerField(default=0)  # of prompt_tokens, served from the provider's cache
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    duration_ms = models.FloatField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "id"]


class ToolCall(models.Model):
    RUNNING, PENDING_APPROVAL, APPROVED = "running", "pending_approval", "approved"
    EXECUTED, FAILED, REJECTED = "executed", "failed", "rejected"
    STATUSES = [(s, s) for s in (RUNNING, PENDING_APPROVAL, APPROVED, EXECUTED, FAILED, REJECTED)]

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="tool_calls")
    call_id = models.CharField(max_length=128)  # the model's id for the call
    name = models.CharField(max_length=64)
    arguments = models.JSONField()  # validated against the tool's schema
    status = models.CharField(max_length=20, choices=STATUSES)
    idempotency_key = models.CharField(max_length=200, unique=True)
    attempts = models.PositiveIntegerField(default=0)
    result = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["run", "id"]
        constraints = [models.UniqueConstraint(fields=["run", "call_id"], name="tool_call_unique_per_run")]


def approval_expiry():
    """When a gated call asked for now stops waiting: APPROVAL_TIMEOUT_SECONDS from now."""
    return timezone.now() + timedelta(seconds=settings.APPROVAL_TIMEOUT_SECONDS)


class Approval(models.Model):
    """A person's decision on what waits for one: a gated call of the agent's run (tool_call and run), or a
    staff member's own refund above SECOND_APPROVAL_ABOVE (staff_action; no run), which another person
    approves. Above that amount a refund needs two different people (support/desk/gate.py): the first
    approval is kept in first_* and the approval stays pending until the second."""

    APPROVED, REJECTED, EXPIRED = "approved", "rejected", "expired"
    DECISIONS = [(d, d) for d in (APPROVED, REJECTED, EXPIRED)]
    # Where a person decided: the console (its staff API, one card), several cards at once in the console
    # (support/desk/bulk.py), an e-mailed link, or Slack (support/desk/elsewhere.py).
    CONSOLE, BULK, EMAIL, SLACK = "console", "bulk", "email", "slack"
    CHANNELS = [(CONSOLE, "the console"), (BULK, "the console, in bulk"), (EMAIL, "an e-mailed link"),
                (SLACK, "Slack")]

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    tool_call = models.OneToOneField(ToolCall, null=True, blank=True, on_delete=models.CASCADE,
                                     related_name="approval")
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.CASCADE, related_name="approvals")
    staff_action = models.OneToOneField("StaffAction", null=True, blank=True, on_delete=models.CASCADE,
                                        related_name="approval")
    # Who asked, when a person did (a staff refund): they count as one of the two and may not approve it.
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="+")
    requested_at = models.DateTimeField(auto_now_add=True, db_index=True)
    requested_arguments = models.JSONField()
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    # Written with the decision; blank when the system decided (an expiry) or the caller named no channel.
    decided_via = models.CharField(max_length=10, choices=CHANNELS, blank=True)
    decision = models.CharField(max_length=10, choices=DECISIONS, blank=True)
    reason = models.TextField(blank=True)
    executed_arguments = models.JSONField(null=True, blank=True)  # what ran: the staff's edit, or as requested
    # requested_at + APPROVAL_TIMEOUT_SECONDS: no decision is accepted after it, swept or not.
    expires_at = models.DateTimeField(default=approval_expiry, db_index=True)
    # Why the call never ran although asked for (a staff member took the conversation over); the
    # decision itself, approved included, stays as it was written.
    not_run_reason = models.CharField(max_length=200, blank=True)
    # The card as the decider was answered, kept so that the same decision sent again (a double click, a
    # retry) gets the same bytes back, whatever the run has done since (support.desk.gate.decision_answer).
    decision_answer = models.JSONField(null=True, blank=True, editable=False)
    # The first of two approvals (four eyes): who, when, and the arguments they approved, which are what the
    # second person approves; first_answer is the answer that first approver got, kept as decision_answer is.
    first_approved_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                          on_delete=models.SET_NULL, related_name="+")
    first_approved_at = models.DateTimeField(null=True, blank=True, db_index=True)
    first_arguments = models.JSONField(null=True, blank=True)
    first_approved_via = models.CharField(max_length=10, choices=CHANNELS, blank=True)  # as decided_via
    first_answer = models.JSONField(null=True, blank=True, editable=False)
    # Its deadline (support/desk/deadlines.py): when the reminder went out (APPROVAL_REMIND_AT of the time to
    # expiry) and when the leads were told (APPROVAL_ESCALATE_AT); each written once, by a conditional UPDATE.
    reminded_at = models.DateTimeField(null=True, blank=True)
    escalated_at = models.DateTimeField(null=True, blank=True)
    # Whose queue the request is in (support/desk/routing.py); anyone allowed may still decide it.
    routed_to = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                  related_name="+")
    routed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["requested_at"]
        # Reports: whether a run's approval expired (a hand-over), without reading every approval.
        indexes = [models.Index(fields=["run"], condition=Q(decision="expired"), name="approval_run_expired")]
        constraints = [
            # Something to decide: a call of the agent's (with its run), or a staff member's action.
            models.CheckConstraint(condition=Q(tool_call__isnull=False, run__isnull=False)
                                   | Q(staff_action__isnull=False, tool_call__isnull=True, run__isnull=True),
                                   name="approval_of_a_call_or_a_staff_action"),
        ]

    STAFF_REFUND = "staff_refund"  # the tool name a staff member's own refund goes by, on cards and in the audit

    @property
    def pending(self) -> bool:
        return self.decided_at is None

    def arguments_to_run(self, edited: dict | None = None) -> dict:
        """What approving would run, the one answer every way of deciding checks and shows: the deciding
        person's edit, else what the first approver approved (four eyes), else what was asked."""
        if edited is not None:
            return edited
        return self.first_arguments if self.first_arguments is not None else self.requested_arguments

    @property
    def tool_name(self) -> str:
        """What is decided: the agent's tool, or "staff_refund" for a staff member's own refund."""
        return self.tool_call.name if self.tool_call_id else self.STAFF_REFUND
