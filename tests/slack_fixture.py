"""A local stand-in of Slack's Web API (a real HTTP server in this process, on a free port) with the site's Slack
settings pointed at it, and requests to the desk signed exactly as Slack signs them.

The stand-in answers the methods the desk calls (auth.test, chat.postMessage, chat.update, chat.postEphemeral,
views.open) as Slack does, refuses a call without the bot token, and records every call: `slack_api.calls_to(
"chat.update")` is the list of their arguments, in order.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlencode

import pytest

BOT_TOKEN = "xoxb-test-desk"
SIGNING_SECRET = "test-signing-secret-8f2c"
CHANNEL = "C0APPROVALS"
TEAM = "T0SUNDRY"


class FakeSlack:
    def __init__(self):
        self.calls: list[tuple[str, dict]] = []
        self._ts = itertools.count(1)
        self.lock = threading.Lock()

    def calls_to(self, method: str) -> list[dict]:
        with self.lock:
            return [args for name, args in self.calls if name == method]

    def answer(self, method: str, args: dict) -> dict:
        if method == "auth.test":
            return {"ok": True, "url": "https://sundry.example/", "team": "Sundry", "user": "desk", "team_id": TEAM,
                    "user_id": "U0DESKBOT", "bot_id": "B0DESKBOT"}
        if method == "chat.postMessage":
            ts = f"1700000000.{next(self._ts):06d}"
            return {"ok": True, "channel": args.get("channel"), "ts": ts, "message": {"ts": ts, "text": args.get("text")}}
        if method == "chat.update":
            return {"ok": True, "channel": args.get("channel"), "ts": args.get("ts"), "text": args.get("text")}
        if method == "chat.postEphemeral":
            return {"ok": True, "message_ts": f"1700000001.{next(self._ts):06d}"}
        if method == "views.open":
            return {"ok": True, "view": {"id": "V0REASON", **(args.get("view") or {})}}
        return {"ok": False, "error": "unknown_method"}


def _handler(fake: FakeSlack):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            method = self.path.rsplit("/", 1)[-1]
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
            if (self.headers.get("Content-Type") or "").startswith("application/json"):
                args = json.loads(raw or "{}")
            else:
                args = dict(parse_qsl(raw))
            for key in ("blocks", "view"):  # sent as JSON text in a form
                if isinstance(args.get(key), str):
                    args[key] = json.loads(args[key])
            if self.headers.get("Authorization") != f"Bearer {BOT_TOKEN}":
                body = {"ok": False, "error": "not_authed"}
            else:
                with fake.lock:
                    fake.calls.append((method, args))
                body = fake.answer(method, args)
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    return Handler


@pytest.fixture
def announced(monkeypatch):
    """The approval ids handed to Celery for e-mail and for Slack (support/desk/queue.py), instead of a broker."""
    sent = {"email": [], "slack": []}
    monkeypatch.setattr("support.desk.queue.email_approval", lambda approval_id: sent["email"].append(approval_id))
    monkeypatch.setattr("support.desk.queue.slack_approval", lambda approval_id: sent["slack"].append(approval_id))
    return sent


@pytest.fixture
def slack_api(settings, announced):
    """Slack's Web API, here; the desk's Slack settings set and pointed at it."""
    fake = FakeSlack()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    settings.SLACK_BOT_TOKEN, settings.SLACK_SIGNING_SECRET = BOT_TOKEN, SIGNING_SECRET
    settings.SLACK_APPROVALS_CHANNEL = CHANNEL
    settings.SLACK_API_URL = f"http://127.0.0.1:{server.server_address[1]}/api/"
    yield fake
    server.shutdown()
    server.server_close()


def signature(body: str, timestamp: str, secret: str = SIGNING_SECRET) -> str:
    """Slack's v0 signature: HMAC-SHA256 of "v0:<timestamp>:<body>" with the app's signing secret."""
    return "v0=" + hmac.new(secret.encode(), f"v0:{timestamp}:{body}".encode(), hashlib.sha256).hexdigest()


def slack_post(client, payload: dict, *, timestamp: int | None = None, secret: str = SIGNING_SECRET,
               sign: str | None = None):
    """POST an interaction payload to the desk as Slack does: form-encoded `payload=<json>`, signed."""
    body = urlencode({"payload": json.dumps(payload)})
    ts = str(int(time.time()) if timestamp is None else timestamp)
    return client.post("/slack/interactive/", data=body, content_type="application/x-www-form-urlencoded",
                       HTTP_X_SLACK_REQUEST_TIMESTAMP=ts,
                       HTTP_X_SLACK_SIGNATURE=sign if sign is not None else signature(body, ts, secret))


def button(slack_user: str, action_id: str, value: str, *, message_ts: str = "1700000000.000001") -> dict:
    """A block_actions payload: `slack_user` pressed a button of the approvals channel's message."""
    return {
        "type": "block_actions", "api_app_id": "A0DESK", "token": "unused-legacy-token",
        "team": {"id": TEAM, "domain": "sundry"}, "user": {"id": slack_user, "team_id": TEAM},
        "container": {"type": "message", "message_ts": message_ts, "channel_id": CHANNEL, "is_ephemeral": False},
        "channel": {"id": CHANNEL, "name": "approvals"}, "message": {"ts": message_ts, "type": "message"},
        "trigger_id": "1234567890.123456.abcdef", "response_url": "http://127.0.0.1:9/unused",
        "actions": [{"type": "button", "action_id": action_id, "block_id": "decide", "value": value,
                     "action_ts": str(time.time())}],
    }


def reason_submitted(slack_user: str, approval_id: str, reason: str) -> dict:
    """A view_submission payload: the reject modal sent with `reason`."""
    return {
        "type": "view_submission", "api_app_id": "A0DESK", "token": "unused-legacy-token",
        "team": {"id": TEAM, "domain": "sundry"}, "user": {"id": slack_user, "team_id": TEAM},
        "trigger_id": "1234567890.654321.fedcba",
        "view": {"id": "V0REASON", "type": "modal", "callback_id": "approval_reject_reason",
                 "private_metadata": approval_id, "team_id": TEAM,
                 "state": {"values": {"reason": {"reason_input": {"type": "plain_text_input", "value": reason}}}}},
    }
