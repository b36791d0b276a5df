// The inbox: one row per conversation (customer, orders, last message, waiting time, this staff member's
// unread count, status, assignee) with the inbox actions (take, assign, close, reopen). Read from the staff
// API (/api/staff/inbox: the server derives every status and count); kept live from the staff socket, whose
// list-level events name a conversation whose row is then read again (several at once, in one request).
// Also here: the read marker a conversation page keeps, and the "next conversation" key.

import { inboxApi } from "./console-api.js";
import { announce, conversationUrl, fill, h, timeEl, visibleText } from "./console-dom.js";
import { expiryText } from "./console-approvals.js";
import { fmtDeadline } from "./console-format.js";
import { learnCustomers } from "./console-store.js";

const FILTERS = ["", "mine", "routed_to_me", "unassigned", "needs_person", "waiting_approval", "waiting", "closed"];
const SORTS = ["updated", "waiting", "expiring"];
const PAGE = 50;
const REFRESH_AFTER_MS = 250; // events of one change arrive together: one request for all of them
const ORDER_KEY = "sundry-console:inbox-order";
// Assigning a conversation silences the agent, so a request waiting for approval ends: asked first.
const ENDS_THE_REQUEST = "The agent is waiting for an approval on this conversation. Assigning it to a person "
  + "stops the agent and ends that request. Assign it anyway?";
const LIST_EVENTS = ["run.status", "conversation.updated", "conversation.assigned", "approval.requested",
  "approval.decided", "inbox.changed", "inbox.read", "conversation.rated"];
const AUTHORS = { customer: "Customer", agent: "Agent", staff: "Staff", system: "Desk" };

/** "12 min", "3 h 5 min", "2 days": how long a customer has waited. */
export function waitedFor(iso) {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return "";
  const minutes = Math.max(0, Math.floor((Date.now() - t) / 60000));
  if (minutes < 1) return "under a minute";
  if (minutes < 60) return `${minutes} min`;
  const hours = Math.floor(minutes / 60);
  if (hours < 24) return minutes % 60 ? `${hours} h ${minutes % 60} min` : `${hours} h`;
  const days = Math.floor(hours / 24);
  return `${days} day${days === 1 ? "" : "s"}`;
}

function typing(target) {
  return target instanceof HTMLElement && (target.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName));
}

/** How the customer wrote (widget / e-mail) and their language: two small marks on the row. */
function channelMarks(d) {
  const email = d.channel === "email";
  return h("span", { class: "row-marks" },
    h("span", { class: `row-channel is-${email ? "email" : "widget"}`, "data-testid": "row-channel", "data-channel": d.channel },
      email ? "E-mail" : "Widget"),
    h("span", { class: "row-language", "data-testid": "row-language", "data-language": d.language, lang: "en" },
      h("span", { class: "visually-hidden" }, "Language: "), (d.language || "").toUpperCase()));
}

/** Nobody has it: whose queue routing put it in ("Routed to you", "Routed to Sam"), else "Unassigned". */
function routedWords(routedTo, viewer) {
  if (!routedTo) return "Unassigned";
  return viewer && routedTo.username === viewer.username ? "Routed to you" : `Routed to ${routedTo.name}`;
}

export class ConversationList {
  constructor({ socket, list, empty, count, filter, search, sort, more }) {
    this.socket = socket;
    this.list = list;
    this.empty = empty;
    this.count = count;
    this.search = search;
    this.sortSelect = sort;
    this.more = more;
    this.rows = new Map(); // id -> {data, li}
    this.gone = new Map(); // id -> the read that took its row away: an older answer, arriving late, does not bring it back
    this.pendingIds = new Set();
    this.reads = 0; // each read of rows takes a number when asked; a row keeps the number of what it shows
    this.colleagues = [];
    this.viewer = null;
    this.limit = PAGE;
    const url = new URLSearchParams(window.location.search);
    this.filter = FILTERS.includes(url.get("filter")) ? url.get("filter") : "";
    this.q = url.get("q") || "";
    this.sort = SORTS.includes(url.get("sort")) ? url.get("sort") : "updated";
    this.bindControls(filter);
    this.bindEvents();
    this.bindKeys();
    window.setInterval(() => this.paintWaiting(), 30000);
    inboxApi.colleagues().then(({ staff, viewer }) => {
      this.colleagues = staff;
      this.viewer = viewer;
      for (const row of this.rows.values()) this.paint(row);
    }).catch(() => {});
  }

  // -- controls ----------------------------------------------------------------------------------------

