"""The latest evaluation report for staff, read-only: a summary page in the console, and the full HTML
report as `manage.py evaluate` wrote it (VAR_DIR/evaluation/report.json and .html).

The summary is rendered from the JSON by a template (escaped like every console page). The full report is
a file of ours whose only style is one inline block: its hash is allowed for that response alone, and it
runs no script.
"""

import json

from csp.decorators import csp_update
from django.http import FileResponse, Http404
from django.shortcuts import render
from django.views.decorators.http import require_safe

from support.evaluation.report import STYLE_HASH, latest_path
from support.web.views.console import staff_member_required


def _latest() -> dict | None:
    try:
        return json.loads(latest_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


@require_safe
@staff_member_required
def summary(request):
    """Model, prompt version, pass rate and one row per scenario, with its failed criteria."""
    data = _latest()
    rows = []
    for s in (data or {}).get("scenarios", []):
        runs = [r for r in s.get("runs", []) if not r.get("skipped")]
        failed = sorted({name for r in runs for name in r.get("failed", [])})
        rows.append({"name": s.get("name"), "title": s.get("title"), "skipped": s.get("skipped"),
                     "passes": s.get("passes"), "attempts": s.get("attempts"), "failed": failed,
                     "ok": bool(runs) and s.get("passes") == s.get("attempts"),
                     "model_calls": sum(r.get("model_calls", 0) for r in runs) / (len(runs) or 1),
                     "cost_usd": sum(r.get("cost_usd", 0) for r in runs) / (len(runs) or 1)})
    has_html = latest_path().with_suffix(".html").is_file()
    user = request.user
    return render(request, "console/evaluation.html", {
        "page": "evaluation", "staff_username": user.get_username(),
        "staff_name": user.get_short_name() or user.get_username(),
        "report": data, "rows": rows, "has_html": has_html})


@require_safe
@staff_member_required
@csp_update({"style-src": [f"'{STYLE_HASH}'"]})
def full_report(request):
    path = latest_path().with_suffix(".html")
    if not path.is_file():
        raise Http404("No evaluation report has been written yet.")
    return FileResponse(path.open("rb"), content_type="text/html; charset=utf-8")
