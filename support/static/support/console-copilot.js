// The copilot beside the person who has the conversation (docs/copilot.md): a drafted reply streamed into the
// reply box with its sources, the summary on top, a suggested next step that fills the staff action's own form,
// and questions answered with sources. It never sends, pays or messages anyone: the person does, through the
// reply box and the staff forms with their own checks. The model's text is shown as text only (h(), .value).
// Hidden entirely when the desk has the copilot turned off (the GET answers 403 or 409).

import { ApiError, copilotApi } from "./console-api.js";
import { announce, confirmDialog, fill, h, timeEl } from "./console-dom.js";
import { money } from "./console-format.js";

const $ = (testid) => document.querySelector(`[data-testid="${testid}"]`);
const PENDING = new Set(["queued", "running"]);
const POLL_MS = 5000; // while one of this person's runs is under way: its end is read again if the event was lost
const SOURCE_WORDS = { order: "Order", parcel: "Parcel", policy: "Policy" };
const ACTION_FORMS = { refund: "refund", seller_message: "seller" }; // a suggestion's action -> the context panel's form

/** A source as a chip: a policy links to the version the copilot read; orders and parcels have no page. */
function chip(source) {
  const words = source.kind === "policy" && source.version ? `${source.label || source.id} v${source.version}`
    : source.label || String(source.id);
  const attrs = { class: `chip chip-${source.kind}`, "data-testid": "copilot-source", "data-kind": source.kind,
    "data-id": source.id, title: SOURCE_WORDS[source.kind] || null };
  if (source.kind !== "policy") return h("span", attrs, words);
  const path = `/console/policies/${encodeURIComponent(source.id)}/`;
  return h("a", { ...attrs, href: source.version ? `${path}versions/${encodeURIComponent(source.version)}/` : path }, words);
}

export function sourceChips(sources) {
  if (!sources?.length) return null;
  return h("ul", { class: "copilot-sources", "aria-label": "Sources" }, sources.map((s) => h("li", {}, chip(s))));
}

/** Fills `el` only when what it shows changed (`key`): a live event that redraws the page leaves a person's focus
 * on a chip, a link or "Use this" where it was. `draw` returns the children. */
function redraw(el, key, draw) {
  const text = JSON.stringify(key);
  if (el.dataset.drawn === text) return;
  el.dataset.drawn = text;
  fill(el, draw());
}

/** Why a run failed, as one sentence (the desk's plain words, or ours when it gave none). */
function failure(run) {
  const words = (run.error || "the copilot failed").trim();
  return /[.!?]$/.test(words) ? words : `${words}.`;
}

function says(error, fallback) {
  return error instanceof ApiError ? error.message : fallback;
}

export class CopilotPanel {
  constructor({ socket, id, me, context, reply }) {
    this.id = id;
    this.me = me;
    this.context = context;
    this.reply = reply; // the reply box (a textarea)
    this.runs = new Map(); // run id -> the run as last read
    this.live = new Map(); // run id -> text streamed so far (this person's runs under way)
    this.early = new Map(); // run id -> text that arrived before the POST answered with its id
    this.mine = new Set();
    this.summary = null;
    this.drafting = null; // {id, stopped}: the draft streaming into the reply box
    this.inBox = null; // the draft id the reply box's text came from, sent with the reply
    this.off = true;
    this.owner = false;
    socket.on("copilot.delta", (e) => e.conversation === this.id && this.delta(e));
    socket.on("copilot.done", (e) => e.conversation === this.id && e.copilot && this.done(e.copilot));
    socket.onOpen(({ reconnected }) => reconnected && this.load()); // what the socket missed meanwhile
    // A message after the summary makes it out of date: read once more to say so (the desk's word, its `stale`).
    socket.on("message.saved", (e) => e.conversation === this.id && this.summary && !this.summary.stale && this.load());
    this.bind();
  }