  bindControls(group) {
    this.filterButtons = [...group.querySelectorAll("button[data-filter]")];
    for (const button of this.filterButtons) {
      button.addEventListener("click", () => {
        this.filter = button.dataset.filter;
        this.changed();
      });
    }
    this.search.value = this.q;
    let typingTimer = null;
    this.search.addEventListener("input", () => {
      window.clearTimeout(typingTimer);
      typingTimer = window.setTimeout(() => {
        this.q = this.search.value.trim();
        this.changed();
      }, 250);
    });
    this.search.form.addEventListener("submit", (e) => {
      e.preventDefault();
      window.clearTimeout(typingTimer);
      this.q = this.search.value.trim();
      this.changed();
    });
    this.sortSelect.value = this.sort;
    this.sortSelect.addEventListener("change", () => {
      this.sort = this.sortSelect.value;
      this.place(); // the rows shown move at once; the server's answer may add or drop some
      this.changed();
    });
    this.more.addEventListener("click", () => {
      this.limit += PAGE;
      this.load();
    });
    this.markControls();
  }

  changed() {
    const url = new URL(window.location.href);
    for (const [key, value, none] of [["filter", this.filter, ""], ["q", this.q, ""], ["sort", this.sort, "updated"]]) {
      if (value && value !== none) url.searchParams.set(key, value);
      else url.searchParams.delete(key);
    }
    window.history.replaceState(null, "", url);
    this.limit = PAGE;
    this.markControls();
    this.load();
  }

  markControls() {
    for (const button of this.filterButtons) button.setAttribute("aria-pressed", String(button.dataset.filter === this.filter));
  }

  query(extra = {}) {
    return { filter: this.filter, q: this.q, sort: this.sort, limit: this.limit, ...extra };
  }

  // -- live ----------------------------------------------------------------------------------------------

  bindEvents() {
    this.socket.onOpen(() => this.load());
    for (const type of LIST_EVENTS) {
      this.socket.on(type, (event) => event.conversation && this.refreshSoon(event.conversation));
    }
  }

  refreshSoon(id) {
    this.pendingIds.add(id);
    window.clearTimeout(this.refreshTimer);
    this.refreshTimer = window.setTimeout(() => this.refresh(), REFRESH_AFTER_MS);
  }

  /** Read the named rows again: changed ones repaint and move, new ones appear, ones no longer matching go. */
  async refresh() {
    const ids = [...this.pendingIds];
    this.pendingIds.clear();
    if (!ids.length) return;
    if (this.loading) {
      for (const id of ids) this.pendingIds.add(id);
      this.refreshTimer = window.setTimeout(() => this.refresh(), REFRESH_AFTER_MS);
      return;
    }
    const read = ++this.reads;
    try {
      const { conversations } = await inboxApi.list(this.query({ ids, limit: ids.length }));
      const found = new Set(conversations.map((c) => c.id));
      for (const data of conversations) this.upsert(data, true, read);
      for (const id of ids) if (!found.has(id) && this.rows.has(id) && !this.newer(this.rows.get(id), read)) this.remove(this.rows.get(id), read);
      this.place();
    } catch (error) {
      for (const id of ids) this.pendingIds.add(id); // tried again with the next event or reconnect
    }
  }

  async load() {
    if (this.loading) {
      this.loadAgain = true;
      return;
    }
    this.loading = true;
    this.list.setAttribute("aria-busy", "true"); // assistive tech (and tests) wait for the answer
    const asked = this.query();
    const read = ++this.reads;
    try {
      const { conversations, count, viewer } = await inboxApi.list(asked);
      if (JSON.stringify(asked) !== JSON.stringify(this.query())) {
        this.loadAgain = true; // the controls changed meanwhile
        return;
      }
      this.viewer = viewer;
      const seen = new Set();
      for (const data of conversations) {
        seen.add(data.id);
        this.upsert(data, this.loadedOnce, read);
      }
      for (const row of [...this.rows.values()]) if (!seen.has(row.data.id) && !this.newer(row, read)) this.remove(row, read);
      this.total = count;
      this.loadedOnce = true;
      learnCustomers(conversations.map((c) => ({ id: c.id, customer: c.customer.email }))); // labels approval cards
      this.place();
      this.showError("");
    } catch (error) {
      this.showError(error.message);
    } finally {
      this.loading = false;
      this.list.setAttribute("aria-busy", "false");
      this.updateCount();
      if (this.loadAgain) {
        this.loadAgain = false;
        this.load();
      }
    }
  }

