// The staff JSON API (docs/api.md): every POST carries the csrftoken cookie's value in X-CSRFToken.

export class ApiError extends Error {
  /** status: HTTP status (0: unreachable); code: the API's stable error code; body: the whole error answer. */
  constructor(status, message, code = null, body = null) {
    super(message);
    this.status = status;
    this.code = code;
    this.body = body;
  }
}

function csrfToken() {
  for (const part of document.cookie.split(";")) {
    const [name, ...rest] = part.trim().split("=");
    if (name === "csrftoken") return decodeURIComponent(rest.join("="));
  }
  return "";
}

async function call(path, { method = "GET", body } = {}) {
  const options = { method, credentials: "same-origin", headers: { Accept: "application/json" } };
  if (method !== "GET") {
    options.headers["Content-Type"] = "application/json";
    options.headers["X-CSRFToken"] = csrfToken();
    options.body = JSON.stringify(body ?? {});
  }
  let response;
  try {
    response = await fetch(`/api/staff/${path}`, options);
  } catch {
    throw new ApiError(0, "The server could not be reached. Check the connection and try again.");
  }
  let data = null;
  try {
    data = await response.json();
  } catch {
    data = null;
  }
  if (!response.ok) {
    throw new ApiError(response.status, (data && data.error) || `The server answered ${response.status}.`,
      data && data.code, data);
  }
  return data;
}

/** A reader that reads once at a time: asked again meanwhile, it reads once more after (never twice at once,
 * and never missing a change that came while it read). `read` is an async function; the promise is the read's. */
export function coalesced(read) {
  let running = null;
  let again = false;
  const run = () => {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      try {
        await read();
      } finally {
        running = null;
        if (again) {
          again = false;
          run();
        }
      }
    })();
    return running;
  };
  return run;
}

const id = (value) => encodeURIComponent(value);
const query = (status) => (status ? `?status=${encodeURIComponent(status)}` : "");

export const staffApi = {
  conversations: (status) => call(`conversations${query(status)}`),
  conversation: (conversationId) => call(`conversations/${id(conversationId)}`),
  approvals: (status = "pending") => call(`approvals${query(status)}`),
  approve: (approvalId, args) =>
    call(`approvals/${id(approvalId)}/approve`, { method: "POST", body: args === undefined ? {} : { arguments: args } }),
  reject: (approvalId, reason) => call(`approvals/${id(approvalId)}/reject`, { method: "POST", body: { reason } }),
  decide: (approvalId, verb, body) => call(`approvals/${id(approvalId)}/${verb}`, { method: "POST", body }),
  decideMany: (approvalIds, decision, reason) =>
    call("approvals/bulk", { method: "POST", body: { approvals: approvalIds, decision, reason } }),
  takeOver: (conversationId) => call(`conversations/${id(conversationId)}/takeover`, { method: "POST" }),
  handBack: (conversationId) => call(`conversations/${id(conversationId)}/handback`, { method: "POST" }),
  // `draft`: the copilot draft the text came from, so the desk records how much the person changed it.
  reply: (conversationId, text, draft) =>
    call(`conversations/${id(conversationId)}/messages`, { method: "POST", body: draft ? { text, draft } : { text } }),
};

// The copilot (docs/copilot.md): this person's runs on a conversation and the latest summary; starting one.
export const copilotApi = {
  runs: (conversationId) => call(`conversations/${id(conversationId)}/copilot`),
  start: (conversationId, kind, question = "") =>
    call(`conversations/${id(conversationId)}/copilot`, { method: "POST", body: { kind, question } }),
};

// The inbox (support/web/views/inbox.py): rows for this staff member, counts, and the inbox actions.
const params = (values) => {
  const q = new URLSearchParams();
  for (const [key, value] of Object.entries(values)) if (value !== undefined && value !== null && value !== "") q.set(key, value);
  const text = q.toString();
  return text ? `?${text}` : "";
};

export const inboxApi = {
  list: ({ filter, q, sort, limit, ids } = {}) =>
    call(`inbox${params({ filter, q, sort, limit, ids: ids && ids.join(",") })}`),
  counts: () => call("inbox/counts"),
  colleagues: () => call("colleagues"),
  take: (conversationId) => call(`conversations/${id(conversationId)}/take`, { method: "POST" }),
  assign: (conversationId, username) =>
    call(`conversations/${id(conversationId)}/assign`, { method: "POST", body: { assignee: username } }),
  close: (conversationId) => call(`conversations/${id(conversationId)}/close`, { method: "POST" }),
  reopen: (conversationId) => call(`conversations/${id(conversationId)}/reopen`, { method: "POST" }),
  read: (conversationId, seq) => call(`conversations/${id(conversationId)}/read`, { method: "POST", body: seq === undefined ? {} : { seq } }),
};

// Working a conversation (support/web/views/desk.py): its customer's context, refunds and seller messages by a
// person (`key`: the same key twice does it once), the actions on record, notes, saved replies.
export const deskApi = {
  context: (conversationId) => call(`conversations/${id(conversationId)}/context`),
  handover: (conversationId) => call(`conversations/${id(conversationId)}/handover`),
  actions: (conversationId) => call(`conversations/${id(conversationId)}/actions`),
  refund: (conversationId, body) => call(`conversations/${id(conversationId)}/refunds`, { method: "POST", body }),
  messageSeller: (conversationId, body) =>
    call(`conversations/${id(conversationId)}/seller-messages`, { method: "POST", body }),
  notes: (conversationId) => call(`conversations/${id(conversationId)}/notes`),
  addNote: (conversationId, text) => call(`conversations/${id(conversationId)}/notes`, { method: "POST", body: { text } }),
  savedReplies: () => call("saved-replies"),
  saveReply: (replyId, body) => (replyId
    ? call(`saved-replies/${id(replyId)}`, { method: "PUT", body })
    : call("saved-replies", { method: "POST", body })),
  deleteReply: (replyId) => call(`saved-replies/${id(replyId)}`, { method: "DELETE" }),
};

// What the customer said of the conversation, and "Sam is typing…" for them (support/web/views/feedback.py).
export const feedbackApi = {
  rating: (conversationId) => call(`conversations/${id(conversationId)}/rating`),
  typing: (conversationId) => call(`conversations/${id(conversationId)}/typing`, { method: "POST" }),
};
