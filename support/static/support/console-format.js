// How the staff console writes values for people: money, counts and costs, times and dates, and the words
// for the API's status codes. Every console module formats through here, so an amount reads the same on an
// approval card, in the context panel and in an alert ("64.00 EUR"). Plain functions only: no DOM here
// (console-dom.js builds the elements), and this module imports nothing.

// -- money -----------------------------------------------------------------------------------------------

/** "64.00": an amount (the API's decimal string such as "64" or "64.5", or a number) with two decimals. */
export function decimal(amount) {
  const n = Number(amount);
  return Number.isFinite(n) ? n.toFixed(2) : String(amount);
}

/** "64.00 EUR": an amount with two decimals and its currency; "—" when there is no amount. */
export function money(amount, currency = "EUR") {
  if (amount === null || amount === undefined || amount === "") return "—";
  return `${decimal(amount)} ${currency}`;
}

/** 6400 (a whole number of cents) -> "64.00", in whole numbers so no rounding creeps in. */
export function centsToDecimal(cents) {
  return `${Math.floor(cents / 100)}.${String(cents % 100).padStart(2, "0")}`;
}

// -- labels for the closed sets of the API ---------------------------------------------------------------

// Words for people: what staff read. The exact codes stay in data-status attributes, the trace and the API.
export const LABELS = {
  open: "With the agent",
  needs_attention: "Needs a person",
  taken_over: "With a person",
  closed: "Closed",
  queued: "About to start",
  running: "Working",
  awaiting_approval: "Waiting for approval",
  stopped: "Finished",
  answered: "Answered the customer",
  escalated: "Handed to a person",
  turn_limit: "Stopped: step limit",
  over_budget: "Stopped: over budget",
  conversation_budget: "Stopped: daily budget used",
  spinning: "Stopped: going in circles",
  model_error: "Stopped: model unavailable",
  empty_reply: "Stopped: model gave no reply",
  quota_exceeded: "Stopped: model quota used up",
  internal_error: "Stopped: desk error",
  stalled: "Stopped: worker kept failing",
  taken_over_stop: "Stopped: a person took over",
  rejected_again: "Stopped: asked again after a no",
  tool_unavailable: "Stopped: shop unreachable",
  resolved: "Resolved",
  waiting_on_customer: "Waiting for the customer",
  waiting: "Waiting",
  not_resolved: "Not resolved",
  handed_to_person: "Handed to a person",
  unstated: "Outcome not stated",
  pending: "Pending",
  approved: "Approved",
  rejected: "Rejected",
  expired: "Expired",
};

export const STOP_REASON_HELP = {
  answered: "The agent gave the customer its answer.",
  escalated: "The agent handed the conversation to a person, with a summary.",
  turn_limit: "The agent used every step it may take on one message; a person should answer.",
  over_budget: "The agent used its budget for this message (tokens, cost or time); a person should answer.",
  conversation_budget: "This conversation used its budget for the day; a person should answer.",
  spinning: "The agent kept repeating the same check, so it stopped; a person should answer.",
  model_error: "The language model could not be reached or gave an unusable reply; a person should answer.",
  taken_over: "A staff member took the conversation over.",
  stalled: "The agent's worker kept stopping, so the conversation went to a person.",
  empty_reply: "The language model twice replied with nothing; a person should answer.",
  quota_exceeded: "The model provider's quota is used up. Tell whoever runs the desk; a person should answer.",
  internal_error: "The desk failed unexpectedly (the error is in the worker's log); a person should answer.",
  rejected_again: "The agent kept asking for something staff had refused; a person should answer.",
  tool_unavailable: "The shop's systems did not answer (or answered something unreadable), so the agent stopped; the step's error says which call. A person should answer.",
};

export function label(value) {
  if (!value) return "—";
  return LABELS[value] || String(value).replaceAll("_", " ");
}

/** A conversation's status for staff, as the inbox words it: [code, words]. "Agent working" only while a run
 * is active; "With Sam" when a person has it (the agent is silent); "Closed" when closed. */