  showError(message) {
    const el = document.querySelector("[data-testid=conversation-list-error]");
    if (!el) return;
    el.textContent = message;
    el.hidden = !message;
  }

  /** Whether the row shows what a read asked after `read` brought: an older answer, arriving late, is stale. */
  newer(row, read) {
    return (row.read || 0) > read;
  }

  /** Show a row's data. `read` is the number of the read that brought it (taken when it was asked; an action's
   * answer takes one when it arrives, since it is the state after the action): a row never goes back to what an
   * earlier read saw, so a list read before a close cannot show the conversation open again after it. */
  upsert(data, flash, read = ++this.reads) {
    let row = this.rows.get(data.id);
    if (row && this.newer(row, read)) return row;
    if (!row && (this.gone.get(data.id) || 0) > read) return null; // taken away by a later read (closed, say)
    this.gone.delete(data.id);
    if (row) row.read = read;
    if (!row) {
      row = { data, read, li: h("li", { class: "inbox-row", "data-testid": "conversation-row", "data-conversation": data.id }) };
      row.li.addEventListener("click", (e) => this.rowClicked(e, row));
      this.rows.set(data.id, row);
    } else if (JSON.stringify(row.data) === JSON.stringify(data)) {
      return row;
    }
    row.data = data;
    this.paint(row, flash);
    return row;
  }

  remove(row, read = ++this.reads) {
    row.li.remove();
    this.rows.delete(row.data.id);
    this.gone.set(row.data.id, read);
    if (this.total) this.total -= 1;
    this.updateCount();
  }

  compare(a, b) {
    if (this.sort === "waiting") {
      const wa = a.waiting_since || "~";
      const wb = b.waiting_since || "~"; // not waiting: after those who are
      if (wa !== wb) return wa < wb ? -1 : 1;
    }
    if (this.sort === "expiring") {
      const ea = a.nearest_expiry || "~";
      const eb = b.nearest_expiry || "~"; // nothing waiting for approval: after those that are
      if (ea !== eb) return ea < eb ? -1 : 1;
    }
    return (b.updated_at || "").localeCompare(a.updated_at || "") || b.id.localeCompare(a.id);
  }

  /** Rows in the server's order (kept here for live updates); the focused row stays where the keyboard is. */
  place() {
    const ordered = [...this.rows.values()].sort((a, b) => this.compare(a.data, b.data));
    let previous = null;
    for (const row of ordered) {
      const anchor = previous ? previous.nextSibling : this.list.firstChild;
      if (row.li !== anchor && !row.li.contains(document.activeElement)) this.list.insertBefore(row.li, anchor);
      else if (!row.li.isConnected) this.list.insertBefore(row.li, anchor);
      previous = row.li;
    }
    try {
      window.sessionStorage.setItem(ORDER_KEY, JSON.stringify(ordered.map((r) => r.data.id)));
    } catch { /* private mode: the next-conversation key falls back to the API */ }
    this.updateCount();
  }

  updateCount() {
    const n = this.rows.size;
    const total = Math.max(this.total || 0, n);
    this.empty.hidden = n > 0 || this.loading;
    this.count.textContent = total > n ? `${n} of ${total} conversations` : `${n} conversation${n === 1 ? "" : "s"}`;
    this.more.hidden = !(total > n);
  }

  // -- one row -----------------------------------------------------------------------------------------

