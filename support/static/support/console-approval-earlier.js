// Earlier decisions on the same order (the card's earlier_decisions, support/desk/selectors_earlier.py): who
// decided, when, what (approved, approved with another amount, rejected) and why, newest first, a few with
// "and N more". Approving over an earlier rejection asks first, in a dialog whose Cancel has the focus; the
// server refuses it unless the request says so (confirm_over_rejection). Reasons go in as text nodes only.

import { confirmDialog, h, timeEl } from "./console-dom.js";
import { money, relative } from "./console-format.js";

const WHAT = { issue_refund: "a refund", staff_refund: "a refund", message_seller: "a seller message",
  escalate_to_human: "a hand-over" };

function verdict(d) {
  if (d.decision === "rejected") return "Rejected";
  if (d.decision === "edited") return `Approved ${money(d.amount)} (asked ${money(d.asked)})`;
  return d.amount ? `Approved ${money(d.amount)}` : "Approved";
}

/** The list on a card, or null when nothing was decided on the order before. */
export function earlierEl(earlier) {
  const shown = earlier?.shown || [];
  if (!shown.length) return null;
  return h("section", { class: `earlier${earlier.rejection ? " has-rejection" : ""}`, "data-testid": "approval-earlier",
    "aria-label": "Earlier decisions on this order" },
  h("p", { class: "facts-label" }, "Earlier decisions on this order"),
  h("ol", { class: "earlier-list" }, shown.map((d) => h("li", { "data-testid": "approval-earlier-item", "data-decision": d.decision },
    h("strong", {}, verdict(d)), ` ${WHAT[d.tool] || d.tool} · ${d.by} · `, timeEl(d.at, "approval-earlier-at"),
    d.reason ? h("q", { class: "reason" }, d.reason) : null))),
  earlier.more ? h("p", { class: "hint", "data-testid": "approval-earlier-more" }, `and ${earlier.more} more`) : null);
}

/** "Sam rejected a refund on this order 2 min ago: “…”. Approve anyway?" — true when the person says yes. */
export function confirmOverRejection(rejection) {
  const what = WHAT[rejection.tool] || "this";
  const when = relative(rejection.at);
  return confirmDialog({
    title: "Approve anyway?",
    text: [`${rejection.by} rejected ${what} on this order ${/ago$|now$/.test(when) ? when : `at ${when}`}${rejection.reason ? ":" : "."}`,
      rejection.reason ? `“${rejection.reason}”` : null].filter(Boolean),
    confirm: "Approve anyway", testid: "over-rejection-confirm",
  });
}
