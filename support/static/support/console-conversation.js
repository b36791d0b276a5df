// One conversation, live: transcript (replayed from the last seq seen on every reconnect), the agent's
// streaming reply and current step, the hand-over summary, the latest run in plain words, its approvals, the
// customer's context with the staff actions (console-context.js), notes and saved replies (console-notes.js),
// the trace and chart, take over / reply / hand back. Each panel is one module; this page wires them.

import { ApiError, deskApi, feedbackApi, inboxApi, staffApi } from "./console-api.js";
import { ApprovalList } from "./console-approval-list.js";
import { ContextPanel } from "./console-context.js";
import { CopilotPanel } from "./console-copilot.js";
import { HandoverPanel } from "./console-handover.js";
import { NotesPanel, SavedReplies, SlashReplies } from "./console-notes.js";
import { customers } from "./console-store.js";
import { announce, badge, fill, h, timeEl, visibleText } from "./console-dom.js";
import { conversationStatus, fmtCost, fmtInt, label, plural, runPhrase, STOP_REASON_HELP } from "./console-format.js";
import { Trace } from "./console-trace.js";
import { Transcript } from "./console-transcript.js";

const $ = (testid) => document.querySelector(`[data-testid="${testid}"]`);

export class ConversationPage {
  constructor({ socket, store, id, me }) {
    this.socket = socket;
    this.store = store;
    this.id = id;
    this.me = me;
    this.conversation = null;
    this.conversationEpoch = 0; // bumped by every live word on the conversation: a detail read older than it is stale
    // The conversation's seq when the state shown was true. An event about the conversation carries the seq it was
    // sent at; one sent before that state (a reply's "updated" overtaken by the close that followed it) is old news.
    this.stateSeq = 0;
    this.loading = false;
    this.loadAgain = false;
    this.buffered = [];
    this.transcript = new Transcript({
      list: $("transcript"), scroller: document.querySelector("[data-transcript-scroller]"),
      stream: $("streaming-reply"), activity: $("agent-activity"),
    });
    this.bindStepsToggle();
    this.trace = new Trace({ table: $("trace-table"), chart: $("trace-chart"), chartSummary: $("chart-summary"), empty: $("trace-empty") });
    this.approvals = new ApprovalList($("conversation-approvals"), { store, conversation: id, showConversation: false, empty: $("conversation-approvals-empty") });
    this.context = new ContextPanel({ body: $("context-body"), meta: $("context-meta"), id,
      mentioned: () => this.mentionedOrders(), onLoad: () => this.renderHeader() });
    this.handover = new HandoverPanel({ panel: $("handover-panel"), body: $("handover-summary"), id,
      onChange: () => this.renderHeader() });
    this.notes = new NotesPanel({ list: $("notes"), empty: $("notes-empty"), form: $("note-form"), input: $("note-input"),
      error: $("note-error"), id, socket });
    this.actions = [];
    store.subscribe(() => this.placeApprovals());
    this.placeApprovals();
    this.bindTabs();
    this.bindControls();
    this.copilot = new CopilotPanel({ socket, id, me, context: this.context, reply: this.replyInput });
    this.saved = new SavedReplies({ select: $("saved-reply-select"), insert: $("saved-reply-insert"),
      manage: $("saved-reply-manage"), reply: this.replyInput });
    this.slash = new SlashReplies({ box: this.replyInput, pop: $("slash-pop"), list: $("slash-list"), empty: $("slash-empty"),
      items: () => this.saved.items });
    this.saved.onChange = () => this.slash.refresh();
    this.bindEvents();
    socket.watch(id, () => this.transcript.lastSeq);
    this.load();
    this.context.load();
    this.handover.load();
    this.notes.load();
    this.saved.load();
    this.loadRating();
    this.copilot.load();
  }

  /** "Show the agent's steps": the prompt, exact calls and results in the transcript; each person's choice
   * is remembered in this browser. */
  bindStepsToggle() {
    const box = $("show-steps");
    const key = `sundry-console:show-steps:${this.me}`;
    let on = false;
    try { on = window.localStorage.getItem(key) === "on"; } catch { /* storage off: not remembered */ }
    box.checked = on;
    this.transcript.showSteps(on);
    box.addEventListener("change", () => {
      this.transcript.showSteps(box.checked);
      try { window.localStorage.setItem(key, box.checked ? "on" : "off"); } catch { /* not remembered */ }
    });
  }

