// The context panel beside a conversation: the customer, their orders (items, money, parcels with the latest
// scans, refunds) with what a person may do on each (refund, message the seller), their other conversations
// and refunds. Read from GET /api/staff/conversations/<id>/context and read again when something changed it
// (a staff action, the agent's refund, a reconnect). The server checks every rule; the forms only offer
// what it would allow.

import { ApiError, coalesced, deskApi } from "./console-api.js";
import { announce, confirmDialog, conversationUrl, excerpt, fill, h, timeEl } from "./console-dom.js";
import { fmtDate, label, money } from "./console-format.js";

function newKey() {
  return window.crypto?.randomUUID ? window.crypto.randomUUID() : `k${Date.now()}${Math.random().toString(36).slice(2)}`;
}

export class ContextPanel {
  constructor({ body, meta, id, mentioned, onLoad }) {
    this.onLoad = onLoad || (() => {});
    this.body = body;
    this.meta = meta;
    this.id = id;
    this.mentioned = mentioned || (() => new Set());
    this.data = null;
    this.drawn = null; // the read last drawn (JSON); null when what is drawn is out of date
    this.open = new Set(); // orders a person opened or closed keep that state across reloads
    this.closed = new Set();
    this.forms = new Map(); // order number -> the form open in its card ({kind, key, values})
    this.waiting = new Map(); // order number -> a refund of this person's waiting for a second approval (four eyes)
    /** Read the context again (one read at a time, one more if asked meanwhile). */
    this.load = coalesced(async () => {
      try {
        this.data = await deskApi.context(this.id);
        // Drawn again only when something in it changed: a redraw for nothing would take away text a person
        // selected in it (a tracking number being copied) and the very element they are about to click.
        const read = JSON.stringify(this.data);
        if (read !== this.drawn) {
          this.drawn = read;
          this.render();
        }
        this.onLoad(this.data);
      } catch (error) {
        if (!this.data) fill(this.body, h("p", { class: "error", role: "alert" }, `The customer's details could not be read: ${error.message}`));
      }
    });
  }

  render() {
    const d = this.data;
    if (!d) return;
    // Keep what a person is typing: a form with text in it is not redrawn away.
    const active = document.activeElement && this.body.contains(document.activeElement) ? document.activeElement : null;
    const focused = active?.id || null;
    // And where the caret is in it: a redraw between two keys must not send the next one to the field's start.
    const caret = typeof active?.selectionStart === "number"
      ? [active.selectionStart, active.selectionEnd, active.selectionDirection] : null;
    const c = d.customer;
    this.meta.textContent = `${c.orders} order${c.orders === 1 ? "" : "s"} · ${c.conversations} conversation${c.conversations === 1 ? "" : "s"}`;
    const mentioned = this.mentioned();
    // The order being acted on first (the scope, then the ones named in the conversation, the latest named
    // first): open, at the top of the column; the customer's other orders below it, closed.
    const named = [d.scope, ...[...mentioned].reverse()].filter(Boolean);
    const focus = d.orders.filter((o) => named.includes(o.number)).sort((a, b) => named.indexOf(a.number) - named.indexOf(b.number));
    const others = d.orders.filter((o) => !focus.includes(o));
    fill(this.body,
      h("div", { class: "customer-card", "data-testid": "context-customer" },
        h("p", { class: "customer-name" }, h("strong", { "data-testid": "context-customer-name" }, c.name),
          " · ", h("a", { href: `mailto:${c.email}`, class: "customer-email", "data-testid": "context-customer-email" }, c.email)),
        h("p", { class: "muted" }, `Customer since ${fmtDate(c.since)}`)),
      c.undeliverable ? h("p", { class: "scope-note", role: "status", "data-testid": "context-undeliverable" },
        `E-mail to ${c.email} bounces, so the desk sends none there (${c.undeliverable.reason}). Reach the customer in the widget or ask for another address.`) : null,
      d.unverified ? h("p", { class: "scope-note", "data-testid": "context-unverified" },
        "This customer wrote by e-mail and has not given an order number of theirs yet: the agent sees none of their orders until they do, and there are no order actions here. You see all their orders.") : null,
      d.scope ? h("p", { class: "scope-note", "data-testid": "context-scope" },
        `The customer signed in with order ${d.scope} only: the agent sees that order alone, and actions here act on it alone. You see all their orders.`) : null,
      d.shop_unavailable ? h("p", { class: "scope-note", role: "status", "data-testid": "context-shop-away" }, d.shop_unavailable) : null,
      focus.length ? [h("h3", { class: "context-h" }, focus.length === 1 ? "The order in this conversation" : "Orders in this conversation"),
        // Only the first (the one acted on now) opens by itself; a person opens the others.
        h("ul", { class: "order-list", "data-testid": "context-focus-orders" }, focus.map((o, i) => h("li", {},
          this.orderCard(o, i === 0 ? new Set([o.number]) : new Set()))))] : null,
      others.length ? [h("h3", { class: "context-h" }, focus.length ? "Other orders" : "Orders"),
        h("ul", { class: "order-list", "data-testid": "context-orders" }, others.map((o) => h("li", {}, this.orderCard(o, mentioned))))] : null,
      h("h3", { class: "context-h" }, "Refunds"),
      d.refunds.length
        ? h("ul", { class: "plain-list", "data-testid": "context-refunds" }, d.refunds.map((r) => h("li", {},
          h("strong", {}, money(r.amount)), ` on ${r.order_id} by ${r.by} · `, timeEl(r.created_at, "context-refund-time"),
          r.reason ? h("span", { class: "sub" }, ` — ${excerpt(r.reason, 90)}`) : null)))
        : h("p", { class: "muted", "data-testid": "context-refunds" }, "No refunds yet."),
      h("h3", { class: "context-h" }, "Other conversations"),
      d.conversations.length
        ? h("ul", { class: "plain-list", "data-testid": "context-conversations" }, d.conversations.map((x) => h("li", {},
          h("a", { href: conversationUrl(x.id), "data-testid": "context-conversation-link" },
            x.first_message ? `“${excerpt(x.first_message, 60)}”` : "(no message)"),
          h("span", { class: "sub", "data-testid": "context-conversation-status", "data-status": x.inbox_status || x.status },
            ` · ${x.status_label || label(x.status)} · `), timeEl(x.created_at, "context-conversation-time"))))
        : h("p", { class: "muted", "data-testid": "context-conversations" }, "No other conversations."),
    );
    const again = focused ? document.getElementById(focused) : null;
    again?.focus();
    if (again && caret && typeof again.setSelectionRange === "function") again.setSelectionRange(...caret);
  }