  paint(row, flash = false) {
    const d = row.data;
    const li = row.li;
    const focused = li.contains(document.activeElement) ? document.activeElement.dataset.testid : null;
    const me = this.viewer && d.assignee && d.assignee.username === this.viewer.username;
    li.dataset.status = d.status;
    li.dataset.unread = String(d.unread);
    li.className = `inbox-row is-${d.status}${d.unread ? " has-unread" : ""}`;
    const last = d.last_message;
    const who = last ? (last.author === "staff" && last.staff_name ? last.staff_name : AUTHORS[last.author] || last.author) : "";
    fill(li,
      h("div", { class: "row-top" },
        h("a", { class: "conv-link", href: conversationUrl(d.id), "data-testid": "conversation-link" }, d.customer.name || d.customer.email),
        h("span", { class: "row-email", "data-testid": "row-email" }, d.customer.email),
        channelMarks(d),
        h("span", { class: `badge inbox-status is-${d.status}`, "data-testid": "inbox-status", "data-status": d.status }, d.status_label),
        d.unread ? h("span", { class: "unread-pill", "data-testid": "unread-count", "data-count": String(d.unread) },
          String(d.unread), h("span", { class: "visually-hidden" }, ` unread message${d.unread === 1 ? "" : "s"}`)) : null,
        h("span", { class: "row-time" }, timeEl(d.updated_at, "conversation-updated"))),
      d.subject ? h("p", { class: "row-subject", "data-testid": "row-subject" },
        h("span", { class: "visually-hidden" }, "Subject: "), d.subject) : null,
      last ? h("p", { class: "row-preview", "data-testid": "last-message" },
        h("span", { class: "row-who" }, `${who}: `), last.text) : h("p", { class: "row-preview muted", "data-testid": "last-message" }, "No messages yet"),
      h("div", { class: "row-meta" },
        d.orders.length ? h("span", { "data-testid": "row-orders" }, d.orders.join(", ")) : null,
        d.waiting_since && d.status !== "closed" ? h("span", { class: "waiting", "data-testid": "waiting", "data-since": d.waiting_since },
          `waiting ${waitedFor(d.waiting_since)}`) : null,
        d.waiting ? h("span", { class: "row-waiting-until", "data-testid": "row-waiting-until", "data-until": d.waiting.until },
          `until ${fmtDeadline(d.waiting.until)}`) : null,
        d.pending_approvals ? h("span", { "data-testid": "pending-approvals", "data-count": String(d.pending_approvals) },
          `${d.pending_approvals} approval${d.pending_approvals === 1 ? "" : "s"} waiting`) : null,
        d.nearest_expiry ? h("span", { class: "row-expiry", "data-testid": "row-expiry", "data-until": d.nearest_expiry },
          expiryText(d.nearest_expiry).text) : null,
        d.status === "needs_person" && d.attention_reason ? h("span", { class: "attention", "data-testid": "attention-reason" }, d.attention_reason) : null,
        d.status === "closed" && d.closed_by ? h("span", { "data-testid": "closed-by" }, `closed by ${d.closed_by.name}`) : null,
        d.rating ? h("span", { class: "row-rating", "data-testid": "row-rating", "data-score": String(d.rating.score),
          title: d.rating.comment ? visibleText(d.rating.comment) : "" }, `rated ${d.rating.score}/5 ${"★".repeat(d.rating.score)}`) : null),
      h("div", { class: "row-actions" },
        h("span", { class: "row-assignee", "data-testid": "row-assignee", "data-assignee": d.assignee ? d.assignee.username : "",
          "data-routed-to": !d.assignee && d.routed_to ? d.routed_to.username : "" },
          d.assignee ? (me ? "Assigned to you" : `Assigned to ${d.assignee.name}`) : routedWords(d.routed_to, this.viewer)),
        !d.assignee && d.status !== "closed" ? h("button", { type: "button", class: "btn btn-primary", "data-testid": "take-button",
          "aria-label": `Assign to me: ${d.customer.name || d.customer.email}'s conversation`, onclick: () => this.act(row, "take") }, "Assign to me") : null,
        d.status !== "closed" ? this.assignSelect(row, me) : null,
        d.status === "closed"
          ? h("button", { type: "button", class: "btn", "data-testid": "reopen-button", onclick: () => this.act(row, "reopen") }, "Reopen")
          : h("button", { type: "button", class: "btn btn-quiet", "data-testid": "close-button", onclick: () => this.act(row, "close") }, "Close")),
      h("p", { class: "row-error error", role: "alert", "data-testid": "row-error", hidden: !row.error }, row.error || ""),
    );
    if (focused) li.querySelector(`[data-testid="${focused}"]`)?.focus();
    if (flash) {
      li.classList.remove("flash");
      void li.offsetWidth; // restart the animation
      li.classList.add("flash");
    }
  }

  assignSelect(row, me) {
    const d = row.data;
    if (!this.colleagues.length) return null;
    const id = `assign-${d.id}`;
    const current = d.assignee ? d.assignee.username : "";
    const select = h("select", { id, class: "text-input assign-select", "data-testid": "assign-select" },
      h("option", { value: "" }, d.assignee ? "Nobody: hand back to the agent" : "Assign to…"),
      this.colleagues.map((c) => h("option", { value: c.username },
        this.viewer && c.username === this.viewer.username ? `${c.name} (me)` : c.name)));
    select.value = current;
    select.addEventListener("change", () => this.act(row, "assign", select.value || null));
    return h("span", { class: "assign" }, h("label", { for: id, class: "visually-hidden" },
      `Assign ${d.customer.name || d.customer.email}'s conversation to`), select);
  }

