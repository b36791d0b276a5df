// Alerts for staff with the console open, on every console page: a hand-over (a conversation newly needs a
// person and nobody has it) shows an alert with "Assign to me", an approval request one with "Open to decide", and
// so does a reminder of an approval still waiting, or its escalation to the leads, for the people it names
// (approval.nudged); when routing put it in someone's queue the alert says so ("Routed to you" for that
// person, else whose);
// each plays a short sound (can be turned off), and, after an explicit opt-in, raises a desktop notification.
// The page title and the nav's Inbox badge count what waits for someone. The first person to assign a
// conversation to themself has it; everyone else's alert says who, live (inbox.changed). An approval's alert (and its desktop notification) goes away
// in every open console as soon as anyone decides it, or it expires (the approval.* events). Counts come from
// /api/staff/inbox/counts, read again after the staff socket's list-level events.

import { inboxApi } from "./console-api.js";
import { announce, conversationUrl, h } from "./console-dom.js";
import { expiresAt, expiryText } from "./console-approvals.js";
import { money } from "./console-format.js";

const COUNT_EVENTS = ["conversation.updated", "conversation.assigned", "inbox.changed", "run.status"];
const RECOUNT_AFTER_MS = 300;
const SOUND_KEY = "sundry-console:sound";
const NOTIFY_KEY = "sundry-console:desktop-alerts";
const MAX_ALERTS = 5;
const GONE_AFTER_TAKEN_MS = 12000;

function stored(key, fallback) {
  try {
    return window.localStorage.getItem(key) ?? fallback;
  } catch {
    return fallback;
  }
}

function store(key, value) {
  try {
    window.localStorage.setItem(key, value);
  } catch { /* private mode: the choice lasts for this page */ }
}

export class Alerts {
  constructor({ socket, store: approvals, badge, optin, sound, region }) {
    this.socket = socket;
    this.approvals = approvals;
    this.badge = badge;
    this.optin = optin;
    this.soundButton = sound;
    this.region = region;
    // The space the alerts take at the window's bottom right, for the layout to keep clear
    // (--alerts-space: the conversation page's side card ends above them, so they cover none of its buttons).
    if (region && window.ResizeObserver) {
      new ResizeObserver(() => document.documentElement.style.setProperty("--alerts-space",
        region.childElementCount ? `${region.offsetHeight + 16}px` : "0px")).observe(region);
    }
    this.baseTitle = document.title;
    this.counts = null;
    this.needing = null; // ids of conversations needing a person that nobody has, as last counted
    this.seenApprovals = null; // approval ids already alerted (or pending when the page opened)
    this.alerts = new Map(); // conversation id -> alert element
    this.approvalAlerts = new Map(); // approval id -> {el, note}: what to take away once it is decided
    this.me = document.body.dataset.staffUsername;
    this.audio = null;
    document.body.dataset.beeps = "0";
    document.body.dataset.notifications = "0";
    this.bindControls();
    socket.onOpen(() => this.recount());
    for (const type of COUNT_EVENTS) socket.on(type, () => this.recountSoon());
    socket.on("inbox.changed", (e) => this.changed(e));
    socket.on("approval.nudged", (e) => this.nudged(e));
    approvals.subscribe((changed) => this.approvalsChanged(changed));
  }

  // -- counts: title and badge ---------------------------------------------------------------------------

  recountSoon() {
    window.clearTimeout(this.recountTimer);
    this.recountTimer = window.setTimeout(() => this.recount(), RECOUNT_AFTER_MS);
  }

  async recount() {
    let counts;
    try {
      counts = await inboxApi.counts();
    } catch {
      return; // the next event or reconnect counts again
    }
    const ids = new Set(counts.needs_person_unassigned_ids);
    if (this.needing !== null) {
      for (const id of ids) if (!this.needing.has(id)) this.handOver(id);
    }
    this.needing = ids;
    this.counts = counts;
    this.render();
  }

