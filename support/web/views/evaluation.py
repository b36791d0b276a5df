"""The latest evaluation report for staff, read-only: a summary page in the console (pass^k per scenario,
and a comparison with an earlier report kept under history/), and the full HTML report as `manage.py
evaluate` wrote it (VAR_DIR/evaluation/report.json and .html).

The summary is rendered from the JSON by a template (escaped like every console page). The full report is
a file of ours whose only style is one inline block: its hash is allowed for that response alone, and it
runs no script.
"""

import json

from csp.decorators import csp_update
from django.http import FileResponse, Http404
from django.shortcuts import render
from django.views.decorators.http import require_safe

from support.evaluation import compare as comparing
from support.evaluation.report import STYLE_HASH, kept, latest_path
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
    trials = int((data or {}).get("trials") or (data or {}).get("repeat") or 1)
    rows = []
    for s in (data or {}).get("scenarios", []):
        runs = [r for r in s.get("runs", []) if not r.get("skipped")]
        failed = sorted({name for r in runs for name in r.get("failed", [])})
        hat = (s.get("pass_hat_k") or {}).get(str(trials))
        rows.append({"name": s.get("name"), "title": s.get("title"), "skipped": s.get("skipped"),
                     "passes": s.get("passes"), "attempts": s.get("attempts"), "failed": failed,
                     "ok": bool(runs) and s.get("passes") == s.get("attempts"), "flaky": bool(s.get("flaky")),
                     "pass_hat_k": None if hat is None else round(hat * 100),
                     "model_calls": sum(r.get("model_calls", 0) for r in runs) / (len(runs) or 1),
                     "cost_usd": sum(r.get("cost_usd", 0) for r in runs) / (len(runs) or 1)})
    has_html = latest_path().with_suffix(".html").is_file()
    earlier = kept()
    chosen = request.GET.get("compare", "")
    comparison = None
    if data and chosen:
        # Only a report of the list may be named: the name is looked up, never joined to a path.
        path = next((p for p in earlier if p.name == chosen), None)
        if path is not None:
            try:
                comparison = _comparison(comparing.compare(comparing.load(path), data))
            except comparing.CompareError:
                comparison = None
    user = request.user
    return render(request, "console/evaluation.html", {
        "page": "evaluation", "staff_username": user.get_username(),
        "staff_name": user.get_short_name() or user.get_username(),
        "report": data, "rows": rows, "has_html": has_html, "trials": trials,
        "pass_hat": _percent((data or {}).get("pass_hat_k") or {}), "flaky": (data or {}).get("flaky") or [],
        "earlier": [(p.name, _label(p.name)) for p in earlier], "chosen": chosen, "comparison": comparison})


def _label(name: str) -> str:
    """"20261201T100000-small-model-a.json" -> "2026-12-01 10:00 UTC · small-model-a"."""
    stem = name.removesuffix(".json")
    stamp, _, model = stem.partition("-")
    if len(stamp) == 15 and stamp[8] == "T" and stamp.replace("T", "").isdigit():
        return f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]} {stamp[9:11]}:{stamp[11:13]} UTC · {model or 'model unknown'}"
    return stem


def _percent(hats: dict) -> list[tuple[str, int | None]]:
    return [(k, None if v is None else round(v * 100)) for k, v in hats.items()]


def _comparison(result: dict) -> dict:
    """The comparison as the template shows it: percentages, and each side's cell in words."""
    def side(x, key):
        if x is None:
            return "absent"
        if x.get("skipped"):
            return "skipped"
        value = x.get(key)
        if key.startswith("pass"):
            return "–" if value is None else f"{round(value * 100)}%"
        return f"{value:.5f}" if key == "cost_usd" else str(value)
    k = result["k"]
    rows = [{"name": r["name"], "change": r["change"],
             "pass_1": (side(r["before"], "pass_1"), side(r["after"], "pass_1")),
             "pass_k": (side(r["before"], "pass_k"), side(r["after"], "pass_k")),
             "tokens": (side(r["before"], "tokens"), side(r["after"], "tokens")),
             "cost_usd": (side(r["before"], "cost_usd"), side(r["after"], "cost_usd"))} for r in result["scenarios"]]
    suite = {j: tuple("–" if h.get(j) is None else f"{round(h[j] * 100)}%"
                      for h in (result["pass_hat_k"]["before"], result["pass_hat_k"]["after"])) for j in ("1", str(k))}
    return {"k": k, "before": result["before"], "after": result["after"], "rows": rows, "suite": suite,
            "worse": result["worse"], "better": result["better"]}


@require_safe
@staff_member_required
@csp_update({"style-src": [f"'{STYLE_HASH}'"]})
def full_report(request):
    path = latest_path().with_suffix(".html")
    if not path.is_file():
        raise Http404("No evaluation report has been written yet.")
    return FileResponse(path.open("rb"), content_type="text/html; charset=utf-8")