  async act(row, action, assignee) {
    const id = row.data.id;
    if ((action === "take" || (action === "assign" && assignee)) && row.data.pending_approvals
      && !window.confirm(ENDS_THE_REQUEST)) {
      this.paint(row); // the select shows who has it again
      return;
    }
    row.error = "";
    try {
      const { conversation } = action === "assign" ? await inboxApi.assign(id, assignee) : await inboxApi[action](id);
      announce({ take: "Assigned to you. The agent is silent.", close: "Conversation closed.", reopen: "Conversation reopened.",
        assign: conversation.assignee ? `Assigned to ${conversation.assignee.name}. The agent is silent.` : "Handed back to the agent." }[action]);
      if (conversation) this.upsert(conversation, false);
      this.refreshSoon(id); // it may no longer match the filter
    } catch (error) {
      row.error = error.message;
      this.paint(row);
      this.refreshSoon(id); // show who has it now
      window.setTimeout(() => { row.error = ""; }, 8000);
    }
  }

  rowClicked(e, row) {
    // The whole row opens the conversation; its link stays the keyboard's way in.
    if (e.target.closest("a, button, select, label") || window.getSelection().toString()) return;
    window.location.assign(conversationUrl(row.data.id));
  }

  paintWaiting() {
    for (const el of this.list.querySelectorAll("[data-testid=waiting]")) el.textContent = `waiting ${waitedFor(el.dataset.since)}`;
    for (const el of this.list.querySelectorAll("[data-testid=row-expiry]")) el.textContent = expiryText(el.dataset.until).text;
  }

  // -- keyboard ------------------------------------------------------------------------------------------

  bindKeys() {
    document.addEventListener("keydown", (e) => {
      if (e.defaultPrevented || e.altKey || e.ctrlKey || e.metaKey) return;
      if (e.key === "/" && !typing(e.target)) {
        e.preventDefault();
        this.search.focus();
        this.search.select();
        return;
      }
      if (e.key === "Escape" && e.target === this.search) {
        this.focusRow(0);
        return;
      }
      const step = { j: 1, ArrowDown: 1, k: -1, ArrowUp: -1 }[e.key];
      if (!step || typing(e.target)) return;
      if (e.key.startsWith("Arrow") && !this.list.contains(e.target)) return; // arrows scroll the page elsewhere
      e.preventDefault();
      const links = [...this.list.querySelectorAll("a[data-testid=conversation-link]")];
      const at = links.findIndex((a) => a.closest("li").contains(e.target));
      this.focusRow(at < 0 ? (step > 0 ? 0 : links.length - 1) : at + step);
    });
  }

  focusRow(index) {
    const links = [...this.list.querySelectorAll("a[data-testid=conversation-link]")];
    if (!links.length) return;
    const link = links[Math.max(0, Math.min(index, links.length - 1))];
    link.focus();
    link.closest("li").scrollIntoView({ block: "nearest" });
  }
}

/** On a conversation's page: mark it read up to what this page has shown, while the page is visible. */
export function keepRead(socket, conversationId) {
  let seen = 0;
  let sent = 0;
  let timer = null;
  const send = () => {
    timer = null;
    if (document.visibilityState !== "visible" || seen <= sent) return;
    const seq = seen;
    inboxApi.read(conversationId, seq).then(({ read_seq: marker }) => { sent = Math.max(sent, marker); }).catch(() => {});
    sent = seq;
  };
  const saw = (seq) => {
    if (typeof seq !== "number" || seq <= seen) return;
    seen = seq;
    if (!timer) timer = window.setTimeout(send, 800);
  };
  socket.on("message.saved", (e) => e.conversation === conversationId && saw(e.seq));
  socket.on("replay.done", (e) => e.conversation === conversationId && saw(e.seq));
  document.addEventListener("visibilitychange", () => { if (document.visibilityState === "visible") send(); });
}

/** The "n" key on a conversation's page opens the next conversation of the inbox as last shown. */
export function bindNextConversation(conversationId) {
  document.addEventListener("keydown", async (e) => {
    if (e.key !== "n" || e.defaultPrevented || e.altKey || e.ctrlKey || e.metaKey || typing(e.target)) return;
    e.preventDefault();
    let order = [];
    try {
      order = JSON.parse(window.sessionStorage.getItem(ORDER_KEY) || "[]");
    } catch { order = []; }
    if (!order.length) {
      try {
        order = (await inboxApi.list({})).conversations.map((c) => c.id);
      } catch { order = []; }
    }
    const at = order.indexOf(conversationId);
    const next = order[at + 1] ?? (at < 0 ? order.find((id) => id !== conversationId) : undefined);
    window.location.assign(next ? conversationUrl(next) : "/console/");
  });
}