  orderCard(o, mentioned) {
    const isOpen = this.open.has(o.number) || this.forms.has(o.number)
      || (!this.closed.has(o.number) && (mentioned.has(o.number) || (this.data.scope === o.number)));
    const seller = o.seller.is_sundry ? "" : ` · ${o.seller.name}`; // the shop's own orders name no seller
    const details = h("details", { class: `order-card${o.in_scope ? "" : " is-out-of-scope"}`, "data-testid": "context-order",
      "data-order": o.number, open: isOpen || null },
      h("summary", {}, h("strong", {}, o.number), ` · ${label(o.status)} · ${money(o.total, o.currency)}${seller}`),
      h("dl", { class: "facts money" },
        h("dt", {}, "Total"), h("dd", { "data-testid": "order-total" }, money(o.total, o.currency)),
        h("dt", {}, "Refunded"), h("dd", { "data-testid": "order-refunded" }, money(o.refunded, o.currency)),
        h("dt", {}, "Refundable"), h("dd", { "data-testid": "context-refundable" }, h("strong", {}, money(o.refundable, o.currency))),
        h("dt", {}, "Placed"), h("dd", {}, timeEl(o.placed_at, "order-placed"))),
      h("ul", { class: "items" }, o.items.map((i) => h("li", {}, `${i.qty} × ${i.title}`, h("span", { class: "sub" }, ` ${money(i.line_total, o.currency)}`))),
        Number(o.shipping_fee) ? h("li", { class: "sub" }, `Shipping ${money(o.shipping_fee, o.currency)}`) : null),
      o.note ? h("p", { class: "order-note" }, `Note: ${o.note}`) : null,
      o.parcels.map((p) => h("div", { class: "parcel", "data-testid": "context-parcel" },
        h("p", {}, h("strong", {}, p.carrier), ` ${p.tracking} · ${label(p.status)}`),
        p.scans.length ? h("ol", { class: "scans", "aria-label": `Latest scans of ${p.tracking}` }, p.scans.map((sc) => h("li", {},
          timeEl(sc.at, "scan-time"), ` ${sc.detail || label(sc.event)}`, sc.location ? h("span", { class: "sub" }, ` · ${sc.location}`) : null))) : null)),
      o.refunds.length ? h("p", { class: "sub" }, `Refunds: ${o.refunds.map((r) => `${r.amount} by ${r.by}`).join(", ")}`) : null,
      this.actions(o));
    details.addEventListener("toggle", () => {
      if (details.open) { this.open.add(o.number); this.closed.delete(o.number); } else { this.closed.add(o.number); this.open.delete(o.number); }
    });
    return details;
  }

