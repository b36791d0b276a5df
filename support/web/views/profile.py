"""The agent profile's JSON API for the console (docs/api.md, "The agent profile"): read the live version and
the draft, save the draft, publish it, roll back to a version, compare two. Staff only, CSRF checked, and
every call needs `support.change_agent_profile`; a refusal is logged like every staff 403."""

from __future__ import annotations

import functools

from django.http import JsonResponse

from support import profiles
from support.desk import agent_profile, permissions

from .common import ApiError, api, json_body
from .staff import staff_required


def _allowed(request) -> None:
    refusal = permissions.profile_change_refusal(request.user)
    if refusal:
        raise ApiError(403, refusal)


def refusals_answered(view):
    """A refused change answers in the API's error shape with its own code (`same_person` among them)."""

    @functools.wraps(view)
    def wrapper(request, *args, **kwargs):
        try:
            return view(request, *args, **kwargs)
        except profiles.ProfileRefused as refused:
            return JsonResponse({"error": str(refused), "code": refused.code, "retryable": False},
                                status=refused.status)

    return wrapper


@api("GET")
@staff_required
def profile(request):
    _allowed(request)
    return JsonResponse(agent_profile.profile_json())


@api("PUT")
@staff_required
@refusals_answered
def draft(request):
    _allowed(request)
    body = json_body(request)
    if not isinstance(body.get("profile"), dict):
        raise ApiError(400, "Send the draft as {\"profile\": {...}}.")
    saved = agent_profile.draft_save(data=body["profile"], by=request.user)
    return JsonResponse({"draft": agent_profile.version_json(saved)})


@api("POST")
@staff_required
@refusals_answered
def publish(request):
    _allowed(request)
    body = json_body(request) if request.body else {}
    revision = body.get("revision")
    if revision is not None and (isinstance(revision, bool) or not isinstance(revision, int)):
        raise ApiError(400, "revision must be the draft's revision number, as read.")
    released = profiles.draft_publish(by=request.user, revision=revision)
    outcome = "published" if released.kind == "publish" else "awaiting_second_person"
    return JsonResponse({"outcome": outcome, "version": agent_profile.version_json(released.version)})


@api("POST")
@staff_required
@refusals_answered
def rollback(request, number: int):
    _allowed(request)
    release = profiles.version_rollback(number=number, by=request.user)
    return JsonResponse({"outcome": "rolled_back", "version": agent_profile.version_json(release.version)})


@api("GET")
@staff_required
@refusals_answered
def diff(request):
    _allowed(request)
    a, b = _ref(request, "a"), _ref(request, "b")
    return JsonResponse({"a": a, "b": b, "changes": profiles.versions_diff(a=a, b=b)})


def _ref(request, name: str):
    value = request.GET.get(name, "")
    if value == "draft":
        return value
    if not value.isdigit():
        raise ApiError(400, f"{name} is a version number, 0 for the built-in defaults, or draft.")
    return int(value)
