"""Earlier decisions on the same order, for every approval card: who decided, when, what (approved, approved
with an edited amount, rejected) and why, newest first. One query for a page of cards (earlier_for); the gate
asks for the newest earlier rejection of the same kind (rejection_before), which approving must confirm.

"The same order" is the order_id the request names (a refund, a seller message, a colleague's own refund);
"the same kind" is what the agent's fingerprint of a rejection uses: a refund is a refund whoever asked.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from datetime import timezone as dt_timezone

from django.utils import timezone

from support.customers.words import staff_name
from support.models import Approval

SHOWN = 5  # earlier decisions listed on a card; the rest are counted ("and 3 more")
READ = 500  # rows read for a page of cards at most: decisions on one order are few
REFUND_TOOLS = {"issue_refund", Approval.STAFF_REFUND}
TOOL_WORDS = {"issue_refund": "a refund", Approval.STAFF_REFUND: "a refund", "message_seller": "a seller message",
              "escalate_to_human": "a hand-over"}


class OverRejection(Exception):
    """Approving a request when the same kind of request on the same order was rejected before, without
    saying so (`confirm_over_rejection`)."""

    code = "earlier_rejection"


@dataclass(frozen=True)
class Earlier:
    """The earlier decisions of one card: the newest SHOWN, how many more, and the newest earlier rejection
    of the card's own kind (None when there is none, or the card is decided)."""

    shown: list[Approval]
    more: int
    rejection: Approval | None


def order_of(approval: Approval) -> str:
    args = approval.requested_arguments if isinstance(approval.requested_arguments, dict) else {}
    return str(args.get("order_id") or "").upper()


def _kind(tool_name: str) -> str:
    return "refund" if tool_name in REFUND_TOOLS else tool_name


def earlier_for(approvals: list[Approval]) -> dict[int, Earlier]:
    """Each card's earlier decisions (by the card's pk), read in one query for all the cards."""
    numbers = {order_of(a) for a in approvals} - {""}
    rows = list(Approval.objects.filter(requested_arguments__order_id__in=sorted(numbers),
                                        decision__in=(Approval.APPROVED, Approval.REJECTED))
                .select_related("decided_by", "tool_call").order_by("-decided_at", "-pk")[:READ]) if numbers else []
    return {a.pk: _of(a, rows) for a in approvals}


def _of(card: Approval, rows: list[Approval]) -> Earlier:
    number = order_of(card)
    before = [r for r in rows if r.pk != card.pk and number and order_of(r) == number
              and (card.decided_at is None or r.decided_at < card.decided_at)]
    rejection = next((r for r in before if r.decision == Approval.REJECTED
                      and _kind(r.tool_name) == _kind(card.tool_name)), None) if card.pending else None
    return Earlier(shown=before[:SHOWN], more=max(0, len(before) - SHOWN), rejection=rejection)


def rejection_before(approval: Approval) -> Approval | None:
    return earlier_for([approval])[approval.pk].rejection


def verdict(row: Approval) -> str:
    """approved, edited (approved with another amount than asked) or rejected."""
    if row.decision == Approval.APPROVED and _amount(row.executed_arguments) != _amount(row.requested_arguments):
        return "edited"
    return row.decision


def _amount(arguments) -> str | None:
    value = arguments.get("amount") if isinstance(arguments, dict) else None
    return None if value is None else str(value)


def decision_json(row: Approval) -> dict:
    return {"id": str(row.public_id), "by": staff_name(row.decided_by) or "the system", "tool": row.tool_name,
            "at": row.decided_at.isoformat().replace("+00:00", "Z"), "decision": verdict(row),
            "asked": _amount(row.requested_arguments), "amount": _amount(row.executed_arguments),
            "reason": row.reason, "via": row.decided_via or None}


def earlier_json(earlier: Earlier) -> dict:
    """The card's `earlier_decisions`: newest first, the count of the rest, and the rejection to confirm."""
    return {"shown": [decision_json(r) for r in earlier.shown], "more": earlier.more,
            "rejection": decision_json(earlier.rejection) if earlier.rejection else None}


def line(row: Approval) -> str:
    """"Rejected by Sam at 14:02 UTC: the order was refunded in full" / "Approved as 40.00 EUR (asked 50.00) …"."""
    who, at = staff_name(row.decided_by) or "the system", moment(row.decided_at)
    what = TOOL_WORDS.get(row.tool_name, row.tool_name)
    if row.decision == Approval.REJECTED:
        said = f"Rejected {what} by {who} at {at}"
    elif verdict(row) == "edited":
        said = (f"Approved {what} as {_amount(row.executed_arguments)} EUR (asked "
                f"{_amount(row.requested_arguments)}) by {who} at {at}")
    else:
        amount = _amount(row.executed_arguments)
        said = f"Approved {what}{f' of {amount} EUR' if amount else ''} by {who} at {at}"
    return f"{said}: {row.reason}" if row.reason else said


def lines(earlier: Earlier) -> list[str]:
    return [line(r) for r in earlier.shown] + ([f"and {earlier.more} more"] if earlier.more else [])


def refusal(rejection: Approval) -> str:
    """What the gate answers an approval that did not confirm the earlier rejection, in plain words."""
    who = staff_name(rejection.decided_by) or "The system"
    said = f"{who} rejected {TOOL_WORDS.get(rejection.tool_name, 'this')} on {order_of(rejection)} at " \
           f"{moment(rejection.decided_at)}"
    reason = f": {rejection.reason}" if rejection.reason else ""
    return f"{said}{reason}. To approve this anyway, confirm that you have seen that rejection."


def moment(at: datetime) -> str:
    """"14:02 UTC", or "14:02 UTC on 3 Dec 2026" when not today."""
    at = at.astimezone(dt_timezone.utc)
    today = timezone.now().astimezone(dt_timezone.utc).date()
    return f"{at:%H:%M} UTC" if at.date() == today else f"{at:%H:%M} UTC on {at.day} {at:%b %Y}"