  actions(o) {
    if (!o.in_scope) return h("p", { class: "muted" }, "Outside this conversation's order: no actions here.");
    const form = this.forms.get(o.number);
    if (form?.kind === "refund") return this.refundForm(o, form);
    if (form?.kind === "seller") return this.sellerForm(o, form);
    const canRefund = o.refund_limit !== null && Number(o.refundable) > 0;
    const waiting = this.waiting.get(o.number);
    return h("div", { class: "order-actions" },
      waiting ? h("p", { class: "notice", role: "status", "data-testid": "refund-waiting" }, waiting,
        h("a", { href: "/console/approvals/" }, "the approvals queue"), ".") : null,
      canRefund ? h("button", { type: "button", class: "btn", "data-testid": "refund-open", onclick: () => this.openForm(o, "refund") },
        "Refund…") : null,
      o.seller.can_message ? h("button", { type: "button", class: "btn", "data-testid": "seller-open", onclick: () => this.openForm(o, "seller") },
        "Message the seller…") : null,
      !canRefund && Number(o.refundable) > 0 && o.refund_limit === null
        ? h("span", { class: "sub" }, "Refunds need the permission to decide approvals.") : null,
      Number(o.refundable) <= 0 ? h("span", { class: "sub" }, "Fully refunded.") : null);
  }

  openForm(o, kind) {
    this.prefill(o.number, kind, {});
  }

  /** Opens an order's refund ("refund") or seller ("seller") form filled with `values` ({amount, reason} or
   * {message}: a suggestion of the copilot's) and puts the focus in it. Nothing is sent: the form's own checks,
   * confirmation and approvals apply when the person submits it. The words why not, or null when it opened. */
  prefill(number, kind, values) {
    const o = this.data?.orders.find((x) => x.number === number);
    if (!o) return `Order ${number} is not one of this customer's orders.`;
    if (!o.in_scope) return `Order ${number} is outside this conversation's order: no actions on it here.`;
    if (kind === "refund" && (o.refund_limit === null || Number(o.refundable) <= 0)) {
      return Number(o.refundable) <= 0 ? `Order ${number} is fully refunded.` : "Refunds need the permission to decide approvals.";
    }
    if (kind === "seller" && !o.seller.can_message) return `The seller of ${number} cannot be messaged from the desk.`;
    this.open.add(number);
    this.closed.delete(number);
    this.forms.set(number, { kind, key: newKey(), values });
    this.render();
    const first = this.body.querySelector(`[data-order="${number}"] form input, [data-order="${number}"] form textarea`);
    first?.scrollIntoView({ block: "nearest" });
    first?.focus();
    return null;
  }

  closeForm(o) {
    this.forms.delete(o.number);
    this.render();
    this.body.querySelector(`[data-order="${o.number}"] .order-actions button`)?.focus();
  }

  refundForm(o, form) {
    // Stable ids: a redraw (the context read again while typing) gives the focus back to the same field.
    const amountId = `refund-amount-${o.number}`;
    const reasonId = `refund-reason-${o.number}`;
    const hintId = `refund-hint-${o.number}`;
    const limit = o.refund_limit;
    const error = h("p", { class: "error", role: "alert", "data-testid": "refund-error", hidden: true });
    const amount = h("input", { id: amountId, type: "text", inputmode: "decimal", autocomplete: "off", required: true,
      "data-testid": "refund-amount", "aria-describedby": hintId, value: form.values.amount ?? limit });
    const reason = h("input", { id: reasonId, type: "text", required: true, maxlength: "500", "data-testid": "refund-reason",
      value: form.values.reason ?? "" });
    const submit = h("button", { type: "submit", class: "btn btn-primary", "data-testid": "refund-submit" });
    const sync = () => {
      form.values = { amount: amount.value, reason: reason.value };
      submit.textContent = /^\d+(\.\d{1,2})?$/.test(amount.value.trim()) ? `Refund ${money(amount.value, o.currency)}` : "Refund";
    };
    amount.addEventListener("input", sync);
    reason.addEventListener("input", sync);
    sync();
    const el = h("form", { class: "action-form", "data-testid": "refund-form", novalidate: true },
      h("label", { for: amountId }, `Amount (${o.currency})`), amount,
      h("p", { class: "hint", id: hintId }, `Up to ${money(limit, o.currency)}: refundable ${money(o.refundable, o.currency)}`
        + (Number(limit) < Number(o.refundable) ? "; more needs a support lead." : ".")),
      h("label", { for: reasonId }, "Reason (kept on record)"), reason,
      h("div", { class: "actions" }, submit,
        h("button", { type: "button", class: "btn", "data-testid": "refund-cancel", onclick: () => this.closeForm(o) }, "Cancel")),
      error);
    el.addEventListener("submit", async (e) => {
      e.preventDefault();
      const value = amount.value.trim();
      if (!/^\d{1,7}(\.\d{1,2})?$/.test(value) || Number(value) <= 0) return this.fail(error, amount, `Write the amount like 24.99, up to ${limit}.`);
      if (Number(value) > Number(limit)) return this.fail(error, amount, `The most you may refund here is ${money(limit, o.currency)}.`);
      if (!reason.value.trim()) return this.fail(error, reason, "Write why: it is kept with the refund.");
      if (!(await this.confirmRefund(o, value))) return undefined; // a large refund is said in words first; cancel sends nothing
      submit.disabled = true;
      try {
        const made = await deskApi.refund(this.id, { order_id: o.number, amount: value, reason: reason.value.trim(), key: form.key });
        if (made.code === "needs_second_approver") { // four eyes: a colleague approves it in the approvals queue
          this.waiting.set(o.number, `Your refund of ${money(value, o.currency)} waits for a colleague: refunds of this size need a second person's approval, in `);
          announce(`Saved: the refund of ${value} ${o.currency} on ${o.number} waits for a second person's approval.`);
        } else {
          this.waiting.delete(o.number);
          announce(`Refunded ${value} ${o.currency} on ${o.number}. The customer has been told.`);
        }
        this.forms.delete(o.number);
        this.drawn = null; // the form goes, even if the read is as before
        await this.load();
        this.body.querySelector(`[data-order="${o.number}"] summary`)?.focus();
      } catch (err) {
        form.key = newKey(); // refused: a corrected request is a new one
        submit.disabled = false;
        this.fail(error, amount, err instanceof ApiError ? err.message : String(err));
      }
    });
    return el;
  }