export function conversationStatus(c, run) {
  if (c.closed) return ["closed", "Closed"];
  if (c.status === "taken_over") return ["with_person", c.assignee ? `With ${c.assignee}` : "With a person"];
  if (c.status === "needs_attention") return ["needs_person", "Needs a person"];
  if (run && run.status === "awaiting_approval") return ["waiting_approval", "Waiting for approval"];
  if (run && (run.status === "queued" || run.status === "running")) return ["agent_working", "Agent working"];
  if (c.waiting) return ["waiting", `Waiting for ${c.waiting.for_words} until ${fmtDeadline(c.waiting.until)}`];
  return ["with_agent", "With the agent"];
}

/** How a run stands, in one phrase: "Answered the customer" for a finished run, not "Stopped · Answered". */
export function runPhrase(run) {
  if (!run) return "No run yet";
  if (run.status !== "stopped") return label(run.status);
  if (run.stop_reason === "taken_over") return LABELS.taken_over_stop;
  return run.stop_reason ? label(run.stop_reason) : label("stopped");
}

// -- numbers ---------------------------------------------------------------------------------------------

const integer = new Intl.NumberFormat("en", { maximumFractionDigits: 0 });

export function fmtInt(n) {
  return integer.format(Number(n) || 0);
}

export function plural(n, word) {
  return `${fmtInt(n)} ${word}${Number(n) === 1 ? "" : "s"}`;
}

/** A model's cost in US dollars: "$0.012", "$0.0004" under a cent. */
export function fmtCost(value) {
  if (value === null || value === undefined || value === "") return "—";
  const n = Number(value);
  if (!Number.isFinite(n)) return String(value);
  if (n === 0) return "$0";
  return n < 0.01 ? `$${n.toFixed(4)}` : `$${n.toFixed(3)}`;
}

export function fmtMs(ms) {
  if (ms === null || ms === undefined) return "—";
  const n = Number(ms);
  return n >= 1000 ? `${(n / 1000).toFixed(1)} s` : `${Math.round(n)} ms`;
}

// -- times and dates -------------------------------------------------------------------------------------

const absolute = new Intl.DateTimeFormat("en-GB", { dateStyle: "medium", timeStyle: "medium" });
const clock = new Intl.DateTimeFormat("en-GB", { hour: "2-digit", minute: "2-digit" });
const dayAndClock = new Intl.DateTimeFormat("en-GB", { day: "numeric", month: "short", hour: "2-digit", minute: "2-digit" });
const dayOnly = new Intl.DateTimeFormat("en-GB", { day: "numeric", month: "short", year: "numeric" });
const dayMonth = new Intl.DateTimeFormat("en-GB", { day: "numeric", month: "short" });
const weekdayClock = new Intl.DateTimeFormat("en-GB", { weekday: "short", day: "numeric", month: "short",
  hour: "2-digit", minute: "2-digit" });

/** "2 Dec 2025, 14:02:07": the full moment, for a title. */
export function fmtDateTime(iso) {
  return absolute.format(new Date(iso));
}

/** "26 Nov": the day of the month, for a date in a sentence; "" when there is none. */
export function fmtDay(iso) {
  const t = Date.parse(iso);
  return Number.isNaN(t) ? "" : dayMonth.format(new Date(t));
}

/** "26 Nov, 14:55". */
export function fmtDayTime(iso) {
  const t = Date.parse(iso);
  return Number.isNaN(t) ? "" : dayAndClock.format(new Date(t));
}

/** "Tue 8 Dec, 14:00": a deadline, with its weekday. */
export function fmtDeadline(iso) {
  const t = Date.parse(iso);
  return Number.isNaN(t) ? "" : weekdayClock.format(new Date(t));
}

/** "2 Dec 2025": the day only; "—" when there is none. */
export function fmtDate(iso) {
  return iso ? dayOnly.format(new Date(iso)) : "—";
}

/** "just now", "4 min ago", "3 h ago", then the clock today or the day and clock before. */
export function relative(iso) {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return "—";
  const seconds = Math.round((Date.now() - t) / 1000);
  if (seconds < 10) return "just now";
  if (seconds < 60) return `${seconds} s ago`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
  if (seconds < 6 * 3600) return `${Math.floor(seconds / 3600)} h ago`;
  const date = new Date(t);
  return new Date().toDateString() === date.toDateString() ? clock.format(date) : dayAndClock.format(date);
}
