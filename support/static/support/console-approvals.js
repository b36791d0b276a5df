// Approval cards (approve / edit arguments then approve / reject with a reason) and the queue built of them.
// The same card serves the queue page, the side panel of the list and the conversation page. A card offers
// only what its viewer may decide (the API refuses the rest anyway), and one whose customer wrote after the
// request shows those messages and asks for a tick before approving (a "cancel" must not go unseen).

import { ApiError, staffApi } from "./console-api.js";
import { customers, onCustomers, wantCustomers } from "./console-store.js";
import {
  announce, badge, clear, fill, conversationUrl, h, label, prettyJson, shortId, timeEl, uniqueId,
} from "./console-dom.js";

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

/** A refused decision: the status, the API's code (e.g. needs_second_look) and the card as it is now. */
class DecisionError extends ApiError {
  constructor(status, message, code, approval) {
    super(status, message);
    this.code = code;
    this.approval = approval;
  }
}

function csrfToken() {
  const pair = document.cookie.split(";").map((part) => part.trim()).find((part) => part.startsWith("csrftoken="));
  return pair ? decodeURIComponent(pair.slice("csrftoken=".length)) : "";
}

// The decisions are posted here rather than through staffApi: a refusal's code and card matter to the card.
async function postDecision(approvalId, verb, body) {
  let response;
  try {
    response = await fetch(`/api/staff/approvals/${encodeURIComponent(approvalId)}/${verb}`, {
      method: "POST", credentials: "same-origin",
      headers: { Accept: "application/json", "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
      body: JSON.stringify(body),
    });
  } catch {
    throw new DecisionError(0, "The server could not be reached. Check the connection and try again.");
  }
  let data = null;
  try {
    data = await response.json();
  } catch {
    data = null;
  }
  if (!response.ok) {
    throw new DecisionError(response.status, (data && data.error) || `The server answered ${response.status}.`,
      data && data.code, data && data.approval);
  }
  return data;
}

function lastSeq(messages) {
  return messages.reduce((max, m) => Math.max(max, m.seq), 0);
}

function sameJson(a, b) {
  return JSON.stringify(a) === JSON.stringify(b);
}

export class ApprovalCard {
  constructor(approval, { store, showConversation = true, heading = "h3" }) {
    this.store = store;
    this.heading = heading;
    this.showConversation = showConversation;
    this.approval = approval;
    this.busy = false;
    this.notice = "";
    this.el = h("article", { class: "approval-card", "data-testid": "approval-card", "data-approval": approval.id });
    this.render();
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
    const hadFocus = this.el.contains(document.activeElement);
    const focusedTestid = hadFocus ? document.activeElement.dataset.testid : null;
    // A live update (the customer wrote) must not wipe what this person was typing.
    const typed = { args: this.textarea?.value, reason: this.reason?.value };
    this.viewer = knownViewer(() => this.render());
    this.seenBox = null;
    const titleId = uniqueId("approval-title");
    this.el.dataset.status = a.status;
    this.el.className = `approval-card is-${a.status}`;
    this.el.setAttribute("aria-labelledby", titleId);
    const conversationLink = this.showConversation
      ? h("a", { href: conversationUrl(a.conversation), "data-testid": "approval-conversation-link", class: "approval-conv" },
        customers.get(a.conversation) || `Conversation ${shortId(a.conversation)}`)
      : null;
    fill(this.el,
      h("header", { class: "approval-head" },
        h(this.heading, { id: titleId, tabindex: "-1", class: "approval-title" },
          h("code", { "data-testid": "approval-tool" }, a.tool)),
        badge("approval", a.status, "approval-status"),
        h("span", { class: "approval-meta" }, conversationLink,
          timeEl(a.requested_at, "approval-requested-at", "requested "))),
      this.notice ? h("p", { class: "notice", role: "status", "data-testid": "approval-notice" }, this.notice) : null,
      a.status === "pending" ? this.pendingBody() : this.decidedBody(),
    );
    this.titleEl = this.el.querySelector(".approval-title");
    if (a.status === "pending" && this.openForm) {
      if (typed.args !== undefined && this.openForm === "edit") this.textarea.value = typed.args;
      if (typed.reason !== undefined && this.openForm === "reject") this.reason.value = typed.reason;
    }
    if (hadFocus && !this.el.contains(document.activeElement)) {
      const again = focusedTestid && this.el.querySelector(`[data-testid="${focusedTestid}"]`);
      (again || this.titleEl).focus();
    }
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
        h("div", { class: "msg-head" }, h("span", { class: "msg-author" }, "Customer"), timeEl(m.created_at, "approval-customer-message-time")),
        h("div", { class: "msg-text" }, m.text))));
    let confirm = null;
    if (pending && this.viewer && this.viewer.can_decide) {
      this.seenBox = h("input", { type: "checkbox", id: boxId, "data-testid": "confirm-seen",
        onchange: () => { this.seenThrough = this.seenBox.checked ? lastSeq(messages) : 0; this.showError(""); } });
      // Ticked only for the messages it was ticked for: a newer one asks again.
      this.seenBox.checked = (this.seenThrough || 0) >= lastSeq(messages);
      confirm = h("label", { for: boxId }, this.seenBox, " I have read what the customer wrote; approve anyway");
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
    const mayApprove = !a.large_refund || v.can_approve_large_refunds;
    const note = mayApprove ? null : h("p", { class: "hint", "data-testid": "approval-needs-lead" },
      `Refunds above ${v.large_refund_threshold} need a support lead to approve. You may lower the amount, or reject it.`);
    return [h("div", { class: "actions", role: "group", "aria-label": "Decide" }, mayApprove ? this.approveBtn : null, this.editBtn, this.rejectBtn), note];
  }

  pendingBody() {
    const a = this.approval;
    const editId = uniqueId("edit");
    const rejectId = uniqueId("reject");
    this.error = h("p", { class: "error", role: "alert", "data-testid": "approval-error", hidden: true });
    const args = h("div", { class: "args" },
      h("div", { class: "args-label" }, "Requested arguments"),
      h("pre", { class: "json", "data-testid": "approval-arguments" }, prettyJson(a.requested_arguments)));

    this.approveBtn = h("button", { type: "button", class: "btn btn-primary", "data-testid": "approve-button",
      onclick: () => this.decide({ approve: true }) }, "Approve");
    this.editBtn = h("button", { type: "button", class: "btn", "data-testid": "edit-button", "aria-expanded": "false",
      "aria-controls": editId, onclick: () => this.toggleForm("edit") }, "Edit arguments…");
    this.rejectBtn = h("button", { type: "button", class: "btn btn-danger-quiet", "data-testid": "reject-button",
      "aria-expanded": "false", "aria-controls": rejectId, onclick: () => this.toggleForm("reject") }, "Reject…");

    const textareaId = uniqueId("args");
    this.textarea = h("textarea", { id: textareaId, class: "json-input", "data-testid": "arguments-input",
      spellcheck: "false", autocomplete: "off", rows: String(Math.min(14, prettyJson(a.requested_arguments).split("\n").length + 1)),
      "aria-describedby": `${textareaId}-hint` });
    this.textarea.value = prettyJson(a.requested_arguments);
    this.editForm = h("form", { id: editId, class: "decide-form", hidden: true, novalidate: true,
      onsubmit: (e) => { e.preventDefault(); this.approveEdited(); } },
      h("label", { for: textareaId }, "Arguments to execute (JSON)"),
      this.textarea,
      h("p", { class: "hint", id: `${textareaId}-hint` }, "Checked against the tool's schema. Ctrl+Enter approves, Esc cancels."),
      h("div", { class: "actions" },
        h("button", { type: "submit", class: "btn btn-primary", "data-testid": "approve-edited-button" }, "Approve with these arguments"),
        h("button", { type: "button", class: "btn btn-quiet", "data-testid": "edit-cancel-button",
          onclick: () => this.toggleForm(null) }, "Cancel")));

    const reasonId = uniqueId("reason");
    this.reason = h("input", { id: reasonId, type: "text", class: "text-input", "data-testid": "reason-input",
      required: true, maxlength: "2000", autocomplete: "off", "aria-describedby": `${reasonId}-hint` });
    this.rejectForm = h("form", { id: rejectId, class: "decide-form", hidden: true, novalidate: true,
      onsubmit: (e) => { e.preventDefault(); this.rejectWithReason(); } },
      h("label", { for: reasonId }, "Reason (required)"),
      this.reason,
      h("p", { class: "hint", id: `${reasonId}-hint` }, "The agent passes it on to the customer."),
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
    const body = h("div", { class: "approval-body" }, args, this.secondLook(), this.actions(),
      this.viewer && this.viewer.can_decide ? [this.editForm, this.rejectForm] : null, this.error);
    if (this.openForm) this.toggleForm(this.openForm, { focus: false });
    return body;
  }

  decidedBody() {
    const a = this.approval;
    const ran = a.executed_arguments !== null && a.executed_arguments !== undefined;
    const edited = ran && !sameJson(a.executed_arguments, a.requested_arguments);
    let decision = label(a.status);
    if (a.status === "approved") decision = edited ? "Approved with edited arguments" : "Approved as requested";
    if (a.status === "expired") decision = "Expired: not run";
    const rows = [
      ["Decision", h("span", { "data-testid": "approval-decision", "data-status": a.status }, decision)],
      ["Decided by", h("span", { "data-testid": "approval-decided-by" }, a.decided_by || (a.status === "expired" ? "the system" : "—"))],
      ["When", timeEl(a.decided_at, "approval-decided-at")],
    ];
    if (a.reason) rows.push(["Reason", h("span", { class: "reason", "data-testid": "approval-reason" }, a.reason)]);
    const requested = h("div", { class: "args" },
      h("div", { class: "args-label" }, "Requested arguments"),
      h("pre", { class: "json", "data-testid": "approval-arguments" }, prettyJson(a.requested_arguments)));
    const args = edited
      ? h("div", { class: "args-compare" }, requested, h("div", { class: "args" },
        h("div", { class: "args-label" }, "Executed (edited by staff)"),
        h("pre", { class: "json is-edited", "data-testid": "approval-executed-arguments" }, prettyJson(a.executed_arguments))))
      : requested;
    return h("div", { class: "approval-body" },
      h("dl", { class: "decision" }, rows.map(([term, value]) => [h("dt", {}, term), h("dd", {}, value)])), args,
      this.secondLook());
  }

  toggleForm(which, { focus = true } = {}) {
    if (this.approval.status !== "pending" || !this.editForm) return;
    this.openForm = which;
    this.editForm.hidden = which !== "edit";
    this.rejectForm.hidden = which !== "reject";
    this.editBtn.setAttribute("aria-expanded", String(which === "edit"));
    this.rejectBtn.setAttribute("aria-expanded", String(which === "reject"));
    this.showError("");
    if (!focus) return;
    if (which === "edit") this.textarea.focus();
    else if (which === "reject") this.reason.focus();
    else this.editBtn.focus();
  }

  showError(message, field) {
    this.error.textContent = message;
    this.error.hidden = !message;
    for (const input of [this.textarea, this.reason]) input.removeAttribute("aria-invalid");
    if (field) {
      field.setAttribute("aria-invalid", "true");
      field.focus();
    }
  }

  approveEdited() {
    let args;
    try {
      args = JSON.parse(this.textarea.value);
    } catch (error) {
      this.showError(`That is not valid JSON: ${error.message}`, this.textarea);
      return;
    }
    if (args === null || typeof args !== "object" || Array.isArray(args)) {
      this.showError("The arguments must be a JSON object, like the requested ones.", this.textarea);
      return;
    }
    this.decide({ approve: true, args, field: this.textarea });
  }

  rejectWithReason() {
    const reason = this.reason.value.trim();
    if (!reason) {
      this.showError("Write a reason: the agent explains the rejection to the customer with it.", this.reason);
      return;
    }
    this.decide({ approve: false, reason, field: this.reason });
  }

  async decide({ approve, args, reason, field }) {
    if (this.busy || this.approval.status !== "pending") return;
    const confirmSeen = Boolean(this.seenBox && this.seenBox.checked);
    if (approve && this.approval.needs_second_look && !confirmSeen) {
      this.showError(SECOND_LOOK, this.seenBox);
      return;
    }
    this.busy = true;
    this.el.setAttribute("aria-busy", "true");
    for (const button of this.el.querySelectorAll("button")) button.disabled = true;
    let decided = null;
    try {
      const body = approve ? { ...(args === undefined ? {} : { arguments: args }), ...(confirmSeen ? { confirm_seen: true } : {}) }
        : { reason };
      const { approval } = await postDecision(this.approval.id, approve ? "approve" : "reject", body);
      decided = approval;
    } catch (error) {
      this.busy = false;
      this.el.removeAttribute("aria-busy");
      for (const button of this.el.querySelectorAll("button")) button.disabled = false;
      if (error instanceof DecisionError && error.code === "needs_second_look") {
        // The customer wrote meanwhile: show it (the answer carries the card as it is now) and ask for the tick.
        this.seenThrough = 0;
        if (!error.approval || !this.store.upsert(error.approval)) this.render();
        this.showError(SECOND_LOOK, this.seenBox);
        return;
      }
      if (error instanceof ApiError && error.status === 409) {
        this.notice = error.message || ALREADY_DECIDED; // "Sam Lee already approved this at 14:02 UTC."
        this.openForm = null;
        if (!(error instanceof DecisionError && error.approval && this.store.upsert(error.approval))) {
          await this.store.refresh(); // brings the other decision (unless an event brought it already)
        }
        this.render();
        announce(this.notice);
        return;
      }
      this.showError(error.message, field);
      return;
    }
    this.busy = false;
    this.openForm = null;
    this.el.removeAttribute("aria-busy");
    announce(`${label(decided.status)}: ${decided.tool}`);
    if (!this.store.upsert(decided)) this.update(decided);
    this.titleEl.focus();
  }
}