  // -- the customer's rating (1 to 5 and a comment), shown beside the status -------------------------------

  async loadRating() {
    try {
      this.renderRating((await feedbackApi.rating(this.id)).rating);
    } catch { /* shown with the next conversation.rated */ }
  }

  renderRating(rating) {
    let slot = $("conversation-rating");
    if (!slot) {
      slot = h("span", { class: "conv-rating", "data-testid": "conversation-rating" });
      $("conversation-status-slot").parentElement.appendChild(slot);
    }
    slot.dataset.score = rating ? String(rating.score) : "";
    fill(slot, rating ? [h("strong", {}, `Rated ${rating.score}/5 `), "★".repeat(rating.score),
      rating.comment ? h("span", { class: "sub", "data-testid": "conversation-rating-comment" }, ` “${visibleText(rating.comment)}”`) : null,
      h("span", { class: "sub" }, ` · ${rating.occasion === "closed" ? "after closing" : "after the agent resolved it"}`)] : []);
    slot.hidden = !rating;
  }

  /** "Sam is typing…" for the customer: at most once every few seconds while the reply box changes. */
  sayTyping() {
    const now = Date.now();
    if (!this.replyInput.value.trim() || now - (this.typingSentAt || 0) < 3000) return;
    this.typingSentAt = now;
    feedbackApi.typing(this.id).catch(() => {});
  }

  /** Order numbers the customer or the agent named, the latest named last: their cards open first in the
   * context panel. */
  mentionedOrders() {
    const found = new Set();
    for (const el of document.querySelectorAll('[data-testid="transcript"] [data-testid="message-text"]')) {
      for (const m of el.textContent.matchAll(/\bSU-\d{1,8}\b/g)) {
        found.delete(m[0]);
        found.add(m[0]);
      }
    }
    return found;
  }

  /** An approval waiting for a decision is what to act on: its card goes to the top of the side column (in the
   * page's order, so the keyboard meets it first too); otherwise the customer and the order come first. Once
   * decided, the card stays where the person decided it: nothing jumps under them. */
  placeApprovals() {
    const panel = $("approvals-panel");
    const side = panel.parentElement;
    if (this.store.pendingCount(this.id) === 0 || side.firstElementChild === panel) return;
    const focused = document.activeElement;
    side.insertBefore(panel, side.firstElementChild);
    if (focused && panel.contains(focused)) focused.focus(); // moving it must not lose a person's place
  }

  // -- the two tabs: the conversation, and the run's details (its trace and what it cost) ---------------

