// Approval cards: approve, change the arguments then approve, or reject with a reason. A card is meant to be
// decided in seconds: one sentence saying what the agent asks and why, the order's money, what the customer
// asked and wrote since, the policies the agent read, the time left, and a form of plain fields
// (console-approval-form.js) rather than JSON. When the agent asked right after reading a seller's text that
// gives it instructions, the card opens with a warning (console-approval-provenance.js). The same card serves
// the queue page, the side panel of the list and the conversation page; the lists themselves are
// console-approval-list.js, which imports this module (never the other way round). A card offers only what
// its viewer may decide (the API refuses the rest anyway), and one whose customer wrote after the request
// shows those messages and asks for a tick before approving (a "cancel" must not go unseen). Above
// SECOND_APPROVAL_ABOVE a refund needs two different people (four eyes): the card says who approved first (or
// which colleague asked, for a refund of their own), waits "1 of 2", and offers that person no second approval.

import { ApiError, staffApi } from "./console-api.js";
import { ArgumentsForm } from "./console-approval-form.js";
import { confirmOverRejection, earlierEl } from "./console-approval-earlier.js";
import { provenanceEl } from "./console-approval-provenance.js";
import { customers } from "./console-store.js";
import { filesEl } from "./console-transcript.js";
import {
  announce, badge, fill, conversationUrl, h, shortId, timeEl, uniqueId,
} from "./console-dom.js";
import { fmtDateTime, label, money } from "./console-format.js";

const ALREADY_DECIDED = "Someone else decided this approval a moment ago; their decision is shown below.";
const SECOND_LOOK = "Read what the customer wrote since the request, then tick the box to approve.";

// What this staff member may decide: the approvals API's `viewer`, asked once per page.
let viewer = null;
let viewerAsked = null;
const viewerWaiters = new Set();

function knownViewer(onKnown) {
  if (viewer) return viewer;
  viewerWaiters.add(onKnown);
  if (!viewerAsked) {
    viewerAsked = staffApi.approvals("pending").then((data) => {
      viewer = data.viewer || { can_decide: false, can_approve_large_refunds: false, large_refund_threshold: "" };
      for (const waiter of viewerWaiters) waiter();
      viewerWaiters.clear();
    }).catch(() => {
      viewerAsked = null; // asked again at the next render
    });
  }
  return null;
}

/** Call back with what this staff member may decide, once it is known (at once when it is). */
export function whenViewer(callback) {
  const known = knownViewer(() => callback(viewer));
  if (known) callback(known);
}

/** A refused decision: the status, the API's code (e.g. needs_second_look) and the card as it is now. */
function lastSeq(messages) {
  return messages.reduce((max, m) => Math.max(max, m.seq), 0);
}

function sameJson(a, b) {
  return JSON.stringify(a) === JSON.stringify(b);
}

// -- reading aids ----------------------------------------------------------------------------------------

const HOUR = 3600 * 1000;

/** "expires in 23 h", "expires in 12 min", or that the time is up; `urgent` under an hour. */
export function expiryText(iso, now = Date.now()) {
  const left = Date.parse(iso) - now;
  if (Number.isNaN(left)) return { text: "", urgent: false, over: false };
  if (left <= 0) return { text: "Time is up: it can no longer be approved", urgent: true, over: true };
  const minutes = Math.floor(left / 60000);
  if (left < 60000) return { text: "Expires in less than a minute", urgent: true, over: false };
  if (left < HOUR) return { text: `Expires in ${minutes} min`, urgent: true, over: false };
  if (left < 2 * HOUR) return { text: `Expires in 1 h ${minutes - 60} min`, urgent: false, over: false };
  return { text: `Expires in ${Math.floor(left / HOUR)} h`, urgent: false, over: false };
}

/** "Reminder sent" / "Escalated to leads": who was told the approval still waits (support/desk/nudges.py). */
export function nudgeText(deadline) {
  if (deadline && deadline.escalated_at) return { text: "Escalated to leads", at: deadline.escalated_at, escalated: true };
  if (deadline && deadline.reminded_at) return { text: "Reminder sent", at: deadline.reminded_at, escalated: false };
  return null;
}

