"""An evaluation's reports: the table printed at the end, the JSON report, and the HTML one built from the
JSON (self-contained: one inline style block, no script, every text escaped).
"""

from __future__ import annotations

import hashlib
import html
import json
from pathlib import Path

from . import Evaluation, passk

FORMAT = 2  # of the JSON report; bumped when a field changes meaning (2: trials, pass^k, flaky, turns)


def latest_path() -> Path:
    """Where `manage.py evaluate` writes by default, and where the staff console reads the latest report."""
    from django.conf import settings

    return Path(settings.VAR_DIR) / "evaluation" / "report.json"


HISTORY_KEPT = 50  # reports kept under history/ for comparing; older ones are removed


def history_dir() -> Path:
    return latest_path().parent / "history"


def keep(report: dict) -> Path:
    """A copy of the report under history/ (named by when it started and its model), for --compare and the
    console's evaluation page; the oldest go once there are more than HISTORY_KEPT."""
    folder = history_dir()
    folder.mkdir(parents=True, exist_ok=True)
    stamp = "".join(ch for ch in str(report.get("started_at", "")) if ch.isalnum())[:15] or "report"
    model = "".join(ch if ch.isalnum() or ch in "-." else "-" for ch in str((report.get("model") or {}).get("name")))
    text = json.dumps(report, indent=1, ensure_ascii=False)
    n = 1
    while True:  # created exclusively: evaluations started in the same second (CI runs three at once) keep each
        path = folder / (f"{stamp}-{model[:40]}.json" if n == 1 else f"{stamp}-{model[:40]}-{n}.json")
        try:
            with path.open("x", encoding="utf-8") as out:
                out.write(text)
            break
        except FileExistsError:
            n += 1
    for old in kept()[HISTORY_KEPT:]:
        old.unlink(missing_ok=True)
    return path


def kept() -> list[Path]:
    """The reports under history/, newest first."""
    folder = history_dir()
    return sorted(folder.glob("*.json"), reverse=True) if folder.is_dir() else []


def as_json(ev: Evaluation) -> dict:
    scenarios = []
    for s in ev.scenarios:
        runs = ev.runs.get(s.name, [])
        counted = [r for r in runs if not r.skipped]
        n, c = len(counted), sum(r.passed for r in counted)
        scenarios.append({
            "name": s.name, "title": s.title, "file": s.path, "tags": list(s.tags), "covers": list(s.covers),
            "skipped": s.skip, "attempts": n, "passes": c,
            "pass_rate": round(c / n, 4) if counted else None,
            "pass_hat_k": passk.per_scenario(n, c, ev.trials) if counted else {},
            "flaky": passk.flaky(n, c),
            "runs": [_run_json(r) for r in runs],
        })
    attempts = ev.attempts
    return {
        "format": FORMAT, "started_at": ev.started_at, "seconds": round(ev.seconds, 2),
        "model": ev.model, "prompt": ev.prompt, "desk": ev.desk, "customer": ev.customer,
        "trials": ev.trials, "repeat": ev.trials,
        "min_pass_rate": ev.min_pass_rate, "min_pass_hat_k": ev.min_pass_hat_k,
        "pass_rate": round(ev.pass_rate, 4), "pass_hat_k": ev.pass_hat(), "ok": ev.ok,
        "attempts": len(attempts), "passed": sum(r.passed for r in attempts),
        "skipped": [s.name for s in ev.scenarios if s.skip],
        "flaky": [s["name"] for s in scenarios if s["flaky"]],
        "totals": {"model_calls": sum(r.model_calls for r in attempts),
                   "tokens": sum(r.prompt_tokens + r.completion_tokens for r in attempts),
                   "cost_usd": round(sum(r.cost_usd for r in attempts), 6)},
        "scenarios": scenarios,
    }


def _run_json(run) -> dict:
    """One trial, with its customer turns (the messages the customer wrote) counted."""
    data = run.as_dict()
    data["turns"] = sum(1 for m in data.get("transcript", []) if m.get("author") == "customer")
    return data


def hat_text(hats: dict) -> str:
    """"pass^1 100% · pass^2 95%" from {"1": 1.0, "2": 0.95}."""
    return " · ".join(f"pass^{k} {'n/a' if v is None else f'{v:.0%}'}" for k, v in hats.items())


