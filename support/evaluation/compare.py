"""Two evaluation reports side by side: per scenario pass^1 and pass^k before and after, and what a trial
cost (tokens, dollars), so a prompt or model change is judged on evidence (`manage.py evaluate --compare
A.json B.json`, and the console's evaluation page).

k is the larger number both reports can say: the smaller of their trial counts. A scenario in one report
only is listed as such. A scenario with the same verdicts whose trials acted otherwise (outcome.py: tools called,
refunds, store credit, how the runs ended) is "different", each difference in words. Reports of the first format
(no pass^k) are read too: pass^k is worked out from their passes and attempts.
"""

from __future__ import annotations

import json
from pathlib import Path

from . import outcome, passk


class CompareError(ValueError):
    """A file that is not an evaluation report."""


def load(path: Path) -> dict:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise CompareError(f"{path}: cannot be read ({e.strerror or e})") from e
    except ValueError as e:
        raise CompareError(f"{path}: not JSON ({e})") from e
    if not isinstance(data, dict) or not isinstance(data.get("scenarios"), list):
        raise CompareError(f"{path}: not an evaluation report (no scenarios)")
    return data


def compare(before: dict, after: dict) -> dict:
    k = max(1, min(_trials(before), _trials(after)))
    a, b = _by_name(before), _by_name(after)
    rows = []
    for name in list(a) + [n for n in b if n not in a]:
        x, y = a.get(name), b.get(name)
        row = {"name": name, "title": (y or x).get("title", ""), "before": _side(x, k), "after": _side(y, k)}
        row["differences"] = outcome.differences(outcome.of_side((x or {}).get("runs") or []),
                                                 outcome.of_side((y or {}).get("runs") or []))
        row["change"] = _change(row["before"], row["after"], k)
        if row["change"] == "same" and row["differences"]:
            row["change"] = "different"  # the same verdicts, reached another way
        rows.append(row)
    return {
        "k": k,
        "before": _about(before), "after": _about(after),
        "pass_hat_k": {"before": passk.overall(_counts(before), k), "after": passk.overall(_counts(after), k)},
        "scenarios": rows,
        "worse": [r["name"] for r in rows if r["change"] == "worse"],
        "better": [r["name"] for r in rows if r["change"] == "better"],
    }


def _trials(report: dict) -> int:
    return int(report.get("trials") or report.get("repeat") or 1)


def _by_name(report: dict) -> dict[str, dict]:
    return {s.get("name"): s for s in report.get("scenarios", []) if isinstance(s, dict) and s.get("name")}


def _counts(report: dict) -> list[tuple[int, int]]:
    return [(s["attempts"], s["passes"]) for s in report.get("scenarios", [])
            if not s.get("skipped") and s.get("attempts")]


def _side(scenario: dict | None, k: int) -> dict | None:
    if scenario is None:
        return None
    if scenario.get("skipped") or not scenario.get("attempts"):
        return {"skipped": True}
    n, c = scenario["attempts"], scenario["passes"]
    runs = [r for r in scenario.get("runs", []) if not r.get("skipped")] or [{}]
    mean = lambda key: sum(float(r.get(key) or 0) for r in runs) / len(runs)  # noqa: E731
    return {"trials": n, "passes": c, "pass_1": passk.pass_hat(n, c, 1), "pass_k": passk.pass_hat(n, c, k),
            "tokens": round(mean("prompt_tokens") + mean("completion_tokens")),
            "cost_usd": round(mean("cost_usd"), 6), "model_calls": round(mean("model_calls"), 1)}


def _change(x: dict | None, y: dict | None, k: int) -> str:
    if x is None:
        return "new"
    if y is None:
        return "gone"
    if x.get("skipped") or y.get("skipped"):
        return "skipped"
    key = "pass_k" if x.get("pass_k") is not None and y.get("pass_k") is not None else "pass_1"
    if y[key] > x[key]:
        return "better"
    if y[key] < x[key]:
        return "worse"
    return "same"


def _about(report: dict) -> dict:
    model, prompt, desk = report.get("model") or {}, report.get("prompt") or {}, report.get("desk") or {}
    return {"started_at": report.get("started_at"), "model": model.get("name"), "endpoint": model.get("endpoint"),
            "prompt_version": prompt.get("version"), "fingerprint": prompt.get("fingerprint"),
            "desk_version": desk.get("version"), "trials": _trials(report),
            "cost_usd": (report.get("totals") or {}).get("cost_usd"), "tokens": (report.get("totals") or {}).get("tokens")}


def _pct(value) -> str:
    return "–" if value is None else f"{value:.0%}"


def _cell(side: dict | None, key: str) -> str:
    if side is None:
        return "(absent)"
    if side.get("skipped"):
        return "skipped"
    value = side[key]
    if key.startswith("pass"):
        return _pct(value)
    if key == "cost_usd":
        return f"{value:.5f}"
    return str(value)


def table(result: dict) -> str:
    """The comparison as text: a header of what was compared, then one line per scenario."""
    k, a, b = result["k"], result["before"], result["after"]
    head = [f"before: {a['model']} · prompt v{a['prompt_version']} ({a['fingerprint']}) · desk {a['desk_version']} · "
            f"{a['trials']} trials · {a['started_at']}",
            f"after:  {b['model']} · prompt v{b['prompt_version']} ({b['fingerprint']}) · desk {b['desk_version']} · "
            f"{b['trials']} trials · {b['started_at']}",
            "suite " + "; ".join(f"pass^{j}: {_pct(result['pass_hat_k']['before'].get(str(j)))} -> "
                                 f"{_pct(result['pass_hat_k']['after'].get(str(j)))}" for j in sorted({1, k})), ""]
    rows = [("scenario", "pass^1") + ((f"pass^{k}",) if k > 1 else ()) + ("tokens/trial", "cost $/trial", "change")]
    for r in result["scenarios"]:
        x, y = r["before"], r["after"]
        rows.append((r["name"], f"{_cell(x, 'pass_1')} -> {_cell(y, 'pass_1')}")
                    + ((f"{_cell(x, 'pass_k')} -> {_cell(y, 'pass_k')}",) if k > 1 else ())
                    + (f"{_cell(x, 'tokens')} -> {_cell(y, 'tokens')}", f"{_cell(x, 'cost_usd')} -> {_cell(y, 'cost_usd')}",
                       {"worse": "WORSE", "same": ""}.get(r["change"], r["change"])))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    tail = [f"{r['name']}: {'; '.join(r['differences'])}" for r in result["scenarios"] if r.get("differences")]
    tail += [f"{len(result['worse'])} worse, {len(result['better'])} better"]
    return "\n".join(head + lines + [""] + tail)
