// The form of an approval card's arguments: one field per argument (an amount field with its limits for a
// refund, text fields, the order fixed), checked in the browser in plain words before anything is sent.
// The server checks everything again and stays the judge: its refusals are shown next to the field they
// name (showServerError).

import { h, uniqueId } from "./console-dom.js";
import { centsToDecimal, money } from "./console-format.js";

const AMOUNT = /^\d{1,7}(\.\d{1,2})?$/;

/** "40" / "40,5" / " 40.50 " -> "40.50"; null when it is not an amount in euros and cents. */
export function normaliseAmount(text) {
  const raw = String(text ?? "").trim().replace(",", ".");
  if (!AMOUNT.test(raw)) return null;
  const [units, cents = ""] = raw.split(".");
  return `${String(Number(units))}.${cents.padEnd(2, "0")}`;
}

export function cents(amount) {
  const normal = normaliseAmount(amount);
  if (normal === null) return NaN;
  const [units, c] = normal.split(".");
  return Number(units) * 100 + Number(c);
}

/**
 * What the amount may be for this viewer: {min, max, why} in cents, `why` naming the limit that binds
 * ("refundable", "ceiling" or "lead") for the hint and the error.
 */
export function amountLimits(limits, viewer) {
  if (!limits) return null;
  const min = cents(limits.min) || 1;
  let max = cents(limits.max);
  let why = limits.max_because || "ceiling";
  const threshold = cents(limits.large_refund_threshold);
  if (viewer && !viewer.can_approve_large_refunds && Number.isFinite(threshold) && threshold < max) {
    max = threshold;
    why = "lead";
  }
  return { min, max, why, limits };
}

/** The money of an amount in cents: 6400 -> "64.00 EUR". */
function centsMoney(centsValue) {
  return money(centsToDecimal(centsValue));
}

function limitHint(bounds, order) {
  const low = centsToDecimal(bounds.min);
  const top = centsMoney(bounds.max);
  if (bounds.why === "refundable") return `Between ${low} and ${top}: what is left to refund on ${order || "the order"}.`;
  if (bounds.why === "lead") {
    return `Between ${low} and ${top}. Above ${top} a support lead approves (the order has ${money(bounds.limits.refundable ?? "?")} left).`;
  }
  return `Between ${low} and ${top}: the most one refund may be.`;
}

/** The plain-words problem with an amount, or "" when it may be approved by this viewer. */
export function amountProblem(text, bounds, order) {
  if (!String(text ?? "").trim()) return "Enter the amount to refund, like 40.00.";
  const value = cents(text);
  if (!Number.isFinite(value)) return "Write the amount in euros with at most two decimals, like 40.00.";
  if (!bounds) return "";
  if (value < bounds.min) return `The amount must be at least ${centsMoney(bounds.min)}.`;
  if (value > bounds.max) {
    if (bounds.why === "refundable") return `Only ${centsMoney(bounds.max)} is left to refund on ${order || "this order"}.`;
    if (bounds.why === "lead") return `Refunds above ${centsMoney(bounds.max)} need a support lead to approve. Lower the amount, or ask a lead.`;
    return `One refund may be at most ${centsMoney(bounds.max)}.`;
  }
  return "";
}

/**
 * The fields of one card's edit form. `values()` -> the arguments to approve, or null after showing what
 * is wrong next to the first bad field (focused).
 */
export class ArgumentsForm {
  constructor({ approval, viewer, onAmount }) {
    this.approval = approval;
    this.requested = approval.requested_arguments || {};
    const context = approval.context || {};
    this.order = (context.order && context.order.number) || this.requested.order_id || "";
    this.bounds = amountLimits(context.amount, viewer);
    this.onAmount = onAmount;
    this.inputs = new Map(); // name -> {field, input, error}
    const fields = context.fields && context.fields.length ? context.fields
      : Object.keys(this.requested).map((name) => ({ name, label: name, kind: "json" }));
    // A refund's reason is asked of the person only when they change the amount: then it says why.
    this.reasonOnChange = approval.tool === "issue_refund" && fields.some((f) => f.kind === "amount")
      && fields.some((f) => f.name === "reason");
    this.el = h("div", { class: "arg-fields" }, fields.map((field) => this.field(field)));
    this.syncReason();
  }

  /** The refund's amount differs from the one asked (as typed, valid or not). */
  get amountChanged() {
    const input = this.amountInput;
    if (!input) return false;
    const typed = normaliseAmount(input.value);
    return typed === null ? input.value.trim() !== String(this.requested.amount ?? "")
      : typed !== normaliseAmount(this.requested.amount);
  }

  /** Show the reason for a new amount while the amount differs from the one asked. */
  syncReason() {
    const entry = this.reasonOnChange && this.inputs.get("reason");
    if (!entry) return;
    entry.wrap.hidden = !this.amountChanged;
    if (entry.wrap.hidden) this.clearError("reason");
  }

