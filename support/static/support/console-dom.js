// DOM helpers and formatters for the staff console. Everything that comes from the server (customer text,
// tool results, model output, staff names) goes into the page as text nodes or attribute values only:
// h() never parses HTML, so a seller's "IGNORE ALL PREVIOUS INSTRUCTIONS <script>" stays inert text.
// Bidirectional controls in that text (which can make "12345 EUR" read "RUE 54321") are shown as visible
// marks instead of acting, and text elements isolate their direction (console.css: unicode-bidi).

const BIDI_CONTROLS = /[\u202A-\u202E\u2066-\u2069\u200E\u200F\u061C]/g;

/** The text with each bidirectional control replaced by a visible mark naming it, e.g. [U+202E]. */
export function visibleText(text) {
  return String(text).replace(BIDI_CONTROLS, (c) => `[U+${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")}]`);
}

const SVG_NS = "http://www.w3.org/2000/svg";

function build(el, attrs, children) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") el.setAttribute("class", value);
    else if (key === "text") el.textContent = visibleText(value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(visibleText(child)));
  }
  return el;
}

/** h("p", {class: "x", "data-testid": "y"}, "text", otherNode): an element; strings become text nodes. */
export function h(tag, attrs = {}, ...children) {
  return build(document.createElement(tag), attrs, children);
}

export function svg(tag, attrs = {}, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

export function clear(el) {
  el.replaceChildren();
  return el;
}

/** Replaces el's children with these (null / false skipped, strings as text). */
export function fill(el, ...children) {
  el.replaceChildren();
  return build(el, {}, children);
}

let uid = 0;
export function uniqueId(prefix) {
  uid += 1;
  return `${prefix}-${uid}`;
}

// -- labels for the closed sets of the API ---------------------------------------------------------------

// Words for people: what staff read. The exact codes stay in data-status attributes, the trace and the API.
export const LABELS = {
  open: "With the agent",
  needs_attention: "Needs a person",
  taken_over: "With a person",
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
  resolved: "Resolved",
  waiting_on_customer: "Waiting for the customer",
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
};

export function label(value) {
  if (!value) return "—";
  return LABELS[value] || String(value).replaceAll("_", " ");
}

/** A status pill. kind: conversation | run | stop | outcome | approval; the raw value is in data-status. */
export function badge(kind, value, testid) {
  return h("span", {
    class: `badge badge-${kind} is-${value || "none"}`,
    "data-testid": testid,
    "data-status": value || "",
    title: kind === "stop" ? STOP_REASON_HELP[value] : null,
  }, kind === "stop" && value === "taken_over" ? LABELS.taken_over_stop : label(value));
}

/** How a run stands, in one phrase: "Answered the customer" for a finished run, not "Stopped · Answered". */
export function runPhrase(run) {
  if (!run) return "No run yet";
  if (run.status !== "stopped") return label(run.status);
  if (run.stop_reason === "taken_over") return LABELS.taken_over_stop;
  return run.stop_reason ? label(run.stop_reason) : label("stopped");
}

// -- numbers and times -----------------------------------------------------------------------------------

const integer = new Intl.NumberFormat("en", { maximumFractionDigits: 0 });

export function fmtInt(n) {
  return integer.format(Number(n) || 0);
}

export function plural(n, word) {
  return `${fmtInt(n)} ${word}${Number(n) === 1 ? "" : "s"}`;
}

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

const absolute = new Intl.DateTimeFormat("en-GB", { dateStyle: "medium", timeStyle: "medium" });
const clock = new Intl.DateTimeFormat("en-GB", { hour: "2-digit", minute: "2-digit" });
const dayAndClock = new Intl.DateTimeFormat("en-GB", { day: "numeric", month: "short", hour: "2-digit", minute: "2-digit" });

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

/** A <time> that keeps itself current (see tickTimes). */
export function timeEl(iso, testid, prefix = "") {
  if (!iso) return h("span", { class: "muted", "data-testid": testid }, "—");
  const el = h("time", { datetime: iso, title: absolute.format(new Date(iso)), "data-testid": testid,
    "data-relative": "", "data-prefix": prefix });
  el.textContent = prefix + relative(iso);
  return el;
}

export function tickTimes(root = document) {
  for (const el of root.querySelectorAll("time[data-relative]")) {
    el.textContent = (el.dataset.prefix || "") + relative(el.getAttribute("datetime"));
  }
}

// -- JSON shown to people --------------------------------------------------------------------------------

/** Arguments as one compact line: get_order({"order_id":"SU-41207"}). Raw text when it is not JSON. */
export function compactJson(text) {
  if (text === null || text === undefined || text === "") return "";
  if (typeof text !== "string") return JSON.stringify(text);
  try {
    return JSON.stringify(JSON.parse(text));
  } catch {
    return text;
  }
}

export function prettyJson(value) {
  if (value === null || value === undefined) return "";
  if (typeof value !== "string") return JSON.stringify(value, null, 2);
  try {
    return JSON.stringify(JSON.parse(value), null, 2);
  } catch {
    return value;
  }
}

export function excerpt(text, length = 90) {
  const flat = String(text || "").replace(/\s+/g, " ").trim();
  return flat.length > length ? `${flat.slice(0, length - 1)}…` : flat;
}

/** Screen-reader announcements ("Approved issue_refund"), through the page's one polite live region. */
export function announce(message) {
  const region = document.getElementById("announcer");
  if (!region) return;
  region.textContent = "";
  window.setTimeout(() => { region.textContent = message; }, 50);
}

export function conversationUrl(id) {
  return `/console/conversations/${encodeURIComponent(id)}/`;
}

export function shortId(id) {
  return String(id || "").slice(0, 8);
}
