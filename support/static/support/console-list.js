// The conversation list: fetched from the staff API, then kept live from the staff socket's list-level
// events; re-fetched after every (re)connect and when an event names a conversation not listed yet.

import { staffApi } from "./console-api.js";
import { learnCustomers } from "./console-store.js";
import {
  badge, fill, conversationUrl, fmtCost, h, label, shortId, STOP_REASON_HELP, timeEl,
} from "./console-dom.js";

const STATUSES = ["", "open", "needs_attention", "taken_over"];
const DETAIL_FETCHES_AT_ONCE = 2;

export class ConversationList {
  constructor({ socket, store, table, empty, count, filter }) {
    this.socket = socket;
    this.store = store;
    this.tbody = table.tBodies[0];
    this.empty = empty;
    this.count = count;
    this.rows = new Map(); // id -> {data, tr}
    this.runCosts = new Map(); // run id -> cost_usd string
    this.runCreated = new Map(); // run id -> created_at, to tell the latest run
    this.costQueue = [];
    this.costFetching = 0;
    this.costRequested = new Set();
    this.convRuns = new Map(); // conversation id -> Map(run id -> cost_usd)
    this.detailRead = new Set(); // conversations whose every run's cost is known
    this.outside = new Set(); // conversations known not to match the status filter
    this.asked = new Set(); // unknown conversations the next load is for
    this.status = new URLSearchParams(window.location.search).get("status") || "";
    if (!STATUSES.includes(this.status)) this.status = "";
    this.bindFilter(filter);
    this.bindEvents();
    this.visible = new IntersectionObserver((entries) => this.seen(entries), { rootMargin: "200px" });
    this.tbody.addEventListener("click", (e) => {
      // The whole row opens the conversation; its link stays the keyboard's way in.
      if (e.target.closest("a, button") || window.getSelection().toString()) return;
      const link = e.target.closest("tr")?.querySelector("a[data-testid=conversation-link]");
      if (link) window.location.assign(link.href);
    });
    store.subscribe(() => {
      for (const row of this.rows.values()) {
        if (row.pending !== this.store.pendingCount(row.data.id)) this.paint(row);
      }
    });
    window.setTimeout(() => this.load(), 0);
  }

  bindFilter(group) {
    this.filterButtons = [...group.querySelectorAll("button[data-filter]")];
    for (const button of this.filterButtons) {
      button.addEventListener("click", () => {
        this.status = button.dataset.filter;
        const url = new URL(window.location.href);
        if (this.status) url.searchParams.set("status", this.status);
        else url.searchParams.delete("status");
        window.history.replaceState(null, "", url);
        this.markFilter();
        this.outside.clear();
        for (const row of this.rows.values()) row.tr.remove();
        this.rows.clear();
        this.load();
      });
    }
    this.markFilter();
  }

  markFilter() {
    for (const button of this.filterButtons) {
      button.setAttribute("aria-pressed", String(button.dataset.filter === this.status));
    }
  }

  bindEvents() {
    const s = this.socket;
    s.onOpen(() => this.scheduleLoad(0));
    s.on("run.status", (e) => {
      const row = this.rows.get(e.conversation);
      if (e.detail) {
        this.setRunCost(e.conversation, e.run, e.detail.cost_usd);
        this.runCreated.set(e.run, e.detail.created_at);
      }
      if (!row) return this.unknown(e);
      const current = row.data.run;
      const newer = !current || current.id === e.run
        || (this.runCreated.get(e.run) || "") >= (this.runCreated.get(current.id) || "");
      if (newer) row.data.run = { id: e.run, status: e.status, stop_reason: e.stop_reason, outcome: e.outcome };
      this.touch(row);
    });
    const conversationEvent = (e) => {
      const row = this.rows.get(e.conversation);
      if (!row) return this.unknown(e, e.status);
      Object.assign(row.data, e.detail || {}, { status: e.status || row.data.status });
      if (this.status && row.data.status !== this.status) return this.remove(row);
      this.touch(row, e.detail && e.detail.updated_at);
    };
    s.on("conversation.updated", conversationEvent);
    s.on("conversation.assigned", conversationEvent);
    const approvalEvent = (e) => {
      const row = this.rows.get(e.conversation);
      if (!row) return this.unknown(e);
      this.touch(row);
    };
    s.on("approval.requested", approvalEvent);
    s.on("approval.decided", approvalEvent);
  }