  render() {
    const waiting = this.counts ? this.counts.needs_person_unassigned : 0;
    if (this.badge) {
      this.badge.dataset.count = String(waiting);
      this.badge.querySelector("[data-count-value]").textContent = this.counts ? String(waiting) : "…";
      this.badge.classList.toggle("is-zero", waiting === 0);
    }
    const total = waiting + (this.approvals.loaded ? this.approvals.pendingCount() : 0);
    document.title = total ? `(${total}) ${this.baseTitle}` : this.baseTitle;
  }

  // -- what raises an alert ------------------------------------------------------------------------------

  approvalsChanged(changed) {
    if (!this.approvals.loaded) return;
    if (this.seenApprovals === null) { // the first full read: what waits already is not news
      this.seenApprovals = new Set(this.approvals.pending().map((a) => a.id));
    }
    for (const approval of changed || []) {
      if (approval.status !== "pending") this.approvalDecided(approval.id);
      if (approval.status !== "pending" || this.seenApprovals.has(approval.id)) continue;
      this.seenApprovals.add(approval.id);
      this.approvalRequested(approval);
    }
    this.render();
  }

  async describe(conversationId) {
    try {
      const { conversations } = await inboxApi.list({ filter: "all", ids: [conversationId], limit: 1 });
      return conversations[0] || null;
    } catch {
      return null;
    }
  }

  async handOver(conversationId) {
    const row = await this.describe(conversationId);
    const who = row ? row.customer.name || row.customer.email : "A customer";
    const orders = row && row.orders.length ? ` · ${row.orders.join(", ")}` : "";
    this.raise({
      kind: "handover", conversation: conversationId, title: `${who} needs a person${orders}`,
      text: row && row.attention_reason ? row.attention_reason : "The agent handed this conversation over.",
      assignee: row && row.assignee, routedTo: row && row.routed_to,
    });
  }

  /** Decided (or expired) anywhere: nothing waits any more, so its alert and notification go. */
  approvalDecided(id) {
    const raised = this.approvalAlerts.get(id);
    if (!raised) return;
    this.approvalAlerts.delete(id);
    if (this.alerts.get(raised.el.dataset.conversation) === raised.el) this.dismiss(raised.el.dataset.conversation);
    else raised.el.remove();
    try { raised.note?.close(); } catch { /* already gone */ }
  }

  stillWaiting(id) {
    return this.approvals.pending().some((a) => a.id === id);
  }

  async approvalRequested(approval) {
    const row = await this.describe(approval.conversation);
    if (!this.stillWaiting(approval.id)) return; // decided while the customer's name was looked up
    const who = row ? row.customer.name || row.customer.email : "A customer";
    const args = approval.requested_arguments || {};
    // A colleague's own refund waits for a second person (four eyes): everyone but the one who asked is alerted.
    const asker = (approval.approvals || []).find((p) => p.role === "asked");
    if (asker && asker.username === document.body.dataset.staffUsername) return;
    const what = approval.tool === "issue_refund" || approval.tool === "staff_refund"
      ? `Refund ${money(args.amount)}${args.order_id ? ` on ${args.order_id}` : ""}`
      : approval.tool === "escalate_to_human" ? "A hand-over" : approval.context?.summary || approval.tool;
    this.raise({
      kind: "approval", approval: approval.id, conversation: approval.conversation, title: `${what} waits for approval`,
      text: asker ? `${who} · ${asker.by} asked for it; a second person approves` : `${who} · the agent asked for it`,
      assignee: row && row.assignee, routedTo: approval.routed_to,
    });
  }

  /** approval.nudged: a reminder or an escalation; alerted only on the consoles of the people it names. */
  async nudged(event) {
    const approval = event.approval;
    if (!approval || approval.status !== "pending" || !(event.to || []).some((p) => p.username === this.me)) return;
    const row = await this.describe(approval.conversation);
    if (!this.stillWaiting(approval.id)) return;
    const who = row ? row.customer.name || row.customer.email : "A customer";
    const left = expiryText(expiresAt(approval)).text;
    const what = approval.context?.summary || approval.tool;
    const escalated = event.nudge === "escalation";
    this.raise({
      kind: "approval", approval: approval.id, conversation: approval.conversation,
      title: `${escalated ? "Escalated to leads" : "Reminder"}: ${what} still waits for approval`,
      text: `${who} · ${left}${escalated ? " · nobody has decided yet" : ""}`,
      assignee: null, nudge: escalated ? "escalation" : "reminder",
    });
  }

