// What prompted a request (the card's context.provenance, support/desk/selectors_provenance.py): the text a
// third party wrote (a seller's product description, policy page or message) that the agent read just
// before asking. When that text gives the agent instructions, the card opens with a warning in plain words
// and quotes the text; otherwise a quiet "Read before asking: …" line, folded. Quoted text goes into the
// page as text nodes only (h() never parses HTML), cut to an excerpt with a button to show all of it.

import { h, timeEl, visibleText } from "./console-dom.js";
import { fmtInt } from "./console-format.js";

const CHECK = "Check the request against the order and the customer's own words: text a seller wrote is "
  + "never an instruction to the team or the agent.";

/** "Order SU-41310", "Policy search": what was read, as a heading of its row. */
function readName(read) {
  const name = read.label || read.tool;
  return name.charAt(0).toUpperCase() + name.slice(1);
}

/** One quoted text: the excerpt, and a button that shows the whole text (and back) when it is longer. */
function quote(text) {
  const whole = text.text || "";
  const short = text.excerpt || whole;
  const body = h("blockquote", { class: "provenance-text", "data-testid": "provenance-text" }, short);
  if (!text.cut) return [body];
  const more = `Show all ${fmtInt(text.chars || whole.length)} characters`;
  const button = h("button", { type: "button", class: "provenance-more", "data-testid": "provenance-show-all", "aria-expanded": "false" }, more);
  button.addEventListener("click", () => {
    const open = button.getAttribute("aria-expanded") !== "true";
    body.textContent = visibleText(open ? whole : short); // bidi controls shown as marks, as h() does
    body.classList.toggle("is-whole", open);
    button.setAttribute("aria-expanded", String(open));
    button.textContent = open ? "Show less" : more;
  });
  return [body, button];
}

function textRow(text) {
  // "Seller's"; an MCP server's answer comes with its words ("the warranty service's").
  const whose = text.whose ? `${text.whose.charAt(0).toUpperCase()}${text.whose.slice(1)}`
    : `${text.source.charAt(0).toUpperCase()}${text.source.slice(1)}'s`;
  return h("div", { class: `provenance-item${text.flagged ? " is-flagged" : ""}`, "data-testid": "provenance-item", "data-flagged": String(text.flagged) },
    h("p", { class: "provenance-what" }, `${whose} ${text.what}`, text.about ? h("span", { class: "muted" }, ` · ${text.about}`) : null),
    text.flagged ? h("ul", { class: "provenance-findings", "data-testid": "provenance-findings" },
      text.findings.map((f) => h("li", { "data-code": f.code }, `It ${f.reason}`, f.match ? [": ", h("q", {}, f.match)] : null))) : null,
    quote(text));
}

function readRow(read) {
  return h("li", { class: "provenance-read", "data-testid": "provenance-read", "data-tool": read.tool, "data-flagged": String(read.flagged) },
    h("p", { class: "provenance-source" }, h("strong", {}, readName(read)), " ",
      h("code", { title: "The tool the agent called" }, read.tool), " ",
      timeEl(read.at, "provenance-read-at", read.since_customer ? "read " : "read before the customer's last message, ")),
    read.texts.map(textRow));
}

/** The provenance block of a card, or null when the agent read nothing a third party wrote. */
export function provenanceEl(provenance) {
  if (!provenance || !provenance.reads || !provenance.reads.length) return null;
  if (provenance.flagged) {
    // The flagged texts in full view; what else was read, ordinary, folded below them.
    const others = provenance.reads.filter((r) => !r.flagged);
    return h("section", { class: "provenance is-flagged", "data-testid": "approval-provenance", "data-flagged": "true", "aria-label": "What the agent read before asking" },
      h("p", { class: "provenance-warning", "data-testid": "approval-provenance-warning" },
        h("span", { class: "provenance-icon", "aria-hidden": "true" }, "!"), h("strong", {}, provenance.warning)),
      h("p", { class: "provenance-check" }, CHECK),
      h("ul", { class: "provenance-reads" }, provenance.reads.filter((r) => r.flagged).map(readRow)),
      others.length ? h("details", { class: "provenance-also", "data-testid": "approval-provenance-also" },
        h("summary", {}, `Also read before asking: ${[...new Set(others.map((r) => r.phrase))].join("; ")}`),
        h("ul", { class: "provenance-reads" }, others.map(readRow))) : null);
  }
  return h("details", { class: "provenance", "data-testid": "approval-provenance", "data-flagged": "false" },
    h("summary", { "data-testid": "approval-provenance-line" }, provenance.line),
    h("ul", { class: "provenance-reads" }, provenance.reads.map(readRow)));
}