function nudgeTag(deadline) {
  const nudge = nudgeText(deadline);
  if (!nudge) return null;
  return h("span", { class: `nudge${nudge.escalated ? " is-escalated" : ""}`, "data-testid": "approval-nudge",
    "data-nudge": nudge.escalated ? "escalation" : "reminder", title: `${nudge.text} ${fmtDateTime(nudge.at)}` }, nudge.text);
}

/** When a pending approval stops waiting: its deadline's expiry (or the card's, for an older answer). */
export function expiresAt(approval) {
  return (approval.deadline && approval.deadline.expires_at) || (approval.context && approval.context.expires_at) || "";
}

/** Every expiry chip on the page, kept current (one timer for all cards). */
function tickExpiries() {
  for (const el of document.querySelectorAll("[data-expires]")) {
    const { text, urgent, over } = expiryText(el.dataset.expires);
    if (el.textContent !== text) el.textContent = text;
    el.classList.toggle("is-urgent", urgent);
    el.dataset.over = String(over);
  }
}
let expiryTimer = null;
function startExpiryTimer() {
  if (!expiryTimer) expiryTimer = window.setInterval(tickExpiries, 5000);
}

/** The arguments as a person reads them: "Amount 64.00 EUR", "Order SU-41310", "Reason …". */
function argumentRows(approval, args) {
  const fields = (approval.context && approval.context.fields) || [];
  const labels = new Map(fields.map((f) => [f.name, f]));
  return Object.entries(args || {}).map(([name, value]) => {
    const field = labels.get(name);
    const text = field && (field.kind === "amount" || field.money) ? money(value)
      : typeof value === "string" ? value : JSON.stringify(value);
    return [field ? field.label.replace(/ \(EUR\)$/, "") : name, text, name];
  });
}

function changedFields(requested, executed) {
  return Object.keys({ ...requested, ...executed }).filter((k) => !sameJson(requested?.[k], executed?.[k]));
}

/** Four eyes on a card: how many approvals it needs, who asked (a colleague's own refund), who approved first,
 *  and whether `me` is one of them (then they may not give the next approval). */
export function fourEyes(a, me) {
  const people = a.approvals || [];
  const asker = people.find((p) => p.role === "asked") || null;
  const first = people.find((p) => p.role === "first") || null;
  return { needed: a.approvals_needed || 1, given: people.length, asker, first,
    mine: a.status === "pending" && people.some((p) => p.username && p.username === me) };
}

function fourEyesTag(a, me) {
  const f = fourEyes(a, me);
  if (a.status !== "pending" || f.needed < 2) return null;
  return h("span", { class: `four-eyes${f.given ? " is-half" : ""}`, "data-testid": "approval-four-eyes",
    title: "Refunds of this size need two different people's approval" },
  f.given ? `${f.given} of 2 approvals` : "Needs 2 approvals");
}

/** "Approved first by Sam, 3 min ago: a second person must approve it before it runs." */
function fourEyesLine(a, me, threshold) {
  const f = fourEyes(a, me);
  if (f.needed < 2) return null;
  const who = (p) => (p.username === me ? "you" : p.by);
  let words;
  if (f.asker) {
    words = [`Asked by ${who(f.asker)} `, timeEl(f.asker.at, "approval-asked-at"),
      f.mine ? ": another person must approve it. You may withdraw it by rejecting it." : ": another person must approve it before it is made."];
  } else if (f.first) {
    const asked = a.requested_arguments?.amount;
    const approved = a.first_arguments?.amount;
    const changed = asked !== undefined && approved !== undefined && asked !== approved ? ` for ${money(approved)} instead of ${money(asked)}` : "";
    words = [`Approved first${changed} by ${who(f.first)} `, timeEl(f.first.at, "approval-first-at"),
      f.mine ? ": a second person must approve it before it runs. You may still reject it." : ": approving it is the second approval, and it runs."];
  } else {
    words = [`${threshold ? `Refunds above ${money(threshold)}` : "Refunds of this size"} need two people: approving it is the first approval, then a colleague gives the second.`];
  }
  return h("p", { class: "four-eyes-line", "data-testid": "approval-approvals" }, words);
}

export class ApprovalCard {
  constructor(approval, { store, showConversation = true, heading = "h3", afterDecision = null, selection = null }) {
    this.store = store;
    this.selection = selection; // the approvals page's bulk selection (console-approval-bulk.js), else null
    this.heading = heading;
    this.showConversation = showConversation;
    this.afterDecision = afterDecision;
    this.approval = approval;
    this.busy = false;
    this.notice = "";
    this.el = h("article", { class: "approval-card", "data-testid": "approval-card", "data-approval": approval.id });
    startExpiryTimer();
    this.render();
  }

