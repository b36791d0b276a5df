// Internal notes on a conversation (staff only: never sent to the model or the customer) and the desk's saved
// replies (inserted into the reply box for editing before sending; created, edited and deleted here).

import { deskApi } from "./console-api.js";
import { announce, excerpt, fill, h, timeEl } from "./console-dom.js";

export class NotesPanel {
  constructor({ list, empty, form, input, error, id, socket }) {
    Object.assign(this, { list, empty, form, input, error, id });
    this.seen = new Set();
    socket.on("note.added", (e) => e.conversation === id && e.note && this.add(e.note));
    form.addEventListener("submit", (e) => this.submit(e));
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        form.requestSubmit();
      }
    });
  }

  async load() {
    try {
      const { notes } = await deskApi.notes(this.id);
      notes.forEach((n) => this.add(n));
    } catch (error) {
      console.warn("console: notes not read:", error.message);
    }
  }

  add(note) {
    if (this.seen.has(note.id)) return;
    this.seen.add(note.id);
    this.list.append(h("li", { class: "note", "data-testid": "note" },
      h("div", { class: "note-head" }, h("strong", {}, note.author || "staff"), " · ", timeEl(note.created_at, "note-time")),
      h("p", { class: "note-text", "data-testid": "note-text" }, note.text)));
    this.empty.hidden = true;
  }

  async submit(e) {
    e.preventDefault();
    const text = this.input.value.trim();
    this.error.hidden = true;
    if (!text) {
      this.error.textContent = "Write the note first.";
      this.error.hidden = false;
      this.input.focus();
      return;
    }
    const button = this.form.querySelector("button[type=submit]");
    button.disabled = true;
    try {
      const { note } = await deskApi.addNote(this.id, text);
      this.add(note);
      this.input.value = "";
      announce("Note saved. Only staff see it.");
    } catch (error) {
      this.error.textContent = error.message;
      this.error.hidden = false;
    } finally {
      button.disabled = false;
      this.input.focus();
    }
  }
}

export class SavedReplies {
  constructor({ select, insert, manage, reply }) {
    Object.assign(this, { select, insert, manage, reply });
    this.items = [];
    this.editing = null; // the reply being edited, or {} for a new one
    insert.addEventListener("click", () => this.insertChosen());
    select.addEventListener("keydown", (e) => {
      if (e.key === "Enter") {
        e.preventDefault();
        this.insertChosen();
      }
    });
  }

  async load() {
    try {
      ({ saved_replies: this.items } = await deskApi.savedReplies());
    } catch (error) {
      console.warn("console: saved replies not read:", error.message);
    }
    this.render();
    this.onChange?.(); // a "/" list opened before the replies arrived shows them now
  }

  render() {
    const chosen = this.select.value;
    fill(this.select, h("option", { value: "" }, this.items.length ? "Saved replies…" : "No saved replies yet"),
      this.items.map((r) => h("option", { value: r.id }, r.title)));
    this.select.value = this.items.some((r) => r.id === chosen) ? chosen : "";
    this.renderManage();
  }

  insertChosen() {
    const reply = this.items.find((r) => r.id === this.select.value);
    if (!reply) {
      this.select.focus();
      return;
    }
    // Into the reply box at the cursor (replacing a selection), to be adapted before sending.
    const box = this.reply;
    const start = box.selectionStart ?? box.value.length;
    const end = box.selectionEnd ?? box.value.length;
    box.value = box.value.slice(0, start) + reply.body + box.value.slice(end);
    box.focus();
    box.setSelectionRange(start + reply.body.length, start + reply.body.length);
    box.dispatchEvent(new Event("input", { bubbles: true }));
    announce(`Inserted “${reply.title}”. Edit it before sending.`);
  }

  renderManage() {
    const list = h("ul", { class: "plain-list saved-list", "data-testid": "saved-reply-list" }, this.items.map((r) => h("li", {},
      h("strong", {}, r.title), h("span", { class: "sub" }, ` ${excerpt(r.body, 70)} `),
      h("button", { type: "button", class: "btn btn-small", "data-testid": "saved-reply-edit", "aria-label": `Edit ${r.title}`,
        onclick: () => this.edit(r) }, "Edit"),
      h("button", { type: "button", class: "btn btn-small", "data-testid": "saved-reply-delete", "aria-label": `Delete ${r.title}`,
        onclick: () => this.remove(r) }, "Delete"))));
    const body = this.manage.querySelector("[data-manage-body]");
    fill(body, list, this.editing ? this.form() : h("button", { type: "button", class: "btn", "data-testid": "saved-reply-new",
      onclick: () => this.edit({}) }, "New saved reply"));
  }

  edit(reply) {
    this.editing = reply;
    this.renderManage();
    this.manage.querySelector("#saved-reply-title")?.focus();
  }

  form() {
    const r = this.editing;
    const error = h("p", { class: "error", role: "alert", hidden: true, "data-testid": "saved-reply-error" });
    const title = h("input", { id: "saved-reply-title", type: "text", maxlength: "80", value: r.title || "", "data-testid": "saved-reply-title" });
    const body = h("textarea", { id: "saved-reply-body", rows: "4", "data-testid": "saved-reply-body" });
    body.value = r.body || "";
    const form = h("form", { class: "action-form", novalidate: true, "data-testid": "saved-reply-form" },
      h("label", { for: "saved-reply-title" }, "Title"), title,
      h("label", { for: "saved-reply-body" }, "Reply"), body,
      h("div", { class: "actions" },
        h("button", { type: "submit", class: "btn btn-primary", "data-testid": "saved-reply-save" }, r.id ? "Save changes" : "Add"),
        h("button", { type: "button", class: "btn", onclick: () => { this.editing = null; this.renderManage(); } }, "Cancel")),
      error);
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      try {
        await deskApi.saveReply(r.id, { title: title.value, body: body.value });
        this.editing = null;
        announce("Saved reply stored.");
        await this.load();
      } catch (err) {
        error.textContent = err.message;
        error.hidden = false;
      }
    });
    return form;
  }

  async remove(reply) {
    if (!window.confirm(`Delete the saved reply “${reply.title}”?`)) return;
    try {
      await deskApi.deleteReply(reply.id);
      announce(`Deleted “${reply.title}”.`);
    } catch (error) {
      announce(error.message);
    }
    await this.load();
  }
}