  // -- the alert itself -----------------------------------------------------------------------------------

  raise({ kind, approval = null, conversation, title, text, assignee, nudge = null, routedTo = null }) {
    this.alerts.get(conversation)?.remove();
    const status = h("p", { class: "alert-status", "data-testid": "alert-status" });
    // An approval is decided on its card (Open); assigning the conversation would silence the agent and end
    // the request, so only a hand-over offers "Assign to me".
    const take = h("button", { type: "button", class: "btn btn-primary", "data-testid": "alert-take", hidden: kind === "approval" },
      "Assign to me");
    const el = h("div", { class: `alert alert-${kind}`, role: "group", "aria-label": title, "data-testid": "alert",
      "data-kind": kind, "data-conversation": conversation, "data-approval": approval, "data-nudge": nudge },
      h("p", { class: "alert-title" }, title),
      h("p", { class: "alert-text" }, text),
      status,
      h("div", { class: "alert-actions" },
        take,
        h("a", { class: kind === "approval" ? "btn btn-primary" : "btn", href: conversationUrl(conversation), "data-testid": "alert-open" },
          kind === "approval" ? "Open to decide" : "Open"),
        h("button", { type: "button", class: "btn btn-quiet", "data-testid": "alert-dismiss", "aria-label": `Dismiss: ${title}`,
          onclick: () => this.dismiss(conversation) }, "Dismiss")));
    take.addEventListener("click", () => this.take(conversation));
    this.alerts.set(conversation, el);
    this.region.prepend(el);
    while (this.region.children.length > MAX_ALERTS) {
      const last = this.region.lastElementChild;
      this.alerts.delete(last.dataset.conversation);
      last.remove();
    }
    if (assignee) this.takenBy(conversation, assignee);
    else if (routedTo) this.routed(conversation, routedTo);
    const mine = !assignee && routedTo && routedTo.username === this.me;
    announce(`${title}. ${text}${mine ? ". Routed to you." : ""}`);
    this.beep();
    const note = this.notify(title, text, conversation);
    if (approval) this.approvalAlerts.set(approval, { el, note });
  }

  dismiss(conversation) {
    this.alerts.get(conversation)?.remove();
    this.alerts.delete(conversation);
  }

  async take(conversation) {
    const el = this.alerts.get(conversation);
    const button = el?.querySelector("[data-testid=alert-take]");
    if (button) button.disabled = true;
    try {
      const { conversation: row } = await inboxApi.take(conversation);
      this.takenBy(conversation, row.assignee);
    } catch (error) {
      this.show(conversation, error.message, "is-taken");
      if (button) button.hidden = true;
    }
  }

  /** inbox.changed: someone was assigned or closed a conversation this page alerted about. */
  changed(event) {
    if (event.change === "assigned" && event.assignee) this.takenBy(event.conversation, event.assignee);
    if (event.change === "closed") this.closed(event.conversation, event.by);
  }

  /** Closed: nothing left to take; the alert says so and goes soon after. */
  closed(conversation, by) {
    const el = this.alerts.get(conversation);
    if (!el) return;
    el.querySelector("[data-testid=alert-take]").hidden = true;
    const mine = by && by.username === this.me;
    this.show(conversation, mine ? "You closed it." : `${by ? by.name : "Someone"} closed it.`, "is-taken");
    window.setTimeout(() => this.alerts.get(conversation) === el && this.dismiss(conversation), GONE_AFTER_TAKEN_MS);
  }

  /** Routing put it in someone's queue (nobody has it yet): the alert says whose; anyone may still act. */
  routed(conversation, routedTo) {
    const el = this.alerts.get(conversation);
    if (!el) return;
    const mine = routedTo.username === this.me;
    el.dataset.routedTo = routedTo.username;
    this.show(conversation, mine ? "Routed to you." : `Routed to ${routedTo.name}.`, mine ? "is-mine" : "is-routed");
  }

