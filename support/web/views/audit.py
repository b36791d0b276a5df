"""The audit export for leads (`support.export_audit`): a console page with the filters (from, to, who) and the
latest rows that match, and two downloads, CSV and JSON, streamed as they are read (support/desk/audit.py).

Downloads are GETs that change nothing. Under ASGI the rows go out through an async iterator, a batch at a
time from the database's thread: a sync iterator there would be read whole into memory before sending.
"""

from __future__ import annotations

from itertools import islice

from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.core.handlers.asgi import ASGIRequest
from django.http import Http404, StreamingHttpResponse
from django.views.decorators.http import require_safe

from support.desk import audit, permissions
from support.web.views.console import console_page as render_page, staff_member_required

BATCH = 200  # lines sent per trip to the database's thread
EVENTS = {"first_approval": "First approval", "approved": "Approved", "rejected": "Rejected",
          "expired": "Expired", "refund": "Refund by a person", "seller_message": "Message to the seller",
          "profile_publish_asked": "Agent profile: asked to publish", "profile_published": "Agent profile published",
          "profile_rolled_back": "Agent profile rolled back"}
CONTENT_TYPES = {"csv": "text/csv; charset=utf-8", "json": "application/json"}


def _refused(request):
    permissions.log_refusal(request.user, permissions.request_address(request),
                            f"{request.method} {request.path}: the audit export needs {permissions.EXPORT_AUDIT}")
    return render_page(request, "audit.html", "audit", status=403, refused=True)


def _people():
    return get_user_model().objects.filter(is_staff=True).order_by("username")


def _filter(request) -> tuple[audit.AuditFilter, dict, str]:
    """The filter the query asks for, the form's values, and what is wrong with them ("" when nothing)."""
    form = {key: (request.GET.get(key) or "").strip()[:40] for key in ("since", "until", "person")}
    try:
        since = audit.parse_bound(form["since"]) if form["since"] else None
        until = audit.parse_bound(form["until"], end=True) if form["until"] else None
    except ValueError as error:
        return audit.AuditFilter(), form, str(error)
    if since and until and since >= until:
        return audit.AuditFilter(), form, "“From” must come before “to”."
    person = None
    if form["person"]:
        person = _people().filter(username=form["person"]).first()
        if person is None:
            return audit.AuditFilter(), form, f"There is no staff account “{form['person']}”."
    return audit.AuditFilter(since=since, until=until, person=person), form, ""


@require_safe
@staff_member_required
def page(request):
    """The filters, the downloads, and the latest rows that match (newest first)."""
    if not request.user.has_perm(permissions.EXPORT_AUDIT):
        return _refused(request)
    wanted, form, error = _filter(request)
    rows = [] if error else [{**row, "event_label": EVENTS.get(row["event"], row["event"]),
                              "asked": audit.csv_safe(row["requested_arguments"]),
                              "ran": audit.csv_safe(row["executed_arguments"])}
                             for row in islice(audit.audit_rows(wanted, newest_first=True), audit.PREVIEW)]
    return render_page(request, "audit.html", "audit", status=400 if error else 200, form=form, error=error,
                       rows=rows, people=_people(), preview=audit.PREVIEW)


@require_safe
@staff_member_required
def export(request, fmt: str):
    if fmt not in CONTENT_TYPES:
        raise Http404("CSV or JSON.")
    if not request.user.has_perm(permissions.EXPORT_AUDIT):
        return _refused(request)
    wanted, form, error = _filter(request)
    if error:
        return render_page(request, "audit.html", "audit", status=400, form=form, error=error, rows=[],
                           people=_people(), preview=audit.PREVIEW)
    rows = audit.audit_rows(wanted)
    chunks = audit.csv_lines(rows) if fmt == "csv" else audit.json_chunks(rows, wanted)
    response = StreamingHttpResponse(_async(chunks) if isinstance(request, ASGIRequest) else chunks,
                                     content_type=CONTENT_TYPES[fmt])
    name = f"sundry-audit-{form['since'] or 'start'}-to-{form['until'] or 'now'}.{fmt}"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    response["Cache-Control"] = "no-store"
    return response


async def _async(chunks):
    """The chunks of a sync generator, read BATCH at a time in the request's database thread."""
    take = sync_to_async(lambda: "".join(islice(chunks, BATCH)), thread_sensitive=True)
    while text := await take():
        yield text