def table(report: dict) -> str:
    """One line per scenario: the verdict (or pass rate), the first failing criterion, the numbers."""
    trials = report.get("trials", report["repeat"])
    rows = [("scenario", "result", f"pass^{trials}" if trials > 1 else "", "failed criterion", "calls", "tokens",
             "cost $", "s")]
    for s in report["scenarios"]:
        runs = [r for r in s["runs"] if not r["skipped"]]
        if s["skipped"]:
            rows.append((s["name"], "skip", "", _clip(s["skipped"], 70), "", "", "", ""))
            continue
        hat = ""
        if trials > 1:
            result = f"{s['passes']}/{s['attempts']}" + (" flaky" if s.get("flaky") else "")
            value = (s.get("pass_hat_k") or {}).get(str(trials))
            hat = "" if value is None else f"{value:.0%}"
        else:
            result = "pass" if s["passes"] == s["attempts"] else "FAIL"
        failed = list(dict.fromkeys(name for r in runs for name in r["failed"]))
        first = (failed[0] + (f" (+{len(failed) - 1} more)" if len(failed) > 1 else "")) if failed else ""
        rows.append((s["name"], result, hat, _clip(first, 70), *_averages(runs)))
    if trials == 1:  # no pass^k column
        rows = [r[:2] + r[3:] for r in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def profile_text(prompt: dict) -> str:
    """"profile Sundry v3": the agent profile version the runs worked with (reports from before it: unknown)."""
    profile = prompt.get("profile") or {}
    if not profile:
        return "profile unknown"
    if profile.get("label"):  # "version 3", "draft of 2025-05-01 14:02 UTC", "file hearth-and-loom.json"
        return f"profile {profile.get('shop')} {profile['label']}"
    return f"profile {profile.get('shop')} v{profile.get('version')}"


def summary(report: dict) -> str:
    model, prompt, totals = report["model"], report["prompt"], report["totals"]
    trials = report.get("trials", report["repeat"])
    hats = ""
    if trials > 1:
        gate = report.get("min_pass_hat_k")
        hats = f" · {hat_text(report.get('pass_hat_k') or {})}" + (
            f" (needed pass^{trials} {gate:.0%})" if gate is not None else "")
        flaky = report.get("flaky") or []
        hats += f" · flaky: {', '.join(flaky)}" if flaky else " · none flaky"
    return (f"{report['passed']}/{report['attempts']} passed ({report['pass_rate']:.0%}, needed "
            f"{report['min_pass_rate']:.0%}){hats} · model {model.get('name')} at {model.get('endpoint')} · prompt "
            f"v{prompt.get('version')} ({prompt.get('fingerprint')}) · {profile_text(prompt)} · "
            f"{totals['model_calls']} model calls, "
            f"{totals['tokens']} tokens, ${totals['cost_usd']:.4f} · {report['seconds']:.0f} s")


def _averages(runs: list[dict]) -> tuple[str, str, str, str]:
    """Model calls, tokens, cost and seconds per attempt."""
    if not runs:
        return ("", "", "", "")
    n = len(runs)
    return (_num(sum(r["model_calls"] for r in runs) / n),
            _num(sum(r["prompt_tokens"] + r["completion_tokens"] for r in runs) / n),
            f"{sum(r['cost_usd'] for r in runs) / n:.5f}", f"{sum(r['seconds'] for r in runs) / n:.1f}")


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.1f}"