  get isRefund() {
    return this.approval.tool === "issue_refund" || this.approval.tool === "staff_refund";
  }

  get me() {
    return this.viewer?.username || document.body.dataset.staffUsername;
  }

  update(approval) {
    const wasPending = this.approval.status === "pending";
    this.approval = approval;
    if (wasPending && approval.status !== "pending" && !this.busy && this.openForm) {
      // Decided elsewhere while this person was editing or writing a reason.
      this.notice = ALREADY_DECIDED;
    }
    this.render();
  }

  render() {
    const a = this.approval;
    const context = a.context || {};
    const hadFocus = this.el.contains(document.activeElement);
    const focusedTestid = hadFocus ? document.activeElement.dataset.testid : null;
    // A live update (the customer wrote) must not wipe what this person was typing.
    const typed = { args: this.form?.typed(), reason: this.reason?.value, why: this.changeWhy?.value };
    this.viewer = knownViewer(() => this.render());
    this.seenBox = null;
    const titleId = uniqueId("approval-title");
    this.el.dataset.status = a.status;
    this.el.dataset.tool = a.tool;
    this.el.className = `approval-card is-${a.status}${context.provenance?.flagged ? " has-warning" : ""}`;
    this.el.setAttribute("aria-labelledby", titleId);
    const conversationLink = this.showConversation
      ? h("a", { href: conversationUrl(a.conversation), "data-testid": "approval-conversation-link", class: "approval-conv" },
        customers.get(a.conversation) || `Conversation ${shortId(a.conversation)}`)
      : null;
    const expiry = a.status === "pending" && context.expires_at ? expiryText(context.expires_at) : null;
    fill(this.el,
      h("header", { class: "approval-head" },
        this.selectBox(titleId),
        // The tool's own name only in a tooltip, for staff who want it: the title says what the case is.
        h(this.heading, { id: titleId, tabindex: "-1", class: "approval-title", "data-testid": "approval-summary",
          title: `The agent's call: ${a.tool}` }, context.summary || a.tool),
        h("div", { class: "approval-tags" },
          badge("approval", a.status, "approval-status"),
          fourEyesTag(a, this.me),
          expiry ? h("span", { class: `expiry${expiry.urgent ? " is-urgent" : ""}`, "data-testid": "approval-expiry",
            "data-expires": context.expires_at, "data-over": String(expiry.over),
            title: `No decision is accepted after ${fmtDateTime(context.expires_at)}` }, expiry.text) : null,
          a.status === "pending" ? nudgeTag(a.deadline) : null),
        h("span", { class: "approval-meta" }, conversationLink,
          timeEl(a.requested_at, "approval-requested-at", "requested "))),
      this.notice ? h("p", { class: "notice", role: "status", "data-testid": "approval-notice" }, this.notice) : null,
      a.status === "pending" ? this.pendingBody() : this.decidedBody(),
    );
    this.titleEl = this.el.querySelector(".approval-title");
    if (a.status === "pending" && this.openForm) {
      if (typed.args && this.openForm === "edit") this.form.restore(typed.args);
      if (typed.why !== undefined && this.openForm === "edit") this.changeWhy.value = typed.why;
      if (typed.reason !== undefined && this.openForm === "reject") this.reason.value = typed.reason;
    }
    if (hadFocus && !this.el.contains(document.activeElement)) {
      const again = focusedTestid && this.el.querySelector(`[data-testid="${focusedTestid}"]`);
      (again || this.titleEl).focus();
    }
  }

  /** The tick box of a bulk decision, on a waiting card this viewer may decide (the approvals page only). */
  selectBox(titleId) {
    const a = this.approval;
    if (!this.selection || a.status !== "pending" || !this.viewer?.can_decide) return null;
    this.tick = h("input", { type: "checkbox", class: "approval-select", "data-testid": "approval-select",
      "aria-labelledby": `${titleId}-select ${titleId}`,
      onchange: () => this.selection.set(a.id, this.tick.checked) });
    this.tick.checked = this.selection.has(a.id);
    return h("label", { class: "approval-select-label" }, this.tick, h("span", { id: `${titleId}-select`, class: "visually-hidden" }, "Select"));
  }

