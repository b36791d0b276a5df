"""Scale-out: two daphne processes, two Celery workers and the beat behind HAProxy (deploy/haproxy.cfg as
shipped), on one PostgreSQL database and one Redis, every part a real process.

Customers reach the desk only through the balancer. The tests show that
- sockets and requests are spread over both daphnes and runs over both workers; every socket gets its run's
  events whichever process ran the run and whichever took the message; a request id set by the balancer is
  on the worker's log lines for the run it caused; when one daphne dies, requests keep being answered and
  its customers reconnect through the balancer to the other and are replayed what they missed;
- a staff decision sent through daphne B resumes a run that paused on the other worker (the one that paused
  it is gone), with the session opened through daphne A; one conversation's rate limit is counted by both
  daphnes together; `manage.py check_workers` sees the worker left and the beat's sweeper;
- a daphne killed while an answer streams through it: the customer reconnects through the balancer and
  every message reaches them once; a worker killed while it streams: the beat's sweeper requeues the run
  and the other worker finishes it, with a sound history and nothing lost or doubled for the customer.
No clock in the assertions: each wait is for a condition, with a generous deadline.

PostgreSQL only: several processes writing one SQLite file is not a supported deployment (docs/deploy.md).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from email.message import Message
from pathlib import Path

import pytest
from django.conf import settings
from websockets.sync.client import connect as ws_connect

from support.customers import identity
from support.models import Run
from tests.redis_fixture import free_port as _free_port

from .conftest import HEARTBEAT_SECONDS, ROOT, STALE_SECONDS, database_url, snapshot, wait_for

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not settings.DATABASES["default"]["ENGINE"].endswith("postgresql"),
                       reason="scale-out needs PostgreSQL: several processes on one SQLite file is not a supported "
                              "deployment (.ci/run runs this test in its PostgreSQL pass)"),
    pytest.mark.timeout(240),
]

QUESTION = "Where is my order SU-41210?"


# -- the processes --------------------------------------------------------------------------------------

def haproxy_binary() -> str:
    """Debian's haproxy; installed here when missing and we are root (as CI is), else the test is skipped."""
    found = shutil.which("haproxy") or ("/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None)
    if found is None and os.geteuid() == 0:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, timeout=300)
        subprocess.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", "haproxy"], env=env,
                       capture_output=True, timeout=300)
        found = shutil.which("haproxy") or ("/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None)
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("haproxy is required for the scale-out test and could not be installed")
        pytest.skip("haproxy is not installed (apt-get install --no-install-recommends haproxy)")
    return found


class Process:
    """A server process with its output in a log file; stopped (SIGTERM, then SIGKILL) at the end."""

    def __init__(self, name: str, args: list[str], env: dict, log_dir: Path):
        self.name, self.log_path = name, log_dir / f"{name}.log"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(8)
            except subprocess.TimeoutExpired:
                self.kill()


# The beat runs the sweeper every second in these tests, so a run whose worker died is resumed within
# STALE_SECONDS + 1 s; a run's messages per minute are few, so one test can show the limit is shared.
SWEEP_SECONDS = 1
MESSAGES_PER_MINUTE = 4


@pytest.fixture
def cluster(demo, worker, redis_server, model_server, tmp_path, request):
    """Two workers (each with its metrics endpoint), the beat, two daphnes and HAProxy in front of them;
    yields the balancer's base URL and the parts. Everything logs JSON."""
    haproxy = haproxy_binary()
    started: list[Process] = []
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "agentsite.settings", "DATABASE_URL": database_url(),
           "REDIS_URL": redis_server, "LIMITS_REDIS_URL": redis_server, "MODEL_BASE_URL": model_server.base_url,
           "LOG_FORMAT": "json", "PYTHONUNBUFFERED": "1", "TRUSTED_PROXIES": "1",
           "RUN_STALE_SECONDS": str(STALE_SECONDS), "RUN_HEARTBEAT_SECONDS": str(HEARTBEAT_SECONDS),
           "RUN_SWEEP_SECONDS": str(SWEEP_SECONDS), "MESSAGES_PER_MINUTE": str(MESSAGES_PER_MINUTE)}
    metrics_ports = [_free_port(), _free_port()]
    workers = [worker(concurrency=2, WORKER_METRICS_PORT=port, LOG_FORMAT="json", RUN_SWEEP_SECONDS=SWEEP_SECONDS)
               for port in metrics_ports]
    web_ports, lb_port = [_free_port(), _free_port()], _free_port()
    try:
        for i, port in enumerate(web_ports, 1):
            started.append(Process(f"web{i}", [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                                               "agentsite.asgi:application"], env, tmp_path))
        started.append(Process("beat", [sys.executable, "-m", "celery", "-A", "agentsite", "beat", "--loglevel",
                                        "info", "--schedule", str(tmp_path / "beat-schedule")], env, tmp_path))
        lb_env = {**env, "DESK_BIND": f"127.0.0.1:{lb_port}", "DESK_WEB1": f"127.0.0.1:{web_ports[0]}",
                  "DESK_WEB2": f"127.0.0.1:{web_ports[1]}",
                  # the static files: a daphne with DEBUG on serves them, standing in for a file server
                  "DESK_STATIC": f"127.0.0.1:{web_ports[1]}"}
        # A stats listener for the test only (a second file: the shipped one stays as it is), so the fixture
        # can wait until HAProxy itself counts every server up, not only the first to pass its checks.
        stats_port = _free_port()
        (tmp_path / "stats.cfg").write_text(
            f"listen stats\n    bind 127.0.0.1:{stats_port}\n    stats enable\n    stats uri /stats\n")
        started.append(Process("haproxy", [haproxy, "-db", "-f", str(ROOT / "deploy" / "haproxy.cfg"),
                                           "-f", str(tmp_path / "stats.cfg")], lb_env, tmp_path))
        webs = [f"http://127.0.0.1:{port}" for port in web_ports]
        for base in webs:
            wait_for(lambda: get(base + "/readyz")[0] == 200, timeout=30, message=f"{base}/readyz",
                     describe=lambda: "\n".join(p.log()[-2000:] for p in started))
        balancer = f"http://127.0.0.1:{lb_port}"
        stats = f"http://127.0.0.1:{stats_port}/stats;csv"
        wait_for(lambda: servers_up(stats) == {"web1", "web2", "static"}, timeout=30,
                 message="HAProxy to count every server up", describe=lambda: f"{servers_up(stats)}\n"
                 + started[-1].log()[-2000:])
        yield Desk(balancer, webs, started[:2], workers,
                   [f"http://127.0.0.1:{port}/metrics" for port in metrics_ports], started[-1])
    finally:
        for p in started:
            p.stop()
        report = getattr(request.node, "rep_call", None)
        if report is not None and report.failed:
            for p in started:
                print(f"\n----- log of {p.name} -----\n{p.log()[-5000:]}")


