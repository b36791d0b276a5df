// DOM helpers for the staff console; the words, numbers and times they show come from console-format.js.
// Everything that comes from the server (customer text, tool results, model output, staff names) goes into
// the page as text nodes or attribute values only: h() never parses HTML, so a seller's "IGNORE ALL
// PREVIOUS INSTRUCTIONS <script>" stays inert text. Bidirectional controls in that text (which can make
// "12345 EUR" read "RUE 54321") are shown as visible marks instead of acting, and text elements isolate
// their direction (console.css: unicode-bidi).

import { fmtDateTime, label, LABELS, relative, STOP_REASON_HELP } from "./console-format.js";

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

// -- status pills and times -------------------------------------------------------------------------

/** A status pill. kind: conversation | run | stop | outcome | approval; the raw value is in data-status. */
export function badge(kind, value, testid) {
  return h("span", {
    class: `badge badge-${kind} is-${value || "none"}`,
    "data-testid": testid,
    "data-status": value || "",
    title: kind === "stop" ? STOP_REASON_HELP[value] : null,
  }, kind === "stop" && value === "taken_over" ? LABELS.taken_over_stop : label(value));
}

/** A <time> that keeps itself current (see tickTimes). */
export function timeEl(iso, testid, prefix = "") {
  if (!iso) return h("span", { class: "muted", "data-testid": testid }, "—");
  const el = h("time", { datetime: iso, title: fmtDateTime(iso), "data-testid": testid,
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

/** A modal question in a <dialog>: the title, the words, a confirm and a cancel button. Resolves true on confirm;
 * false on cancel, Esc or closing. Tab stays inside it; the focus goes back where it was. */
export function confirmDialog({ title, text, confirm, cancel = "Cancel", testid = "confirm-dialog" }) {
  return new Promise((resolve) => {
    const titleId = uniqueId("dialog-title");
    const textId = uniqueId("dialog-text");
    const no = h("button", { type: "button", class: "btn", "data-testid": `${testid}-cancel` }, cancel);
    const yes = h("button", { type: "button", class: "btn btn-primary", "data-testid": `${testid}-confirm` }, confirm);
    const dialog = h("dialog", { class: "confirm-dialog", "aria-labelledby": titleId, "aria-describedby": textId, "data-testid": testid },
      h("h2", { id: titleId }, title),
      [text].flat().map((line, i) => h("p", { id: i === 0 ? textId : null }, line)),
      h("div", { class: "actions" }, yes, no));
    const before = document.activeElement;
    // A live event may redraw the part of the page the person was in while they answer (an order's panel):
    // focus then goes back to the same control drawn again, found by its test id within the same order or card.
    const scope = before?.closest?.("[data-order], [data-approval]");
    const where = before?.dataset?.testid ? {
      testid: before.dataset.testid,
      scope: scope ? (scope.dataset.order ? ["data-order", scope.dataset.order] : ["data-approval", scope.dataset.approval]) : null,
    } : null;
    const redrawnAs = () => {
      if (!where) return null;
      const control = `[data-testid="${CSS.escape(where.testid)}"]`;
      return document.querySelector(where.scope ? `[${where.scope[0]}="${CSS.escape(where.scope[1])}"] ${control}` : control);
    };
    let answer = false;
    const close = (value) => { answer = value; dialog.close(); };
    yes.addEventListener("click", () => close(true));
    no.addEventListener("click", () => close(false));
    dialog.addEventListener("keydown", (e) => { // Tab and Shift+Tab go round the two buttons
      if (e.key !== "Tab") return;
      const first = yes;
      const last = no;
      if (e.shiftKey && document.activeElement === first) { e.preventDefault(); last.focus(); }
      else if (!e.shiftKey && document.activeElement === last) { e.preventDefault(); first.focus(); }
    });
    dialog.addEventListener("close", () => {
      dialog.remove();
      const back = before && (before.isConnected ? before : redrawnAs(before));
      if (back) back.focus();
      resolve(answer);
    });
    document.body.appendChild(dialog);
    dialog.showModal(); // Esc cancels (the "cancel" event closes it with the answer false)
    no.focus(); // the safe answer first: Enter on an opened dialog never pays, approves or sends

  });
}