def _clip(text: str, n: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:16px 24px}header h1{margin:0 0 4px;font-size:20px}
header p{margin:0;color:#c9cfdb}main{padding:16px 24px;max-width:1200px}
table{border-collapse:collapse;width:100%;background:#fff;margin:8px 0 16px}
th,td{border:1px solid #dde1e8;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#eef0f4;font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums}
.pass{color:#146c2e;font-weight:600}.fail{color:#b3261e;font-weight:600}.skip{color:#6b7280}
details{background:#fff;border:1px solid #dde1e8;border-radius:6px;margin:8px 0;padding:0 12px}
summary{cursor:pointer;padding:8px 0;font-weight:600}
ul.checks{list-style:none;padding:0}ul.checks li{padding:2px 0}
.msg{border-left:3px solid #dde1e8;padding:4px 8px;margin:4px 0;white-space:pre-wrap;word-break:break-word}
.msg.user{border-color:#2563eb}.msg.assistant{border-color:#16a34a}.msg.tool{border-color:#9ca3af;color:#4b5563}
.msg.system{border-color:#a855f7;color:#4b5563}.who{font-size:12px;color:#6b7280;display:block}
code{font:12px ui-monospace,Menlo,Consolas,monospace;white-space:pre-wrap;word-break:break-word}
h3{font-size:15px;margin:12px 0 4px}
"""

STYLE_HASH = "sha256-" + __import__("base64").b64encode(hashlib.sha256(STYLE.encode()).digest()).decode()


def as_html(report: dict) -> str:
    e = _e
    model, prompt = report["model"], report["prompt"]
    trials = report.get("trials", report["repeat"])
    head = (f"<header><h1>Agent evaluation: {report['passed']}/{report['attempts']} passed "
            f"({report['pass_rate']:.0%})</h1><p>{e(summary(report))}</p></header>")
    rows = []
    for s in report["scenarios"]:
        if s["skipped"]:
            verdict = '<span class="skip">skipped</span>'
        elif report["repeat"] > 1:
            cls = "pass" if s["passes"] == s["attempts"] else "fail"
            verdict = f'<span class="{cls}">{s["passes"]}/{s["attempts"]}</span>'
        else:
            verdict = '<span class="pass">✓ pass</span>' if s["passes"] == s["attempts"] else \
                '<span class="fail">✗ fail</span>'
        runs = [r for r in s["runs"] if not r["skipped"]]
        failed = sorted({name for r in runs for name in r["failed"]})
        numbers = "".join(f'<td class="n">{cell}</td>' for cell in _averages(runs))
        if s.get("flaky"):
            verdict += ' <span class="fail">flaky</span>'
        hats = "".join(f'<td class="n">{"" if v is None else f"{v:.0%}"}</td>'
                       for v in (s.get("pass_hat_k") or {}).values()) if trials > 1 else ""
        if trials > 1 and not s.get("pass_hat_k"):
            hats = "".join("<td></td>" for _ in range(trials))
        rows.append(
            f'<tr><td><a href="#{e(s["name"])}">{e(s["name"])}</a><br>{e(s["title"])}</td><td>{verdict}</td>'
            f'{hats}<td>{e(s["skipped"] or "; ".join(failed))}</td>{numbers}</tr>')
    hat_heads = "".join(f"<th>pass^{k}</th>" for k in range(1, trials + 1)) if trials > 1 else ""
    overview = (f"<table><thead><tr><th>scenario</th><th>result</th>{hat_heads}<th>failed criteria</th>"
                "<th>model calls</th><th>tokens</th><th>cost $</th><th>s</th></tr></thead><tbody>"
                + "".join(rows) + "</tbody></table>")
    desk, customer = report.get("desk") or {}, report.get("customer") or {}
    meta = (f"<table><tr><th>model</th><td>{e(model.get('name'))}</td><th>endpoint</th><td>{e(model.get('endpoint'))}</td>"
            f"</tr><tr><th>prompt version</th><td>{e(prompt.get('version'))}</td><th>prompt and tools fingerprint</th>"
            f"<td>{e(prompt.get('fingerprint'))} (tools {e(prompt.get('tools_fingerprint'))})</td></tr>"
            f"<tr><th>agent profile</th><td colspan=\"3\">{e(profile_text(prompt))}</td></tr>"
            f"<tr><th>started</th><td>{e(report['started_at'])}</td><th>desk version</th>"
            f"<td>{e(desk.get('version'))}</td></tr><tr><th>simulated customer</th>"
            f"<td>{e(customer.get('model') or model.get('customer_model'))}</td><th>its temperature and prompt</th>"
            f"<td>temperature {e(customer.get('temperature'))} · prompt v{e(customer.get('prompt_version'))} "
            f"({e(customer.get('prompt_fingerprint'))})</td></tr>"
            f"<tr><th>trials</th><td>{trials}</td><th>pass^k</th><td>{e(hat_text(report.get('pass_hat_k') or {}))}"
            f"</td></tr><tr><th>flaky scenarios</th><td colspan=\"3\">{e(', '.join(report.get('flaky') or []) or 'none')}"
            f"</td></tr></table>")
    details = "".join(_scenario_html(s) for s in report["scenarios"] if not s["skipped"])
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Agent evaluation · '
            f'{e(model.get("name"))}</title><style>{STYLE}</style></head><body>{head}<main>{meta}{overview}'
            f'{details}</main></body></html>')


def _scenario_html(s: dict) -> str:
    e = _e
    parts = [f'<h2 id="{e(s["name"])}">{e(s["name"])}: {e(s["title"])}</h2>']
    for r in s["runs"]:
        mark = '<span class="pass">✓</span>' if r["passed"] else '<span class="fail">✗</span>'
        checks = "".join(
            f'<li>{"<span class=pass>✓</span>" if c["ok"] else "<span class=fail>✗</span>"} {e(c["name"])}'
            f'{" — " + e(c["detail"]) if c["detail"] and not c["ok"] else ""}</li>' for c in r["checks"])
        transcript = "".join(_message_html(m) for m in r["transcript"])
        trace = "".join(
            f'<tr><td class="n">{t["run"]}</td><td class="n">{t["turn"]}</td><td>{e(t["tool"] or "(model)")}</td>'
            f'<td><code>{e(t["arguments"])}</code></td><td><code>{e(t["error"] or t["result"])}</code></td>'
            f'<td class="n">{t["prompt_tokens"]}+{t["completion_tokens"]}</td><td class="n">{t["cost_usd"]:.5f}</td>'
            f'<td class="n">{t["ms"]}</td><td>{e(t["finish_reason"])}</td></tr>' for t in r["trace"])
        decisions = "".join(f'<li>{e(d["scope"])}: {e(d["decision"])} — {e(d["detail"])}</li>' for d in r["decisions"])
        parts.append(
            f'<details{" open" if not r["passed"] else ""}><summary>{mark} trial {r["attempt"]}: '
            f'{r.get("turns", 0)} customer turns, {r["model_calls"]} model calls, '
            f'{r["prompt_tokens"] + r["completion_tokens"]} tokens, ${r["cost_usd"]:.5f}, {r["seconds"]:.1f} s</summary>'
            + _triage_html(r)
            + f'<h3>Criteria</h3><ul class="checks">{checks}</ul>'
            + (f'<h3>Staff decisions</h3><ul>{decisions}</ul>' if decisions else "")
            + f'<h3>Transcript</h3>{transcript}'
            f'<h3>Trace</h3><table><thead><tr><th>run</th><th>turn</th><th>tool</th><th>arguments</th>'
            f'<th>result</th><th>tokens</th><th>cost $</th><th>ms</th><th>finish</th></tr></thead>'
            f'<tbody>{trace}</tbody></table></details>')
    return "".join(parts)


def _triage_html(r: dict) -> str:
    """A failed attempt's triage label and why (support/evaluation/triage.py), and how a simulated customer ended."""
    e = _e
    out = ""
    if r.get("triage"):
        t = r["triage"]
        out += f'<p><strong>Why it failed: {e(t.get("label"))}</strong> — {e(t.get("why"))}</p>'
    if r.get("customer_end"):
        out += f'<p>The simulated customer ended with: {e(r["customer_end"])}</p>'
    return out


def _message_html(m: dict) -> str:
    e = _e
    who = {"user": "customer", "assistant": "agent" if m["author"] == "agent" else m["author"],
           "tool": "tool result", "system": "system prompt"}.get(m["role"], m["role"])
    body = e(m["content"]) if m["role"] != "system" else e(_clip(m["content"], 200))
    calls = "<br>".join(f'<code>→ {e(c["name"])}({e(c["arguments"])})</code>' for c in m["tool_calls"])
    if body and calls:
        calls = "<br>" + calls
    return f'<div class="msg {e(m["role"])}"><span class="who">#{m["seq"]} {e(who)}</span>{body}{calls}</div>'


def _e(value) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def write(report: dict, json_path, html_path) -> None:
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(report, indent=1, ensure_ascii=False), encoding="utf-8")
    html_path.write_text(as_html(report), encoding="utf-8")