  unknown(event, status) {
    // A conversation this list has not got: new, or outside the filter. Ask for the list again, once per
    // conversation while a filter is on (its run events would otherwise re-fetch the list each time).
    const id = event.conversation;
    if (this.status && status && status !== this.status) {
      this.outside.add(id);
      return;
    }
    if (this.status && !status && this.outside.has(id)) return;
    this.outside.delete(id);
    this.asked.add(id);
    this.scheduleLoad(300);
  }

  scheduleLoad(delay) {
    window.clearTimeout(this.loadTimer);
    this.loadTimer = window.setTimeout(() => this.load(), delay);
  }

  async load() {
    if (this.loading) {
      this.loadAgain = true;
      return;
    }
    this.loading = true;
    const status = this.status;
    try {
      const { conversations } = await staffApi.conversations(status);
      if (status !== this.status) return; // the filter changed meanwhile; that load follows
      const seen = new Set();
      for (const data of conversations) {
        seen.add(data.id);
        const row = this.rows.get(data.id);
        if (row) {
          const changed = row.data.updated_at !== data.updated_at || JSON.stringify(row.data.run) !== JSON.stringify(data.run);
          row.data = { ...row.data, ...data };
          this.paint(row, changed);
        } else {
          this.add(data);
        }
        if (data.run && !this.runCosts.has(data.run.id)) this.wantCost(data.id);
      }
      for (const row of [...this.rows.values()]) if (!seen.has(row.data.id)) this.remove(row);
      for (const id of this.asked) if (!seen.has(id) && status) this.outside.add(id);
      this.asked.clear();
      this.sort();
      this.loadedOnce = true;
      this.showError("");
      learnCustomers(conversations);
    } catch (error) {
      this.showError(error.message);
    } finally {
      this.loading = false;
      this.updateCount();
      if (this.loadAgain) {
        this.loadAgain = false;
        this.scheduleLoad(0);
      }
    }
  }

  showError(message) {
    const el = document.querySelector("[data-testid=conversation-list-error]");
    if (!el) return;
    el.textContent = message;
    el.hidden = !message;
  }

  add(data) {
    const tr = h("tr", { "data-testid": "conversation-row", "data-conversation": data.id });
    const row = { data, tr };
    this.rows.set(data.id, row);
    this.paint(row, this.loadedOnce); // rows that arrive live flash once; the first load does not
    this.tbody.append(tr);
    this.visible.observe(tr);
    return row;
  }

  remove(row) {
    this.visible.unobserve(row.tr);
    row.tr.remove();
    this.rows.delete(row.data.id);
    this.updateCount();
  }

  touch(row, updatedAt) {
    const stamp = updatedAt || new Date().toISOString();
    if (!row.data.updated_at || stamp > row.data.updated_at) row.data.updated_at = stamp;
    if (row.data.run && !this.runCosts.has(row.data.run.id)) this.wantCost(row.data.id);
    this.paint(row, true);
    this.sort();
  }

  sort() {
    const ordered = [...this.rows.values()].sort((a, b) => (b.data.updated_at || "").localeCompare(a.data.updated_at || ""));
    let previous = null;
    for (const row of ordered) {
      const anchor = previous ? previous.nextSibling : this.tbody.firstChild;
      if (row.tr !== anchor && !row.tr.contains(document.activeElement)) this.tbody.insertBefore(row.tr, anchor);
      previous = row.tr;
    }
    this.updateCount();
  }

  updateCount() {
    const n = this.rows.size;
    this.empty.hidden = n > 0 || this.loading;
    this.count.textContent = `${n} conversation${n === 1 ? "" : "s"}`;
  }

  cost(data) {
    // The latest run's spend (the list API has no cost: it comes from run.status events and details).
    if (!data.run || !this.runCosts.has(data.run.id)) return null;
    return fmtCost(this.runCosts.get(data.run.id));
  }

  setRunCost(conversation, run, cost) {
    this.runCosts.set(run, cost);
    if (!this.convRuns.has(conversation)) this.convRuns.set(conversation, new Map());
    this.convRuns.get(conversation).set(run, cost);
  }