  field(field) {
    const value = this.requested[field.name];
    if (field.kind === "fixed") {
      return h("p", { class: "arg-fixed", "data-testid": `field-${field.name}` },
        h("span", { class: "arg-label" }, `${field.label}: `), h("strong", {}, String(value ?? "")));
    }
    const id = uniqueId(`arg-${field.name}`);
    const hintId = `${id}-hint`;
    const errorId = `${id}-error`;
    let hint = field.help || "";
    let label = field.label;
    const changeReason = this.reasonOnChange && field.name === "reason";
    if (changeReason) {
      label = "Why a different amount?";
      hint = "Kept with the refund in place of the agent's reason.";
    }
    let input;
    if (field.kind === "amount") {
      input = h("input", { id, type: "text", inputmode: "decimal", autocomplete: "off", class: "text-input amount-input",
        "data-testid": "amount-input", "aria-describedby": `${hintId} ${errorId}`, size: "10" });
      input.value = normaliseAmount(value) || String(value ?? "");
      if (this.bounds) {
        hint = limitHint(this.bounds, this.order);
        input.dataset.min = centsToDecimal(this.bounds.min);
        input.dataset.max = centsToDecimal(this.bounds.max);
      }
      input.addEventListener("input", () => {
        this.clearError(field.name);
        this.onAmount?.(this.amountToApprove());
        this.syncReason();
      });
    } else if (field.kind === "textarea" || field.kind === "json") {
      input = h("textarea", { id, rows: field.kind === "json" ? "4" : "4", class: field.kind === "json" ? "json-input" : "text-input",
        "data-testid": `field-input-${field.name}`, "aria-describedby": `${hintId} ${errorId}`,
        maxlength: field.max_length ? String(field.max_length) : null, spellcheck: field.kind === "json" ? "false" : null });
      input.value = field.kind === "json" ? JSON.stringify(value ?? null, null, 2) : changeReason ? "" : String(value ?? "");
      if (field.kind === "json") hint = hint || "Written as JSON, like the requested value.";
    } else {
      input = h("input", { id, type: "text", autocomplete: "off", class: "text-input", "data-testid": `field-input-${field.name}`,
        "aria-describedby": `${hintId} ${errorId}`, maxlength: field.max_length ? String(field.max_length) : null });
      input.value = String(value ?? "");
    }
    if (field.kind !== "amount") input.addEventListener("input", () => this.clearError(field.name));
    const error = h("p", { id: errorId, class: "field-error", "data-testid": `field-error-${field.name}`, hidden: true });
    const wrap = h("div", { class: `arg-field is-${field.kind}`, "data-testid": `field-${field.name}` },
      h("label", { for: id }, label, field.required || changeReason ? null : h("span", { class: "muted" }, " (optional)")),
      input,
      hint ? h("p", { class: "hint", id: hintId }, hint) : h("span", { id: hintId, hidden: true }),
      error);
    this.inputs.set(field.name, { field, input, error, wrap });
    return wrap;
  }

  /** The amount as it would be approved ("40.00"), or null while it is not one this viewer may approve. */
  amountToApprove() {
    const input = this.amountInput;
    if (!input || amountProblem(input.value, this.bounds, this.order)) return null;
    return normaliseAmount(input.value);
  }

  get amountInput() {
    return this.inputs.get("amount")?.input || null;
  }

  focusFirst() {
    const first = this.amountInput || [...this.inputs.values()][0]?.input;
    first?.focus();
    if (first && first.select) first.select();
  }

  /** The typed values kept across a re-render (a live update must not wipe what a person typed). */
  typed() {
    return new Map([...this.inputs].map(([name, { input }]) => [name, input.value]));
  }

  restore(typed) {
    if (!typed) return;
    for (const [name, value] of typed) {
      const entry = this.inputs.get(name);
      if (entry) entry.input.value = value;
    }
    if (this.amountInput) this.onAmount?.(this.amountToApprove());
    this.syncReason();
  }

  values() {
    const args = { ...this.requested };
    let firstBad = null;
    for (const [name, { field, input, wrap }] of this.inputs) {
      let problem = "";
      if (this.reasonOnChange && name === "reason" && wrap.hidden) {
        continue; // the amount asked: the agent's reason stands
      }
      if (this.reasonOnChange && name === "reason" && !input.value.trim()) {
        problem = "Say why the amount is different: it is kept with the refund.";
      } else if (field.kind === "amount") {
        problem = amountProblem(input.value, this.bounds, this.order);
        if (!problem) args[name] = normaliseAmount(input.value);
      } else if (field.kind === "json") {
        try {
          args[name] = JSON.parse(input.value);
        } catch {
          problem = "This is not valid JSON; keep the form of the requested value.";
        }
      } else {
        const text = input.value.trim();
        if (field.required && !text) problem = `Write the ${field.label.toLowerCase()}; it cannot be empty.`;
        else if (field.max_length && text.length > field.max_length) problem = `At most ${field.max_length} characters (now ${text.length}).`;
        args[name] = text;
      }
      if (problem) {
        this.showError(name, problem, { focus: !firstBad });
        firstBad = firstBad || name;
      }
    }
    return firstBad ? null : args;
  }

  showError(name, message, { focus = true } = {}) {
    const entry = this.inputs.get(name);
    if (!entry) return false;
    entry.error.textContent = message;
    entry.error.hidden = false;
    entry.input.setAttribute("aria-invalid", "true");
    if (focus) entry.input.focus();
    return true;
  }

  clearError(name) {
    const entry = this.inputs.get(name);
    if (!entry) return;
    entry.error.hidden = true;
    entry.error.textContent = "";
    entry.input.removeAttribute("aria-invalid");
  }

  /**
   * The server's refusal next to the field it names ("invalid arguments for issue_refund at amount: …",
   * a 403 about large refunds); false when it names none, for the card's own error line.
   */
  showServerError(status, message) {
    const text = String(message || "");
    const at = /\bat ([a-z_]+)(?:\/[^:]*)?: (.*)$/s.exec(text);
    if (at && this.inputs.has(at[1])) {
      const entry = this.inputs.get(at[1]);
      const plain = entry.field.kind === "amount"
        ? "The amount was refused: write it in euros with at most two decimals, like 40.00."
        : `This was refused: ${at[2]}`;
      return this.showError(at[1], plain);
    }
    // The refund's own rules (ceiling, balance, the lead's threshold) name no field: they are about the amount.
    if ((status === 403 || status === 400) && this.inputs.has("amount")
        && /refund|left to refund|limit an agent may issue/i.test(text)) return this.showError("amount", text);
    return false;
  }
}
