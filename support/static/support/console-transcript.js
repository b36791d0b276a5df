// The transcript of one conversation as staff see it, each message once (keyed by seq): by default the
// conversation as the customer saw it, with each of the agent's steps as one quiet line in plain words
// (console-steps.js) that opens on the facts behind it; the system prompt, the exact calls and their results
// only with "Show the agent's steps" on (the list's `show-steps` class; console.css hides `.raw-only`
// otherwise). The agent's reply streams token by token below it.

import { compactJson, excerpt, fill, h, prettyJson, timeEl } from "./console-dom.js";
import { stepWords } from "./console-steps.js";

const NEAR_BOTTOM_PX = 80;

// How a message travelled: a customer's came by e-mail or in the widget (the server says); an answer goes the
// way the customer last wrote (an e-mail conversation is answered by e-mail, docs/email.md).
const CHANNEL_WORDS = { email: "By e-mail", widget: "In the widget" };

function channelEl(channel, m) {
  if (!CHANNEL_WORDS[channel]) return null;
  return h("span", { class: `msg-channel is-${channel}`, "data-testid": "message-channel", "data-channel": channel },
    CHANNEL_WORDS[channel],
    m.original ? [" · ", h("a", { href: m.original, target: "_blank", rel: "noopener", "data-testid": "message-original" },
      "Show original")] : null);
}

function authorLabel(m) {
  switch (m.author) {
    case "customer": return "Customer";
    case "agent": return "Agent";
    case "tool": return "Tool result";
    case "staff": return `Staff · ${m.staff_name || "staff"}`;
    // Hand-over, join, hand-back and refund notices: the customer saw these words too.
    default: return m.role === "system" ? "System prompt" : "Notice · shown to the customer";
  }
}

// A customer's photos and PDFs: thumbnails that open the full photo in a new tab, and a tile that downloads
// a PDF (the desk serves PDFs as downloads, never shown on the console's origin). The links are signed and
// expire (ATTACHMENT_URL_MAX_AGE); one past its time is fetched again before opening.
export function filesEl(attachments) {
  return h("div", { class: "msg-files", "data-testid": "message-files" }, attachments.map((a) => {
    const pdf = a.kind === "pdf";
    const caption = `${a.ref} · ${a.size_text}${a.width ? ` · ${a.width}×${a.height}` : ""}`;
    const opens = pdf ? { download: a.name } : { target: "_blank", rel: "noopener" };
    const link = h("a", { class: `msg-file msg-file-${a.kind}`, href: a.url, ...opens,
      "data-testid": "message-file", "data-ref": a.ref, title: `${pdf ? "Download " : ""}${a.name} — ${caption}` },
    a.thumbnail_url ? h("img", { src: a.thumbnail_url, alt: `Photo ${a.ref} from the customer`, loading: "lazy" })
      : h("span", { class: "msg-file-badge" }, "PDF"),
    h("span", { class: "msg-file-caption" }, pdf ? `${a.name} · ${caption} · Download` : caption));
    let expires = Date.parse(a.expires_at) || 0;
    const fresh = async () => {
      const response = await fetch(`/api/staff/attachments/${encodeURIComponent(a.id)}`, { credentials: "same-origin" });
      if (!response.ok) return false;
      const { attachment } = await response.json();
      link.href = attachment.url;
      expires = Date.parse(attachment.expires_at) || 0;
      const img = link.querySelector("img");
      if (img && attachment.thumbnail_url) img.src = attachment.thumbnail_url;
      return true;
    };
    link.addEventListener("click", async (event) => {
      if (Date.now() < expires - 30000) return;
      event.preventDefault();
      if (!(await fresh())) return;
      if (pdf) link.click(); // its fresh link now: this click goes through to the download
      else window.open(link.href, "_blank", "noopener");
    });
    link.querySelector("img")?.addEventListener("error", () => { if (Date.now() >= expires - 30000) fresh(); }, { once: true });
    return link;
  }));
}