def servers_up(stats_csv_url: str) -> set[str]:
    """The servers HAProxy's stats page (CSV) says are UP."""
    status, body = get(stats_csv_url)
    if status != 200:
        return set()
    lines = body.decode().splitlines()
    header = lines[0].lstrip("# ").split(",")
    rows = [dict(zip(header, line.split(","))) for line in lines[1:] if line]
    return {row["svname"] for row in rows if row["svname"] not in ("FRONTEND", "BACKEND") and row["status"] == "UP"}


class Desk:
    def __init__(self, url, webs, daphnes, workers, worker_metrics, balancer):
        self.url, self.webs, self.daphnes, self.workers = url, webs, daphnes, workers
        self.worker_metrics, self.balancer = worker_metrics, balancer


# -- talking to it -----------------------------------------------------------------------------------------

def get(url: str, headers: dict | None = None) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except OSError:
        return 0, b""


def post(url: str, body: dict, headers: dict | None = None) -> tuple[int, dict, Message]:
    """(status, JSON body, response headers: read them case-blind)."""
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, json.loads(r.read() or b"{}"), r.headers
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}"), e.headers


def samples(url: str) -> dict[str, float]:
    status, body = get(url)
    assert status == 200, f"{url}: {status}"
    out = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            key, _, number = line.rpartition(" ")
            out[key] = float(number)
    return out