  /** Keep the tick box in step with the selection (select all, a decision that cleared it). */
  syncTick() {
    if (this.tick && this.el.contains(this.tick)) this.tick.checked = this.selection.has(this.approval.id);
  }

  /** Why the agent asks, what it found, the order's money, what the customer said, the policies it read. */
  facts({ withSecondLook = true } = {}) {
    const a = this.approval;
    const c = a.context || {};
    const parts = [];
    // Third-party text read just before asking: a warning first when it gives the agent instructions.
    const origin = provenanceEl(c.provenance);
    const warned = Boolean(origin && c.provenance.flagged);
    if (warned) parts.push(origin);
    parts.push(earlierEl(a.earlier_decisions));
    if (c.why) {
      parts.push(h("p", { class: "approval-why", "data-testid": "approval-why" },
        h("span", { class: "muted" }, a.tool === "staff_refund" ? "Their reason: " : "Agent's reason: "), c.why));
    }
    if (c.handover_summary) {
      parts.push(h("div", { class: "handover", role: "group", "data-testid": "approval-handover-summary", "aria-label": "The agent's summary" },
        h("p", { class: "facts-label" }, "What the agent found"), h("p", {}, c.handover_summary)));
    }
    if (c.order) {
      const o = c.order;
      parts.push(h("div", { class: "order-money", role: "group", "data-testid": "approval-order", "aria-label": `Order ${o.number}` },
        h("p", { class: "order-line" }, h("strong", {}, o.number), ` · ${label(o.status)} · ${o.seller}`,
          o.items && o.items.length ? h("span", { class: "muted" }, ` · ${o.items.join(", ")}`) : null),
        h("dl", { class: "money" },
          h("div", {}, h("dt", {}, "Order total"), h("dd", { "data-testid": "order-total" }, money(o.total))),
          h("div", {}, h("dt", {}, "Refunded"), h("dd", { "data-testid": "order-refunded" }, money(o.refunded))),
          h("div", { class: "is-key" }, h("dt", {}, "Refundable"), h("dd", { "data-testid": "order-refundable" }, money(o.refundable))))));
    }
    if (c.customer_request && c.customer_request.length) {
      parts.push(h("div", { class: "customer-said", role: "group", "data-testid": "approval-customer-request", "aria-label": "What the customer asked" },
        h("p", { class: "facts-label" }, "The customer asked"),
        h("ol", { class: "said" }, c.customer_request.map((m) => h("li", { "data-seq": String(m.seq) },
          m.attachments_only ? null : h("q", {}, m.text), " ", timeEl(m.created_at, "approval-request-time"),
          m.attachments && m.attachments.length ? filesEl(m.attachments) : null)))));
    }
    if (withSecondLook) parts.push(this.secondLook());
    if (c.policies && c.policies.length) {
      // Closed, with the titles of the policies it relied on in view: the passages are a click (or Enter)
      // away, the other search hits folded once more, the buttons stay close.
      const more = c.policies_more || [];
      parts.push(h("details", { class: "policies", "data-testid": "approval-policies" },
        h("summary", {}, h("span", { class: "muted" }, "Policies the agent read: "),
          c.policies.map((p) => p.title || p.doc_id).join(" · ")),
        h("ul", {}, c.policies.map((p) => h("li", { "data-testid": "approval-policy", "data-doc": p.doc_id },
          h("strong", {}, p.title || p.doc_id), " ", h("span", { class: "doc-id" }, p.doc_id),
          p.version ? h("span", { class: "doc-version", "data-testid": "approval-policy-version" }, ` v${p.version}`) : null,
          p.excerpt ? h("p", { class: "excerpt" }, /[.!?…]$/.test(p.excerpt.trim()) ? p.excerpt : `${p.excerpt.trim()}…`) : null))),
        more.length ? h("details", { class: "policies-more", "data-testid": "approval-policies-more" },
          h("summary", {}, `${more.length} more searched`),
          h("ul", {}, more.map((p) => h("li", { "data-testid": "approval-policy-more", "data-doc": p.doc_id },
            p.title || p.doc_id, " ", h("span", { class: "doc-id" }, p.doc_id))))) : null));
    } else if (a.tool === "issue_refund") {
      parts.push(h("p", { class: "hint", "data-testid": "approval-no-policies" }, "The agent read no policy before asking."));
    }
    if (origin && !warned) parts.push(origin);
    return parts;
  }

