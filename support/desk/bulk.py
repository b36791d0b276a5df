"""Bulk decisions: several approval cards approved or rejected at once with one reason. Each card is its own
decision through gate.approval_decide (its own row, its own answer, kept), so a retried bulk request decides
nothing twice, a card decided meanwhile is skipped, and every card's rules hold as they do one at a time: a
card whose customer wrote since the request (the second look), that needs two people's approval (four eyes,
before someone else has given the first) or that carries the warning about instructions in text a third party
wrote (selectors_provenance) is refused, never approved in bulk: each is for a person to open and read. The
large-refund permission is checked on what would run (Approval.arguments_to_run), as the console checks it.
"""

from __future__ import annotations

from support.desk import four_eyes, gate, permissions, selectors, selectors_approvals, serializers, services
from support.models import Approval

MAX_BULK = 50  # cards in one request

DECIDED, SKIPPED, REFUSED = "decided", "skipped", "refused"
FLAGGED = "instructions_in_text_read"  # the code of a card refused for its warning


def approvals_decide_bulk(*, user, ids: list[str], approve: bool, reason: str = "") -> list[dict]:
    """One outcome per card, in the order asked (an id sent twice is decided once, reported once):
    {"id", "outcome": decided | skipped | refused, "code", "message", "approval": the card or None}."""
    return [_one(public_id, user=user, approve=approve, reason=reason) for public_id in dict.fromkeys(ids)]


def _one(public_id: str, *, user, approve: bool, reason: str) -> dict:
    approval = selectors.approval_by_public_id(public_id)
    if approval is None:
        return _outcome(public_id, REFUSED, "not_found", "No such approval.")
    refusal = permissions.decision_refusal(user, tool=approval.tool_name, approve=approve,
                                           arguments=approval.arguments_to_run() if approve else None)
    if refusal is not None:
        return _outcome(public_id, REFUSED, "forbidden", refusal, approval)
    warning = _warning(approval) if approve and approval.pending else ""
    if warning:
        return _outcome(public_id, REFUSED, FLAGGED, f"{warning} Open the card, read that text and decide it there.",
                        approval)
    try:
        decided = gate.approval_decide(approval=approval, user=user, approve=approve, reason=reason,
                                       confirm_seen=False, first_allowed=False, channel=Approval.BULK,
                                       confirm_over_rejection=False)
    except gate.NeedsSecondLook:
        return _outcome(public_id, REFUSED, "needs_second_look", "The customer wrote after this was requested: "
                        "open the card, read what they wrote and decide it there.", approval)
    except gate.OverRejection as error:  # for a person to read on the card, as a flagged one
        return _outcome(public_id, REFUSED, error.code, f"{error} Open the card and decide it there.", approval)
    except (four_eyes.NeedsSecondApprover, four_eyes.SamePerson, four_eyes.DiffersFromFirst) as error:
        return _outcome(public_id, REFUSED, error.code, str(error), approval)
    except gate.ApprovalExpired as error:
        return _outcome(public_id, SKIPPED, "expired", str(error), approval)
    except services.AlreadyDecided as error:
        return _outcome(public_id, SKIPPED, "already_decided", str(error), approval)
    except services.InvalidArguments as error:
        return _outcome(public_id, REFUSED, "invalid_arguments", str(error), approval)
    if decided.pending:  # this person's own first approval, sent again: the other one is someone else's
        return _outcome(public_id, REFUSED, four_eyes.SamePerson.code,
                        "You gave the first approval; a second person must give the other.", approval)
    # The answer a single decision gets, kept with the approval: a retried bulk request answers the same.
    card = gate.decision_answer(decided, lambda: _card(decided))
    return {"id": public_id, "outcome": DECIDED, "code": decided.decision, "message": "", "approval": card}


def _warning(approval) -> str:
    """The card's warning about instructions in text a third party wrote, "" when it has none. What the agent
    read before asking never changes, so reading it before the decision's lock races with nothing."""
    if approval.run_id is None:  # a colleague's own refund: no agent asked, nothing was read
        return ""
    shown = selectors_approvals.approval_provenance(approval)
    return shown["warning"] if shown["flagged"] else ""


def _outcome(public_id: str, outcome: str, code: str, message: str, approval=None) -> dict:
    return {"id": public_id, "outcome": outcome, "code": code, "message": message,
            "approval": _card(approval) if approval is not None else None}


def _card(approval) -> dict:
    return serializers.approval_json(selectors.approval_by_public_id(approval.public_id))