def total(metrics: dict[str, float], name: str, **labels) -> float:
    want = [f'{k}="{v}"' for k, v in labels.items()]
    return sum(v for k, v in metrics.items()
               if k.split("{")[0] == name and all(w in k for w in want))


class Customer:
    """One customer's conversation, opened through the balancer, with a socket on whichever daphne it got."""

    def __init__(self, desk: Desk, email: str):
        self.desk = desk
        status, body, _ = post(desk.url + "/api/conversations", {"customer_token": identity.customer_token(email)})
        assert status in (200, 201), body
        self.id, self.token = body["conversation"]["id"], body["token"]
        self.covered, self.seen, self.events = 0, set(), []
        self.received: list[int] = []  # the seq of every message event that reached this customer, in order
        self.connect()

    def connect(self, last_seq: int | None = None) -> None:
        host = self.desk.url.removeprefix("http://")
        self.ws = ws_connect(f"ws://{host}/ws/conversations/{self.id}/", origin=self.desk.url, open_timeout=10,
                             legacy=True)  # closed by the test's end (or by the daphne's death)
        last_seq = self.covered if last_seq is None else last_seq
        self.ws.send(json.dumps({"type": "resume", "token": self.token, "last_seq": last_seq}))
        self.until(lambda e: e["type"] == "replay.done")

    def say(self, text: str) -> str:
        """Post a message through the balancer; returns the request id it was given (the desk answers it)."""
        status, body, headers = post(f"{self.desk.url}/api/conversations/{self.id}/messages", {"text": text},
                                     {"Authorization": f"Bearer {self.token}", "X-Request-ID": "client-chosen"})
        assert status == 202, body
        return headers["X-Request-ID"]

    def until(self, done, timeout: float = 30.0) -> dict:
        """Read events until one satisfies `done`, keeping `covered`: every seq up to it has arrived."""
        deadline = time.monotonic() + timeout
        while True:
            event = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            self.events.append(event)
            if event["type"] in ("message.saved", "message.hidden", "message.accepted"):
                self.seen.add(event["seq"])
                self.received.append(event["seq"])
            elif event["type"] == "replay.done":
                self.seen.update(range(1, event["seq"] + 1))
            while self.covered + 1 in self.seen:
                self.covered += 1
            if done(event):
                return event

    def answered(self) -> dict:
        """The agent's answer to the last message: a saved assistant message, then the run stopped."""
        self.until(lambda e: e["type"] == "run.status" and e["status"] == "stopped")
        return next(e for e in reversed(self.events) if e["type"] == "message.saved"
                    and e["message"]["role"] == "assistant" and e["message"].get("content"))


# -- the test --------------------------------------------------------------------------------------------

