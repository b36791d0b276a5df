""""Test this draft" (/console/agent/test/): start a test of the agent profile's draft against the live version
(the stand-in, or the configured model after its estimated cost is confirmed), the tests so far, and one test's
page with its progress and, once finished, the scenarios whose outcome changed. Staff read; starting needs
support.change_agent_profile. Every text is escaped by the templates; the reports are served as written."""

from csp.decorators import csp_update
from django.conf import settings
from django.http import FileResponse, Http404
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_http_methods, require_safe

from support import trials
from support.desk import permissions
from support.evaluation import compare as comparing
from support.evaluation.report import STYLE_HASH
from support.models import DraftTest
from support.profiles import CHANGE_AGENT_PROFILE
from support.profiles.selectors import draft as current_draft
from support.web.views.console import console_page, staff_member_required

KEPT_SHOWN = 20


@require_http_methods(["GET", "POST"])
@staff_member_required
def page(request):
    can_start = request.user.has_perm(CHANGE_AGENT_PROFILE)
    confirm, refusal, status = None, "", 200
    if request.method == "POST":
        if not can_start:
            why = f"Testing a draft needs the permission “change the agent profile” ({CHANGE_AGENT_PROFILE})."
            permissions.log_refusal(request.user, permissions.request_address(request),
                                    f"{request.method} {request.path}: {why}")
            refusal, status = why, 403
        else:
            use_model = request.POST.get("model") == "configured"
            try:
                test = trials.draft_test_start(by=request.user, use_model=use_model,
                                               confirmed=request.POST.get("confirm") == "yes")
                return redirect("console:agent_test_detail", public_id=test.public_id)
            except trials.DraftTestRefused as refused:
                if refused.code == "confirm_estimate":
                    confirm = trials.draft_test_estimate()
                else:
                    refusal, status = str(refused), refused.status
    return console_page(request, "agent_test.html", "agent_test", status=status, can_start=can_start,
                        draft=current_draft(), estimate=trials.draft_test_estimate(), confirm=confirm,
                        refusal=refusal, model_configured=bool(settings.MODEL_BASE_URL),
                        demo_only=settings.SHOP_BACKEND not in ("demo", "http") or bool(settings.SHOP_URL),
                        tests=DraftTest.objects.select_related("asked_by", "live_version")[:KEPT_SHOWN])


@require_safe
@staff_member_required
def detail(request, public_id):
    test = get_object_or_404(DraftTest.objects.select_related("asked_by", "live_version"), public_id=public_id)
    rows, summary = [], None
    if test.state == DraftTest.FINISHED:
        paths = trials.report_paths(test)
        try:
            result = comparing.compare(comparing.load(paths["live"]), comparing.load(paths["draft"]))
        except comparing.CompareError:
            result = None
        if result is not None:
            rows = sorted(result["scenarios"], key=lambda r: r["change"] == "same")  # the changed ones first
            summary = {"changed": sum(r["change"] != "same" for r in rows), "worse": result["worse"],
                       "better": result["better"], "different": sum(r["change"] == "different" for r in rows)}
    return console_page(request, "agent_test_detail.html", "agent_test", test=test, rows=rows, summary=summary,
                        running=test.state in DraftTest.ACTIVE,
                        percent=round(100 * test.done / test.total) if test.total else 0)


@require_safe
@staff_member_required
@csp_update({"style-src": [f"'{STYLE_HASH}'"]})
def report(request, public_id, side):
    test = get_object_or_404(DraftTest, public_id=public_id)
    if side not in trials.services.SIDES:
        raise Http404("No such report.")
    path = trials.report_paths(test)[side].with_suffix(".html")
    if not path.is_file():
        raise Http404("This report has not been written.")
    return FileResponse(path.open("rb"), content_type="text/html; charset=utf-8")
