"""The audit: every decision on an approval, every staff action, every step of putting an agent profile
version live and every change to the staff (invitations, roles, teams, access) as one row each, for a person or a program to read (the console's Audit page,
`manage.py export_audit`): what the model asked, what a person changed, what ran, who, when, why, on which
conversation and tool.

Rows come from five database iterators (first approvals, decisions, staff actions, profile releases, team changes), each in
time order and read in chunks, merged lazily: an export of years writes as it reads and never holds it all. CSV
cells are made safe for spreadsheets (a cell starting with = + - @ is prefixed with ' so it is never a formula); JSON
is a stream of one object with the rows in it. Times are UTC.
"""

from __future__ import annotations

import csv
import heapq
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from datetime import timezone as dt_timezone

from django.utils import timezone

from support.customers.words import staff_name
from support.models import Approval, ProfileRelease, StaffAction, TeamChange
from support.profiles import versions_diff

CHUNK = 500  # rows read from the database at a time
PREVIEW = 20  # rows the console page shows
FIELDS = ("at", "record", "id", "event", "person", "person_name", "other_person", "conversation", "tool",
          "requested_arguments", "executed_arguments", "changed", "result", "status", "reason",
          "via", "first_approval_via",
          # For finance, each in a column of its own (_money()): the order, the amount as it ran (or would have:
          # a rejection's is what was asked), as asked, its currency, and the decision in one word.
          "order", "amount", "amount_asked", "currency", "decision")
CURRENCY = "EUR"  # what the desk's amounts are in: the cards, the tools and staff refunds say EUR
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


@dataclass(frozen=True)
class AuditFilter:
    """Rows from `since` (inclusive) to `until` (exclusive), by `person` (a user: what they did) or anyone."""

    since: datetime | None = None
    until: datetime | None = None
    person: object | None = None

    def json(self) -> dict:
        return {"since": _ts(self.since), "until": _ts(self.until),
                "person": self.person.get_username() if self.person is not None else None}


def parse_bound(text: str, *, end: bool = False) -> datetime:
    """"2026-11-30" (a day, UTC: its start, or with end=True the next day's start, so the day is included) or an
    ISO date and time ("2026-11-30T14:00:00Z"; without a zone, UTC). ValueError in plain words otherwise."""
    text = (text or "").strip()
    try:
        if len(text) == 10:
            day = datetime.fromisoformat(text).date()
            return datetime.combine(day + timedelta(days=1) if end else day, time.min, tzinfo=dt_timezone.utc)
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"“{text}” is not a date like 2026-11-30 or a time like 2026-11-30T14:00:00Z.") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt_timezone.utc)


# -- the rows ---------------------------------------------------------------------------------------------

def audit_rows(audit: AuditFilter, *, newest_first: bool = False) -> Iterator[dict]:
    """Every row the filter matches, oldest first (newest first for a preview), read lazily."""
    sources = (_first_approvals(audit, newest_first), _decisions(audit, newest_first),
               _staff_actions(audit, newest_first), _profile_releases(audit, newest_first),
               _team_changes(audit, newest_first))
    return heapq.merge(*sources, key=lambda row: row["at"], reverse=newest_first)


def _approvals():
    return Approval.objects.select_related("tool_call", "run__conversation", "decided_by", "first_approved_by",
                                           "requested_by", "staff_action__conversation")


def _in(queryset, audit: AuditFilter, at: str, person: str, newest_first: bool):
    if audit.since is not None:
        queryset = queryset.filter(**{f"{at}__gte": audit.since})
    if audit.until is not None:
        queryset = queryset.filter(**{f"{at}__lt": audit.until})
    if audit.person is not None:
        queryset = queryset.filter(**{person: audit.person})
    return queryset.order_by(f"-{at}" if newest_first else at, "-pk" if newest_first else "pk").iterator(CHUNK)


def _first_approvals(audit: AuditFilter, newest_first: bool) -> Iterator[dict]:
    rows = _approvals().filter(first_approved_at__isnull=False)
    for a in _in(rows, audit, "first_approved_at", "first_approved_by", newest_first):
        yield _approval_row(a, at=a.first_approved_at, event="first_approval", person=a.first_approved_by,
                            other=None, executed=a.first_arguments, reason="", via=a.first_approved_via)


def _decisions(audit: AuditFilter, newest_first: bool) -> Iterator[dict]:
    rows = _approvals().filter(decided_at__isnull=False)
    for a in _in(rows, audit, "decided_at", "decided_by", newest_first):
        yield _approval_row(a, at=a.decided_at, event=a.decision, person=a.decided_by,
                            other=a.first_approved_by or a.requested_by, executed=a.executed_arguments,
                            reason=a.reason, via=a.decided_via)


def _approval_row(a: Approval, *, at, event: str, person, other, executed, reason: str, via: str) -> dict:
    """One decision: the model's (or a colleague's) request as asked, as it would run, and what came of it;
    where this decision was made (`via`) and where the first of two approvals was (`first_approval_via`)."""
    if a.staff_action_id:
        action = a.staff_action
        conversation, result, status = action.conversation, action.result, action.status
    else:
        conversation, result, status = a.run.conversation, a.tool_call.result, a.tool_call.status
    return {"at": at, "record": "approval", "id": str(a.public_id), "event": event, **_people(person, other),
            "conversation": str(conversation.public_id), "tool": a.tool_name,
            "requested_arguments": a.requested_arguments, "executed_arguments": executed,
            "changed": _changed(a.requested_arguments, executed), "result": result or None, "status": status,
            "reason": reason or a.not_run_reason, "via": via,
            "first_approval_via": a.first_approved_via if a.first_approved_at is not None else "",
            **_money(a.requested_arguments, executed), "decision": _decision(event, a.requested_arguments, executed)}


