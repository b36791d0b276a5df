// A live list of approval cards (the approvals page's queue, the list page's side panel, a conversation's
// cards), and the approvals page's keyboard. Each card is console-approvals.js's ApprovalCard.

import { staffApi } from "./console-api.js";
import { ApprovalCard, expiresAt } from "./console-approvals.js";
import { customers, onCustomers, wantCustomers } from "./console-store.js";
import { announce, clear, h } from "./console-dom.js";

/** Least time left first; of two that expire together, the one asked first. */
function byTimeLeft(a, b) {
  const ea = Date.parse(expiresAt(a)) || Infinity;
  const eb = Date.parse(expiresAt(b)) || Infinity;
  if (ea !== eb) return ea < eb ? -1 : 1;
  return a.requested_at.localeCompare(b.requested_at);
}

/**
 * A live list of approval cards. mode "pending": the store's pending approvals, least time left first; one decided
 * while on screen stays, showing the decision. "decided" / "all": fetched, then kept live from the store.
 * `keys` (the approvals page): J / K move between cards, A approves, E changes, R rejects the card that
 * has the focus, and a decision moves the focus on to the next card still waiting.
 */
export class ApprovalList {
  constructor(container, { store, mode = "pending", conversation = null, showConversation = true, empty, heading = "h3", keys = false, selection = null }) {
    this.heading = heading;
    this.selection = selection; // bulk decisions (the approvals page): console-approval-bulk.js
    if (selection) selection.onChange(() => { for (const card of this.cards.values()) card.syncTick(); });
    this.container = container;
    this.store = store;
    this.mode = mode;
    this.conversation = conversation;
    this.showConversation = showConversation;
    this.empty = empty;
    this.keys = keys;
    this.cards = new Map();
    store.subscribe(() => this.sync());
    if (showConversation) onCustomers(() => this.relabel());
    if (keys) document.addEventListener("keydown", (e) => this.onKey(e));
  }

  async setMode(mode) {
    this.mode = mode;
    this.cards.clear();
    this.shown = false;
    clear(this.container);
    if (mode !== "pending") {
      this.fetching = true;
      try {
        const { approvals } = await staffApi.approvals(mode);
        this.store.upsertMany(approvals);
      } catch (error) {
        this.container.append(h("p", { class: "error", role: "alert" }, error.message));
      }
      this.fetching = false;
    }
    this.sync();
  }

  wanted(a) {
    if (this.conversation) return a.conversation === this.conversation;
    if (this.cards.has(a.id)) return true;
    if (this.mode === "pending") return a.status === "pending";
    if (this.mode === "decided") return a.status !== "pending";
    return true;
  }

  order(a, b) {
    // Pending first, least time left first (then oldest); then decisions, newest first.
    const rank = (x) => (x.status === "pending" ? 0 : 1);
    if (rank(a) !== rank(b)) return rank(a) - rank(b);
    if (a.status === "pending") return byTimeLeft(a, b);
    return (b.decided_at || "").localeCompare(a.decided_at || "");
  }

  sync() {
    const list = [...this.store.items.values()].filter((a) => this.wanted(a));
    if (!this.conversation && this.mode === "pending") {
      list.sort(byTimeLeft); // decided ones keep their place
    } else {
      list.sort((a, b) => this.order(a, b));
    }
    let previous = null;
    for (const approval of list) {
      let card = this.cards.get(approval.id);
      if (!card) {
        card = new ApprovalCard(approval, { store: this.store, showConversation: this.showConversation, heading: this.heading,
          afterDecision: this.keys ? (decided, words) => this.next(decided, words) : null, selection: this.selection });
        this.cards.set(approval.id, card);
        if (this.shown) card.el.classList.add("is-new"); // arrived live, not with the page
      } else if (card.approval !== approval) {
        card.update(approval);
      }
      const anchor = previous ? previous.nextSibling : this.container.firstChild;
      if (card.el !== anchor && !card.el.contains(document.activeElement)) this.container.insertBefore(card.el, anchor);
      previous = card.el;
    }
    if (this.empty) this.empty.hidden = list.length > 0 || !this.store.loaded;
    if (this.store.loaded && !this.fetching) this.shown = true;
    if (this.showConversation) wantCustomers(list.map((a) => a.conversation));
    if (this.selection) this.selection.changed();
  }

  /** The waiting cards in view, in order: what "Select all shown" selects. */
  pendingShown() {
    return this.shownCards().map((card) => card.approval).filter((a) => a.status === "pending");
  }

  relabel() {
    for (const card of this.cards.values()) {
      const link = card.el.querySelector("[data-testid=approval-conversation-link]");
      const customer = customers.get(card.approval.conversation);
      if (link && customer) link.textContent = customer;
    }
  }

  /** The cards in the order shown. */
  shownCards() {
    const byEl = new Map([...this.cards.values()].map((card) => [card.el, card]));
    return [...this.container.children].map((el) => byEl.get(el)).filter(Boolean);
  }

  current() {
    return this.shownCards().find((card) => card.el.contains(document.activeElement)) || null;
  }

  focusCard(card) {
    if (!card) return;
    card.titleEl.focus();
    card.el.scrollIntoView({ block: "nearest" });
  }

  /** After a decision: on to the next card still waiting (after this one, else the first), or stay. */
  next(decided, words) {
    const cards = this.shownCards();
    const at = cards.indexOf(decided);
    const waiting = [...cards.slice(at + 1), ...cards.slice(0, Math.max(at, 0))].find((c) => c.approval.status === "pending");
    if (waiting) {
      this.focusCard(waiting);
      announce(`${words}. Next: ${waiting.approval.context?.summary || waiting.approval.tool}`);
    } else {
      decided.titleEl.focus();
      announce(`${words}. Nothing else is waiting.`);
    }
  }

  onKey(e) {
    if (e.defaultPrevented || e.ctrlKey || e.metaKey || e.altKey) return;
    const target = e.target;
    if (target.closest && target.closest("input, textarea, select, [contenteditable], .decide-form")) return;
    // Single keys act only in the queue, or with nothing focused (WCAG 2.1.4: never while typing elsewhere).
    if (!(this.container.contains(target) || target === document.body || target.id === "main")) return;
    const key = e.key.toLowerCase();
    const cards = this.shownCards();
    const card = this.current();
    if (key === "j" || key === "k") {
      e.preventDefault();
      const at = card ? cards.indexOf(card) : -1;
      const to = key === "j" ? Math.min(at + 1, cards.length - 1) : Math.max(at - 1, 0);
      this.focusCard(cards[to]);
      return;
    }
    if (!card || card.approval.status !== "pending" || !card.viewer || !card.viewer.can_decide) return;
    if (key === "x" && this.selection && card.tick) { e.preventDefault(); card.tick.click(); }
    if (key === "a") { e.preventDefault(); card.decide({ approve: true }); }
    if (key === "e") { e.preventDefault(); card.toggleForm("edit"); }
    if (key === "r") { e.preventDefault(); card.toggleForm("reject"); }
  }
}
