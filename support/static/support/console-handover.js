// "Why this needs a person": one short summary, read from GET /api/staff/conversations/<id>/handover (built
// by support/desk/selectors_handover.py) and read again whenever the conversation changes (a refund, a reply,
// the customer writing, a take-over, a close), so it always says how things stand now. Hidden when nothing
// waits for a person.

import { coalesced, deskApi } from "./console-api.js";
import { fill, h } from "./console-dom.js";

export class HandoverPanel {
  constructor({ panel, body, id, onChange }) {
    this.panel = panel;
    this.body = body;
    this.id = id;
    this.onChange = onChange || (() => {});
    this.data = null;
    /** Read it again (one read at a time, one more if asked meanwhile). */
    this.load = coalesced(async () => {
      try {
        ({ handover: this.data } = await deskApi.handover(this.id));
        this.render();
      } catch (error) {
        console.warn("console: the hand-over summary was not read:", error.message);
      }
    });
  }

  get shown() {
    return !this.panel.hidden;
  }

  render() {
    const d = this.data;
    this.panel.hidden = !d;
    if (d) {
      const row = (term, testid, ...value) => [h("dt", {}, term), h("dd", { "data-testid": testid }, ...value)];
      fill(this.body, h("dl", { class: "handover-facts" },
        d.wants ? row("The customer wants", "handover-wants", d.wants) : null,
        d.found.length ? row("The agent found", "handover-found", d.found.map((f, i) => [i ? " " : "", `${f}.`])) : null,
        d.done.length ? row("Done since", "handover-done", `${d.done.join("; ")}.`) : null,
        row("Left for you", "handover-left", h("strong", {}, d.left))));
    }
    this.onChange();
  }
}
