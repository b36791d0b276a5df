"""What a report covers: its filters, its range in the lead's time zone, and the rows that fall inside it.

Every figure starts from one of three scopes: the conversations started in the range, the approvals asked in
the range, the refunds made in the range, each narrowed by the same filters (channel, language, agent version,
team member), so a number and its drill-down list read the same rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db.models import Exists, OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from support.agent import types as agent
from support.models import Approval, Conversation, Message, Run, ShopEffect, StaffAction
from support.models.desk import InboxEvent

CHANNELS = (Message.WIDGET, Message.EMAIL)


@dataclass(frozen=True)
class Filters:
    """A report's question: from start to end (both days included, in time_zone), and optionally one channel
    ("widget" | "email"), one customer language, one agent profile version (its number) and one team member
    (a user id)."""

    start: date
    end: date
    channel: str | None = None
    language: str | None = None
    profile_version: int | None = None
    staff_user_id: int | None = None
    time_zone: str = field(default_factory=lambda: settings.TIME_ZONE)

    def bounds(self) -> tuple[datetime, datetime]:
        """[first instant, instant after the last day) as aware datetimes."""
        tz = ZoneInfo(self.time_zone)
        return (datetime.combine(self.start, time.min, tzinfo=tz),
                datetime.combine(self.end + timedelta(days=1), time.min, tzinfo=tz))

    def narrows(self) -> bool:
        """Whether a filter besides the range is set."""
        return any(v is not None for v in (self.channel, self.language, self.profile_version, self.staff_user_id))

    def idle_before(self) -> datetime:
        """A conversation whose last message is older than this is idle (REPORTS_IDLE_HOURS before now)."""
        return timezone.now() - timedelta(hours=settings.REPORTS_IDLE_HOURS)


def first_channel() -> Subquery:
    """The channel of a conversation's first customer message: how the customer came."""
    return Subquery(Message.objects.filter(conversation=OuterRef("pk"), author=Message.CUSTOMER)
                    .order_by("seq").values("channel")[:1])


# A staff message, or the notice a take-over writes in the person's name (author_user). The partial index
# message_conv_by_a_person has this condition, so whether a person wrote in a conversation is one index probe.
WRITTEN_BY_A_PERSON = Q(author=Message.STAFF) | Q(author_user__isnull=False)


def person_involved() -> Q:
    """A person took part: a staff message to the customer, a staff action (a refund, a seller message), an
    assignment (now or ever), or a take-over (even one handed back without a word). Deciding an approval and
    closing are not taking part."""
    return (Q(assignee__isnull=False) | Q(status=Conversation.TAKEN_OVER)
            | Exists(Message.objects.filter(WRITTEN_BY_A_PERSON, conversation=OuterRef("pk")))
            | Exists(StaffAction.objects.filter(conversation=OuterRef("pk")))
            | Exists(InboxEvent.objects.filter(conversation=OuterRef("pk"), kind=InboxEvent.ASSIGNED))
            | Exists(Run.objects.filter(conversation=OuterRef("pk"), stop_reason=agent.TAKEN_OVER)))


def _member(user_id: int) -> Q:
    """The conversations a team member took part in: assigned to them, written or acted on by them, closed by
    them, or with an approval they decided."""
    return (Q(assignee_id=user_id) | Q(closed_by_id=user_id)
            | Exists(Message.objects.filter(conversation=OuterRef("pk"), author_user_id=user_id))
            | Exists(StaffAction.objects.filter(conversation=OuterRef("pk"), user_id=user_id))
            | Exists(InboxEvent.objects.filter(conversation=OuterRef("pk"), assignee_id=user_id))
            | Exists(Approval.objects.filter(run__conversation=OuterRef("pk"), decided_by_id=user_id)))


def narrowed(filters: Filters, queryset: QuerySet | None = None) -> QuerySet:
    """The conversations the filters keep (any start date)."""
    qs = Conversation.objects.all() if queryset is None else queryset
    if filters.channel:
        qs = qs.annotate(came_by=first_channel()).filter(came_by=filters.channel)
    if filters.language:
        qs = qs.filter(language=filters.language)
    if filters.profile_version is not None:
        qs = qs.filter(Exists(Run.objects.filter(conversation=OuterRef("pk"),
                                                 profile_version__number=filters.profile_version)))
    if filters.staff_user_id is not None:
        qs = qs.filter(_member(filters.staff_user_id))
    return qs


def conversations(filters: Filters) -> QuerySet:
    """The conversations started in the range that the filters keep."""
    start, end = filters.bounds()
    return narrowed(filters, Conversation.objects.filter(created_at__gte=start, created_at__lt=end)).order_by()


def approvals(filters: Filters) -> QuerySet:
    """The approvals asked in the range on conversations the filters keep (the agent's calls and staff refunds
    that need a second person)."""
    start, end = filters.bounds()
    asked = Approval.objects.filter(requested_at__gte=start, requested_at__lt=end).order_by()
    if not filters.narrows():
        return asked
    kept = narrowed(filters).values("pk")
    return asked.filter(Q(run__conversation__in=kept) | Q(staff_action__conversation__in=kept))


def refunds(filters: Filters) -> QuerySet:
    """The refunds the desk made in the shop in the range, on conversations the filters keep."""
    start, end = filters.bounds()
    made = ShopEffect.objects.filter(kind=ShopEffect.REFUND, created_at__gte=start, created_at__lt=end).order_by()
    return made.filter(conversation__in=narrowed(filters).values("pk")) if filters.narrows() else made