def test_two_daphnes_and_two_workers_behind_the_balancer_serve_every_customer_and_survive_a_lost_daphne(
        cluster, model_server):
    desk = cluster
    model_server.configure(latency_ms=300)  # runs overlap, so both workers take some
    emails = ["maya@example.com", "tom@example.com", "ines@example.com", "maya@example.com"]
    customers = [Customer(desk, email) for email in emails]

    # Sockets were spread over both daphnes (open connections decide where the next goes).
    per_daphne = [total(samples(w + "/metrics"), "desk_websockets_open", socket="customer") for w in desk.webs]
    assert sum(per_daphne) == 4 and min(per_daphne) >= 1, per_daphne

    request_ids = [customer.say(QUESTION) for customer in customers]
    assert "client-chosen" not in request_ids  # the balancer sets the id, whatever a client sent
    for customer in customers:
        assert customer.answered()["message"]["content"]
    runs = {c.id: Run.objects.get(conversation__public_id=c.id) for c in customers}
    assert {(r.status, r.stop_reason) for r in runs.values()} == {("stopped", "answered")}, [
        snapshot(r.conversation) for r in runs.values()]

    # Both workers ran runs, and each said so on its own metrics endpoint; both daphnes answered the API.
    answered = [total(samples(url), "desk_run_tasks_total", result="answered") for url in desk.worker_metrics]
    assert sum(answered) == 4 and min(answered) >= 1, answered
    served = [total(samples(w + "/metrics"), "desk_http_requests_total") for w in desk.webs]
    assert min(served) >= 1, served

    # The balancer's id for a message is on its own log line, and on the worker's lines for the run it queued.
    run_0 = str(runs[customers[0].id].public_id)
    lines = [json.loads(line) for w in desk.workers for line in w.log().splitlines() if line.startswith("{")]
    tagged = [line for line in lines if line.get("run") == run_0]
    assert tagged and {line.get("request_id") for line in tagged} == {request_ids[0]}, tagged[:3]
    assert any("succeeded" in line["message"] for line in tagged)
    assert f"id={request_ids[0]}" in desk.balancer.log()
    for path in ("/metrics", "/%6Detrics", "/%6detrics", "/m%65trics", "/metrics?x=1"):
        assert get(desk.url + path)[0] == 404, path  # scraped at each process's own address, never here
    status, script = get(desk.url + "/static/support/widget.js")
    assert status == 200 and script  # through the static backend

    # One daphne dies. Requests through the balancer are all answered, even before its check notices.
    desk.daphnes[0].kill()
    for customer in customers:
        status, _ = get(f"{desk.url}/api/conversations/{customer.id}", {"Authorization": f"Bearer {customer.token}"})
        assert status == 200
    lost = [c for c in customers if _closed(c)]
    assert len(lost) == per_daphne[0], "the sockets of the daphne that died are closed, and only those"
    # Every customer writes again. Those still connected are answered live; the others, once their run is
    # over, reconnect through the balancer (to the daphne left) and are replayed the answer they missed.
    for customer in customers:
        customer.say("Thanks. And when will it arrive?")
    for customer in customers:
        if customer not in lost:
            assert customer.answered()["message"]["content"]
    for customer in lost:
        before = customer.covered
        wait_for(lambda: Run.objects.filter(conversation__public_id=customer.id, status="stopped").count() == 2,
                 timeout=30, message=f"the second run of {customer.id}")
        customer.connect()
        replayed = [e for e in customer.events if e["type"] == "message.saved" and e["seq"] > before]
        assert any(e["message"]["role"] == "assistant" and e["message"].get("content") for e in replayed)
    wait_for(lambda: get(desk.url + "/readyz")[0] == 200, timeout=10, message="the balancer's readiness")
    assert total(samples(desk.webs[1] + "/metrics"), "desk_websockets_open", socket="customer") == 4


def _closed(customer: Customer) -> bool:
    """Whether the customer's socket was closed by its daphne's death (read until the close, or 2 s)."""
    from websockets.exceptions import ConnectionClosed

    try:
        while True:
            customer.events.append(json.loads(customer.ws.recv(timeout=2)))
    except ConnectionClosed:
        return True
    except TimeoutError:
        return False


# -- a decision through the other daphne, on the other worker; sessions and limits shared -----------------