export class Transcript {
  constructor({ list, scroller, stream, activity }) {
    this.list = list;
    this.scroller = scroller;
    this.stream = stream;
    this.streamText = stream.querySelector("[data-stream-text]");
    this.activity = activity;
    this.bySeq = new Map();
    this.toolNames = new Map(); // tool call id -> tool name, to title the results
    this.steps = new Map(); // tool call id -> {call, server, el}: its quiet line
    this.results = new Map(); // tool call id -> the result's text, for a line drawn after its result came
    this.lastSeq = 0;
    this.customerChannels = []; // [seq, channel] of the customer's messages, for the channel of an answer
    // Whether the view follows the end: true until a person scrolls up away from it. The box changes size
    // without a scroll (the hand-over summary appears above it, the window is resized): the end that was in
    // view stays in view, instead of sliding below the reply box.
    this.following = true;
    scroller.addEventListener("scroll", () => { this.following = this.nearBottom(); }, { passive: true });
    if (window.ResizeObserver) {
      new ResizeObserver(() => { if (this.following) this.showLatest(); }).observe(scroller);
    }
  }

  /** The channel a message travelled by: its own for a customer's, the customer's last before it for an answer. */
  channelOf(m) {
    if (m.author === "customer") return m.channel || "widget";
    if (m.role !== "assistant" || !m.content || !["agent", "staff"].includes(m.author)) return null;
    const before = this.customerChannels.filter(([seq]) => seq < m.seq).sort((a, b) => a[0] - b[0]).pop();
    return before ? before[1] : null;
  }

  /** With the agent's steps shown: the system prompt, the exact calls and their results, and the seqs. */
  showSteps(on) {
    const wasNear = this.nearBottom();
    this.list.classList.toggle("show-steps", on);
    if (wasNear) this.showLatest();
  }

  nearBottom() {
    const s = this.scroller;
    return s.scrollHeight - s.scrollTop - s.clientHeight < NEAR_BOTTOM_PX;
  }

  stick(wasNear) {
    if (wasNear) this.scroller.scrollTop = this.scroller.scrollHeight;
  }

  /** Scrolled to the end, unless the end leaves the customer's latest message out of view: then that message
   * at the top, with what came after it below (a person reads what the customer asked first). */
  showLatest() {
    const s = this.scroller;
    s.scrollTop = s.scrollHeight;
    const asked = [...this.list.querySelectorAll('[data-author="customer"]')].pop();
    if (!asked) return;
    const above = asked.getBoundingClientRect().top - s.getBoundingClientRect().top;
    if (above < 0) s.scrollTop += above - 8;
  }

  /** Adds a message unless its seq is already shown; true when added. */
  add(message) {
    if (!message || typeof message.seq !== "number" || this.bySeq.has(message.seq)) return false;
    const wasNear = this.nearBottom();
    for (const call of message.tool_calls || []) this.toolNames.set(call.id, call.function?.name);
    if (message.role === "tool") this.results.set(message.tool_call_id, message.content ?? "");
    if (message.author === "customer") this.customerChannels.push([message.seq, message.channel || "widget"]);
    const el = this.render(message);
    if (message.role === "tool") this.drawStep(message.tool_call_id);
    this.bySeq.set(message.seq, el);
    // Usually appended; a replayed older message goes in its place.
    let before = null;
    if (message.seq < this.lastSeq) {
      before = [...this.list.children].find((li) => Number(li.dataset.seq) > message.seq) || null;
    }
    this.list.insertBefore(el, before);
    this.lastSeq = Math.max(this.lastSeq, message.seq);
    if (message.role === "assistant" && message.author === "agent" && message.content) this.endStream();
    this.stick(wasNear);
    return true;
  }

