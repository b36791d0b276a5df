"""The staff's API, used by the console: approvals to decide, conversations with their runs and trace.

Session login with is_staff; CSRF enforced on every POST (by staff_required, so failures answer in JSON).
Any staff member may read; deciding needs the permissions of support/desk/permissions.py. Every 403 is logged
on `support.security` with who, from where and why.
"""

from __future__ import annotations

import functools

from django.http import HttpResponse, JsonResponse

from support import copilot
from support.desk import bulk, four_eyes, gate, permissions, selectors, services, takeover
from support.desk.serializers import approval_json, approvals_json, conversation_json, message_json, run_json, step_json
from support.customers.identity import parse_uuid
from support.models import Approval, InboundEmail

from .common import ApiError, api, json_body
from .common import staff_required as _staff_required

NO_SUCH_APPROVAL = "No such approval."


def staff_required(view):
    """common.staff_required (a staff session and the CSRF token, or 403), with its refusals logged."""
    guarded = _staff_required(view)

    @functools.wraps(guarded)
    def wrapper(request, *args, **kwargs):
        try:
            response = guarded(request, *args, **kwargs)
        except ApiError as error:
            if error.status == 403:
                _log_refusal(request, error.message)
            raise
        if response.status_code == 403:  # the CSRF check answers instead of raising
            _log_refusal(request, "CSRF check failed")
        return response

    return wrapper


def _log_refusal(request, reason: str) -> None:
    permissions.log_refusal(request.user, permissions.request_address(request),
                            f"{request.method} {request.path}: {reason}")


def _approval(public_id):
    approval = selectors.approval_by_public_id(public_id)
    if approval is None:
        raise ApiError(404, NO_SUCH_APPROVAL)
    return approval


def _status_filter(request, allowed, default):
    status = request.GET.get("status") or default
    if status is not None and status not in allowed:
        raise ApiError(400, f"status must be one of: {', '.join(allowed)}.")
    return status


@api("GET")
@staff_required
def approvals(request):
    status = _status_filter(request, selectors.APPROVAL_STATUSES, "pending")
    # `viewer`: what this staff member may decide, so the console offers only that.
    return JsonResponse({"approvals": approvals_json(selectors.approvals_list(status)),
                         "viewer": permissions.viewer_json(request.user)})


@api("POST")
@staff_required
def approve(request, public_id):
    approval = _approval(public_id)
    body = json_body(request)
    confirm_seen, confirm_over_rejection = _flag(body, "confirm_seen"), _flag(body, "confirm_over_rejection")
    arguments = body.get("arguments")
    reason = body.get("reason") or ""  # why a changed amount: the agent passes it on to the customer as written
    if not isinstance(reason, str):
        raise ApiError(400, "reason must be text.")
    _may_decide(request, approval, approve=True, arguments=approval.arguments_to_run(arguments))
    return _decide(request, approval, approve=True, arguments=arguments, confirm_seen=confirm_seen,
                   confirm_over_rejection=confirm_over_rejection, reason=reason)


def _flag(body: dict, name: str) -> bool:
    value = body.get(name, False)
    if not isinstance(value, bool):
        raise ApiError(400, f"{name} must be true or false.")
    return value


@api("POST")
@staff_required
def reject(request, public_id):
    approval = _approval(public_id)
    reason = json_body(request).get("reason")
    if reason is not None and not isinstance(reason, str):
        raise ApiError(400, "reason must be text.")
    _may_decide(request, approval, approve=False, arguments=None)
    # An empty reason is refused by the service, which owns that rule.
    return _decide(request, approval, approve=False, reason=reason or "")


@api("POST")
@staff_required
def decide_many(request):
    """Several cards approved or rejected with one reason: {"approvals": [ids], "decision": "approve" |
    "reject", "reason"}. Each card is its own decision (support/desk/bulk.py); the answer reports each."""
    body = json_body(request)
    ids, decision, reason = body.get("approvals"), body.get("decision"), body.get("reason") or ""
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        raise ApiError(400, "approvals must be a list of approval ids.")
    if len(set(ids)) > bulk.MAX_BULK:
        return JsonResponse({"error": f"At most {bulk.MAX_BULK} approvals at once; {len(set(ids))} were sent. "
                                      "Decide them in smaller groups.", "code": "too_many_approvals",
                             "retryable": False}, status=400)
    if decision not in ("approve", "reject"):
        raise ApiError(400, 'decision must be "approve" or "reject".')
    if not isinstance(reason, str):
        raise ApiError(400, "reason must be text.")
    if decision == "reject" and not reason.strip():
        raise ApiError(400, "A rejection needs a reason; the agent relays it to the customer.")
    refusal = permissions.decision_refusal(request.user, tool="", approve=False, arguments=None)
    if refusal is not None:
        raise ApiError(403, refusal)
    results = bulk.approvals_decide_bulk(user=request.user, ids=ids, approve=decision == "approve", reason=reason)
    for result in results:
        if result["code"] == "forbidden":
            _log_refusal(request, f"approval {result['id']}: {result['message']}")
    counts = {outcome: sum(r["outcome"] == outcome for r in results)
              for outcome in (bulk.DECIDED, bulk.SKIPPED, bulk.REFUSED)}
    return JsonResponse({"results": results, "counts": counts})