class Staff:
    """A staff member's browser: one cookie jar for every process (cookies do not care about ports), so a
    session opened through one daphne is sent to the other."""

    def __init__(self):
        import http.cookiejar

        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def cookie(self, name: str) -> str:
        return next(c.value for c in self.jar if c.name == name)

    def open(self, url: str, data: bytes | None = None, headers: dict | None = None) -> tuple[int, bytes]:
        try:
            with self.opener.open(urllib.request.Request(url, data=data, headers=headers or {}), timeout=10) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def log_in(self, base: str, username: str, password: str) -> None:
        from urllib.parse import urlencode

        self.open(base + "/accounts/login/")
        status, _ = self.open(base + "/accounts/login/", urlencode({
            "username": username, "password": password, "csrfmiddlewaretoken": self.cookie("csrftoken")}).encode(),
            {"Referer": base + "/accounts/login/"})
        assert status == 200 and any(c.name == "sessionid" for c in self.jar), "the staff login failed"

    def post_json(self, url: str, body: dict) -> tuple[int, dict]:
        status, raw = self.open(url, json.dumps(body).encode(), {"Content-Type": "application/json",
                                                                  "X-CSRFToken": self.cookie("csrftoken")})
        return status, json.loads(raw or b"{}")


def _worker_that_ran(desk: Desk, run: Run):
    """The worker whose log has the run's lines (every line of a run's task carries its id)."""
    run_id = str(run.public_id)
    found = [w for w in desk.workers
             if any(line.startswith("{") and json.loads(line).get("run") == run_id for line in w.log().splitlines())]
    assert len(found) == 1, [w.name for w in found]
    return found[0]


def test_a_decision_through_the_other_daphne_resumes_the_run_on_the_other_worker_with_one_session_and_one_limit(
        cluster, model_server):
    from support.desk import demo as demo_data

    desk = cluster
    customer = Customer(desk, "maya@example.com")
    customer.say("My parcel SU-41310 never came.")
    customer.until(lambda e: e["type"] == "run.status" and e["status"] == "awaiting_approval")
    run = Run.objects.get(conversation__public_id=customer.id)
    paused_on = _worker_that_ran(desk, run)
    # The worker that paused the run goes away (a warm shutdown): only the other can resume it.
    paused_on.stop(grace=15)
    other = next(w for w in desk.workers if w is not paused_on)

    # A staff member logs in through daphne A; the session is the same one on daphne B.
    user = demo_data.demo_staff_user(password="scale-out-pw")  # a Support lead: may decide any refund
    staff = Staff()
    staff.log_in(desk.webs[0], user.username, "scale-out-pw")
    status, body = staff.open(desk.webs[1] + "/api/staff/approvals")
    assert status == 200, body
    [approval_id] = [a["id"] for a in json.loads(body)["approvals"] if a["run"] == str(run.public_id)]
    # The decision goes through daphne B; the run resumes on the other worker and the customer sees the answer.
    status, body = staff.post_json(f"{desk.webs[1]}/api/staff/approvals/{approval_id}/approve", {"confirm_seen": True})
    assert status == 200, body
    assert customer.answered()["message"]["content"]
    run.refresh_from_db()
    assert (run.status, run.stop_reason) == ("stopped", "answered"), snapshot(run.conversation)
    assert any(line.startswith("{") and json.loads(line).get("run") == str(run.public_id)
               for line in other.log().splitlines()), "the other worker resumed the run"

    # One conversation's messages per minute, counted by daphne A and daphne B together.
    limited = Customer(desk, "tom@example.com")
    statuses = []
    for i in range(MESSAGES_PER_MINUTE + 1):
        base = desk.webs[i % 2]
        status, _, _ = post(f"{base}/api/conversations/{limited.id}/messages", {"text": f"Hello ({i})."},
                            {"Authorization": f"Bearer {limited.token}"})
        statuses.append(status)
    assert statuses == [202] * MESSAGES_PER_MINUTE + [429], statuses

    # The Celery side's health, as an operator reads it: a worker answers, the beat's sweeper runs.
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    wait_for(lambda: _workers_ok(call_command, out), timeout=20, message="check_workers to pass",
             describe=out.getvalue)
    report = json.loads(out.getvalue().splitlines()[-1])
    assert report["checks"]["workers"]["answered"] == [f"{other.name}@{os.uname().nodename}"], report