  /** Above STAFF_REFUND_CONFIRM_ABOVE: "Refund 300.00 EUR on SU-41533 to Maya Okafor?" in a dialog; true when no
   * dialog is needed or the person confirms. Above SECOND_APPROVAL_ABOVE it says the refund waits for a colleague. */
  confirmRefund(o, value) {
    const { confirm_refund_above: above, second_approval_above: fourEyes } = this.data.viewer;
    if (!above || Number(value) <= Number(above)) return Promise.resolve(true);
    const waits = fourEyes && Number(value) > Number(fourEyes);
    return confirmDialog({
      title: `Refund ${money(value, o.currency)} on ${o.number} to ${this.data.customer.name}?`,
      text: waits
        ? ["It will wait for a colleague's approval: refunds of this size need a second person. Nothing is paid until then.",
          "The reason is kept on record."]
        : ["The money goes back to the customer now, and they are told. The reason is kept on record."],
      confirm: waits ? `Ask for ${money(value, o.currency)}` : `Refund ${money(value, o.currency)}`,
      testid: "refund-confirm",
    });
  }

  sellerForm(o, form) {
    const textId = `seller-text-${o.number}`;
    const error = h("p", { class: "error", role: "alert", "data-testid": "seller-error", hidden: true });
    const text = h("textarea", { id: textId, rows: "4", maxlength: "2000", "data-testid": "seller-text" });
    text.value = form.values.message ?? `About order ${o.number}: `;
    text.addEventListener("input", () => { form.values = { message: text.value }; });
    const submit = h("button", { type: "submit", class: "btn btn-primary", "data-testid": "seller-submit" }, `Send to ${o.seller.name}`);
    const el = h("form", { class: "action-form", "data-testid": "seller-form", novalidate: true },
      h("label", { for: textId }, `Message to ${o.seller.name}`), text,
      h("p", { class: "hint" }, "The seller reads exactly this. Leave out the customer's contact details unless the seller needs them."),
      h("div", { class: "actions" }, submit,
        h("button", { type: "button", class: "btn", "data-testid": "seller-cancel", onclick: () => this.closeForm(o) }, "Cancel")),
      error);
    el.addEventListener("submit", async (e) => {
      e.preventDefault();
      if (!text.value.trim()) return this.fail(error, text, "Write the message first.");
      submit.disabled = true;
      try {
        const { action } = await deskApi.messageSeller(this.id, { order_id: o.number, message: text.value.trim(), key: form.key });
        announce(action.result?.status === "already_sent" ? "This message was already sent to the seller." : `Sent to ${o.seller.name}.`);
        this.forms.delete(o.number);
        this.drawn = null; // the form goes, even if the read is as before
        await this.load();
      } catch (err) {
        form.key = newKey();
        submit.disabled = false;
        this.fail(error, text, err.message);
      }
    });
    return el;
  }

  fail(error, field, message) {
    error.textContent = message;
    error.hidden = false;
    field.setAttribute("aria-invalid", "true");
    field.focus();
  }
}