  bind() {
    $("copilot-draft").addEventListener("click", () => this.draft());
    $("copilot-draft-stop").addEventListener("click", () => this.stop());
    $("copilot-summarize").addEventListener("click", (e) => this.start("summary", e.currentTarget, "copilot-summary-error"));
    $("copilot-suggest").addEventListener("click", (e) => this.start("suggest", e.currentTarget, "copilot-suggest-error"));
    const question = $("copilot-question");
    question.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        $("copilot-ask-form").requestSubmit();
      }
    });
    $("copilot-ask-form").addEventListener("submit", async (e) => {
      e.preventDefault();
      const text = question.value.trim();
      if (!text) return this.say("copilot-ask-error", "Write a question first.", question);
      if (await this.start("ask", $("copilot-ask"), "copilot-ask-error", text)) question.value = "";
      return undefined;
    });
  }

  async load() {
    try {
      const { summary, runs } = await copilotApi.runs(this.id);
      this.off = false;
      for (const run of runs) this.remember(run);
      if (summary) this.summary = summary;
      for (const run of runs) if (!PENDING.has(run.status)) this.finishDraft(run);
    } catch (error) {
      if (error instanceof ApiError && (error.status === 403 || error.status === 409)) this.off = true;
      else console.warn("console: the copilot's runs were not read:", error.message);
    }
    this.render();
  }

  /** The conversation's state changed: the copilot drafts and suggests for whoever has it. */
  setOwner(conversation, mine) {
    this.owner = conversation.status === "taken_over" && mine;
    this.render();
  }

  remember(run) {
    this.runs.set(run.id, run);
    if (run.requested_by?.username === this.me) this.mine.add(run.id);
    if (!PENDING.has(run.status)) this.live.delete(run.id);
  }

  delta(event) {
    if (!this.mine.has(event.copilot)) { // ours perhaps, its POST not yet answered; a colleague's otherwise
      if (this.early.size < 20) this.early.set(event.copilot, event.text ? (this.early.get(event.copilot) || "") + event.text : "");
      return;
    }
    // An empty chunk starts the text again (the model asked again, or a new call after a read): docs/copilot.md.
    this.live.set(event.copilot, event.text ? (this.live.get(event.copilot) || "") + event.text : "");
    if (this.drafting?.id === event.copilot) {
      if (!this.drafting.stopped) this.showInBox(this.live.get(event.copilot));
    } else this.render();
  }

  done(run) {
    const mine = run.requested_by?.username === this.me;
    this.early.delete(run.id);
    if (!mine && run.kind !== "summary") return; // a colleague's draft, step or question is theirs
    this.remember(run);
    if (run.kind === "summary" && run.status === "done") this.summary = run;
    if (mine && run.status === "done") announce(`The copilot's ${{ draft: "draft", summary: "summary", suggest: "suggestion", ask: "answer" }[run.kind]} is ready.`);
    if (mine && run.status === "failed") announce(`The copilot could not finish: ${failure(run)}`);
    this.finishDraft(run);
    this.render();
  }

  /** Starts a run of this kind; its refusal in plain words at `errorTestid`. True when it started. */
  async start(kind, button, errorTestid, question = "") {
    this.say(errorTestid, null);
    button.disabled = true;
    try {
      const { copilot: run } = await copilotApi.start(this.id, kind, question);
      this.mine.add(run.id);
      this.live.set(run.id, this.early.get(run.id) || "");
      this.early.delete(run.id);
      this.remember(run);
      if (kind === "draft") this.drafting = { id: run.id, stopped: false };
      announce({ draft: "Drafting a reply…", summary: "Summarizing…", suggest: "Looking for the next step…", ask: "Asking the copilot…" }[kind]);
      this.poll();
      return true;
    } catch (error) {
      this.say(errorTestid, says(error, "The copilot could not be asked."));
      return false;
    } finally {
      button.disabled = false;
      this.render();
    }
  }

  /** While one of this person's runs is under way, its end is read again now and then (a lost event). */
  poll() {
    if (this.pollTimer) return;
    this.pollTimer = window.setTimeout(async () => {
      this.pollTimer = null;
      await this.load();
      if ([...this.mine].some((runId) => PENDING.has(this.runs.get(runId)?.status))) this.poll();
    }, POLL_MS);
  }

  // -- the draft in the reply box -------------------------------------------------------------------

  async draft() {
    if (this.reply.value.trim() && !(await confirmDialog({ title: "Replace your reply with a draft?",
      text: "What you wrote in the reply box goes; the copilot's draft takes its place. Nothing is sent.",
      confirm: "Draft a reply", testid: "copilot-replace" }))) return;
    this.before = this.reply.value;
    this.inBox = null;
    if (!(await this.start("draft", $("copilot-draft"), "copilot-draft-error"))) return;
    this.showInBox(this.live.get(this.drafting.id));
    $("copilot-draft-stop").focus(); // the draft button waits while it writes: the focus goes to what can be done
  }

  showInBox(text) {
    this.reply.value = text || "";
    this.reply.scrollTop = this.reply.scrollHeight;
  }

  stop() {
    if (!this.drafting) return;
    this.drafting.stopped = true;
    this.inBox = this.drafting.id;
    announce("Stopped: the draft is yours to edit. Nothing has been sent.");
    this.render();
    this.reply.focus();
  }

  /** The draft's run ended: its text in the box (unless the person stopped it), its sources under the box. */
  finishDraft(run) {
    if (this.drafting?.id !== run.id || PENDING.has(run.status)) return;
    const { stopped } = this.drafting;
    this.drafting = null;
    if (run.status === "failed") {
      if (!stopped) this.showInBox(this.before || "");
      this.say("copilot-draft-error", `The copilot could not draft a reply: ${failure(run)}`);
      return;
    }
    if (!stopped) this.showInBox(run.text);
    this.inBox = run.id;
    this.render();
    this.reply.focus();
  }

  /** The draft the reply box's text came from, for the reply; null when none, or while its run has not ended
   * (stopped early: the desk records only a finished draft). */
  draftFor() {
    return this.runs.get(this.inBox)?.status === "done" ? this.inBox : null;
  }

  /** Sending waits for the draft to end or be stopped. */
  get busy() {
    return Boolean(this.drafting && !this.drafting.stopped);
  }

  sent() {
    this.inBox = null;
    this.render();
  }

  // -- drawing --------------------------------------------------------------------------------------

  say(testid, words, field = null) {
    const el = $(testid);
    el.textContent = words || "";
    el.hidden = !words;
    field?.focus();
  }

  render() {
    for (const testid of ["copilot-summary-panel", "copilot-panel", "copilot-draft-bar"]) $(testid).hidden = this.off;
    if (this.off) {
      $("copilot-draft-info").hidden = true;
      return;
    }
    this.renderDraft();
    this.renderSummary();
    this.renderSuggestion();
    this.renderAnswers();
  }

  renderDraft() {
    const draft = $("copilot-draft");
    const streaming = this.busy;
    draft.disabled = !this.owner || Boolean(this.drafting);
    draft.title = this.owner ? "" : "Assign the conversation to yourself to draft a reply.";
    $("copilot-draft-stop").hidden = !streaming;
    this.reply.readOnly = streaming;
    if (streaming) this.reply.setAttribute("aria-busy", "true");
    else this.reply.removeAttribute("aria-busy");
    $("reply-send").disabled = streaming;
    const run = this.runs.get(this.inBox || this.drafting?.id);
    const status = streaming ? "The copilot is drafting into the reply box. Nothing is sent until you send it."
      : this.drafting ? "Stopped: the draft is yours to edit. Nothing is sent until you send it."
        : run ? "A draft from the copilot: read it, edit it, then send. Nothing has been sent." : "";
    $("copilot-draft-status").textContent = this.owner || run ? status : "Assign the conversation to yourself to draft a reply.";
    redraw($("copilot-draft-sources"), run?.sources || null,
      () => (run?.sources?.length ? [h("span", { class: "sub" }, "It read:"), sourceChips(run.sources)] : null));
    $("copilot-draft-info").hidden = !$("copilot-draft-status").textContent && $("copilot-draft-error").hidden;
  }

  renderSummary() {
    const s = this.summary;
    const pending = [...this.mine].map((id) => this.runs.get(id)).find((r) => r?.kind === "summary" && PENDING.has(r.status));
    $("copilot-summarize").textContent = s ? "Summarize again" : "Summarize";
    $("copilot-summarize").disabled = Boolean(pending);
    fill($("copilot-summary-meta"), s ? [s.stale ? h("span", { class: "badge is-stale", "data-testid": "copilot-summary-stale" },
      "Out of date: messages came after it") : null, " ", timeEl(s.finished_at || s.created_at, "copilot-summary-time"),
    ` · asked by ${s.requested_by?.name || s.requested_by?.username || "a colleague"}`] : null);
    const text = pending ? this.live.get(pending.id) : "";
    redraw($("copilot-summary-text"), pending ? [pending.id, text] : s && [s.id, s.text, s.sources], () => [
      pending ? h("p", { class: "copilot-text is-live", "aria-busy": "true" }, text || "Summarizing the conversation…") : null,
      !pending && s ? h("p", { class: "copilot-text", "data-testid": "copilot-summary" }, s.text) : null,
      !pending && s ? sourceChips(s.sources) : null]);
    if (!s && !pending) $("copilot-summary-meta").textContent = "none yet: what the customer wants, what was done, what is open";
  }

  latestMine(kind) {
    return [...this.runs.values()].filter((r) => r.kind === kind && this.mine.has(r.id))
      .sort((a, b) => (a.created_at < b.created_at ? 1 : -1));
  }

  renderSuggestion() {
    const [run] = this.latestMine("suggest");
    const button = $("copilot-suggest");
    button.disabled = !this.owner || (run && PENDING.has(run.status));
    button.title = this.owner ? "" : "Assign the conversation to yourself first.";
    const currency = run?.suggestion && this.context.data?.orders.find((o) => o.number === run.suggestion.order_id)?.currency;
    const problem = run && this.problem?.run === run.id ? this.problem.words : null;
    redraw($("copilot-suggestion-slot"), run ? [run.id, run.status, run.text, currency, problem] : null, () => {
      if (!run) return null;
      if (PENDING.has(run.status)) return h("p", { class: "muted", "aria-busy": "true" }, "Looking for the next step…");
      if (run.status === "failed") return h("p", { class: "error" }, `No suggestion: ${failure(run)}`);
      return this.suggestionCard(run, currency, problem);
    });
  }

  suggestionCard(run, currency, problem) {
    const s = run.suggestion;
    const title = !s ? "No action to suggest"
      : s.action === "refund" ? `Refund ${money(s.amount, currency)} on ${s.order_id}`
        : `Message the seller of ${s.order_id}`;
    const why = s ? s.reason : run.text;
    const use = async () => {
      if (!this.context.data) await this.context.load(); // clicked before the customer's orders were read
      const values = s.action === "refund" ? { amount: s.amount, reason: s.reason || "" } : { message: s.message || "" };
      const refused = this.context.prefill(s.order_id, ACTION_FORMS[s.action], values);
      this.problem = { run: run.id, words: refused };
      this.renderSuggestion();
      if (refused) $("copilot-suggestion-slot").querySelector('[data-testid="copilot-use"]')?.focus(); // drawn again
      else announce(`${title}: the form is filled in. Check it, then submit it yourself.`);
    };
    return h("article", { class: "copilot-card", "data-testid": "copilot-suggestion", "data-action": s?.action || "" },
      h("p", { class: "copilot-card-title" }, h("strong", {}, title), why ? ` — ${why}` : ""),
      s?.message ? h("blockquote", { class: "copilot-text copilot-quote", "data-testid": "copilot-suggestion-message" }, s.message) : null,
      s && run.text ? h("p", { class: "copilot-text sub" }, run.text) : null,
      sourceChips(run.sources),
      s && ACTION_FORMS[s.action] ? h("button", { type: "button", class: "btn btn-small", "data-testid": "copilot-use",
        onclick: use }, "Use this") : null,
      h("p", { class: "sub" }, "Nothing is done until you submit the form: its checks and approvals apply."),
      problem ? h("p", { class: "error", role: "alert" }, problem) : null);
  }

  renderAnswers() {
    const runs = this.latestMine("ask");
    redraw($("copilot-answers"), runs.map((r) => [r.id, r.status, this.live.get(r.id)]), () => runs.map((run) => h("li", { class: "copilot-answer",
      "data-testid": "copilot-answer", "data-status": run.status },
      h("p", { class: "copilot-question" }, h("strong", {}, run.question), " ", timeEl(run.created_at, "copilot-answer-time")),
      run.status === "failed" ? h("p", { class: "error" }, `No answer: ${failure(run)}`)
        : h("p", { class: "copilot-text", "aria-busy": PENDING.has(run.status) ? "true" : null },
          (PENDING.has(run.status) ? this.live.get(run.id) : run.text) || "Thinking…"),
      sourceChips(run.sources))));
  }
}