  bindTabs() {
    const tabs = [...document.querySelectorAll('[role="tab"][data-tab]')];
    const select = (tab, { focus = false, remember = false } = {}) => {
      for (const t of tabs) {
        const on = t === tab;
        t.setAttribute("aria-selected", String(on));
        t.tabIndex = on ? 0 : -1;
        document.getElementById(t.getAttribute("aria-controls")).hidden = !on;
      }
      document.body.dataset.tab = tab.dataset.tab;
      if (focus) tab.focus();
      if (remember) { // a reload or a shared link opens the same tab
        const url = new URL(window.location.href);
        url.hash = tab.dataset.tab === "conversation" ? "" : tab.dataset.tab;
        window.history.replaceState(null, "", url);
      }
      if (tab.dataset.tab === "conversation") this.transcript.showLatest();
    };
    for (const [i, tab] of tabs.entries()) {
      tab.addEventListener("click", () => select(tab, { remember: true }));
      tab.addEventListener("keydown", (e) => {
        const to = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: tabs.length - 1 }[e.key];
        if (to === undefined) return;
        e.preventDefault();
        select(tabs[(to + tabs.length) % tabs.length], { focus: true, remember: true });
      });
    }
    select(tabs.find((t) => `#${t.dataset.tab}` === window.location.hash) || tabs[0]);
  }

  mine(event) {
    return event.conversation === this.id;
  }

  bindEvents() {
    const s = this.socket;
    s.on("replay.done", (e) => { // steps, actions and the context are not replayed: read them again
      if (!this.mine(e)) return;
      this.load();
      this.context.load();
      this.handover.load();
    });
    s.on("conversation.rated", (e) => { if (this.mine(e)) this.renderRating(e.rating); });
    s.on("staff.action", (e) => {
      if (!this.mine(e) || !e.action) return;
      this.actions = [...this.actions.filter((a) => a.id !== e.action.id), e.action]; // its latest state
      this.trace.addAction(e.action);
      this.context.load(); // a refund changed the balance; a seller message the order's story
      this.handover.load(); // and what is done, and what is left
    });
    s.on("message.saved", (e) => {
      if (!this.mine(e)) return;
      this.transcript.add(e.message);
      if (["customer", "staff", "system"].includes(e.message?.author)) this.handover.load(); // asked, answered, told
      if (e.message?.content && this.context.data) this.context.render(); // an order named: its card comes first
      if (e.message?.author === "customer" && this.conversation?.closed) { // the customer wrote again: reopened
        this.conversation = { ...this.conversation, closed: false, closed_at: null, closed_by: null };
        this.renderHeader();
      }
    });
    s.on("inbox.changed", (e) => { // closed or reopened here or in another console
      if (!this.mine(e) || !["closed", "reopened"].includes(e.change) || !this.conversation || !this.fresh(e)) return;
      const closed = e.change === "closed";
      this.conversation = { ...this.conversation, closed, closed_at: closed ? e.at : null, closed_by: closed ? e.by?.name : null };
      this.renderHeader();
      this.handover.load();
    });
    s.on("token.delta", (e) => this.mine(e) && this.transcript.delta(e.text));
    s.on("step.started", (e) => {
      if (!this.mine(e) || !e.step) return;
      const step = e.step;
      // A model call begins a new reply: a partial one (its worker died mid-stream) is not continued.
      if (step.kind === "model") this.transcript.endStream();
      if (step.kind === "tool") this.transcript.doing(`Agent is ${lower(step.label) || "running a tool"}:`, step.tool);
      else this.transcript.doing(`Agent is ${lower(step.label) || "thinking"} (model call, turn ${step.turn})…`);
    });
    s.on("step.finished", (e) => this.mine(e) && this.later(e, () => this.stepFinished(e.step)));
    s.on("run.status", (e) => this.mine(e) && this.later(e, () => this.runStatus(e)));
    const conversationEvent = (e) => {
      if (!this.mine(e) || !this.fresh(e)) return;
      this.conversationEpoch += 1;
      this.conversation = { ...(this.conversation || {}), ...(e.detail || {}), status: e.status };
      this.renderHeader();
      this.handover.load(); // handed to a person, taken over, handed back
    };
    s.on("conversation.updated", conversationEvent);
    s.on("conversation.assigned", conversationEvent);
    s.on("error", (e) => console.warn("console: socket error frame:", e.error));
  }

  /** Whether an event about the conversation's state is newer than the state shown (and then it is). */
  fresh(event) {
    if (typeof event.seq !== "number") return true;
    if (event.seq < this.stateSeq) return false;
    this.stateSeq = event.seq;
    return true;
  }

  /** Trace events that arrive while the detail is being read are applied after it (duplicates dropped). */
  later(event, apply) {
    if (this.loading) this.buffered.push(apply);
    else apply();
  }

  stepFinished(step) {
    if (!step) return;
    if (step.tool === "issue_refund" && !step.error) this.context.load(); // the agent's refund changed the balance
    const run = this.trace.latestRun();
    if (!run) {
      this.load();
      return;
    }
    if (this.trace.addLiveStep(step, run.id)) this.renderRun();
    if (run.status === "running") this.transcript.doing("Agent is working…");
  }

  runStatus(e) {
    const run = e.detail || { id: e.run, status: e.status, stop_reason: e.stop_reason, outcome: e.outcome };
    // A run never leaves "stopped". Its "queued" is sent by the web process and the rest by the worker, so
    // a late "queued" can arrive after the worker's "stopped": old news, not a run starting again.
    if (this.trace.runStatus(run.id) === "stopped" && run.status !== "stopped") return;
    this.trace.upsertRun(run);
    if (e.status === "stopped") this.handover.load();
    if (e.status !== "running") this.transcript.endStream();
    this.renderRun();
    this.renderHeader(); // "Agent working" only while a run is active
  }

  async load() {
    if (this.loading) {
      this.loadAgain = true;
      return;
    }
    this.loading = true;
    const error = $("conversation-error");
    try {
      const epoch = this.conversationEpoch;
      const data = await staffApi.conversation(this.id);
      // An event or an action's answer that came while this read was on its way is newer than what it read
      // (a read started just before "Take over" must not show the conversation as open again).
      if (epoch === this.conversationEpoch || !this.conversation) {
        this.conversation = data.conversation;
        this.stateSeq = Math.max(this.stateSeq, data.conversation.last_seq || 0);
      }
      customers.set(this.id, data.conversation.customer);
      for (const message of data.messages) this.transcript.add(message);
      this.trace.load(data.runs);
      try {
        ({ actions: this.actions } = await deskApi.actions(this.id));
      } catch (e) {
        console.warn("console: staff actions not read:", e.message);
      }
      this.trace.setActions(this.actions);
      this.store.upsertMany(data.approvals);
      error.hidden = true;
    } catch (e) {
      error.textContent = e instanceof ApiError && e.status === 404 ? "There is no such conversation." : e.message;
      error.hidden = false;
    } finally {
      this.loading = false;
      const buffered = this.buffered;
      this.buffered = [];
      for (const apply of buffered) apply();
      this.renderHeader();
      this.renderRun();
      if (this.context.data) this.context.render(); // the orders the conversation names come first
      if (!this.shownOnce && this.transcript.lastSeq) { // opened: the customer's latest message in view
        this.shownOnce = true;
        this.transcript.showLatest();
      }
      if (this.loadAgain) {
        this.loadAgain = false;
        this.load();
      }
    }
  }

  // -- header: who, status, take over / hand back ----------------------------------------------------

  renderHeader() {
    const c = this.conversation;
    if (!c) return;
    const name = this.context.data?.customer?.name;
    document.title = `${name || c.customer} · ${document.body.dataset.shopName || "Support"} support desk`;
    $("conversation-customer").textContent = visibleText(name ? `${name}` : c.customer);
    const subject = $("conversation-subject"); // the customer's e-mail subject, when they wrote by e-mail
    subject.textContent = c.subject ? `Subject: ${visibleText(c.subject)}` : "";
    subject.hidden = !c.subject;
    // `assignee` is a display name (a first name); `me` is this staff member's username. One model of
    // ownership: a person who has the conversation answers it and the agent is silent.
    const mineNow = c.status === "taken_over" && c.assignee_username === this.me;
    const someoneElse = c.status === "taken_over" && !mineNow;
    const [status, words] = conversationStatus(c, this.trace.latestRun());
    fill($("conversation-status-slot"), h("span", { class: `badge badge-conversation is-${status}`,
      // data-status keeps the desk's code (open / needs_attention / taken_over / closed); data-state the inbox's.
      "data-testid": "conversation-status", "data-status": c.closed ? "closed" : c.status, "data-state": status }, words));
    const assignee = $("conversation-assignee");
    assignee.textContent = c.closed ? `Closed${c.closed_by ? ` by ${c.closed_by}` : ""}: a message from the customer reopens it.`
      : c.status === "taken_over" && c.assignee ? `${mineNow ? "Assigned to you" : `Assigned to ${c.assignee}`} · the agent is silent` : "";
    // The summary below says why, and more: the reason is not said twice.
    const reason = $("attention-reason");
    reason.textContent = visibleText(c.status === "needs_attention" && !c.closed ? c.attention_reason || "" : "");
    reason.hidden = !reason.textContent || this.handover.shown;
    const take = $("take-over-button");
    take.hidden = mineNow;
    take.title = someoneElse && c.assignee ? `${c.assignee} has it now` : "";
    $("hand-back-button").hidden = c.status === "open" || !!c.closed; // closed: the agent has nothing to take back
    $("close-conversation-button").hidden = !!c.closed;
    $("reopen-conversation-button").hidden = !c.closed;
    // Replying assigns the conversation to the one who replies (the server keeps the rule: a person writes
    // only when the agent is silent), so the box is there unless a colleague has the conversation.
    const reply = $("reply-form");
    reply.hidden = someoneElse;
    const closed = $("reply-closed-note");
    closed.hidden = !someoneElse;
    closed.textContent = someoneElse ? `${c.assignee || "A colleague"} has this conversation. Assign it to yourself to reply.` : "";
    $("reply-send").textContent = "Send";
    const keys = "Enter sends · Shift+Enter for a new line · / for a saved reply.";
    $("reply-hint").textContent = c.closed
      ? `${keys} The conversation is closed: a reply still reaches the customer, and it opens again when they write.`
      : mineNow ? `${keys} The agent is silent until you hand back.`
        : `${keys} Sending assigns the conversation to you: the agent stops.`;
    this.copilot?.setOwner(c, mineNow);
    if (mineNow && this.focusReply) this.replyInput.focus();
    this.focusReply = false;
  }

  bindControls() {
    const take = $("take-over-button");
    const back = $("hand-back-button");
    this.replyInput = $("reply-input");
    const actionError = $("conversation-action-error");
    const act = async (button, call, done) => {
      actionError.hidden = true;
      button.disabled = true;
      try {
        const data = await call();
        this.conversationEpoch += 1;
        if (typeof data.conversation?.last_seq === "number") this.stateSeq = Math.max(this.stateSeq, data.conversation.last_seq);
        this.conversation = { ...(this.conversation || {}), ...data.conversation };
        done(data);
        this.renderHeader();
      } catch (e) {
        actionError.textContent = e.message;
        actionError.hidden = false;
      } finally {
        button.disabled = false;
      }
    };
    // Closing is the inbox's service (support/desk/inbox.py): it answers with the inbox row, whose status says it.
    const closeOrReopen = (button, call, words) => act(button, async () => {
      const { conversation: row } = await call(this.id);
      const closed = row?.status === "closed";
      if (typeof row?.last_seq === "number") this.stateSeq = Math.max(this.stateSeq, row.last_seq);
      return { conversation: { closed, closed_at: closed ? row.closed_at : null, closed_by: closed ? row.closed_by?.name : null } };
    }, () => {
      announce(words);
      window.setTimeout(() => $(this.conversation.closed ? "reopen-conversation-button" : "close-conversation-button").focus(), 0);
    });
    const close = $("close-conversation-button");
    const reopen = $("reopen-conversation-button");
    close.addEventListener("click", () => closeOrReopen(close, inboxApi.close, "Conversation closed. The customer has been told."));
    reopen.addEventListener("click", () => closeOrReopen(reopen, inboxApi.reopen, "Conversation reopened."));
    take.addEventListener("click", () => {
      const c = this.conversation || {};
      if (c.status === "taken_over" && c.assignee_username !== this.me
        && !window.confirm(`${c.assignee || "A colleague"} has this conversation. Assign it to you instead?`)) return;
      if (this.store.pendingCount(this.id) > 0 && !window.confirm("The agent is waiting for an approval on this "
        + "conversation. Assigning it to you stops the agent and ends that request. Assign it anyway?")) return;
      act(take, () => staffApi.takeOver(this.id), () => {
        this.focusReply = true;
        announce("Assigned to you. The agent is silent; reply below.");
      });
    });
    back.addEventListener("click", () => act(back, () => staffApi.handBack(this.id), (data) => {
      announce(data.run ? "Handed back: the agent answers the customer's waiting message."
        : "Handed back: the agent answers the customer's next message.");
      window.setTimeout(() => $("take-over-button").focus(), 0);
    }));

    const form = $("reply-form");
    const send = $("reply-send");
    const replyError = $("reply-error");
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const text = this.replyInput.value.trim();
      if (!text || this.copilot.busy) {
        replyError.textContent = text ? "The copilot is still drafting: wait for it, or stop it, then send." : "Write a reply first.";
        replyError.hidden = false;
        this.replyInput.focus();
        return;
      }
      send.disabled = true;
      replyError.hidden = true;
      try {
        const c = this.conversation || {};
        if (!(c.status === "taken_over" && c.assignee_username === this.me)) {
          const data = await staffApi.takeOver(this.id); // joining first: the customer sees "Sam has joined"
          this.conversationEpoch += 1;
          this.conversation = { ...(this.conversation || {}), ...data.conversation };
          this.renderHeader();
        }
        const { message } = await staffApi.reply(this.id, text, this.copilot.draftFor());
        this.transcript.add(message);
        this.replyInput.value = "";
        this.copilot.sent();
      } catch (error) {
        replyError.textContent = error.message;
        replyError.hidden = false;
      } finally {
        send.disabled = false;
        this.replyInput.focus();
      }
    });
    this.replyInput.addEventListener("input", () => this.sayTyping());
    this.replyInput.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing && !e.defaultPrevented) { // taken by the saved replies' list
        e.preventDefault();
        form.requestSubmit();
      }
    });
  }

  // -- the latest run ---------------------------------------------------------------------------------

  renderRun() {
    const run = this.trace.latestRun();
    const panel = $("run-panel-body");
    if (!run) {
      fill(panel, h("p", { class: "muted", "data-testid": "run-status", "data-status": "" }, "The agent has not worked on this yet: it starts when the customer writes."));
      this.transcript.doing(null);
      return;
    }
    const help = run.status === "stopped" ? STOP_REASON_HELP[run.stop_reason] : null;
    const rows = [
      ["Outcome", run.outcome ? [label(run.outcome), run.outcome_summary ? h("span", { class: "sub" }, ` — ${run.outcome_summary}`) : null]
        : h("span", { class: "muted" }, "—"), "run-outcome", run.outcome],
      ["Spend", [`${plural(run.turns, "model call")} · ${fmtInt(run.prompt_tokens)} in / ${fmtInt(run.completion_tokens)} out · `,
        h("strong", { "data-testid": "run-cost" }, fmtCost(run.cost_usd))], "run-spend"],
      ["Started", timeEl(run.created_at, "run-started")],
    ];
    if (run.finished_at) rows.push(["Finished", timeEl(run.finished_at, "run-finished")]);
    if (run.attempts > 1) rows.push(["Attempts", String(run.attempts)]);
    if (run.trace_id) { // tracing is on: the run's trace, in the operator's trace viewer when one is configured
      const id = h("code", {}, run.trace_id);
      rows.push(["Trace", /^https?:\/\//.test(run.trace_url || "")
        ? h("a", { href: run.trace_url, target: "_blank", rel: "noopener noreferrer" }, "Open in the trace viewer ", id)
        : id, "run-trace"]);
    }
    fill(panel,
      h("p", { class: "run-headline" },
        h("span", { class: `badge badge-run is-${run.status === "stopped" ? run.stop_reason || "stopped" : run.status}`,
          "data-testid": "run-status", "data-status": run.status }, runPhrase(run))),
      help ? h("p", { class: "sub run-help" }, help) : null,
      h("dl", { class: "facts" }, rows.map(([t, v, testid, status]) => [h("dt", {}, t),
        h("dd", testid ? { "data-testid": testid, "data-status": status || "" } : {}, v)])),
      // The exact codes, for whoever reads the trace or the API.
      h("p", { class: "codes" }, "Codes: ", h("code", { "data-testid": "stop-reason", "data-status": run.stop_reason || "" },
        [run.status, run.stop_reason, run.outcome].filter(Boolean).join(" · "))),
      run.detail ? h("p", { class: "sub codes", "data-testid": "run-detail" }, run.detail) : null,
    );
    const runs = this.trace.runs.size;
    $("run-count").textContent = runs > 1 ? `latest of ${runs} runs` : "";
    $("run-details-meta").textContent = `· ${runPhrase(run)}`;
    if (run.status === "queued") this.transcript.doing("About to start: waiting for a worker…");
    else if (run.status === "awaiting_approval") {
      this.transcript.doing("Paused: waiting for a person to approve or reject a request.", null, { waiting: true });
    }
    else if (run.status === "stopped") this.transcript.doing(null);
    else if (this.transcript.activity.hidden) this.transcript.doing("Agent is working…");
  }
}

function lower(text) {
  return text ? text.charAt(0).toLowerCase() + text.slice(1) : "";
}
