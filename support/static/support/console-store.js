// What several parts of a page share: the approvals seen so far (the nav badge, the queue, the list's
// counts and the conversation page all read this one store) and the customers of conversations, to label
// approval cards.

import { staffApi } from "./console-api.js";

export class ApprovalStore {
  constructor(socket) {
    this.items = new Map(); // approval id -> approval JSON (pending or decided)
    this.listeners = new Set();
    this.loaded = false;
    this.refreshing = null;
    this.heard = null; // while a refresh is on its way: the approvals an event told of since it was asked for
    const told = (event) => {
      if (!event.approval) return;
      this.heard?.add(event.approval.id);
      this.upsert(event.approval);
    };
    socket.on("approval.requested", told);
    socket.on("approval.decided", told);
    // A reminder or an escalation went out (support/desk/nudges.py): the card says so.
    socket.on("approval.nudged", told);
    socket.on("run.status", (event) => {
      // Taking a conversation over expires its run's pending approvals without an approval.decided event;
      // a run that is no longer awaiting approval has none pending, so ask the server what became of them.
      if (event.status !== "awaiting_approval" && this.pending().some((a) => a.run === event.run)) {
        this.refresh();
      }
    });
    socket.onOpen(() => this.refresh());
  }

  subscribe(listener) {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  notify(changed) {
    for (const listener of this.listeners) listener(changed);
  }

  /** A newer state of an approval. A decision is final: a late "pending" never overwrites it. */
  upsert(approval, { quiet = false } = {}) {
    const known = this.items.get(approval.id);
    if (known && known.status !== "pending" && approval.status === "pending") return false;
    if (known && JSON.stringify(known) === JSON.stringify(approval)) return false;
    this.items.set(approval.id, approval);
    if (!quiet) this.notify([approval]);
    return true;
  }

  upsertMany(approvals) {
    const changed = approvals.filter((a) => this.upsert(a, { quiet: true }));
    if (changed.length) this.notify(changed);
    return changed;
  }

  get(id) {
    return this.items.get(id);
  }

  pending() {
    return [...this.items.values()].filter((a) => a.status === "pending");
  }

  pendingCount(conversationId) {
    return this.pending().filter((a) => !conversationId || a.conversation === conversationId).length;
  }

  forConversation(conversationId) {
    return [...this.items.values()].filter((a) => a.conversation === conversationId);
  }

  /** The pending list from the server; approvals we held as pending but that are not in it were decided. An
   * approval an event told of while the list was on its way is left as the event said: the list may have been
   * read before that change (a first approval of two, a new request), and every change sends an event after it. */
  refresh() {
    if (this.refreshing) return this.refreshing;
    this.refreshing = (async () => {
      const heard = (this.heard = new Set());
      try {
        const { approvals } = await staffApi.approvals("pending");
        const now = new Set(approvals.map((a) => a.id));
        const gone = this.pending().filter((a) => !now.has(a.id) && !heard.has(a.id));
        const changed = this.upsertMany(approvals.filter((a) => !heard.has(a.id)));
        if (gone.length) {
          const { approvals: decided } = await staffApi.approvals("decided");
          const byId = new Map(decided.map((a) => [a.id, a]));
          for (const a of gone) {
            if (byId.has(a.id)) this.upsert(byId.get(a.id), { quiet: true });
            else this.items.delete(a.id);
          }
          changed.push(...gone);
        }
        this.loaded = true;
        this.notify(changed);
      } catch (error) {
        console.warn("console: approvals not refreshed:", error.message);
      } finally {
        this.refreshing = null;
        this.heard = null;
      }
    })();
    return this.refreshing;
  }
}

/** Conversation id -> customer, for labelling approvals with who asked (the approvals API gives only ids). */
export const customers = new Map();
const customerListeners = new Set();
const askedFor = new Set();
let customerFetch = null;

export function onCustomers(listener) {
  customerListeners.add(listener);
}

export function learnCustomers(conversations) {
  for (const c of conversations) customers.set(c.id, c.customer);
  for (const listener of customerListeners) listener();
}

/** Fetch the conversation list once for ids not labelled yet (each id asked for once). */
export function wantCustomers(ids) {
  const unknown = ids.filter((id) => !customers.has(id) && !askedFor.has(id));
  if (!unknown.length || customerFetch) return;
  for (const id of unknown) askedFor.add(id);
  customerFetch = staffApi.conversations()
    .then(({ conversations }) => learnCustomers(conversations))
    .catch(() => {})
    .finally(() => { customerFetch = null; });
}

/** The nav's "Approvals" count, live. */
export function bindApprovalsBadge(store, badgeEl) {
  if (!badgeEl) return;
  const render = () => {
    const count = store.pendingCount();
    badgeEl.dataset.count = String(count);
    badgeEl.querySelector("[data-count-value]").textContent = store.loaded ? String(count) : "…";
    badgeEl.classList.toggle("is-zero", count === 0);
  };
  store.subscribe(render);
  render();
}