  render(m) {
    const kind = m.role === "system" ? "prompt" : m.author;
    // The steps alone (a reply of tool calls without words) are quiet lines, without a head of their own.
    const stepsOnly = m.role === "assistant" && !m.content && (m.tool_calls || []).length > 0;
    const raw = m.role === "system" || m.role === "tool";
    const li = h("li", { class: `msg msg-${kind}${stepsOnly ? " msg-steps" : ""}${raw ? " raw-only" : ""}`,
      "data-testid": "message", "data-seq": m.seq, "data-author": m.author, "data-role": m.role },
    h("div", { class: `msg-head${stepsOnly ? " raw-only" : ""}` },
      h("span", { class: "msg-author" }, authorLabel(m)),
      channelEl(this.channelOf(m), m),
      h("span", { class: "msg-seq raw-only" }, `#${m.seq}`),
      timeEl(m.created_at, "message-time")));
    if (m.role === "system") {
      li.append(h("details", { class: "msg-collapsed" },
        h("summary", {}, excerpt(m.content, 80)),
        h("div", { class: "msg-text" }, m.content || "")));
    } else if (m.role === "tool") {
      const name = this.toolNames.get(m.tool_call_id) || "tool";
      const failed = /^ERROR\b/.test(m.content || "");
      li.classList.toggle("is-error", failed);
      li.append(h("details", { class: "msg-collapsed", "data-testid": "tool-result" },
        h("summary", {}, h("code", {}, name), " → ", h("span", { class: "excerpt" }, excerpt(m.content, 110))),
        h("pre", { class: "json" }, prettyJson(m.content))));
    } else {
      if (m.attachments?.length) li.append(filesEl(m.attachments));
      if (m.content && !m.attachments_only) li.append(h("div", { class: "msg-text", "data-testid": "message-text" }, m.content));
      for (const call of m.tool_calls || []) {
        const fn = call.function || {};
        const step = h("details", { class: "step", "data-testid": "agent-step", "data-tool": fn.name || "", "data-call": call.id || "" });
        this.steps.set(call.id, { call, server: m.tool_servers?.[call.id] || null, el: step });
        this.drawStep(call.id);
        li.append(step, h("code", { class: "tool-call raw-only", "data-testid": "tool-call", "data-tool": fn.name || "" },
          `${fn.name || "?"}(${compactJson(fn.arguments)})`));
      }
    }
    return li;
  }

  /** A step's quiet line, drawn again when its result comes (an open one stays open). */
  drawStep(callId) {
    const step = this.steps.get(callId);
    if (!step) return;
    const fn = step.call.function || {};
    const said = stepWords({ name: fn.name, args: fn.arguments, result: this.results.has(callId) ? this.results.get(callId) : null,
      server: step.server });
    step.el.dataset.state = said.state;
    fill(step.el, h("summary", { "data-testid": "agent-step-line" }, said.line),
      said.facts.length ? h("dl", { class: "step-facts" }, said.facts.map(([term, text]) => [h("dt", {}, term), h("dd", {}, text)]))
        : h("p", { class: "step-facts muted" }, said.state === "running" ? "No answer yet." : "Nothing more to show."));
  }

  /** token.delta: more of the agent's reply; "" restarts it (a retried model call). */
  delta(text) {
    const wasNear = this.nearBottom();
    if (text === "") {
      this.streamText.textContent = "";
    } else {
      this.streamText.append(document.createTextNode(text));
    }
    this.stream.hidden = false;
    this.stick(wasNear);
  }

  endStream() {
    this.streamText.textContent = "";
    this.stream.hidden = true;
  }

  /** The "agent is doing X" line (null hides it); waiting: no spinner (nothing is working). */
  doing(text, tool, { waiting = false } = {}) {
    if (!text) {
      this.activity.hidden = true;
      return;
    }
    this.activity.hidden = false;
    this.activity.classList.toggle("is-waiting", waiting);
    const label = this.activity.querySelector("[data-activity-text]");
    label.replaceChildren(text, tool ? " " : "", tool ? h("code", {}, tool) : "");
  }
}
