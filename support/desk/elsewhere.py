"""Deciding an approval away from the console (an e-mailed link, Slack): the same rules as the console, the
outcome in plain words, and what a person needs to see of the request to decide it there.

The rules are not repeated here: who may decide is permissions.decision_refusal, as for the console's API,
and everything else (in time, once, a reason to reject, a second look at what the customer wrote since) is
gate.approval_decide's, whose refusals come back as they are worded there. Away from the console a request
is approved as it would run (Approval.arguments_to_run, as the console checks it): as the agent asked it, or as
the first of two approvers approved it; changing the amount is the console's form. What a person is shown there
is that same amount, who approved first and as what, and the card's warning about instructions in text a
third party wrote.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from support.customers.notify import desk_url
from support.desk import (four_eyes, gate, permissions, selectors_approvals, selectors_earlier, selectors_provenance,
                          serializers, services)
from support.models import Approval
from support.tools import mcp

# What came of a decision asked for away from the console (Outcome.code).
FORBIDDEN, SECOND_LOOK, ALREADY_DECIDED, EXPIRED, INVALID, OVER_REJECTION = (
    "forbidden", "needs_second_look", "already_decided", "expired", "invalid", gate.OverRejection.code)
WORDS_SHOWN = 3  # the customer's latest messages shown with a request
CHANNEL_WORDS = {Approval.CONSOLE: "in the console", Approval.BULK: "in the console, with others at once",
                 Approval.EMAIL: "from an e-mailed link", Approval.SLACK: "in Slack"}


@dataclass(frozen=True)
class Outcome:
    decided: bool  # this request's decision is the one on record (a repeat of it included)
    code: str  # the decision ("approved", "rejected") when decided, else one of the codes above
    text: str  # in plain words, for the person who asked


def approval_decide_from(*, approval: Approval, user, approve: bool, channel: str, reason: str = "",
                         confirm_seen: bool = False, confirm_over_rejection: bool = False,
                         address: str = "") -> Outcome:
    """Decide as `user` from `channel` (Approval.EMAIL or SLACK), with the console's rules. A refusal of
    permission is logged on support.security, as the console's 403s are. confirm_over_rejection: the person
    confirmed the earlier rejection on the order they were shown (the decide page's tick; Slack never does)."""
    if approval.tool_call_id is None:  # a colleague's own refund (four eyes): decided on its card in the console
        return Outcome(False, FORBIDDEN, "A colleague's own refund is approved on its card in the console.")
    arguments = approval.arguments_to_run() if approve else None  # what runs: checked as the console checks it
    refusal = permissions.decision_refusal(user, tool=approval.tool_call.name, approve=approve, arguments=arguments)
    if refusal is not None:
        permissions.log_refusal(user, address or f"{channel} (no address)",
                                f"deciding approval {approval.public_id} {CHANNEL_WORDS.get(channel, '')}: {refusal}")
        return Outcome(False, FORBIDDEN, refusal)
    try:
        gate.approval_decide(approval=approval, user=user, approve=approve, reason=reason,
                             confirm_seen=confirm_seen, channel=channel, confirm_over_rejection=confirm_over_rejection)
    except gate.NeedsSecondLook as error:
        return Outcome(False, SECOND_LOOK, str(error))
    except gate.OverRejection as error:
        return Outcome(False, OVER_REJECTION, str(error))
    except gate.ApprovalExpired as error:
        return Outcome(False, EXPIRED, str(error))
    except services.AlreadyDecided as error:
        return Outcome(False, ALREADY_DECIDED, str(error))
    except services.InvalidArguments as error:
        return Outcome(False, INVALID, str(error))
    except (four_eyes.SamePerson, four_eyes.DiffersFromFirst, four_eyes.NeedsSecondApprover) as error:
        return Outcome(False, FORBIDDEN, str(error))
    approval.refresh_from_db()
    return Outcome(True, approval.decision or "pending", decided_words(approval))


def decided_words(approval: Approval) -> str:
    """"Approved by Sam Lee at 14:02 UTC in Slack." / "Rejected by …: the reason" / why it expired."""
    if approval.pending and approval.first_approved_at is not None:  # four eyes: one of two approvals given
        return f"{first_words(approval)}; it runs once a second person approves it too."
    if approval.pending:
        return "Waiting for a decision."
    if approval.decision == Approval.EXPIRED:
        return f"No longer waiting: {approval.not_run_reason or approval.reason}."
    who = person(approval.decided_by) if approval.decided_by_id else "the system"
    where = CHANNEL_WORDS.get(approval.decided_via, "")
    said = f"{approval.decision.capitalize()} by {who} at {moment(approval.decided_at)}{' ' + where if where else ''}"
    if approval.decision == Approval.REJECTED and approval.reason:
        return f"{said}: {approval.reason}"
    return f"{said}."


def first_words(approval: Approval) -> str:
    """"Approved first by Sam Lee as 64.00 EUR at 14:02 UTC (the agent asked for 50.00 EUR)"; "" when no one
    approved first."""
    if approval.first_approved_at is None:
        return ""
    first = person(approval.first_approved_by) if approval.first_approved_by_id else "someone"
    approved = four_eyes.approved_as(approval, approval.first_arguments)
    asked = four_eyes.approved_as(approval, approval.requested_arguments)
    changed = f" (the agent asked for {asked} EUR)" if asked != approved else ""
    return f"Approved first by {first} as {approved} EUR at {moment(approval.first_approved_at)}{changed}"


def person(user) -> str:
    return user.get_full_name() or user.get_username()


moment = selectors_earlier.moment  # "14:02 UTC", or "14:02 UTC on 3 Dec 2026" when not today


# -- what a person sees of the request away from the console -------------------------------------------------

@dataclass(frozen=True)
class Said:
    text: str  # the customer's words as written: shown as text, never markup
    at: datetime
    after_request: bool  # written while the request waited


@dataclass(frozen=True)
class Essentials:
    summary: str  # "Refund 64.00 EUR on SU-41310 — parcel marked delivered 5 days ago"
    why: str  # the agent's own reason, when the tool has one
    customer: str  # "Maya Rossi <maya@example.com>"
    order: dict | None  # serializers' order shape: number, total, refunded, refundable, currency, seller
    amount: str | None  # what would be paid out (what ran, once approved), when the call moves money
    first: str  # who approved first and as what (four eyes), else ""
    warning: str  # the card's warning: text a third party wrote gives the agent instructions, else ""
    flagged: list[tuple[str, str]]  # (what it is, an excerpt) of each such text, shown as text
    earlier: list[str]  # the earlier decisions on the order, newest first, in words (selectors_earlier)
    rejection: str  # the earlier rejection approving must confirm, in words, else ""
    said: list[Said]  # the customer's latest messages, oldest first
    said_since: int  # how many the customer wrote after the request
    expires_at: datetime
    large_refund: bool
    console_url: str

    @property
    def check(self) -> str:
        """Said under the warning, as on the console's card."""
        return selectors_provenance.CHECK if self.warning else ""

    @property
    def fields(self) -> list[tuple[str, str]]:
        """(label, value) lines for an e-mail or a Slack message, in the order a person reads them."""
        lines = [("Customer", self.customer)]
        if self.order:
            o = self.order
            lines.append(("Order", f"{o['number']} · total {o['total']} {o['currency']} · refunded {o['refunded']} · "
                                   f"refundable {o['refundable']} · sold by {o['seller']}"))
        if self.amount:
            lines.append(("Amount", f"{self.amount} EUR"))
        if self.why:
            lines.append(("The agent's reason", self.why))
        return lines


def approval_essentials(approval: Approval) -> Essentials:
    context = selectors_approvals.approval_context(approval)
    customer = approval.run.conversation.customer
    since = list(serializers.customer_messages_since(approval).order_by("-seq")[:WORDS_SHOWN])[::-1]
    before = [Said(m["text"], _parse(m["created_at"]), False) for m in context["customer_request"]]
    said = (before + [Said(m.content or "", m.created_at, True) for m in since])[-WORDS_SHOWN:]
    args = _shown_arguments(approval)
    field = "amount" if approval.tool_call.name == "issue_refund" else mcp.amount_field(approval.tool_call.name)
    flagged = selectors_provenance.flagged_texts(context["provenance"])
    earlier = selectors_earlier.earlier_for([approval])[approval.pk]
    return Essentials(
        summary=context["summary"], why=context["why"],
        customer=f"{customer.name} <{customer.email}>" if customer.name else customer.email,
        order=context["order"], amount=str(args[field]) if field and args.get(field) is not None else None,
        first=first_words(approval) if approval.pending else "",
        warning=context["provenance"]["warning"] if flagged else "", flagged=flagged,
        earlier=selectors_earlier.lines(earlier),
        rejection=selectors_earlier.refusal(earlier.rejection) if earlier.rejection else "",
        said=said, said_since=serializers.customer_messages_since(approval).count(),
        expires_at=selectors_approvals.effective_expiry(approval),
        large_refund=permissions.is_large_refund(approval.tool_call.name, args),
        console_url=desk_url(f"/console/conversations/{approval.run.conversation.public_id}/"))


def _shown_arguments(approval: Approval) -> dict:
    """What ran, once approved; while it waits, what approving would run."""
    done = approval.decision == Approval.APPROVED and approval.executed_arguments is not None
    args = approval.executed_arguments if done else approval.arguments_to_run()
    return args if isinstance(args, dict) else {}


def _parse(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))
