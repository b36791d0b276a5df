"""The agent profile in the staff console (/console/agent/): the editor of the draft, its differences from the
live version, publishing (with four eyes when PROFILE_PUBLISH_NEEDS_TWO), the versions and rolling back.

Every staff member sees the live version; saving, publishing and rolling back need
support.change_agent_profile, checked here on every POST and again by the profile's services, which also write
the audit's rows. Plain server-rendered forms; a refused save keeps what was typed, each problem by its field.
"""

from __future__ import annotations

from django.conf import settings
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from support import profiles
from support.customers.words import staff_name
from support.desk import agent_profile, permissions
from support.profiles import caps, reading
from support.profiles import selectors as profile_selectors
from support.web import agent_form
from support.web.views.console import console_page, staff_member_required

NOTICES = {"saved": "The draft is saved. It is not live until it is published.",
           "published": "Published: the new version is live. Conversations take it at their next turn.",
           "asked": "Asked to publish: another person with the permission must confirm it.",
           "rolled_back": "Rolled back: that version is live again."}


@require_http_methods(["GET", "POST"])
@staff_member_required
def editor(request):
    if request.method == "GET":
        notice = NOTICES.get(request.GET.get("done", ""), "")
        return _page(request, notice=notice)
    refused = _refuse_writer(request)
    if refused is not None:
        return refused
    values = agent_form.posted_values(request.POST)
    draft = profile_selectors.draft()
    base = draft.data if draft is not None else profiles.live().as_data()
    tools = [tool["name"] for tool in agent_profile.tool_choices()]
    data, found = agent_form.draft_data(values, base=base, tools=tools)
    try:
        reading.profile_from_json(data, known_tools=agent_profile.known_tools())
    except reading.ProfileInvalid as invalid:
        found = {**agent_form.problems_by_field(invalid.problems), **found}
    if found:
        return _page(request, values=values, errors=found, status=400)
    try:
        agent_profile.draft_save(data=data, by=request.user)
    except profiles.ProfileRefused as refused:
        return _page(request, values=values, errors={"": str(refused)}, status=refused.status)
    return redirect(reverse("console:agent") + "?done=saved#draft")


@require_POST
@staff_member_required
def publish(request):
    refused = _refuse_writer(request)
    if refused is not None:
        return refused
    revision = request.POST.get("revision", "")
    try:
        released = profiles.draft_publish(by=request.user, revision=int(revision) if revision.isdigit() else -1)
    except profiles.ProfileRefused as refused:
        return _page(request, errors={"": f"Not published: {refused}"}, status=refused.status)
    done = "published" if released.kind == "publish" else "asked"
    if request.POST.get("next") == "setup":
        return redirect("console:setup")
    return redirect(reverse("console:agent") + f"?done={done}")


@require_http_methods(["GET", "POST"])
@staff_member_required
def rollback(request, number: int):
    """GET: what rolling back to version `number` would change, and the button; POST: do it."""
    refused = _refuse_writer(request)
    if refused is not None:
        return refused
    target = profile_selectors.version_by_number(number)
    live = _live_number()
    if target is None or number == live:
        return redirect("console:agent")
    if request.method == "POST":
        try:
            profiles.version_rollback(number=number, by=request.user)
        except profiles.ProfileRefused as refused:
            return _page(request, errors={"": f"Not rolled back: {refused}"}, status=refused.status)
        return redirect(reverse("console:agent") + "?done=rolled_back")
    changes = agent_form.readable_diff(profiles.versions_diff(a=live, b=number))
    return console_page(request, "agent_rollback.html", "agent", number=number, live=live, changes=changes,
                        target=_version_row(target, None))


def _page(request, *, values: dict | None = None, errors: dict | None = None, notice: str = "", status: int = 200):
    can_edit = request.user.has_perm(permissions.CHANGE_AGENT_PROFILE)
    draft = profile_selectors.draft() if can_edit else None
    shown = profiles.Profile.from_data(draft.data) if draft is not None else profiles.live()
    live_id = profile_selectors.live_version_id()
    versions = [_version_row(v, live_id) for v in profile_selectors.versions()]
    live = next((row for row in versions if row["live"]), None)
    values = values if values is not None else agent_form.values_of(shown)
    changes = (agent_form.readable_diff(profiles.versions_diff(a=live["number"] if live else 0, b="draft"))
               if draft is not None else [])
    fields = _fields(values, errors)
    return console_page(
        request, "agent.html", "agent", status=status, can_edit=can_edit,
        why_read_only=permissions.profile_change_refusal(request.user), values=values, f=fields,
        problems=[(f"agent-{name}" if name else "", message) for name, message in (errors or {}).items()],
        notice=notice, draft=_draft_row(draft, request.user) if draft is not None else None, changes=changes,
        versions=versions, live=live,
        limits=_limit_rows(fields), tools=_tool_rows(values),
        days=[(name, fields[f"hours_{day}"]) for day, name in enumerate(agent_form.DAYS)],
        needs_two=settings.PROFILE_PUBLISH_NEEDS_TWO, rules_max=reading.GUIDANCE_MAX, rule_chars=reading.RULE_MAX)


def _fields(values: dict, errors: dict | None) -> dict:
    """Each text field as the template needs it: its name, element id, value and problem."""
    return {name: {"name": name, "id": f"agent-{name}", "value": values.get(name, ""),
                   "error": (errors or {}).get(name, "")} for name in agent_form.TEXTS}


def _live_number() -> int:
    live_id = profile_selectors.live_version_id()
    return next((v.number for v in profile_selectors.versions() if v.pk == live_id), 0)


def _version_row(version, live_id) -> dict:
    return {"number": version.number, "live": version.pk == live_id, "at": version.published_at,
            "by": f"published by {staff_name(version.published_by)}" if version.published_by
            else "seeded when the desk was set up"}


def _draft_row(draft, user) -> dict:
    asker = draft.publish_requested_by
    return {"revision": draft.revision, "updated_at": draft.updated_at,
            "updated_by": staff_name(draft.updated_by) if draft.updated_by else "",
            "asked_by": staff_name(asker) if asker else "", "asked_at": draft.publish_requested_at,
            "asked_by_me": asker is not None and asker.pk == user.pk}


def _limit_rows(fields: dict) -> list[dict]:
    rows = []
    for cap in caps.CAPS:
        value = cap.value()
        off = cap.zero_is_off and not value
        cap_words = (f"The operator set no cap ({cap.setting} is 0): any value is allowed." if off else
                     f"Up to {cap.shown(value)}, set by the operator as {cap.setting}.")
        rows.append({"f": fields[cap.field], "label": cap.words.capitalize(), "cap": cap_words,
                     "default": "off" if off else cap.shown(value), "zero_is_off": cap.zero_is_off and not off,
                     "unit": cap.unit.strip()})
    return rows


def _tool_rows(values: dict) -> list[dict]:
    offered = values.get("offered")
    return [{**tool, "offered": tool["always_offered"] or offered is None or tool["name"] in offered,
             "gated": tool["always_gated"] or tool["name"] in (values.get("gated") or ())}
            for tool in agent_profile.tool_choices()]


def _refuse_writer(request):
    refusal = permissions.profile_change_refusal(request.user)
    if refusal is None:
        return None
    permissions.log_refusal(request.user, permissions.request_address(request),
                            f"{request.method} {request.path}: {refusal}")
    return _page(request, errors={"": refusal}, status=403)
