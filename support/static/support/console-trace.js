// The trace of a conversation's runs (one tbody per run, a row per step, live from step.finished), the staff
// actions between the steps (by time: a refund or a seller message a person made, live from staff.action),
// and the small chart of tokens and cost per model call, drawn as SVG with DOM calls (no chart library).

import { badge, clear, compactJson, excerpt, h, prettyJson, shortId, svg } from "./console-dom.js";
import { fmtCost, fmtInt, fmtMs, plural, runPhrase } from "./console-format.js";

const ACTION_NAMES = { refund: "refund by a person", seller_message: "message to the seller" };

const COLUMNS = 10;

function stepKey(step) {
  // Steps carry no id; these fields together tell two apart (see the report on the protocol).
  return [step.kind, step.turn, step.call_id, step.created_at].join("|");
}

export class Trace {
  constructor({ table, chart, chartSummary, empty }) {
    this.table = table;
    this.chart = chart;
    this.chartSummary = chartSummary;
    this.empty = empty;
    this.runs = new Map(); // run id -> {run, steps: [], keys: Set, tbody, head}
    this.actionIds = new Set();
    this.staffBody = null; // staff actions taken before the conversation's first run
  }

  /** Every staff action of the conversation (after load(), which redraws the runs). */
  setActions(actions) {
    for (const row of this.table.querySelectorAll('[data-testid="trace-action"]')) row.remove();
    this.actionIds.clear();
    for (const action of actions || []) this.addAction(action);
  }

  /** A staff action, placed among the steps by time: in the run that was current when it was taken. */
  addAction(a) {
    if (!a) return;
    if (this.actionIds.has(a.id)) { // a later state of it (a refund a second person approved, then made)
      this.table.querySelector(`[data-testid="trace-action"][data-id="${a.id}"]`)?.replaceWith(this.actionRow(a));
      return;
    }
    this.actionIds.add(a.id);
    let target = null;
    for (const entry of this.runs.values()) {
      if ((entry.run.created_at || "") <= a.created_at && (!target || entry.run.created_at >= target.run.created_at)) target = entry;
    }
    let tbody = target?.tbody;
    if (!tbody) {
      if (!this.staffBody) {
        this.staffBody = h("tbody", { "data-testid": "trace-staff" }, h("tr", { class: "run-row" },
          h("th", { colspan: String(COLUMNS), scope: "colgroup" }, h("span", { class: "run-name" }, "Staff actions"))));
        this.table.querySelector("thead").after(this.staffBody);
      }
      tbody = this.staffBody;
    }
    const later = [...tbody.querySelectorAll("tr[data-at]")].find((r) => r.dataset.at > a.created_at) || null;
    tbody.insertBefore(this.actionRow(a), later);
    this.empty.hidden = true;
  }

  actionRow(a) {
    const refused = a.status === "refused";
    // Four eyes: a refund of this size waits for, or was approved by, a second person.
    const approval = a.approval;
    const second = approval && approval.decided_by && approval.status === "approved" ? `, approved by ${approval.decided_by}` : "";
    const finish = a.status === "awaiting_approval" ? "waiting for a second person" : a.status === "pending" ? "in progress" : "done";
    const args = compactJson(a.arguments);
    const result = a.result ? JSON.stringify(a.result) : "";
    return h("tr", { "data-testid": "trace-action", "data-id": a.id, "data-kind": a.kind, "data-status": a.status, "data-at": a.created_at,
      class: `step-row is-staff${refused ? " is-error" : ""}` },
    h("td", { class: "num" }, "—"),
    h("td", {}, h("span", { class: "kind kind-staff" }, "staff")),
    h("td", {}, h("span", { class: "staff-action-name" }, `${ACTION_NAMES[a.kind] || a.kind}`), h("span", { class: "sub", "data-testid": "trace-action-people" }, ` · ${a.by || "staff"}${second}`)),
    h("td", { class: "cell-args" }, args ? h("code", { class: "clamp", title: args }, args) : h("span", { class: "muted" }, "—")),
    h("td", { class: "cell-result" }, result
      ? h("details", {}, h("summary", {}, excerpt(refused ? a.result.error : result, 70)), h("pre", { class: "json" }, prettyJson(result)))
      : h("span", { class: "muted" }, "—")),
    h("td", { class: "num" }, "—"), h("td", { class: "num" }, "—"), h("td", { class: "num" }, "—"), h("td", { class: "num" }, "—"),
    h("td", { class: "cell-finish" }, refused ? h("span", { class: "error-text" }, "refused") : finish));
  }

  latestRun() {
    let latest = null;
    for (const entry of this.runs.values()) {
      if (!latest || (entry.run.created_at || "") >= (latest.run.created_at || "")) latest = entry;
    }
    return latest ? latest.run : null;
  }

  /** The status shown for run `id`, or undefined. */
  runStatus(id) {
    return this.runs.get(id)?.run.status;
  }

