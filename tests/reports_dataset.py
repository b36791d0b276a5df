"""A week of conversations whose report is known (docs/reports.md), built row by row with the ORM.

The week is Monday 2026-11-23 to Sunday 2026-11-29 (UTC); each conversation starts at 10:00 on its day with the
customer's message. The figures each case adds are in its comment; tests/test_reports.py asserts the sums.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone as tz
from decimal import Decimal

from django.contrib.auth import get_user_model

from support.models import Approval, Conversation, Customer, Message, ProfileVersion, Rating, Run, ShopEffect, \
    StaffAction, ToolCall
from tests.desk_factories import make_user

UTC = tz.utc


class Week:
    def __init__(self):
        # Found when there already (a browser test's database, shared by the session's tests).
        users = get_user_model().objects
        self.alice = users.filter(username="alice").first() or make_user("alice", staff=True)
        self.bob = users.filter(username="bob").first() or make_user("bob", staff=True)
        self.version = ProfileVersion.objects.filter(number=1).first() or ProfileVersion.objects.create(
            state=ProfileVersion.PUBLISHED, number=1, data={}, published_at=self.day(1))
        self._n = 0
        self.c = {}
        self._build()

    # -- builders ------------------------------------------------------------------------------------------
    def conversation(self, name, start: datetime, *, channel="widget", language="en", **fields) -> Conversation:
        self._n += 1
        customer = Customer.objects.create(name=f"Customer {name} <b>", email=f"report-{self._n}@example.com")
        c = Conversation.objects.create(customer=customer, language=language, **fields)
        Conversation.objects.filter(pk=c.pk).update(created_at=start)
        c.created_at = start
        self.message(c, Message.CUSTOMER, start, "Where is my parcel?", channel=channel)
        self.c[name] = c
        return c

    def message(self, c, author, at, content="", user=None, channel="widget") -> Message:
        c.last_seq += 1
        Conversation.objects.filter(pk=c.pk).update(last_seq=c.last_seq)
        role = {Message.CUSTOMER: "user", Message.SYSTEM: "assistant"}.get(author, "assistant")
        m = Message.objects.create(conversation=c, seq=c.last_seq, role=role, author=author, content=content,
                                   author_user=user, channel=channel)
        Message.objects.filter(pk=m.pk).update(created_at=at)
        return m

    def run(self, c, after: int, *, stop="answered", outcome="", cost="0.01", version=None, status=Run.STOPPED) -> Run:
        """A run that finished `after` seconds after the conversation started, with the agent's reply then."""
        finished = c.created_at + timedelta(seconds=after)
        r = Run.objects.create(conversation=c, status=status, stop_reason=stop, outcome=outcome,
                               cost_usd=Decimal(cost), profile_version=version, finished_at=finished)
        Run.objects.filter(pk=r.pk).update(created_at=finished - timedelta(seconds=1))
        self.message(c, Message.AGENT, finished, "Here is what I found.")
        return r

    def approval(self, c, run, *, asked: dict, ran: dict | None = None, decision="", by=None, via="",
                 after: int = 0) -> Approval:
        call = ToolCall.objects.create(run=run, call_id=f"call_{run.pk}", name="issue_refund", arguments=asked,
                                       status=ToolCall.EXECUTED, idempotency_key=f"{run.public_id}:call_{run.pk}")
        at = c.created_at + timedelta(seconds=5)
        a = Approval.objects.create(tool_call=call, run=run, requested_arguments=asked, executed_arguments=ran,
                                    decision=decision, decided_by=by, decided_via=via,
                                    decided_at=at + timedelta(seconds=after) if decision else None)
        Approval.objects.filter(pk=a.pk).update(requested_at=at)
        return a

    def refund(self, c, key: str, amount: str) -> ShopEffect:
        e = ShopEffect.objects.create(kind=ShopEffect.REFUND, key=key, backend="demo", order_number="SU-1",
                                      conversation=c, amount=Decimal(amount), shop_id=key)
        ShopEffect.objects.filter(pk=e.pk).update(created_at=c.created_at + timedelta(minutes=5))
        return e

    @staticmethod
    def day(d: int, hour: int = 10, minute: int = 0) -> datetime:
        return datetime(2026, 11, d, hour, minute, tzinfo=UTC)

    # -- the week --------------------------------------------------------------------------------------------
    def _build(self):
        # resolved by the agent, confirmed (rated 5 after the resolution), on agent version 1
        c = self.conversation("resolved", self.day(23))
        self.run(c, 10, outcome="resolved", version=self.version)
        Rating.objects.create(conversation=c, score=5, occasion=Rating.RESOLVED)
        # handed over (escalated), handed back by a person who did not write, then resolved by the agent
        c = self.conversation("hand_back", self.day(23, 11))
        self.run(c, 10, stop="escalated", outcome="handed_to_person")
        self.run(c, 7200, outcome="resolved")
        # turn limit: a person answered and closed it; rated 2
        c = self.conversation("person", self.day(24))
        self.run(c, 30, stop="turn_limit", outcome="handed_to_person")
        self.message(c, Message.STAFF, c.created_at + timedelta(seconds=600), "I am on it.", user=self.bob)
        Conversation.objects.filter(pk=c.pk).update(closed_at=c.created_at + timedelta(seconds=3600),
                                                    closed_by=self.bob)
        Rating.objects.create(conversation=c, score=2, occasion=Rating.CLOSED)
        # closed by staff, reopened by the customer, resolved again by the agent; rated 3
        c = self.conversation("reopened", self.day(24, 12))
        self.run(c, 10, outcome="resolved")
        Conversation.objects.filter(pk=c.pk).update(closed_at=c.created_at + timedelta(seconds=100),
                                                    closed_by=self.alice)
        self.message(c, Message.CUSTOMER, c.created_at + timedelta(seconds=200), "It came broken.")
        self.run(c, 210, outcome="resolved")
        Rating.objects.create(conversation=c, score=3, occasion=Rating.RESOLVED)
        # abandoned: the agent asked, the customer (by e-mail, in German) never answered
        c = self.conversation("abandoned", self.day(25), channel="email", language="de")
        self.run(c, 50, outcome="waiting_on_customer")
        # an approval nobody decided: expired, handed to a person
        c = self.conversation("expired", self.day(25, 11), status=Conversation.NEEDS_ATTENTION)
        r = self.run(c, 10, stop="")
        self.approval(c, r, asked={"amount": "80.00"}, decision=Approval.EXPIRED)
        # approved as asked in the console by alice after 60 s; refunded 20.00; resolved
        c = self.conversation("approved", self.day(26))
        r = self.run(c, 10, outcome="resolved")
        a = self.approval(c, r, asked={"amount": "20.00"}, ran={"amount": "20.00"}, decision=Approval.APPROVED,
                          by=self.alice, via=Approval.CONSOLE, after=60)
        self.refund(c, a.tool_call.idempotency_key, "20.00")
        # changed in Slack by bob after 300 s (50.00 asked, 30.00 ran); refunded 30.00
        c = self.conversation("changed", self.day(26, 11))
        r = self.run(c, 10, outcome="not_resolved")
        a = self.approval(c, r, asked={"amount": "50.00"}, ran={"amount": "30.00"}, decision=Approval.APPROVED,
                          by=self.bob, via=Approval.SLACK, after=300)
        self.refund(c, a.tool_call.idempotency_key, "30.00")
        # rejected from an e-mailed link by alice after 120 s; came by e-mail
        c = self.conversation("rejected", self.day(27), channel="email")
        r = self.run(c, 10, outcome="not_resolved")
        self.approval(c, r, asked={"amount": "40.00"}, decision=Approval.REJECTED, by=self.alice,
                      via=Approval.EMAIL, after=120)
        # auto-approved by the policy (no person): refunded 10.00 automatically; resolved
        c = self.conversation("automatic", self.day(27, 11))
        r = self.run(c, 10, outcome="resolved")
        a = self.approval(c, r, asked={"amount": "10.00"}, ran={"amount": "10.00"}, decision=Approval.APPROVED)
        self.refund(c, a.tool_call.idempotency_key, "10.00")
        # bob refunded 15.00 himself
        c = self.conversation("staff_refund", self.day(28))
        self.run(c, 10, outcome="not_resolved")
        StaffAction.objects.create(conversation=c, user=self.bob, kind=StaffAction.REFUND, arguments={},
                                   status=StaffAction.DONE)
        self.refund(c, f"staff:{self.bob.pk}:1", "15.00")
        # no run yet; a person answered after 600 s
        c = self.conversation("no_run", self.day(29))
        self.message(c, Message.STAFF, c.created_at + timedelta(seconds=600), "Hello", user=self.alice)
        # the Sunday before the week at 23:30 UTC: outside it in UTC, inside it in Berlin (00:30 on Monday)
        c = self.conversation("before", self.day(22, 23, 30))
        self.run(c, 10, outcome="resolved")
