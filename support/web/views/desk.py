"""The staff API for working a conversation: its customer's context, refunds and seller messages by a person,
the actions on record, internal notes, and the desk's saved replies.

Staff session + CSRF on every call (staff_required, which logs every 403); the rules live in
support/desk/staff_actions.py, so a call made without the console meets the same checks.
"""

from __future__ import annotations

from django.http import JsonResponse

from support import copilot
from support.customers.identity import parse_uuid
from support.desk import selectors, selectors_context, selectors_handover, serializers, staff_actions
from support.models import Note, SavedReply, StaffAction

from .common import ApiError, api, json_body
from .staff import staff_required


def _conversation(public_id):
    conversation = selectors.conversation_by_public_id(public_id)
    if conversation is None:
        raise ApiError(404, "No such conversation.")
    return conversation


def _refused(error: staff_actions.ActionRefused):
    raise ApiError(error.status, str(error)) from None


@api("GET")
@staff_required
def context(request, public_id):
    conversation = _conversation(public_id)
    return JsonResponse(selectors_context.conversation_context(conversation, request.user))


@api("GET")
@staff_required
def handover(request, public_id):
    """Why the conversation needs a person, as it stands now; null when nothing waits for one. `summary`: the
    copilot's latest summary of it (support/copilot/), for whoever picks it up; null when none was made."""
    conversation = _conversation(public_id)
    return JsonResponse({"handover": selectors_handover.handover_summary(conversation),
                         "summary": copilot.summary_json(conversation)})


@api("POST")
@staff_required
def refund(request, public_id):
    conversation = _conversation(public_id)
    body = json_body(request)
    try:
        action = staff_actions.refund_issue(conversation=conversation, user=request.user,
                                            order_id=body.get("order_id"), amount=body.get("amount"),
                                            reason=body.get("reason"), key=body.get("key"))
    except staff_actions.ActionRefused as error:
        _refused(error)
    if action.status == StaffAction.AWAITING_APPROVAL:  # four eyes: another person approves it first
        approval = selectors.approval_by_public_id(action.approval.public_id)
        return JsonResponse({"action": serializers.staff_action_json(action),
                             "approval": serializers.approval_json(approval), "code": "needs_second_approver",
                             "message": "Saved, not made yet: refunds of this size need a second person's "
                                        "approval. It waits in the approvals queue."}, status=202)
    return JsonResponse({"action": serializers.staff_action_json(action)}, status=201)


@api("POST")
@staff_required
def seller_message(request, public_id):
    conversation = _conversation(public_id)
    body = json_body(request)
    try:
        action = staff_actions.seller_message_send(conversation=conversation, user=request.user,
                                                   order_id=body.get("order_id"), message=body.get("message"),
                                                   key=body.get("key"))
    except staff_actions.ActionRefused as error:
        _refused(error)
    return JsonResponse({"action": serializers.staff_action_json(action)}, status=201)


@api("GET")
@staff_required
def actions(request, public_id):
    conversation = _conversation(public_id)
    rows = StaffAction.objects.filter(conversation=conversation).select_related("user", "conversation")
    return JsonResponse({"actions": [serializers.staff_action_json(a) for a in rows]})


@api("GET", "POST")
@staff_required
def notes(request, public_id):
    conversation = _conversation(public_id)
    if request.method == "POST":
        try:
            note = staff_actions.note_add(conversation=conversation, user=request.user,
                                          text=json_body(request).get("text"))
        except staff_actions.ActionRefused as error:
            _refused(error)
        return JsonResponse({"note": serializers.note_json(note)}, status=201)
    rows = Note.objects.filter(conversation=conversation).select_related("author")
    return JsonResponse({"notes": [serializers.note_json(n) for n in rows]})


@api("GET", "POST")
@staff_required
def saved_replies(request):
    if request.method == "POST":
        body = json_body(request)
        try:
            reply = staff_actions.saved_reply_save(user=request.user, title=body.get("title"), body=body.get("body"))
        except staff_actions.ActionRefused as error:
            _refused(error)
        return JsonResponse({"saved_reply": serializers.saved_reply_json(reply)}, status=201)
    rows = SavedReply.objects.select_related("updated_by")
    return JsonResponse({"saved_replies": [serializers.saved_reply_json(r) for r in rows]})


@api("PUT", "DELETE")
@staff_required
def saved_reply(request, public_id):
    wanted = parse_uuid(public_id)
    reply = SavedReply.objects.filter(public_id=wanted).first() if wanted else None
    if reply is None:
        raise ApiError(404, "No such saved reply.")
    if request.method == "DELETE":
        staff_actions.saved_reply_delete(reply=reply)
        return JsonResponse({"deleted": str(reply.public_id)})
    body = json_body(request)
    try:
        reply = staff_actions.saved_reply_save(user=request.user, title=body.get("title"), body=body.get("body"),
                                               reply=reply)
    except staff_actions.ActionRefused as error:
        _refused(error)
    return JsonResponse({"saved_reply": serializers.saved_reply_json(reply)})
