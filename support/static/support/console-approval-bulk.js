// Several approval cards decided together on the approvals page: tick cards (or all those shown, or X on a
// card), write one reason, approve or reject them (POST /api/staff/approvals/bulk, at most 50). The server
// decides each card on its own and reports each: decided, skipped (decided meanwhile, expired) or refused
// with the reason (a second look, four eyes, a lead's permission, a warning of instructions read); the page
// lists those outcomes and the cards show what became of them. The selection lives here; each card draws its
// own tick box from it.

import { ApiError, staffApi } from "./console-api.js";
import { announce, h } from "./console-dom.js";
import { label } from "./console-format.js";

export const MAX_BULK = 50;

/** What a person reads about one card's outcome. */
function outcomeWords(result) {
  if (result.outcome === "decided") return label(result.code); // Approved / Rejected
  if (result.outcome === "skipped") return `Skipped: ${result.message}`;
  return `Not decided: ${result.message}`;
}

export class BulkDecisions {
  /** els: the bar's parts by testid; `store`: the page's approvals; `shown()`: the pending cards in view. */
  constructor({ bar, results, store, shown }) {
    this.bar = bar;
    this.results = results;
    this.store = store;
    this.shown = shown;
    this.selected = new Set();
    this.busy = false;
    this.visible = false;
    this.listeners = new Set();
    const $ = (testid) => bar.querySelector(`[data-testid="${testid}"]`);
    this.all = $("bulk-select-all");
    this.count = $("bulk-count");
    this.reason = $("bulk-reason");
    this.approveBtn = $("bulk-approve");
    this.rejectBtn = $("bulk-reject");
    this.error = $("bulk-error");
    this.all.addEventListener("change", () => this.selectAll(this.all.checked));
    this.approveBtn.addEventListener("click", () => this.decide("approve"));
    this.rejectBtn.addEventListener("click", () => this.decide("reject"));
    bar.addEventListener("submit", (e) => e.preventDefault()); // Enter in the reason decides nothing
  }

  /** Cards redraw their tick box when the selection changes. */
  onChange(listener) {
    this.listeners.add(listener);
  }

  has(id) {
    return this.selected.has(id);
  }

  set(id, on) {
    if (on) this.selected.add(id); else this.selected.delete(id);
    this.changed();
  }

  selectAll(on) {
    if (on) for (const a of this.shown()) this.selected.add(a.id);
    else this.selected.clear();
    this.changed();
  }

  /** Show or hide the bar (the waiting queue of someone who may decide); hiding drops the selection. */
  show(visible) {
    this.visible = visible;
    if (!visible) {
      this.selected.clear();
      this.results.hidden = true;
    }
    this.changed();
  }

  /** The selection kept to cards still waiting and in view; the count, the select-all box and buttons. */
  changed() {
    const waiting = new Set(this.shown().map((a) => a.id));
    for (const id of [...this.selected]) if (!waiting.has(id)) this.selected.delete(id);
    const n = this.selected.size;
    // Shown while there is something to select, or a selection or an error to keep in view.
    this.bar.hidden = !this.visible || (waiting.size === 0 && !n && this.error.hidden);
    this.count.textContent = n ? `${n} selected` : "None selected";
    this.all.checked = n > 0 && n === waiting.size;
    this.all.indeterminate = n > 0 && n < waiting.size;
    this.all.disabled = waiting.size === 0;
    this.approveBtn.textContent = n ? `Approve ${n} selected` : "Approve selected";
    this.rejectBtn.textContent = n ? `Reject ${n} selected` : "Reject selected";
    this.approveBtn.disabled = this.rejectBtn.disabled = this.busy || n === 0;
    for (const listener of this.listeners) listener();
  }

  showError(message, field) {
    this.error.textContent = message;
    this.error.hidden = !message;
    if (field) field.focus();
  }

  async decide(decision) {
    if (this.busy || !this.selected.size) return;
    const reason = this.reason.value.trim();
    if (decision === "reject" && !reason) {
      this.reason.setAttribute("aria-invalid", "true");
      this.showError("Write a reason to reject: the agent passes it on to each customer.", this.reason);
      return;
    }
    if (this.selected.size > MAX_BULK) {
      this.showError(`At most ${MAX_BULK} cards at once: ${this.selected.size} are selected. Untick some first.`);
      return;
    }
    this.reason.removeAttribute("aria-invalid");
    this.showError("");
    this.busy = true;
    this.bar.setAttribute("aria-busy", "true");
    this.changed();
    const ids = [...this.selected];
    try {
      const answer = await staffApi.decideMany(ids, decision, reason);
      this.selected.clear();
      if (answer.counts.refused === 0) this.reason.value = "";
      this.report(answer);
      this.store.upsertMany(answer.results.map((r) => r.approval).filter(Boolean));
    } catch (error) {
      this.showError(error instanceof ApiError ? error.message : String(error));
    } finally {
      this.busy = false;
      this.bar.removeAttribute("aria-busy");
      this.changed();
    }
  }

  /** The outcome of each card, listed: what was decided, skipped, and why a card was left for a person. */
  report({ results, counts }) {
    const title = this.results.querySelector('[data-testid="bulk-results-title"]');
    const list = this.results.querySelector('[data-testid="bulk-result-list"]');
    const parts = [`${counts.decided} decided`];
    if (counts.skipped) parts.push(`${counts.skipped} skipped`);
    if (counts.refused) parts.push(`${counts.refused} left for you to open`);
    title.textContent = parts.join(" · ");
    list.replaceChildren(...results.map((r) => h("li", { class: `bulk-result is-${r.outcome}`, "data-testid": "bulk-result",
      "data-outcome": r.outcome, "data-code": r.code, "data-for": r.id },
    h("strong", {}, r.approval?.context?.summary || this.store.get(r.id)?.context?.summary || "An approval"),
    h("span", { class: "bulk-outcome" }, outcomeWords(r)))));
    this.results.hidden = false;
    this.results.focus();
    announce(title.textContent);
  }
}