/** Saved replies by typing "/" in the reply box (at its start or after a space): a list filtered as one types
 * ("/ref": titles and texts with "ref"), arrows to move, Enter or Tab to put the reply in place of "/ref", Esc to
 * close, a click or a tap too. The box is a combobox owning the list (aria-expanded, aria-activedescendant). */
export class SlashReplies {
  constructor({ box, pop, list, empty, items }) {
    Object.assign(this, { box, pop, list, empty, items });
    this.matches = [];
    this.active = 0;
    this.start = -1; // where the "/" is while the list is open
    this.dismissed = -1; // a "/" closed with Esc stays closed until another one is typed
    box.setAttribute("role", "combobox");
    box.setAttribute("aria-autocomplete", "list");
    box.setAttribute("aria-controls", list.id);
    box.setAttribute("aria-expanded", "false");
    box.addEventListener("input", () => this.follow());
    box.addEventListener("click", () => this.follow());
    box.addEventListener("blur", () => this.close());
    // Before the box's own keys (Enter sends): the form hears them first, in the capture phase.
    box.form.addEventListener("keydown", (e) => { if (e.target === box) this.key(e); }, { capture: true });
  }

  /** The "/query" just before the cursor, or null. */
  query() {
    const caret = this.box.selectionEnd;
    if (caret !== this.box.selectionStart) return null;
    const m = /(^|\s)\/([^\s/]{0,40})$/.exec(this.box.value.slice(0, caret));
    return m ? { start: caret - m[2].length - 1, text: m[2] } : null;
  }

  follow() {
    const q = this.query();
    if (!q || q.start === this.dismissed) {
      if (!q) this.dismissed = -1;
      this.close();
      return;
    }
    const words = q.text.toLowerCase();
    const all = this.items();
    const inTitle = all.filter((r) => r.title.toLowerCase().includes(words));
    const inBody = all.filter((r) => !inTitle.includes(r) && r.body.toLowerCase().includes(words));
    this.matches = [...inTitle, ...inBody];
    this.start = q.start;
    this.active = 0;
    this.render(q.text);
  }

  render(words) {
    fill(this.list, this.matches.map((r, i) => h("li", {
      id: `${this.list.id}-${i}`, role: "option", class: "slash-option", "aria-selected": String(i === this.active),
      "data-testid": "slash-option", onmousedown: (e) => e.preventDefault(), // the box keeps the focus
      onclick: () => this.insert(r),
    }, h("strong", {}, r.title), h("span", { class: "sub" }, excerpt(r.body, 90)))));
    const none = !this.items().length ? "No saved replies yet: add them under “Manage saved replies”."
      : `No saved reply matches “${words}”.`;
    this.empty.textContent = this.matches.length ? "" : none;
    this.empty.hidden = this.matches.length > 0;
    this.list.hidden = !this.matches.length;
    this.pop.hidden = false;
    this.box.setAttribute("aria-expanded", "true");
    this.showActive();
  }

  showActive() {
    [...this.list.children].forEach((li, i) => li.setAttribute("aria-selected", String(i === this.active)));
    const li = this.list.children[this.active];
    if (li) {
      this.box.setAttribute("aria-activedescendant", li.id);
      li.scrollIntoView({ block: "nearest" });
    } else {
      this.box.removeAttribute("aria-activedescendant");
    }
  }

  /** The open list again, from the replies as they are now (read after the list opened, or changed). */
  refresh() {
    if (!this.pop.hidden) this.follow();
  }

  close() {
    if (this.pop.hidden) return;
    this.pop.hidden = true;
    this.start = -1;
    this.box.setAttribute("aria-expanded", "false");
    this.box.removeAttribute("aria-activedescendant");
  }

  key(e) {
    if (this.pop.hidden || e.isComposing) return;
    const n = this.matches.length;
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      if (!n) return;
      e.preventDefault();
      this.active = (this.active + (e.key === "ArrowDown" ? 1 : n - 1)) % n;
      this.showActive();
    } else if ((e.key === "Enter" && !e.shiftKey) || (e.key === "Tab" && !e.shiftKey && n)) {
      e.preventDefault(); // not sent: with nothing matching, Enter closes the list and the next one sends
      if (n) this.insert(this.matches[this.active]);
      else this.dismiss();
    } else if (e.key === "Escape") {
      e.preventDefault();
      e.stopPropagation();
      this.dismiss();
    }
  }

  dismiss() {
    this.dismissed = this.start;
    this.close();
  }

  insert(reply) {
    const box = this.box;
    const end = box.selectionEnd;
    const start = this.start;
    box.value = box.value.slice(0, start) + reply.body + box.value.slice(end);
    this.close();
    box.focus();
    box.setSelectionRange(start + reply.body.length, start + reply.body.length);
    box.dispatchEvent(new Event("input", { bubbles: true }));
    announce(`Inserted “${reply.title}”. Edit it before sending.`);
  }
}
