"""The staff inbox's API: the list (filters, search, sort, paging), the counts the console's title and tabs
show, and the inbox actions (take, assign, unassign, close, reopen, mark read). Any active staff member may
use them; refusals are logged like every staff 403 (views/staff.staff_required)."""

from __future__ import annotations

from django.http import JsonResponse

from support.customers.identity import parse_uuid
from support.desk import inbox as inbox_services
from support.desk import selectors, selectors_inbox

from .common import ApiError, api, json_body
from .staff import staff_required


def _int(request, name: str, default: int) -> int:
    raw = request.GET.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(400, f"{name} must be a whole number.") from None
    if value < 0:
        raise ApiError(400, f"{name} must not be negative.")
    return value


@api("GET")
@staff_required
def inbox(request):
    """?filter=mine|unassigned|needs_person|waiting_approval|with_person|closed|all, ?q=search words,
    ?sort=updated|waiting, ?limit, ?offset, ?ids=id,id (refresh those rows only)."""
    ids = None
    if request.GET.get("ids"):
        ids = [parse_uuid(i) for i in request.GET["ids"].split(",")[:selectors_inbox.MAX_LIMIT]]
        ids = [i for i in ids if i is not None]
    q = request.GET.get("q", "")
    if len(q) > 200:
        raise ApiError(400, "Search for at most 200 characters.")
    try:
        page = selectors_inbox.inbox(request.user, filter_=request.GET.get("filter", ""), q=q,
                                     sort=request.GET.get("sort") or "updated",
                                     limit=_int(request, "limit", selectors_inbox.DEFAULT_LIMIT),
                                     offset=_int(request, "offset", 0), ids=ids)
    except ValueError as error:
        raise ApiError(400, str(error)) from None
    return JsonResponse({"conversations": page.rows, "count": page.count,
                         "viewer": selectors_inbox.person_json(request.user)})


@api("GET")
@staff_required
def counts(request):
    return JsonResponse(selectors_inbox.inbox_counts(request.user))


@api("GET")
@staff_required
def colleagues(request):
    return JsonResponse({"staff": selectors_inbox.colleagues(),
                         "viewer": selectors_inbox.person_json(request.user)})


def _conversation(public_id):
    conversation = selectors.conversation_by_public_id(public_id)
    if conversation is None:
        raise ApiError(404, "No such conversation.")
    return conversation


def _row(request, conversation) -> JsonResponse:
    return JsonResponse({"conversation": selectors_inbox.inbox_row(request.user, conversation.public_id)})


def _act(request, public_id, action, **kwargs) -> JsonResponse:
    conversation = _conversation(public_id)
    try:
        action(conversation=conversation, **kwargs)
    except inbox_services.InboxConflict as error:
        return JsonResponse({"error": str(error), "code": "conflict", "retryable": False,
                             "conversation": selectors_inbox.inbox_row(request.user, conversation.public_id)},
                            status=409)
    except inbox_services.NotStaff as error:
        raise ApiError(400, str(error)) from None
    return _row(request, conversation)


@api("POST")
@staff_required
def take(request, public_id):
    """Assign to me, if nobody has it: 409 naming who took it first otherwise."""
    return _act(request, public_id, inbox_services.conversation_take, user=request.user)


@api("POST")
@staff_required
def assign(request, public_id):
    """{"assignee": "<username>"} gives it to that colleague; {"assignee": null} unassigns it."""
    body = json_body(request)
    if "assignee" not in body:
        raise ApiError(400, "Say whom to assign it to: {\"assignee\": \"<username>\"}, or null for nobody.")
    username = body["assignee"]
    if username is None:
        return _act(request, public_id, inbox_services.conversation_unassign, actor=request.user)
    if not isinstance(username, str) or not username or len(username) > 150:
        raise ApiError(400, "assignee must be a staff member's username, or null.")
    return _act(request, public_id, inbox_services.conversation_assign, actor=request.user,
                assignee_username=username)


@api("POST")
@staff_required
def unassign(request, public_id):
    return _act(request, public_id, inbox_services.conversation_unassign, actor=request.user)


@api("POST")
@staff_required
def close(request, public_id):
    return _act(request, public_id, inbox_services.conversation_close, actor=request.user)


@api("POST")
@staff_required
def reopen(request, public_id):
    return _act(request, public_id, inbox_services.conversation_reopen, actor=request.user)


@api("POST")
@staff_required
def read(request, public_id):
    """{"seq": N}: I have read the conversation up to N (default: all of it)."""
    conversation = _conversation(public_id)
    seq = json_body(request).get("seq", conversation.last_seq)
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
        raise ApiError(400, "seq must be a whole number, 0 or more.")
    marker = inbox_services.conversation_mark_read(conversation=conversation, user=request.user, seq=seq)
    return JsonResponse({"read_seq": marker})


@api("GET")
@staff_required
def history(request, public_id):
    """Who took, assigned, unassigned, closed and reopened the conversation, and when."""
    return JsonResponse({"events": selectors_inbox.inbox_events(_conversation(public_id))})