def _staff_actions(audit: AuditFilter, newest_first: bool) -> Iterator[dict]:
    rows = StaffAction.objects.select_related("conversation", "user", "approval__decided_by")
    for action in _in(rows, audit, "created_at", "user", newest_first):
        approval = getattr(action, "approval", None)  # a refund a second person approved (four eyes)
        approver = approval.decided_by if approval is not None and approval.decision == Approval.APPROVED else None
        arguments = action.arguments if isinstance(action.arguments, dict) else {}
        yield {"at": action.created_at, "record": "staff_action", "id": str(action.public_id), "event": action.kind,
               **_people(action.user, approver), "conversation": str(action.conversation.public_id),
               "tool": action.kind, "requested_arguments": action.arguments,
               "executed_arguments": action.arguments if action.status == StaffAction.DONE else None, "changed": "",
               "result": action.result or None, "status": action.status, "reason": str(arguments.get("reason") or ""),
               "via": "", "first_approval_via": "", **_money(arguments, None), "decision": action.status}


PROFILE_EVENTS = {ProfileRelease.REQUEST: "profile_publish_asked", ProfileRelease.PUBLISH: "profile_published",
                  ProfileRelease.ROLLBACK: "profile_rolled_back"}


def _profile_releases(audit: AuditFilter, newest_first: bool) -> Iterator[dict]:
    """The agent profile: each request to publish (four eyes), publish and rollback, with the fields that
    changed against the version live before."""
    rows = ProfileRelease.objects.select_related("version", "previous", "by", "first_by")
    for release in _in(rows, audit, "at", "by", newest_first):
        version, previous = release.version, release.previous
        moved = {"version": version.number, "previous": previous.number if previous is not None else None}
        changed = ""
        if release.kind != ProfileRelease.REQUEST:
            changes = versions_diff(a=previous.number if previous is not None else 0, b=version.number)
            changed = ", ".join(c["field"] for c in changes)
        yield {"at": release.at, "record": "agent_profile", "id": str(release.public_id),
               "event": PROFILE_EVENTS[release.kind], **_people(release.by, release.first_by), "conversation": "",
               "tool": "", "requested_arguments": moved, "executed_arguments": moved, "changed": changed,
               "result": None, "status": "asked" if release.kind == ProfileRelease.REQUEST else "live",
               "reason": "", "via": "", "first_approval_via": "", **_money(None, None), "decision": ""}


def _team_changes(audit: AuditFilter, newest_first: bool) -> Iterator[dict]:
    """The staff (support/team/): invitations sent, resent, cancelled and used, roles, teams, (re)activation;
    `other_person` is whom it changed, `requested_arguments` and `executed_arguments` before and after."""
    rows = TeamChange.objects.select_related("by", "person", "invitation")
    for change in _in(rows, audit, "at", "by", newest_first):
        email = change.invitation.email if change.invitation is not None else ""
        yield {"at": change.at, "record": "team", "id": str(change.public_id), "event": change.event,
               **_people(change.by, change.person), "conversation": "", "tool": "",
               "requested_arguments": change.before, "executed_arguments": change.after,
               "changed": _changed(change.before, change.after),
               "result": {"invitation": email} if email else None, "status": "done", "reason": "", "via": "",
               "first_approval_via": "", **_money(None, None), "decision": ""}


def _people(person, other) -> dict:
    return {"person": person.get_username() if person is not None else "",
            "person_name": staff_name(person) if person is not None else "the system",
            "other_person": other.get_username() if other is not None else ""}


def _money(requested, executed) -> dict:
    """The row's order and amounts: as it ran (else as asked) and as asked; "" where the request names none."""
    asked = requested if isinstance(requested, dict) else {}
    ran = executed if isinstance(executed, dict) else asked
    amount, amount_asked = str(ran.get("amount") or ""), str(asked.get("amount") or "")
    return {"order": str(asked.get("order_id") or ""), "amount": amount, "amount_asked": amount_asked,
            "currency": CURRENCY if amount or amount_asked else ""}


def _decision(event: str, requested, executed) -> str:
    """approved, edited (approved with changes), rejected, expired or first_approval (its changes: `changed`)."""
    return "edited" if event == Approval.APPROVED and _changed(requested, executed) else event


def _changed(requested, executed) -> str:
    """The arguments a person changed before it ran, by name ("amount")."""
    if not isinstance(requested, dict) or not isinstance(executed, dict):
        return ""
    return ", ".join(k for k in sorted({*requested, *executed}) if requested.get(k) != executed.get(k))


# -- the formats ------------------------------------------------------------------------------------------

class _Line:
    """What csv.writer writes to: each row comes back as its text instead of being kept."""

    def write(self, text: str) -> str:
        return text


def csv_safe(value) -> str:
    """A cell as text a spreadsheet shows and never runs: objects as JSON, a formula's first character escaped."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        return _ts(value)
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def csv_lines(rows: Iterable[dict]) -> Iterator[str]:
    writer = csv.writer(_Line())
    yield writer.writerow(FIELDS)
    for row in rows:
        yield writer.writerow([csv_safe(row[field]) for field in FIELDS])


def json_chunks(rows: Iterable[dict], audit: AuditFilter) -> Iterator[str]:
    """{"exported_at", "filter", "rows": [...]}, written row by row."""
    head = json.dumps({"exported_at": _ts(timezone.now()), "filter": audit.json()})
    yield head[:-1] + ', "rows": ['
    for n, row in enumerate(rows):
        yield ("\n" if n == 0 else ",\n") + json.dumps({**row, "at": _ts(row["at"])}, sort_keys=False)
    yield "\n]}\n"


def _ts(value) -> str | None:
    return value.astimezone(dt_timezone.utc).isoformat().replace("+00:00", "Z") if value else None
