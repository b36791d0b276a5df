"""The Reports page for staff (docs/reports.md): the figures of a date range as cards, charts over days or
weeks, each count's drill-down list of the rows behind it, and the page as CSV.

Read-only GETs. Figures come from support.reports.figures; this module only reads the form, formats numbers for
people and renders. Names in the rows (customers, staff, reasons) are data: templates escape them, the CSV
neutralises a leading formula character.
"""

from __future__ import annotations

import csv
from datetime import date, datetime, timedelta

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_safe

from support.desk.audit import csv_safe
from support.models import ProfileVersion
from support.reports import digest
from support.reports.formats import shown
from support.reports.figures import COUNTS, Filters, conversations_behind, report
from support.reports.figures import charts as charted_series
from support.web.views.console import console_page, staff_member_required

LONGEST_RANGE = 366  # days
CHARTED = ("new_conversations", "resolved_by_agent", "handed_over", "approvals_asked")
PER_PAGE = 100


class ReportForm(forms.Form):
    start = forms.DateField(label="From", required=False, widget=forms.DateInput(attrs={"type": "date"}))
    end = forms.DateField(label="To", required=False, widget=forms.DateInput(attrs={"type": "date"}))
    channel = forms.ChoiceField(label="Channel", required=False,
                                choices=[("", "Any"), ("widget", "Widget"), ("email", "E-mail")])
    language = forms.ChoiceField(label="Language", required=False)
    version = forms.TypedChoiceField(label="Agent version", required=False, coerce=int, empty_value=None)
    member = forms.TypedChoiceField(label="Team member", required=False, coerce=int, empty_value=None)
    by = forms.ChoiceField(label="Chart by", required=False, choices=[("day", "Day"), ("week", "Week")])

    def __init__(self, data):
        super().__init__(data)
        self.fields["language"].choices = [("", "Any"), *settings.LANGUAGES]
        numbers = ProfileVersion.objects.filter(number__isnull=False).order_by("-number").values_list(
            "number", flat=True)
        self.fields["version"].choices = [("", "Any"), *((n, f"v{n}") for n in numbers)]
        people = get_user_model().objects.filter(is_staff=True).order_by("username")
        self.fields["member"].choices = [("", "Anyone"), *((u.pk, u.get_username()) for u in people)]
        for field in self.fields.values():
            field.widget.attrs["class"] = "text-input"

    def clean(self):
        data = super().clean()
        today = timezone.localdate()
        end = data.get("end") or today
        start = data.get("start") or end - timedelta(days=6)
        if start > end:
            raise forms.ValidationError("“From” must not come after “To”.")
        if (end - start).days >= LONGEST_RANGE:
            raise forms.ValidationError(f"Choose at most {LONGEST_RANGE} days.")
        data["start"], data["end"] = start, end
        return data


def _filters(request) -> tuple[Filters, ReportForm, str]:
    """The filters the query asks for (the last 7 days when it asks nothing, or something wrong), the bound
    form, and the chart's bucket."""
    form = ReportForm(request.GET or None)
    if form.is_valid():
        d = form.cleaned_data
        return (Filters(start=d["start"], end=d["end"], channel=d["channel"] or None,
                        language=d["language"] or None, profile_version=d["version"], staff_user_id=d["member"]),
                form, d["by"] or "day")
    end = timezone.localdate()
    return Filters(start=end - timedelta(days=6), end=end), form, "day"


ORDER = ("Conversations", "Resolution", "Hand-overs", "Hand-over reasons", "Approvals", "Time to decision",
         "Refunds", "Satisfaction", "First response", "Time to resolution", "Cost")


def _groups(figures: dict) -> list[dict]:
    """The figures by group, in the order a lead reads them (a reason next to the hand-overs)."""
    groups: dict[str, list] = {name: [] for name in ORDER}
    for key, row in figures.items():
        groups.setdefault(row["group"], []).append({**row, "key": key, "shown": shown(row)})
    return [{"name": name, "rows": rows} for name, rows in groups.items() if rows]


@require_safe
@staff_member_required
def page(request):
    """The filters, the figures as cards (each count a link to its drill-down), the charts and the CSV link."""
    filters, form, by = _filters(request)
    data = report(filters)
    charts = [{"figure": key, "label": COUNTS[key].label, "points": [(day.isoformat(), n) for day, n in points]}
              for key, points in charted_series(filters, CHARTED, by).items()]
    status = 400 if form.is_bound and not form.is_valid() else 200
    return console_page(request, "reports.html", "reports", status=status, form=form, filters=filters,
                        groups=_groups(data["figures"]), charts=charts, by=by, query=request.GET.urlencode(),
                        provisional=_provisional(data["provisional"]),
                        lead=digest.is_lead(request.user), digest_on=digest.digest_wanted(request.user),
                        digest_hour=settings.REPORTS_DIGEST_HOUR)


def _provisional(provisional: dict | None) -> dict | None:
    """The days read from provisional rows and as of when, as dates and a datetime for the template."""
    if provisional is None:
        return None
    return {"days": [date.fromisoformat(day) for day in provisional["days"]],
            "as_of": datetime.fromisoformat(provisional["as_of"])}


@require_safe
@staff_member_required
def drill(request, figure: str):
    """The rows behind one count, a page of PER_PAGE at a time, each linking to its conversation."""
    if figure not in COUNTS:
        raise Http404("No such figure.")
    filters, form, _ = _filters(request)
    rows = conversations_behind(filters, figure)
    scope = COUNTS[figure].scope
    related = {"conversations": ["customer"], "approvals": ["tool_call", "run__conversation",
                                                            "staff_action__conversation", "decided_by"],
               "refunds": ["conversation"]}[scope]
    listed = Paginator(rows.select_related(*related).order_by("-pk"), PER_PAGE).get_page(request.GET.get("page"))
    return console_page(request, "report_drill.html", "reports", figure=figure, label=COUNTS[figure].label,
                        scope=scope, rows=[_drill_row(scope, r) for r in listed], listed=listed, filters=filters,
                        total=listed.paginator.count, query=_without_page(request))


def _without_page(request) -> str:
    query = request.GET.copy()
    query.pop("page", None)
    return query.urlencode()


def _drill_row(scope: str, row) -> dict:
    if scope == "conversations":
        return {"conversation": row.public_id, "when": row.created_at, "who": row.customer.name,
                "what": row.get_status_display()}
    if scope == "approvals":
        conversation = row.run.conversation if row.run_id else row.staff_action.conversation
        decided = row.decision or "pending"
        who = row.decided_by.get_username() if row.decided_by_id else ""
        return {"conversation": conversation.public_id, "when": row.requested_at, "who": who,
                "what": f"{row.tool_name}: {decided}"}
    return {"conversation": row.conversation.public_id if row.conversation_id else None, "when": row.created_at,
            "who": row.reference or row.shop_id, "what": f"€{row.amount}"}


@require_safe
@staff_member_required
def export_csv(request):
    """The page's figures, one line each: key, group, label, value (as computed, not formatted), unit."""
    filters, _, _ = _filters(request)
    data = report(filters)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = (f'attachment; filename="sundry-report-{filters.start}-to-{filters.end}.csv"')
    response["Cache-Control"] = "no-store"
    out = csv.writer(response)
    out.writerow(["figure", "group", "label", "value", "unit"])
    for key, row in data["figures"].items():  # a decider's name is data: no cell may start a formula
        out.writerow([csv_safe(key), row["group"], csv_safe(row["label"]), csv_safe(row["value"]), row["unit"]])
    return response
