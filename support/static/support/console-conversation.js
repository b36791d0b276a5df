// One conversation, live: transcript (replayed from the last seq seen on every reconnect), the agent's
// streaming reply and current step, the latest run, its approvals, the trace and chart, take over / hand back.

import { ApiError, staffApi } from "./console-api.js";
import { ApprovalList } from "./console-approvals.js";
import { customers } from "./console-store.js";
import {
  announce, badge, fill, fmtCost, fmtInt, h, plural, shortId, STOP_REASON_HELP, timeEl, visibleText,
} from "./console-dom.js";
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
    this.loading = false;
    this.loadAgain = false;
    this.buffered = [];
    this.transcript = new Transcript({
      list: $("transcript"), scroller: document.querySelector("[data-transcript-scroller]"),
      stream: $("streaming-reply"), activity: $("agent-activity"),
    });
    this.trace = new Trace({ table: $("trace-table"), chart: $("trace-chart"), chartSummary: $("chart-summary"), empty: $("trace-empty") });
    this.approvals = new ApprovalList($("conversation-approvals"), { store, conversation: id, showConversation: false, empty: $("conversation-approvals-empty") });
    this.bindControls();
    this.bindEvents();
    socket.watch(id, () => this.transcript.lastSeq);
    this.load();
  }

  mine(event) {
    return event.conversation === this.id;
  }

  bindEvents() {
    const s = this.socket;
    s.on("replay.done", (e) => this.mine(e) && this.load()); // steps are not replayed: read the trace again
    s.on("message.saved", (e) => {
      if (!this.mine(e)) return;
      this.transcript.add(e.message);
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
      if (!this.mine(e)) return;
      this.conversationEpoch += 1;
      this.conversation = { ...(this.conversation || {}), ...(e.detail || {}), status: e.status };
      this.renderHeader();
    };
    s.on("conversation.updated", conversationEvent);
    s.on("conversation.assigned", conversationEvent);
    s.on("error", (e) => console.warn("console: socket error frame:", e.error));
  }

  /** Trace events that arrive while the detail is being read are applied after it (duplicates dropped). */
  later(event, apply) {
    if (this.loading) this.buffered.push(apply);
    else apply();
  }

  stepFinished(step) {
    if (!step) return;
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
    this.trace.upsertRun(run);
    if (e.status !== "running") this.transcript.endStream();
    this.renderRun();
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
      if (epoch === this.conversationEpoch || !this.conversation) this.conversation = data.conversation;
      customers.set(this.id, data.conversation.customer);
      for (const message of data.messages) this.transcript.add(message);
      this.trace.load(data.runs);
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
    document.title = `${c.customer} · Sundry support desk`;
    $("conversation-customer").textContent = visibleText(c.customer);
    $("conversation-id").textContent = shortId(c.id);
    fill($("conversation-status-slot"), badge("conversation", c.status, "conversation-status"));
    // `assignee` is a display name (a first name); `me` is this staff member's username.
    const mineNow = c.status === "taken_over" && c.assignee_username === this.me;
    const assignee = $("conversation-assignee");
    assignee.textContent = c.status === "taken_over" && c.assignee
      ? `Taken over by ${c.assignee}${mineNow ? " (you)" : ""}` : "";
    const reason = $("attention-reason");
    reason.textContent = visibleText(c.attention_reason || "");
    reason.hidden = !c.attention_reason;
    const take = $("take-over-button");
    take.hidden = mineNow;
    take.textContent = c.status === "taken_over" && c.assignee ? `Take over from ${c.assignee}` : "Take over";
    $("hand-back-button").hidden = c.status === "open";
    const reply = $("reply-form");
    const wasHidden = reply.hidden;
    reply.hidden = !mineNow;
    $("reply-closed-note").hidden = mineNow;
    if (wasHidden && mineNow && this.focusReply) this.replyInput.focus();
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
    take.addEventListener("click", () => act(take, () => staffApi.takeOver(this.id), () => {
      this.focusReply = true;
      announce("You have taken the conversation over. The agent stops; reply below.");
    }));
    back.addEventListener("click", () => act(back, () => staffApi.handBack(this.id), (data) => {
      announce(data.run ? "Handed back: the agent answers the customer's last message." : "Handed back to the agent.");
      window.setTimeout(() => $("take-over-button").focus(), 0);
    }));

    const form = $("reply-form");
    const send = $("reply-send");
    const replyError = $("reply-error");
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const text = this.replyInput.value.trim();
      if (!text) {
        replyError.textContent = "Write a reply first.";
        replyError.hidden = false;
        this.replyInput.focus();
        return;
      }
      send.disabled = true;
      replyError.hidden = true;
      try {
        const { message } = await staffApi.reply(this.id, text);
        this.transcript.add(message);
        this.replyInput.value = "";
      } catch (error) {
        replyError.textContent = error.message;
        replyError.hidden = false;
      } finally {
        send.disabled = false;
        this.replyInput.focus();
      }
    });
    this.replyInput.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
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
      fill(panel, h("p", { class: "muted", "data-testid": "run-status", "data-status": "" }, "No run yet: the agent starts when the customer writes."));
      this.transcript.doing(null);
      return;
    }
    const rows = [
      ["Status", badge("run", run.status, "run-status")],
      ["Stop reason", run.stop_reason ? [badge("stop", run.stop_reason, "stop-reason"),
        h("span", { class: "sub" }, ` ${STOP_REASON_HELP[run.stop_reason] || ""}`)] : h("span", { class: "muted", "data-testid": "stop-reason" }, "—")],
      ["Outcome", run.outcome ? badge("outcome", run.outcome, "run-outcome") : h("span", { class: "muted", "data-testid": "run-outcome" }, "—")],
      ["Spend", h("span", { "data-testid": "run-spend" },
        `${plural(run.turns, "turn")} · ${fmtInt(run.prompt_tokens)} in / ${fmtInt(run.completion_tokens)} out · `,
        h("strong", { "data-testid": "run-cost" }, fmtCost(run.cost_usd)))],
      ["Started", timeEl(run.created_at, "run-started")],
    ];
    if (run.finished_at) rows.push(["Finished", timeEl(run.finished_at, "run-finished")]);
    if (run.attempts > 1) rows.push(["Attempts", String(run.attempts)]);
    fill(panel,
      h("dl", { class: "facts" }, rows.map(([t, v]) => [h("dt", {}, t), h("dd", {}, v)])),
      run.summary ? h("div", { class: "summary" }, h("div", { class: "args-label" }, "Summary for a person"),
        h("p", { class: "summary-text", "data-testid": "run-summary" }, run.summary)) : null,
      run.detail ? h("p", { class: "sub", "data-testid": "run-detail" }, run.detail) : null,
    );
    const runs = this.trace.runs.size;
    $("run-count").textContent = runs > 1 ? `latest of ${runs}` : "";
    if (run.status === "queued") this.transcript.doing("Queued: waiting for a worker…");
    else if (run.status === "awaiting_approval") {
      this.transcript.doing("Paused: waiting for a staff decision on a gated call.", null, { waiting: true });
    }
    else if (run.status === "stopped") this.transcript.doing(null);
    else if (this.transcript.activity.hidden) this.transcript.doing("Agent is working…");
  }
}

function lower(text) {
  return text ? text.charAt(0).toLowerCase() + text.slice(1) : "";
}
