// The staff socket (docs/events.md): list-level events of every conversation, plus the events of the
// conversations this page watches. Reconnects with exponential backoff and jitter; on every (re)open it
// watches again from the last seq this page has, so the server replays exactly what was missed. While
// open, a watched conversation's seqs are checked for holes (the live path may lose an event or deliver
// two out of order): a hole, or a pong naming a later last seq, asks for a replay again.

const PING_EVERY_MS = 20000;
const PONG_WITHIN_MS = 8000;
const MAX_BACKOFF_MS = 15000;
const GAP_GRACE_MS = 1500; // a merely late event (another process published it) may still arrive
const IDLE_CHECK_MS = 4000; // after a watched conversation goes quiet, ask for its last seq once

/** The seqs of one watched conversation this page has: all up to `covered`, some `ahead` of it. */
class SeqTrack {
  constructor(lastSeq) {
    this.lastSeq = lastSeq; // () => the page's highest seq, until a replay has said what is covered
    this.covered = null;
    this.ahead = new Set();
    this.wanted = 0;
    this.timer = null;
  }

  /** The last_seq to watch from: what is covered, which is never past a hole. */
  from() {
    if (this.covered === null) this.covered = this.lastSeq();
    return this.covered;
  }

  got(seq, askAgain) {
    if (this.covered === null) return;
    if (seq > this.covered) this.ahead.add(seq);
    while (this.ahead.delete(this.covered + 1)) this.covered += 1;
    this.expect(seq, askAgain);
  }

  expect(seq, askAgain) {
    if (this.covered === null) return;
    this.wanted = Math.max(this.wanted, seq);
    if (this.wanted > this.covered && !this.timer) {
      this.timer = window.setTimeout(() => {
        this.timer = null;
        if (this.wanted > this.covered) askAgain(this.covered);
      }, GAP_GRACE_MS);
    }
  }

  /** replay.done: every seq up to `seq` is here now. */
  replayed(seq) {
    this.covered = Math.max(this.covered ?? 0, seq);
    for (const s of this.ahead) if (s <= this.covered) this.ahead.delete(s);
    while (this.ahead.delete(this.covered + 1)) this.covered += 1;
    this.stop();
    this.wanted = this.covered; // the database's word: nothing else is owed
  }

  stop() {
    window.clearTimeout(this.timer);
    this.timer = null;
  }
}