/**
 * A live list of approval cards. mode "pending": the store's pending approvals, oldest first; one decided
 * while on screen stays, showing the decision. "decided" / "all": fetched, then kept live from the store.
 */
export class ApprovalList {
  constructor(container, { store, mode = "pending", conversation = null, showConversation = true, empty, heading = "h3" }) {
    this.heading = heading;
    this.container = container;
    this.store = store;
    this.mode = mode;
    this.conversation = conversation;
    this.showConversation = showConversation;
    this.empty = empty;
    this.cards = new Map();
    store.subscribe(() => this.sync());
    if (showConversation) onCustomers(() => this.relabel());
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
    // Pending first, oldest first (a queue); then decisions, newest first.
    const rank = (x) => (x.status === "pending" ? 0 : 1);
    if (rank(a) !== rank(b)) return rank(a) - rank(b);
    if (a.status === "pending") return a.requested_at.localeCompare(b.requested_at);
    return (b.decided_at || "").localeCompare(a.decided_at || "");
  }

  sync() {
    const list = [...this.store.items.values()].filter((a) => this.wanted(a));
    if (!this.conversation && this.mode === "pending") {
      list.sort((a, b) => a.requested_at.localeCompare(b.requested_at)); // decided ones keep their place
    } else {
      list.sort((a, b) => this.order(a, b));
    }
    let previous = null;
    for (const approval of list) {
      let card = this.cards.get(approval.id);
      if (!card) {
        card = new ApprovalCard(approval, { store: this.store, showConversation: this.showConversation, heading: this.heading });
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
  }

  relabel() {
    for (const card of this.cards.values()) {
      const link = card.el.querySelector("[data-testid=approval-conversation-link]");
      const customer = customers.get(card.approval.conversation);
      if (link && customer) link.textContent = customer;
    }
  }
}