  /** Everything from GET /api/staff/conversations/<id>: replaces what is shown. */
  load(runs) {
    for (const entry of this.runs.values()) entry.tbody.remove();
    this.runs.clear();
    for (const run of runs) {
      const entry = this.upsertRun(run, { redraw: false });
      for (const step of run.steps || []) this.addStep(step, run.id, { redraw: false });
      entry.run = run;
    }
    this.drawChart();
  }

  upsertRun(run, { redraw = true } = {}) {
    let entry = this.runs.get(run.id);
    if (!entry) {
      const tbody = h("tbody", { "data-testid": "trace-run", "data-run": run.id });
      entry = { run, steps: [], keys: new Set(), tbody, head: null };
      this.runs.set(run.id, entry);
      this.table.append(tbody); // runs arrive oldest first
    }
    entry.run = { ...entry.run, ...run };
    const number = [...this.runs.keys()].indexOf(run.id) + 1;
    const r = entry.run;
    const head = h("tr", { class: "run-row" },
      h("th", { colspan: String(COLUMNS), scope: "colgroup" },
        h("span", { class: "run-name" }, `Run ${number}`),
        h("span", { class: "muted" }, shortId(r.id)),
        h("span", { class: `badge badge-run is-${r.status === "stopped" ? r.stop_reason || "stopped" : r.status}`,
          "data-testid": "trace-run-status", "data-status": r.status, "data-stop-reason": r.stop_reason || "",
          title: [r.status, r.stop_reason].filter(Boolean).join(" · ") }, runPhrase(r)),
        // "Handed to a person" twice says nothing more: the outcome shows when it adds something.
        r.outcome && !(r.outcome === "handed_to_person" && r.stop_reason !== "answered")
          ? badge("outcome", r.outcome, "trace-run-outcome") : null,
        h("span", { class: "run-totals" },
          `${plural(r.turns, "turn")} · ${fmtInt(r.prompt_tokens)} in / ${fmtInt(r.completion_tokens)} out · ${fmtCost(r.cost_usd)}`)));
    if (entry.head) entry.head.replaceWith(head);
    else entry.tbody.prepend(head);
    entry.head = head;
    this.empty.hidden = true;
    if (redraw) this.drawChart();
    return entry;
  }

  /** A step that finished live: shown, and its spending added to the run's totals until run.status brings them. */
  addLiveStep(step, runId) {
    if (!this.addStep(step, runId)) return false;
    const entry = this.runs.get(runId);
    if (step.kind === "model") {
      const r = entry.run;
      this.upsertRun({
        id: runId, turns: (r.turns || 0) + 1, prompt_tokens: (r.prompt_tokens || 0) + step.prompt_tokens,
        completion_tokens: (r.completion_tokens || 0) + step.completion_tokens,
        cost_usd: ((Number(r.cost_usd) || 0) + (Number(step.cost_usd) || 0)).toFixed(6),
      });
    }
    return true;
  }

  /** A finished step; false when it is already shown. */
  addStep(step, runId, { redraw = true } = {}) {
    const entry = this.runs.get(runId);
    if (!entry) return false;
    const key = stepKey(step);
    if (entry.keys.has(key)) return false;
    entry.keys.add(key);
    entry.steps.push(step);
    entry.tbody.append(this.row(step));
    if (redraw) this.drawChart();
    return true;
  }

  row(s) {
    const isModel = s.kind === "model";
    const args = compactJson(s.arguments);
    return h("tr", { "data-testid": "trace-row", "data-kind": s.kind, "data-turn": s.turn, "data-tool": s.tool || "",
      "data-at": s.created_at || "",
      class: `step-row is-${s.kind}${s.error ? " is-error" : ""}` },
    h("td", { class: "num" }, String(s.turn)),
    h("td", {}, h("span", { class: `kind kind-${s.kind}` }, s.kind)),
    h("td", {}, isModel ? h("span", { class: "muted", title: s.label }, s.model || "model")
      : [h("code", { title: s.label }, s.tool),
        s.server ? h("span", { class: "sub", "data-testid": "trace-server" }, ` · ${s.server} service`) : null]),
    h("td", { class: "cell-args" }, args ? h("code", { class: "clamp", title: args }, args) : h("span", { class: "muted" }, "—")),
    h("td", { class: "cell-result" }, s.result
      ? h("details", {}, h("summary", {}, excerpt(s.result, 70)), h("pre", { class: "json" }, prettyJson(s.result)))
      : h("span", { class: "muted" }, "—")),
    h("td", { class: "num" }, fmtMs(s.duration_ms)),
    h("td", { class: "num" }, isModel ? fmtInt(s.prompt_tokens) : "—"),
    h("td", { class: "num" }, isModel ? fmtInt(s.completion_tokens) : "—"),
    h("td", { class: "num" }, isModel ? fmtCost(s.cost_usd) : "—"),
    h("td", { class: "cell-finish" },
      s.error ? h("span", { class: "error-text", "data-testid": "trace-error" }, s.error)
        : h("span", { class: s.finish_reason && !["stop", "tool_calls", "awaiting_approval"].includes(s.finish_reason) ? "error-text" : "" },
          s.finish_reason || (isModel ? "—" : "ok")),
      s.attempts > 1 ? h("span", { class: "sub" }, ` ${s.attempts} attempts`) : null));
  }

