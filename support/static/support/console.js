// The staff console's entry point: one staff socket and one approval store per page, then the page's part
// (the conversation list with the queue beside it, one conversation, or the approval queue).

import { BulkDecisions } from "./console-approval-bulk.js";
import { ApprovalList } from "./console-approval-list.js";
import { whenViewer } from "./console-approvals.js";
import { ConversationPage } from "./console-conversation.js";
import { tickTimes } from "./console-dom.js";
import { ConversationList, bindNextConversation, keepRead } from "./console-list.js";
import { Alerts } from "./console-notify.js";
import { StaffSocket } from "./console-socket.js";
import { ApprovalStore, bindApprovalsBadge } from "./console-store.js";

const $ = (testid) => document.querySelector(`[data-testid="${testid}"]`);
const body = document.body;
const socket = new StaffSocket($("connection-status"));
const store = new ApprovalStore(socket);
bindApprovalsBadge(store, $("approvals-badge"));

// On every page: alerts for hand-overs and approval requests, the counts in the title and the nav.
new Alerts({ socket, store, badge: $("inbox-badge"), optin: $("notify-optin"), sound: $("sound-toggle"), region: $("alerts") });

function indexPage() {
  new ApprovalList($("approval-queue"), { store, mode: "pending", empty: $("approval-queue-empty") });
  new ConversationList({
    socket, list: $("conversation-list"), empty: $("conversation-list-empty"), count: $("conversation-count"),
    filter: $("inbox-filter"), search: $("inbox-search"), sort: $("inbox-sort"), more: $("inbox-more"),
  });
}

function approvalsPage() {
  let list = null;
  const bulk = new BulkDecisions({ bar: $("bulk-bar"), results: $("bulk-results"), store, shown: () => (list ? list.pendingShown() : []) });
  list = new ApprovalList($("approval-queue"), { store, mode: "pending", empty: $("approval-queue-empty"), heading: "h2", keys: true, selection: bulk });
  const tabs = [...$("approval-filter").querySelectorAll("button[data-filter]")];
  const wanted = new URLSearchParams(window.location.search).get("status");
  const choose = (mode, push) => {
    for (const tab of tabs) tab.setAttribute("aria-pressed", String(tab.dataset.filter === mode));
    $("approval-queue-empty").textContent = mode === "pending" ? "Nothing is waiting for a decision." : "No decisions yet.";
    if (push) {
      const url = new URL(window.location.href);
      url.searchParams.set("status", mode);
      window.history.replaceState(null, "", url);
    }
    list.setMode(mode);
    whenViewer((viewer) => bulk.show(mode === "pending" && viewer.can_decide)); // deciding together: the waiting queue
  };
  for (const tab of tabs) tab.addEventListener("click", () => choose(tab.dataset.filter, true));
  choose(["pending", "decided", "all"].includes(wanted) ? wanted : "pending", false);
}

function conversationPage() {
  new ConversationPage({ socket, store, id: body.dataset.conversation, me: body.dataset.staffUsername });
  keepRead(socket, body.dataset.conversation); // this staff member's unread count in the inbox
  bindNextConversation(body.dataset.conversation); // "n": the next conversation of the inbox
}

({ index: indexPage, approvals: approvalsPage, conversation: conversationPage })[body.dataset.page]?.();
socket.connect();
window.setInterval(() => tickTimes(), 15000);
