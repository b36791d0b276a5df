// The agent's steps in plain words, for the transcript's quiet lines: one line per tool call ("Looked up
// SU-41533 · delivered · 480.00 EUR from Brightside Electronics") and, when a person opens it, the few facts
// behind it. Built from the call's arguments and its result as saved (the result may not be there yet: the
// line then says what the agent is doing). The exact calls and results stay behind "Show the agent's steps".
// Plain functions, no DOM: everything they return is text.

import { fmtDay, fmtDayTime, label, money } from "./console-format.js";

function parsed(text) {
  if (text === null || text === undefined) return null;
  if (typeof text !== "string") return text;
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

const cut = (text, n = 160) => {
  const flat = String(text ?? "").replace(/\s+/g, " ").trim();
  return flat.length > n ? `${flat.slice(0, n - 1)}…` : flat;
};
const words = (code) => String(code || "").replaceAll("_", " ");
// Shop text the tools mark as someone else's words ({untrusted_text_from, text}): its words, shown as text.
const said = (value) => (value && typeof value === "object" ? value.text ?? "" : value ?? "");

/** "Delivered 26 Nov, Leeds" / "In transit · last scan 1 Dec, Wakefield", from track_parcel's result. */
function parcelState(p) {
  const last = p.last_scan || {};
  const where = said(last.location) ? `, ${said(last.location)}` : "";
  if (p.status === "delivered") return `delivered ${last.at ? fmtDay(last.at) : ""}${where}`.replace(" ,", ",").trim();
  return `${words(p.status)}${last.at ? ` · last scan ${fmtDay(last.at)}${where}` : ""}`;
}

/** The policies the agent goes by from one search: the best of the shop's own and of the seller's. */
function reliedOn(results) {
  const chosen = new Map();
  for (const r of results || []) if (r?.title && !chosen.has(r.scope || "sundry")) chosen.set(r.scope || "sundry", r.title);
  return [...chosen.values()];
}

// Per tool: what the line says while it runs, once done, and the facts behind it. `a`: arguments, `r`: result.
const TOOLS = {
  get_order: {
    doing: (a) => `Looking up ${a.order_id || "an order"}…`,
    failed: (a) => `Could not look up ${a.order_id || "the order"}`,
    done: (a, r) => {
      const seller = r.fulfilled_by?.type === "sundry" ? (document.body.dataset.shopName || "the shop") : said(r.fulfilled_by?.name);
      return `Looked up ${r.order_id || a.order_id} · ${words(r.status)} · ${money(r.total)}${seller ? ` from ${seller}` : ""}`;
    },
    facts: (a, r) => [
      ["Status", `${label(r.status)}${r.placed_at ? `, placed ${fmtDay(r.placed_at)}` : ""}`],
      ["Items", (r.items || []).map((i) => `${i.qty} × ${said(i.title)}`).join(", ")],
      ["Money", `${money(r.total)} total, ${money(r.refunded)} refunded, ${money(r.refundable)} refundable`],
      ["Parcels", (r.parcels || []).map((p) => `${said(p.carrier)} ${p.tracking} · ${words(p.status)}`).join("; ")],
      ["Note", said(r.note)],
    ],
  },
  track_parcel: {
    doing: (a) => `Checking the tracking of ${a.tracking || "a parcel"}…`,
    failed: (a) => `Could not check the tracking of ${a.tracking || "the parcel"}`,
    done: (a, r) => `Checked ${said(r.carrier) ? `${said(r.carrier)} ` : ""}tracking for ${r.tracking || a.tracking} · ${parcelState(r)}`,
    facts: (a, r) => (r.scans || []).map((s) => [fmtDayTime(s.at), [said(s.detail) || words(s.event), said(s.location)].filter(Boolean).join(" · ")]),
  },
  search_policy: {
    doing: () => "Reading the policies…",
    failed: () => "Could not read the policies",
    done: (a, r) => {
      const titles = reliedOn(r.results);
      return titles.length ? `Read the policies: ${titles.join("; ")}` : `Searched the policies for “${cut(a.query, 60)}” · nothing found`;
    },
    facts: (a, r) => (r.results || []).map((p) => [p.title + (p.scope === "seller" ? " (the seller's own)" : ""), cut(p.excerpt, 300)]),
  },
  message_seller: {
    doing: (a) => `Writing to the seller of ${a.order_id || "the order"}…`,
    failed: (a) => `Could not write to the seller of ${a.order_id || "the order"}`,
    done: (a, r) => (r.status === "already_sent" ? `Had already written to ${said(r.seller) || "the seller"} about ${a.order_id}`
      : `Wrote to ${said(r.seller) || "the seller"} about ${a.order_id}`),
    facts: (a) => [["Message", a.message], ["About", words(a.issue)]],
  },
  issue_refund: {
    doing: (a) => `Asked to refund ${money(a.amount)} on ${a.order_id} · waiting for a person's decision`,
    failed: (a) => `Refund of ${money(a.amount)} on ${a.order_id} not made`,
    done: (a, r) => `Refunded ${money(r.amount || a.amount)} on ${r.order_id || a.order_id}${r.refund_id ? ` (${r.refund_id})` : ""}`,
    facts: (a, r) => [["Reason", a.reason], ["Still refundable", r?.refundable_remaining ? money(r.refundable_remaining) : null]],
  },
  escalate_to_human: {
    doing: () => "Handing over to a person…",
    failed: () => "Could not hand over to a person",
    done: (a) => `Handed over to a person: ${cut(a.reason, 140)}`,
    facts: (a) => [["Why", a.reason], ["The agent's note", a.summary]],
  },
  record_outcome: {
    doing: () => "Noting how this turn ended…",
    failed: () => "Could not note how this turn ended",
    done: (a) => `Noted: ${label(a.outcome)}${a.summary ? ` · ${cut(a.summary, 120)}` : ""}`,
    facts: (a) => [["Outcome", label(a.outcome)], ["Note", a.summary]],
  },
};

/** A tool from an MCP server (its server's name given), or one the desk does not know: named as it is. */
function otherTool(name, server) {
  const tool = server && name.startsWith(`${server}__`) ? name.slice(server.length + 2) : name;
  const asked = server ? `the ${server} service: ${tool}` : tool;
  const answer = (r) => (r && typeof r === "object" && "text" in r ? r.text : typeof r === "string" ? r : JSON.stringify(r));
  return {
    doing: () => (server ? `Asking ${asked}…` : `Using ${tool}…`),
    failed: () => (server ? `Could not ask the ${server} service for ${tool}` : `Could not use ${tool}`),
    done: (a, r) => (server ? `Asked ${asked}` : `Used ${tool}`) + (r?.service_reported_error ? " · the service reported an error" : ""),
    facts: (a, r) => [...Object.entries(a).map(([k, v]) => [words(k), typeof v === "string" ? v : JSON.stringify(v)]),
      ["Answer", r === null ? null : cut(answer(r), 600)]],
  };
}

/**
 * One step in words: {line, facts: [[term, text]...], state: "running" | "done" | "failed"}.
 * `result` is the saved result's text, or null while there is none; "ERROR: …" results are failures.
 */
export function stepWords({ name, args, result, server = null }) {
  const tool = TOOLS[name] || otherTool(name || "a tool", server);
  const a = parsed(args) || {};
  if (result === null || result === undefined) return { line: tool.doing(a), facts: [], state: "running" };
  const text = String(result);
  if (/^ERROR\b/.test(text)) {
    const why = text.replace(/^ERROR:\s*/, "");
    return { line: `${tool.failed(a)}: ${cut(why, 140)}`, facts: [["Why", why]], state: "failed" };
  }
  const r = parsed(text) ?? text;
  const facts = tool.facts(a, r).filter(([, v]) => v !== null && v !== undefined && String(v).trim() !== "");
  return { line: tool.done(a, r), facts, state: "done" };
}