def _may_decide(request, approval, *, approve: bool, arguments) -> None:
    refusal = permissions.decision_refusal(request.user, tool=approval.tool_name, approve=approve,
                                           arguments=arguments)
    if refusal is not None:
        raise ApiError(403, refusal)  # logged by staff_required, as every 403 here


SECOND_APPROVER_NEEDED = "Approved, 1 of 2: a second person must approve it before it runs."


def _decide(request, approval, **decision):
    try:
        approval = gate.approval_decide(approval=approval, user=request.user, channel=Approval.CONSOLE, **decision)
    except gate.NeedsSecondLook as error:
        # The card as it is now, so the console shows what the customer wrote before asking again.
        return _refused(approval, "needs_second_look", error)
    except (four_eyes.SamePerson, four_eyes.DiffersFromFirst, gate.OverRejection) as error:
        return _refused(approval, error.code, error)
    except services.AlreadyDecided as error:  # or ApprovalExpired: the text says which
        return _refused(approval, "conflict", error)
    except services.InvalidArguments as error:
        raise ApiError(400, str(error)) from None
    # The same decision sent again gets these very bytes: the card as it was when decided, not as the run
    # has moved it since (a refund made, a balance lowered). The first of two approvals is answered 202, with
    # the card waiting for the second person, and its own kept answer.
    if four_eyes.answered_as_first(approval, request.user):
        return JsonResponse({"approval": gate.decision_answer(approval, lambda: _fresh(approval), first=True),
                             "code": four_eyes.NeedsSecondApprover.code, "message": SECOND_APPROVER_NEEDED},
                            status=202)
    return JsonResponse({"approval": gate.decision_answer(approval, lambda: _fresh(approval))})


def _refused(approval, code: str, error: Exception) -> JsonResponse:
    return JsonResponse({"error": str(error), "code": code, "retryable": False, "approval": _fresh(approval)},
                        status=409)


def _fresh(approval) -> dict:
    return approval_json(selectors.approval_by_public_id(approval.public_id))


@api("GET")
@staff_required
def conversations(request):
    status = _status_filter(request, selectors.CONVERSATION_STATUSES, None)
    return JsonResponse({"conversations": [
        {**conversation_json(c, staff=True), "run": selectors.run_summary(c.latest_run, staff=True),
         "pending_approvals": c.pending_approvals}
        for c in selectors.conversations_for_staff(status)
    ]})


def _conversation(public_id):
    conversation = selectors.conversation_by_public_id(public_id)
    if conversation is None:
        raise ApiError(404, "No such conversation.")
    return conversation


@api("GET")
@staff_required
def conversation(request, public_id):
    conversation = _conversation(public_id)
    detail = selectors.conversation_detail_for_staff(conversation)
    return JsonResponse({
        "conversation": conversation_json(conversation, staff=True),
        "messages": [message_json(m, staff=True) for m in detail.messages],
        "runs": [{**run_json(run), "steps": [step_json(s) for s in run.steps.all()]} for run in detail.runs],
        "approvals": approvals_json(detail.approvals),
    })


@api("POST")
@staff_required
def take_over(request, public_id):
    conversation = takeover.conversation_take_over(conversation=_conversation(public_id), user=request.user)
    return JsonResponse({"conversation": conversation_json(conversation, staff=True)})


@api("POST")
@staff_required
def hand_back(request, public_id):
    conversation = _conversation(public_id)
    run = takeover.conversation_hand_back(conversation=conversation, user=request.user)
    conversation.refresh_from_db()
    return JsonResponse({"conversation": conversation_json(conversation, staff=True),
                         "run": selectors.run_summary(run, staff=True)})


@api("POST")
@staff_required
def reply(request, public_id):
    """{"text", "draft"?}: `draft`, the copilot draft it was written from (this person's, of this conversation),
    checked before the reply is saved and told what became of it after (support/copilot/)."""
    conversation = _conversation(public_id)
    body = json_body(request)
    draft = _draft(conversation, request.user, body.get("draft"))
    try:
        message = takeover.conversation_staff_reply(conversation=conversation, user=request.user,
                                                    text=body.get("text"))
    except services.InvalidMessage as error:
        raise ApiError(400, str(error)) from None
    except takeover.NotTakenOver as error:
        raise ApiError(409, str(error)) from None
    if draft is not None:
        copilot.draft_used(run=draft, message=message)
    return JsonResponse({"message": message_json(message, staff=True)}, status=201)


def _draft(conversation, user, draft):
    if draft is None:
        return None
    try:
        return copilot.draft_for_reply(conversation=conversation, user=user, draft=draft)
    except copilot.CopilotRefused as error:
        raise ApiError(error.status, str(error)) from None


@api("GET")
@staff_required
def email_original(request, public_id):
    """A customer's e-mail exactly as it came, for "Show original": plain text, never rendered (nosniff and a
    sandboxing CSP: a mail's HTML is shown as its source)."""
    wanted = parse_uuid(public_id)
    mail = InboundEmail.objects.filter(public_id=wanted).first() if wanted else None
    if mail is None:
        raise ApiError(404, "No such e-mail.")
    raw = bytes(mail.raw)
    text = raw.decode("utf-8", "replace") if raw else "This e-mail was too large to keep; only its headers were read."
    response = HttpResponse(text, content_type="text/plain; charset=utf-8")
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "sandbox; default-src 'none'"
    return response