  // -- the chart ------------------------------------------------------------------------------------------

  drawChart() {
    const calls = [];
    let runNumber = 0;
    for (const entry of this.runs.values()) {
      runNumber += 1;
      entry.steps.filter((s) => s.kind === "model").forEach((s, i) => calls.push({ ...s, run: runNumber, first: i === 0 }));
    }
    const W = 460;
    const H = 170;
    const pad = { l: 44, r: 50, t: 24, b: 26 };
    const plotW = W - pad.l - pad.r;
    const plotH = H - pad.t - pad.b;
    const maxTokens = Math.max(1, ...calls.map((c) => c.prompt_tokens + c.completion_tokens));
    const maxCost = Math.max(1e-9, ...calls.map((c) => Number(c.cost_usd) || 0));
    const totalTokens = calls.reduce((n, c) => n + c.prompt_tokens + c.completion_tokens, 0);
    const totalCost = calls.reduce((n, c) => n + (Number(c.cost_usd) || 0), 0);
    const summary = calls.length
      ? `${calls.length} model call${calls.length === 1 ? "" : "s"}: ${fmtInt(totalTokens)} tokens, ${fmtCost(totalCost)} in total`
      : "No model calls yet.";
    this.chartSummary.textContent = summary;

    const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart-svg", role: "img", "aria-label": `Tokens and cost per model call. ${summary}` });
    const y = (tokens) => pad.t + plotH - (tokens / maxTokens) * plotH;
    const yCost = (cost) => pad.t + plotH - (cost / maxCost) * plotH;
    // axes and grid
    for (const f of [0, 0.5, 1]) {
      const gy = pad.t + plotH - f * plotH;
      root.append(svg("line", { x1: pad.l, x2: W - pad.r, y1: gy, y2: gy, class: "grid-line" }));
      root.append(svg("text", { x: pad.l - 6, y: gy + 3, class: "axis-label", "text-anchor": "end" }, fmtInt(maxTokens * f)));
      root.append(svg("text", { x: W - pad.r + 6, y: gy + 3, class: "axis-label cost-label" }, fmtCost(maxCost * f)));
    }
    root.append(svg("text", { x: pad.l - 6, y: 10, class: "axis-title", "text-anchor": "end" }, "tokens"));
    root.append(svg("text", { x: W - pad.r + 6, y: 10, class: "axis-title cost-label" }, "cost"));
    if (!calls.length) {
      clear(this.chart).append(root);
      return;
    }
    const slot = plotW / calls.length;
    const barW = Math.max(2, Math.min(28, slot * 0.62));
    const points = [];
    calls.forEach((c, i) => {
      const cx = pad.l + slot * i + slot / 2;
      const x = cx - barW / 2;
      const promptTop = y(c.prompt_tokens);
      const allTop = y(c.prompt_tokens + c.completion_tokens);
      const cost = Number(c.cost_usd) || 0;
      const g = svg("g", { "data-testid": "chart-bar", "data-turn": c.turn, "data-run": c.run, class: "bar" },
        svg("title", {}, `Run ${c.run}, turn ${c.turn}: ${fmtInt(c.prompt_tokens)} prompt + ${fmtInt(c.completion_tokens)} completion tokens, ${fmtCost(cost)}, ${fmtMs(c.duration_ms)}`),
        svg("rect", { x, width: barW, y: promptTop, height: Math.max(0, pad.t + plotH - promptTop), class: "bar-prompt" }),
        svg("rect", { x, width: barW, y: allTop, height: Math.max(0.5, promptTop - allTop), class: "bar-completion" }));
      root.append(g);
      if (c.first && c.run > 1) {
        root.append(svg("line", { x1: pad.l + slot * i, x2: pad.l + slot * i, y1: pad.t, y2: pad.t + plotH, class: "run-divider" }));
      }
      if (calls.length <= 24 || i % Math.ceil(calls.length / 24) === 0) {
        root.append(svg("text", { x: cx, y: H - pad.b + 13, class: "axis-label", "text-anchor": "middle" }, String(i + 1)));
      }
      points.push([cx, yCost(cost)]);
    });
    root.append(svg("polyline", { points: points.map((p) => p.join(",")).join(" "), class: "cost-line" }));
    for (const [px, py] of points) root.append(svg("circle", { cx: px, cy: py, r: 2.6, class: "cost-dot" }));
    root.append(svg("text", { x: pad.l + plotW / 2, y: H - 2, class: "axis-title", "text-anchor": "middle" }, "model call"));
    clear(this.chart).append(root);
  }
}