  takenBy(conversation, assignee) {
    const el = this.alerts.get(conversation);
    if (!el || !assignee) return;
    const mine = assignee.username === this.me;
    el.dataset.takenBy = assignee.username;
    el.querySelector("[data-testid=alert-take]").hidden = true;
    this.show(conversation, mine ? "Assigned to you." : `Assigned to ${assignee.name}.`, mine ? "is-mine" : "is-taken");
    if (!mine) window.setTimeout(() => this.alerts.get(conversation) === el && this.dismiss(conversation), GONE_AFTER_TAKEN_MS);
  }

  show(conversation, message, state) {
    const el = this.alerts.get(conversation);
    if (!el) return;
    const status = el.querySelector("[data-testid=alert-status]");
    status.textContent = message;
    el.classList.remove("is-mine", "is-taken", "is-routed");
    el.classList.add(state);
  }

  // -- sound and desktop notifications -------------------------------------------------------------------

  bindControls() {
    const supported = "Notification" in window;
    const paintOptin = () => {
      const on = supported && stored(NOTIFY_KEY, "off") === "on" && Notification.permission === "granted";
      this.optin.setAttribute("aria-pressed", String(on));
      this.optin.textContent = !supported ? "Desktop alerts: not available"
        : Notification.permission === "denied" ? "Desktop alerts: blocked in the browser"
          : `Desktop alerts: ${on ? "on" : "off"}`;
      this.optin.disabled = !supported || Notification.permission === "denied";
    };
    this.optin.addEventListener("click", async () => {
      if (!supported) return;
      if (this.optin.getAttribute("aria-pressed") === "true") {
        store(NOTIFY_KEY, "off");
      } else {
        const answer = Notification.permission === "granted" ? "granted" : await Notification.requestPermission();
        store(NOTIFY_KEY, answer === "granted" ? "on" : "off");
      }
      paintOptin();
    });
    paintOptin();
    const paintSound = () => {
      const on = stored(SOUND_KEY, "on") === "on";
      this.soundButton.setAttribute("aria-pressed", String(on));
      this.soundButton.textContent = `Sound: ${on ? "on" : "off"}`;
    };
    this.soundButton.addEventListener("click", () => {
      store(SOUND_KEY, stored(SOUND_KEY, "on") === "on" ? "off" : "on");
      paintSound();
      this.unlockAudio(); // a click lets the page play sound later
    });
    paintSound();
    document.addEventListener("pointerdown", () => this.unlockAudio(), { once: true });
  }

  unlockAudio() {
    const Context = window.AudioContext || window.webkitAudioContext;
    if (!Context) return;
    try {
      this.audio = this.audio || new Context();
      if (this.audio.state === "suspended") this.audio.resume();
    } catch { this.audio = null; }
  }

  beep() {
    if (stored(SOUND_KEY, "on") !== "on") return;
    document.body.dataset.beeps = String(Number(document.body.dataset.beeps) + 1);
    this.unlockAudio();
    if (!this.audio) return;
    try { // two short tones, quiet: noticeable, not alarming
      const now = this.audio.currentTime;
      for (const [at, frequency] of [[0, 880], [0.16, 1175]]) {
        const tone = this.audio.createOscillator();
        const gain = this.audio.createGain();
        tone.frequency.value = frequency;
        gain.gain.setValueAtTime(0.0001, now + at);
        gain.gain.exponentialRampToValueAtTime(0.12, now + at + 0.02);
        gain.gain.exponentialRampToValueAtTime(0.0001, now + at + 0.14);
        tone.connect(gain).connect(this.audio.destination);
        tone.start(now + at);
        tone.stop(now + at + 0.15);
      }
    } catch { /* no sound device: the alert and the title still say it */ }
  }

  notify(title, body, conversation) {
    if (!("Notification" in window) || Notification.permission !== "granted" || stored(NOTIFY_KEY, "off") !== "on") return null;
    try {
      const note = new Notification(title, { body, tag: `sundry-${conversation}` });
      document.body.dataset.notifications = String(Number(document.body.dataset.notifications) + 1);
      note.onclick = () => {
        window.focus();
        window.location.assign(conversationUrl(conversation));
        note.close();
      };
      return note;
    } catch { /* some browsers allow notifications from a service worker only */ }
    return null;
  }
}