export class StaffSocket {
  constructor(indicator) {
    this.indicator = indicator;
    this.handlers = new Map();
    this.openHandlers = [];
    this.watches = new Map(); // conversation id -> SeqTrack
    this.attempt = 0;
    this.opens = 0;
    this.ws = null;
    this.retryTimer = null;
    this.pingTimer = null;
    this.pongTimer = null;
    this.idleTimer = null;
    this.gaveUp = false;
    window.addEventListener("online", () => this.reconnectNow());
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "visible") this.reconnectNow();
    });
  }

  /** handler(event) for one event type; "*" receives every event. */
  on(type, handler) {
    if (!this.handlers.has(type)) this.handlers.set(type, []);
    this.handlers.get(type).push(handler);
  }

  /** handler({reconnected}) after every successful open: re-fetch what may have been missed. */
  onOpen(handler) {
    this.openHandlers.push(handler);
  }

  watch(conversationId, lastSeq) {
    this.watches.set(conversationId, new SeqTrack(lastSeq));
    if (this.isOpen()) this.sendWatch(conversationId, this.watches.get(conversationId).from());
  }

  sendWatch(conversation, lastSeq) {
    this.send({ type: "watch", conversation, last_seq: lastSeq });
  }

  isOpen() {
    return this.ws !== null && this.ws.readyState === WebSocket.OPEN;
  }

  send(frame) {
    if (this.isOpen()) this.ws.send(JSON.stringify(frame));
  }

  connect() {
    if (this.gaveUp) return;
    window.clearTimeout(this.retryTimer);
    this.retryTimer = null;
    this.show(this.opens ? "reconnecting" : "connecting", this.opens ? "Reconnecting…" : "Connecting…");
    const scheme = window.location.protocol === "https:" ? "wss" : "ws";
    const ws = new WebSocket(`${scheme}://${window.location.host}/ws/staff/`);
    this.ws = ws;
    ws.addEventListener("open", () => this.opened(ws));
    ws.addEventListener("message", (message) => this.received(ws, message));
    ws.addEventListener("close", (event) => this.closed(ws, event));
  }

  reconnectNow() {
    if (this.gaveUp || this.isOpen() || (this.ws && this.ws.readyState === WebSocket.CONNECTING)) return;
    this.attempt = 0;
    this.connect();
  }

  opened(ws) {
    if (ws !== this.ws) return;
    const reconnected = this.opens > 0;
    this.opens += 1;
    this.attempt = 0;
    this.show("live", "Live");
    for (const [conversation, track] of this.watches) {
      track.stop();
      this.sendWatch(conversation, track.from());
    }
    this.schedulePing();
    for (const handler of this.openHandlers) handler({ reconnected });
  }

  received(ws, message) {
    if (ws !== this.ws) return;
    window.clearTimeout(this.pongTimer); // anything from the server proves the connection is alive
    let event;
    try {
      event = JSON.parse(message.data);
    } catch {
      return;
    }
    if (!event || typeof event.type !== "string") return;
    this.track(event);
    for (const handler of [...(this.handlers.get(event.type) || []), ...(this.handlers.get("*") || [])]) {
      try {
        handler(event);
      } catch (error) {
        console.error("console: handling", event.type, error);
      }
    }
  }

  /** Follows the seqs of watched conversations; asks for a replay when one is missing. */
  track(event) {
    if (event.type === "pong") {
      for (const [conversation, seq] of Object.entries(event.seqs || {})) {
        this.watches.get(conversation)?.expect(seq, (from) => this.sendWatch(conversation, from));
      }
      return;
    }
    const conversation = event.conversation;
    const track = this.watches.get(conversation);
    if (!track) return;
    const askAgain = (from) => this.sendWatch(conversation, from);
    if (event.type === "message.saved") track.got(event.seq, askAgain);
    else if (event.type === "replay.done") track.replayed(event.seq);
    window.clearTimeout(this.idleTimer); // quiet for a while: check for a lost last event
    this.idleTimer = window.setTimeout(() => this.send({ type: "ping" }), IDLE_CHECK_MS);
  }

  closed(ws, event) {
    if (ws !== this.ws) return;
    window.clearTimeout(this.pingTimer);
    window.clearTimeout(this.pongTimer);
    window.clearTimeout(this.idleTimer);
    for (const track of this.watches.values()) track.stop();
    this.ws = null;
    if (event.code === 4403) {
      // Not (or no longer) a logged-in staff member: retrying cannot help.
      this.gaveUp = true;
      this.show("denied", "Signed out: reload to log in");
      return;
    }
    const base = Math.min(MAX_BACKOFF_MS, 500 * 2 ** this.attempt);
    const delay = Math.round(base * (0.75 + Math.random() * 0.5));
    this.attempt += 1;
    this.show("offline", `Offline · retrying in ${Math.max(1, Math.round(delay / 1000))} s`);
    this.retryTimer = window.setTimeout(() => this.connect(), delay);
  }

  schedulePing() {
    window.clearTimeout(this.pingTimer);
    this.pingTimer = window.setTimeout(() => {
      if (!this.isOpen()) return;
      this.send({ type: "ping" });
      const ws = this.ws;
      this.pongTimer = window.setTimeout(() => { // a silent, dead connection: drop it and dial again
        this.closed(ws, { code: 4000 });
        ws.close();
      }, PONG_WITHIN_MS);
      this.schedulePing();
    }, PING_EVERY_MS);
  }

  show(state, text) {
    if (!this.indicator) return;
    this.indicator.dataset.state = state;
    this.indicator.querySelector("[data-connection-text]").textContent = text;
  }
}