  /** What the customer wrote after the request, newest last; with a tick box while it is pending. */
  secondLook() {
    const a = this.approval;
    const messages = a.customer_messages_since || [];
    const count = a.customer_messages_since_count || messages.length;
    if (!count) return null;
    const pending = a.status === "pending";
    const boxId = uniqueId("seen");
    const earlier = count - messages.length;
    const list = h("ol", { class: "transcript", "data-testid": "approval-customer-messages" },
      messages.map((m) => h("li", { class: "msg msg-customer", "data-testid": "approval-customer-message", "data-seq": String(m.seq) },
        h("div", { class: "msg-head" }, h("span", { class: "msg-author" }, "Customer, after the request"), timeEl(m.created_at, "approval-customer-message-time")),
        h("div", { class: "msg-text" }, m.text))));
    let confirm = null;
    if (pending && this.viewer && this.viewer.can_decide) {
      this.seenBox = h("input", { type: "checkbox", id: boxId, "data-testid": "confirm-seen",
        onchange: () => { this.seenThrough = this.seenBox.checked ? lastSeq(messages) : 0; this.showError(""); } });
      // Ticked only for the messages it was ticked for: a newer one asks again.
      this.seenBox.checked = (this.seenThrough || 0) >= lastSeq(messages);
      confirm = h("label", { for: boxId, class: "confirm" }, this.seenBox, " I have read what the customer wrote; approve anyway");
    }
    return h("section", { class: "notice", "data-testid": "approval-second-look", "aria-label": "Customer messages since the request" },
      h("strong", {}, pending
        ? `The customer wrote ${count === 1 ? "a message" : `${count} messages`} after this was requested. Read ${count === 1 ? "it" : "them"} before approving.`
        : `The customer wrote ${count === 1 ? "a message" : `${count} messages`} while this waited.`),
      earlier > 0 ? h("p", { class: "hint" }, `${earlier} earlier ${earlier === 1 ? "message is" : "messages are"} in the `,
        h("a", { href: conversationUrl(a.conversation) }, "conversation"), ".") : null,
      list, confirm);
  }

  /** The decide buttons this viewer may use, or a line saying why there are none. */
  actions() {
    const a = this.approval;
    const v = this.viewer;
    if (!v) return [h("p", { class: "hint", "data-testid": "approval-checking" }, "Checking what you may decide…")];
    if (!v.can_decide) {
      return [h("p", { class: "hint", "data-testid": "approval-read-only" },
        "You can follow this approval but not decide it: that needs the “decide approvals” permission (Support agents or Support leads).")];
    }
    const f = fourEyes(a, this.me);
    if (f.mine) { // four eyes: this person asked or approved first; the next approval is someone else's
      return [h("div", { class: "actions", role: "group", "aria-label": "Decide" }, this.rejectBtn)];
    }
    const mayApprove = !a.large_refund || v.can_approve_large_refunds;
    // The second approval approves what the first approved, and a colleague's refund is approved as asked.
    const mayEdit = a.context?.editable !== false && !f.first;
    const note = mayApprove ? null : h("p", { class: "hint", "data-testid": "approval-needs-lead" },
      `Refunds above ${money(v.large_refund_threshold)} need a support lead to approve. ${mayEdit ? "You may lower the amount, or reject it." : "You may reject it."}`);
    return [h("div", { class: "actions", role: "group", "aria-label": "Decide" }, mayApprove ? this.approveBtn : null,
      mayEdit ? this.editBtn : null, this.rejectBtn), note];
  }