def _workers_ok(call_command, out) -> bool:
    try:
        call_command("check_workers", "--json", "--timeout", "1", stdout=out)
    except SystemExit:
        return False
    return True


# -- a daphne killed mid-stream, a worker killed mid-run ---------------------------------------------------------

def _on_daphne(desk: Desk, index: int, emails: list[str]) -> Customer:
    """A customer whose socket (opened through the balancer) is held by daphne `index`."""
    opened = []
    for email in emails:
        before = [total(samples(w + "/metrics"), "desk_websockets_open", socket="customer") for w in desk.webs]
        customer = Customer(desk, email)
        after = [total(samples(w + "/metrics"), "desk_websockets_open", socket="customer") for w in desk.webs]
        if after[index] == before[index] + 1:
            return customer
        opened.append(customer)
    pytest.fail(f"no socket landed on daphne {index} among {len(opened)}")


def _first_token(customer: Customer) -> dict:
    return customer.until(lambda e: e["type"] == "token.delta" and e.get("text"))


def _assert_each_message_once(customer: Customer) -> None:
    """Every message the customer may see reached them, and none twice (over every socket they had)."""
    from support.models import Message

    assert len(customer.received) == len(set(customer.received)), f"doubled: {customer.received}"
    visible = set(Message.objects.filter(conversation__public_id=customer.id, role__in=("user", "assistant"))
                  .exclude(content="").values_list("seq", flat=True))
    assert visible <= set(customer.received), f"lost: {sorted(visible - set(customer.received))}"


def test_a_daphne_killed_mid_stream_and_a_worker_killed_mid_run_lose_and_double_nothing(cluster, model_server):
    from websockets.exceptions import ConnectionClosed

    from .conftest import assert_history_sound

    desk = cluster
    model_server.configure(token_delay_ms=40)  # each answer streams for a couple of seconds
    emails = ["ines@example.com", "tom@example.com", "maya@example.com", "ines@example.com"]
    customer = _on_daphne(desk, 0, emails)

    # Daphne A dies while the answer streams to the customer through it.
    customer.say(QUESTION)
    _first_token(customer)
    desk.daphnes[0].kill()
    with pytest.raises(ConnectionClosed):
        while True:
            customer.until(lambda e: False, timeout=10)
    # The widget reconnects through the balancer (to daphne B now) from the last message it has.
    customer.connect(last_seq=max(customer.received))
    # Joined before the replay read the database: a run still working then sends its end here, live.
    if Run.objects.filter(conversation__public_id=customer.id).exclude(status="stopped").exists():
        customer.until(lambda e: e["type"] == "run.status" and e["status"] == "stopped", timeout=30)
    _assert_each_message_once(customer)
    assert Run.objects.get(conversation__public_id=customer.id).stop_reason == "answered"

    # A worker dies while it streams the next answer: the beat's sweeper finds the run's heartbeat stale and
    # requeues it, and the other worker finishes it.
    customer.say("Thanks. And when will it arrive?")
    _first_token(customer)
    run = Run.objects.get(conversation__public_id=customer.id, status="running")
    holder = _worker_holding(desk, run)
    holder.kill()
    customer.until(lambda e: e["type"] == "run.status" and e["status"] == "stopped", timeout=60)
    run.refresh_from_db()
    assert (run.status, run.stop_reason, run.attempts) == ("stopped", "answered", 2), snapshot(run.conversation)
    assert_history_sound(run.conversation)
    _assert_each_message_once(customer)


def _worker_holding(desk: Desk, run: Run):
    """The worker whose task is working the run now (Celery's remote control: active tasks)."""
    from agentsite.celery import app

    def holder():
        active = app.control.inspect(timeout=1).active() or {}
        names = [name for name, tasks in active.items() if any(str(run.pk) in str(t.get("args")) for t in tasks)]
        return names[0] if names else None

    name = wait_for(holder, timeout=10, message=f"the worker holding run {run.pk}")
    return next(w for w in desk.workers if name.split("@")[0] == w.name)