  totalCost(data) {
    if (!this.detailRead.has(data.id)) return "";
    const runs = [...(this.convRuns.get(data.id) || new Map()).values()];
    const total = runs.reduce((sum, cost) => sum + (Number(cost) || 0), 0);
    return `Latest run; all ${runs.length} run${runs.length === 1 ? "" : "s"}: ${fmtCost(total)}`;
  }

  paint(row, flash = false) {
    const d = row.data;
    const run = d.run;
    const pending = this.store.loaded ? this.store.pendingCount(d.id) : d.pending_approvals || 0;
    const cost = this.cost(d);
    const tr = row.tr;
    const hadFocus = tr.contains(document.activeElement);
    row.pending = pending;
    tr.dataset.status = d.status;
    fill(tr,
      h("td", { class: "cell-customer" },
        h("a", { href: conversationUrl(d.id), "data-testid": "conversation-link", class: "conv-link" }, d.customer || shortId(d.id)),
        h("span", { class: "sub" }, shortId(d.id), d.assignee ? ` · with ${d.assignee}` : ""),
        d.attention_reason ? h("span", { class: "sub attention", title: d.attention_reason, "data-testid": "attention-reason" }, d.attention_reason) : null),
      h("td", {}, badge("conversation", d.status, "conversation-status")),
      h("td", { class: "cell-run" }, run ? [badge("run", run.status, "run-status"),
        run.stop_reason ? h("span", { class: `stop-text is-${run.stop_reason}`, "data-testid": "stop-reason",
          "data-status": run.stop_reason, title: STOP_REASON_HELP[run.stop_reason] }, label(run.stop_reason)) : null]
        : h("span", { class: "muted", "data-testid": "run-status", "data-status": "" }, "no run yet")),
      h("td", {}, run && run.outcome ? badge("outcome", run.outcome, "run-outcome") : h("span", { class: "muted", "data-testid": "run-outcome" }, "—")),
      h("td", { class: "num", "data-testid": "conversation-cost", title: cost ? this.totalCost(d) || null : null },
        cost ?? h("span", { class: "muted" }, run ? "…" : "—")),
      h("td", { class: "num" }, h("span", { class: `count-pill${pending ? " is-waiting" : ""}`, "data-testid": "pending-approvals",
        "data-count": String(pending), "aria-label": `${pending} waiting for approval` }, String(pending))),
      h("td", { class: "cell-time" }, timeEl(d.updated_at, "conversation-updated")),
    );
    if (hadFocus) tr.querySelector("a[data-testid=conversation-link]").focus(); // repainting must not lose the keyboard's place
    if (flash) {
      tr.classList.remove("flash");
      void tr.offsetWidth; // restart the animation
      tr.classList.add("flash");
    }
  }

  // -- cost: not in the list API, so read from each visible conversation's detail, a few at a time ------

  wantCost(id) {
    const row = this.rows.get(id);
    if (!row || this.costRequested.has(`${id}:${row.data.run?.id}`)) return;
    if (row.visible) this.enqueueCost(id);
  }

  seen(entries) {
    for (const entry of entries) {
      const id = entry.target.dataset.conversation;
      const row = this.rows.get(id);
      if (!row) continue;
      row.visible = entry.isIntersecting;
      if (row.visible && row.data.run && !this.runCosts.has(row.data.run.id)) this.enqueueCost(id);
    }
  }

  enqueueCost(id) {
    const row = this.rows.get(id);
    const key = `${id}:${row?.data.run?.id}`;
    if (!row || this.costRequested.has(key)) return;
    this.costRequested.add(key);
    this.costQueue.push(id);
    this.drainCosts();
  }

  async drainCosts() {
    while (this.costFetching < DETAIL_FETCHES_AT_ONCE && this.costQueue.length) {
      const id = this.costQueue.shift();
      this.costFetching += 1;
      staffApi.conversation(id).then(({ runs }) => {
        for (const run of runs) {
          this.setRunCost(id, run.id, run.cost_usd);
          this.runCreated.set(run.id, run.created_at);
        }
        this.detailRead.add(id);
        const row = this.rows.get(id);
        if (row) this.paint(row);
      }).catch(() => {}).finally(() => {
        this.costFetching -= 1;
        this.drainCosts();
      });
    }
  }
}