  pendingBody() {
    const a = this.approval;
    const editId = uniqueId("edit");
    const rejectId = uniqueId("reject");
    this.error = h("p", { class: "error", role: "alert", "data-testid": "approval-error", hidden: true });
    const amount = this.isRefund ? (a.first_arguments || a.requested_arguments)?.amount : null;
    this.approveBtn = h("button", { type: "button", class: "btn btn-primary", "data-testid": "approve-button",
      onclick: () => this.decide({ approve: true }) }, amount ? `Approve ${money(amount)}` : "Approve");
    this.editBtn = h("button", { type: "button", class: "btn", "data-testid": "edit-button", "aria-expanded": "false",
      "aria-controls": editId, onclick: () => this.toggleForm(this.openForm === "edit" ? null : "edit") },
    this.isRefund ? "Change amount…" : "Edit…");
    this.rejectBtn = h("button", { type: "button", class: "btn btn-danger-quiet", "data-testid": "reject-button",
      "aria-expanded": "false", "aria-controls": rejectId, onclick: () => this.toggleForm(this.openForm === "reject" ? null : "reject") }, "Reject…");

    const submitEdited = h("button", { type: "submit", class: "btn btn-primary", "data-testid": "approve-edited-button" });
    // The button names the amount it approves, once the field holds one this person may approve.
    const name = (value) => { submitEdited.textContent = value ? `Approve ${money(value)}` : amount ? "Approve this amount" : "Approve with these values"; };
    this.form = new ArgumentsForm({ approval: a, viewer: this.viewer, onAmount: name });
    name(this.form.amountToApprove());
    const whyId = uniqueId("why");
    // Why the change, in words this person chooses to share: the agent passes them on to the customer.
    this.changeWhy = h("input", { id: whyId, type: "text", class: "text-input", "data-testid": "change-reason-input",
      maxlength: "2000", autocomplete: "off", "aria-describedby": `${whyId}-hint` });
    this.editForm = h("form", { id: editId, class: "decide-form", hidden: true, novalidate: true, "aria-label": "Change what runs",
      onsubmit: (e) => { e.preventDefault(); this.approveEdited(); } },
      this.form.el,
      h("label", { for: whyId }, "Why (optional)"), this.changeWhy,
      h("p", { class: "hint", id: `${whyId}-hint` }, "The agent tells the customer these words as you write them."),
      h("p", { class: "hint" }, "Ctrl+Enter approves, Esc cancels. The agent tells the customer what was approved."),
      h("div", { class: "actions" }, submitEdited,
        h("button", { type: "button", class: "btn btn-quiet", "data-testid": "edit-cancel-button",
          onclick: () => this.toggleForm(null) }, "Cancel")));

    const reasonId = uniqueId("reason");
    this.reason = h("input", { id: reasonId, type: "text", class: "text-input", "data-testid": "reason-input",
      required: true, maxlength: "2000", autocomplete: "off", "aria-describedby": `${reasonId}-hint`,
      // "Write a reason" goes once there is one: an error must not outlive what it was about.
      oninput: () => { if (this.reason.value.trim() && !this.error.hidden) this.showError(""); } });
    this.rejectForm = h("form", { id: rejectId, class: "decide-form", hidden: true, novalidate: true, "aria-label": "Reject",
      onsubmit: (e) => { e.preventDefault(); this.rejectWithReason(); } },
      h("label", { for: reasonId }, "Reason (required)"),
      this.reason,
      h("p", { class: "hint", id: `${reasonId}-hint` }, "The agent passes it on to the customer, so write it for them."),
      h("div", { class: "actions" },
        h("button", { type: "submit", class: "btn btn-danger", "data-testid": "reject-confirm-button" }, "Reject"),
        h("button", { type: "button", class: "btn btn-quiet", "data-testid": "reject-cancel-button",
          onclick: () => this.toggleForm(null) }, "Cancel")));

    for (const form of [this.editForm, this.rejectForm]) {
      form.addEventListener("keydown", (e) => {
        if (e.key === "Escape") { e.preventDefault(); this.toggleForm(null); }
        if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); form.requestSubmit(); }
      });
    }
    // The buttons make way for an open form: one Approve at a time.
    this.actionsEl = h("div", { class: "decide-buttons", "data-testid": "approval-actions" }, this.actions());
    const body = h("div", { class: "approval-body" }, this.serviceCall(), this.facts(),
      fourEyesLine(a, this.me, this.viewer?.second_approval_above), this.actionsEl,
      this.viewer && this.viewer.can_decide ? [this.editForm, this.rejectForm] : null, this.error);
    if (this.openForm) this.toggleForm(this.openForm, { focus: false });
    return body;
  }

  /** A call to another system (a tool of an MCP server): exactly what would be sent to it, before anyone approves. */
  serviceCall() {
    const a = this.approval;
    const service = a.context && a.context.service;
    if (!service) return null;
    return h("div", { class: "service-call", role: "group", "data-testid": "approval-service-call", "aria-label": `Sent to the ${service} service` },
      h("p", { class: "facts-label" }, `Sent to the ${service} service when approved`),
      h("dl", { class: "args-read" }, argumentRows(a, a.requested_arguments).map(([term, text, name]) =>
        h("div", { "data-arg": name }, h("dt", {}, term), h("dd", {}, text)))));
  }

  decidedBody() {
    const a = this.approval;
    const ran = a.executed_arguments !== null && a.executed_arguments !== undefined;
    const changed = ran ? changedFields(a.requested_arguments, a.executed_arguments) : [];
    let decision = label(a.status);
    if (a.status === "approved") {
      if (!changed.length) decision = "Approved as requested";
      else if (this.isRefund && changed.includes("amount")) {
        decision = `Approved ${money(a.executed_arguments.amount)} instead of ${money(a.requested_arguments.amount)}`;
      } else decision = "Approved with changes";
    }
    if (a.status === "expired") decision = "Expired: no one decided in time, so it did not run";
    const f = fourEyes(a, this.me);
    const rows = [
      ["Decision", h("span", { "data-testid": "approval-decision", "data-status": a.status }, decision)],
      f.asker ? ["Asked by", h("span", { "data-testid": "approval-asked-by" }, f.asker.by)] : null,
      f.first ? ["First approval", h("span", { "data-testid": "approval-first-by" }, f.first.by, " · ", timeEl(f.first.at, "approval-first-at"))] : null,
      [a.status !== "approved" ? "Decided by" : f.first ? "Second approval" : f.asker ? "Approved by" : "Decided by", h("span", { "data-testid": "approval-decided-by" }, a.decided_by || (a.status === "expired" ? "the system" : "—"))],
      ["When", timeEl(a.decided_at, "approval-decided-at")],
    ].filter(Boolean);
    const made = a.staff_action;
    if (made && a.status === "approved") {
      rows.push(["Refund", h("span", { "data-testid": "approval-refund-made", "data-status": made.status },
        made.status === "done" ? `Made${made.result?.reference ? `: ${made.result.reference}` : ""}`
          : made.status === "refused" ? `Not made: ${made.result?.error || "refused"}` : "Being made…")]);
    }
    if (a.reason) rows.push([a.status === "expired" ? "What happened" : "Reason", h("span", { class: "reason", "data-testid": "approval-reason" }, a.reason)]);
    if (a.not_run_reason) rows.push(["Not run", h("span", { "data-testid": "approval-not-run" }, a.not_run_reason)]);
    const args = h("dl", { class: "args-read", "data-testid": "approval-arguments" },
      argumentRows(a, a.requested_arguments).map(([term, text, name]) => h("div", { "data-arg": name },
        h("dt", {}, changed.includes(name) ? `${term} asked` : term), h("dd", {}, text),
        changed.includes(name) ? [h("dt", {}, `${term} approved`),
          h("dd", { class: "is-edited", "data-testid": "approval-executed-arguments" },
            argumentRows(a, { [name]: a.executed_arguments[name] })[0][1])] : null)));
    return h("div", { class: "approval-body" },
      h("dl", { class: "decision" }, rows.map(([term, value]) => [h("dt", {}, term), h("dd", {}, value)])),
      this.secondLook(),
      h("details", { class: "args-details" }, h("summary", {}, f.asker ? "What was asked, and why" : "What the agent asked for, and why"), args,
        this.facts({ withSecondLook: false })));
  }

  toggleForm(which, { focus = true } = {}) {
    if (this.approval.status !== "pending" || !this.editForm) return;
    this.openForm = which;
    this.editForm.hidden = which !== "edit";
    this.rejectForm.hidden = which !== "reject";
    this.actionsEl.hidden = Boolean(which);
    this.editBtn.setAttribute("aria-expanded", String(which === "edit"));
    this.rejectBtn.setAttribute("aria-expanded", String(which === "reject"));
    this.showError("");
    if (!focus) return;
    if (which === "edit") this.form.focusFirst();
    else if (which === "reject") this.reason.focus();
    else (this.el.contains(this.editBtn) ? this.editBtn : this.rejectBtn).focus();
  }

  showError(message, field) {
    this.error.textContent = message;
    this.error.hidden = !message;
    this.reason?.removeAttribute("aria-invalid");
    if (field) {
      if (field === this.reason) field.setAttribute("aria-invalid", "true");
      field.focus();
    }
  }

  approveEdited() {
    const args = this.form.values();
    if (!args) return; // the form shows what is wrong next to the field
    const same = sameJson(args, this.approval.requested_arguments);
    this.decide({ approve: true, args: same ? undefined : args, edited: true, reason: this.changeWhy.value.trim() });
  }

  rejectWithReason() {
    const reason = this.reason.value.trim();
    if (!reason) {
      this.showError("Write a reason: the agent explains the rejection to the customer with it.", this.reason);
      return;
    }
    this.decide({ approve: false, reason, field: this.reason });
  }

  async decide({ approve, args, reason, field, edited = false }) {
    if (this.busy || this.approval.status !== "pending") return;
    if (!this.viewer || !this.viewer.can_decide) return;
    if (approve && fourEyes(this.approval, this.me).mine) {
      this.showError("You already count as one of the two people: a colleague must give the other approval.");
      return;
    }
    const confirmSeen = Boolean(this.seenBox && this.seenBox.checked);
    if (approve && this.approval.needs_second_look && !confirmSeen) {
      this.showError(SECOND_LOOK, this.seenBox);
      return;
    }
    if (approve && !edited && this.approval.large_refund && !this.viewer.can_approve_large_refunds) {
      this.toggleForm("edit");
      this.form.showError("amount", `Refunds above ${money(this.viewer.large_refund_threshold)} need a support lead to approve. Lower the amount, or ask a lead.`);
      return;
    }
    const rejection = approve ? this.approval.earlier_decisions?.rejection : null;
    if (rejection && !(await confirmOverRejection(rejection))) return;
    this.busy = true;
    this.el.setAttribute("aria-busy", "true");
    for (const button of this.el.querySelectorAll("button")) button.disabled = true;
    let decided = null;
    try {
      const body = approve ? { ...(args === undefined ? {} : { arguments: args }), ...(confirmSeen ? { confirm_seen: true } : {}),
        ...(rejection ? { confirm_over_rejection: true } : {}), ...(reason ? { reason } : {}) } : { reason };
      const { approval } = await staffApi.decide(this.approval.id, approve ? "approve" : "reject", body);
      decided = approval;
    } catch (error) {
      this.busy = false;
      this.el.removeAttribute("aria-busy");
      for (const button of this.el.querySelectorAll("button")) button.disabled = false;
      if (error instanceof ApiError && error.code === "needs_second_look") {
        // The customer wrote meanwhile: show it (the answer carries the card as it is now) and ask for the tick.
        this.seenThrough = 0;
        if (!error.approval || !this.store.upsert(error.approval)) this.render();
        this.showError(SECOND_LOOK, this.seenBox);
        return;
      }
      if (error instanceof ApiError && error.code === "earlier_rejection") {
        // Rejected on the order meanwhile: the card shows it now, and Approve asks first.
        if (!error.body?.approval || !this.store.upsert(error.body.approval)) this.render();
        this.showError(error.message);
        return;
      }
      if (error instanceof ApiError && error.status === 409) {
        this.notice = error.message || ALREADY_DECIDED; // "Sam Lee already approved this at 14:02 UTC."
        this.openForm = null;
        if (!(error instanceof ApiError && error.body && error.body.approval && this.store.upsert(error.body.approval))) {
          await this.store.refresh(); // brings the other decision (unless an event brought it already)
        }
        this.render();
        announce(this.notice);
        return;
      }
      if (edited && this.form.showServerError(error.status, error.message)) return;
      this.showError(error.message, field);
      return;
    }
    this.busy = false;
    this.openForm = null;
    this.el.removeAttribute("aria-busy");
    const words = decided.status === "pending" ? "Approved, 1 of 2: a second person must approve it before it runs"
      : decided.status === "approved" && decided.executed_arguments && this.isRefund
        ? `Approved: refund of ${money(decided.executed_arguments.amount)}` : `${label(decided.status)}: ${decided.context?.summary || decided.tool}`;
    if (!this.store.upsert(decided)) this.update(decided);
    if (this.afterDecision) this.afterDecision(this, words);
    else {
      announce(words);
      this.titleEl.focus();
    }
  }
}
