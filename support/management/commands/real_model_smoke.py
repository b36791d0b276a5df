"""`manage.py real_model_smoke`: the desk end to end against a real model server (evaluation/real_model_smoke.sh
starts llama.cpp's with Gemma 3 270M; any OpenAI-compatible endpoint will do). Asserts that the pipeline works,
not that the model answers well:

1. `manage.py evaluate` plays a few scenarios against the server and writes its reports (any pass rate);
2. the site runs as `./dev serve` runs it (Redis, a Celery worker, the site) on a database of its own, pointed
   at the server, and a customer writes over the HTTP API: a first message, and a second once the first run
   has ended; the conversation is read back as the customer and as staff;
3. support/evaluation/smoke.py judges both: every run ended with a defined stop, no model call failed, no 5xx,
   every message kept, the reports written. Exit status 1 with the problems named, else 0.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from http.cookiejar import CookieJar
from pathlib import Path
from urllib.parse import urlencode

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from support.evaluation import smoke

ROOT = Path(settings.BASE_DIR)
SCENARIOS = ["su-41210-delivered-status", "su-41310-missing-refund-approved", "unrecognised-then-handed-over"]
CUSTOMER = "maya@example.com"
SAY = ["Has my order SU-41210 arrived?", "Thanks. And where is SU-41207?"]
READY_LINE = "Sundry support desk is up"


class Command(BaseCommand):
    help = ("Play scenarios and a conversation over HTTP against a real model server and check that every run "
            "ends with a defined stop, nothing answers 5xx and the reports are written (not the pass rate).")

    def add_arguments(self, parser):
        parser.add_argument("--model-base-url", required=True, help="the server, e.g. http://127.0.0.1:8080/v1")
        parser.add_argument("--model", required=True, help="the model name the server answers to")
        parser.add_argument("--scenario", action="append", metavar="NAME",
                            help=f"a scenario to play (repeatable; default: {', '.join(SCENARIOS)})")
        parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                            help="where the reports, the site's database and logs go (default: "
                                 "VAR_DIR/real-model-smoke; an earlier smoke's are replaced)")
        parser.add_argument("--wait", type=float, default=300.0, metavar="SECONDS",
                            help="how long a run may take before it counts as left running (default 300)")

    def handle(self, *args, model_base_url, model, scenario, out, wait, **options):
        out = (out or Path(settings.VAR_DIR) / "real-model-smoke").resolve()
        shutil.rmtree(out / "site", ignore_errors=True)  # a database and logs of an earlier smoke
        for name in ("report.json", "report.html", "conversation.json"):
            (out / name).unlink(missing_ok=True)
        out.mkdir(parents=True, exist_ok=True)
        names = scenario or SCENARIOS
        env = {**os.environ, "MODEL_BASE_URL": model_base_url, "MODEL_NAME": model,
               "MODEL_DEFAULT_PRICE": "[0, 0]", "PYTHONUNBUFFERED": "1"}

        report_path = out / "report.json"
        t0 = time.monotonic()
        self._evaluate(env, model_base_url, model, names, report_path)
        self.stdout.write(f"› the evaluation took {time.monotonic() - t0:.0f} s")
        try:
            report = json.loads(report_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            report = None

        t0 = time.monotonic()
        with _Site(out / "site", env) as site:
            self.stdout.write(f"› the site is up at {site.base} ({time.monotonic() - t0:.0f} s)")
            t0 = time.monotonic()
            seen = _Conversation(site, wait, self.stdout.write).play()
        self.stdout.write(f"› the conversation took {time.monotonic() - t0:.0f} s")
        (out / "conversation.json").write_text(json.dumps(seen, indent=1, ensure_ascii=False), encoding="utf-8")

        problems = (smoke.reports_problems(report_path) + smoke.report_problems(report, names)
                    + smoke.conversation_problems(seen))
        if problems:
            self.stderr.write("real-model smoke FAILED:\n" + "\n".join(f"  - {p}" for p in problems))
            self.stderr.write(f"the reports, the site's logs and conversation.json are in {out}")
            sys.exit(1)
        passed = f"{report['passed']}/{report['attempts']}" if report else "?"
        self.stdout.write(f"real-model smoke passed: {len(names)} scenarios played to a defined stop (criteria met "
                          f"by {passed}, not asserted), {len(seen['runs'])} runs over HTTP, no 5xx; reports in {out}")

    def _evaluate(self, env, base_url, model, names, report_path) -> None:
        args = [sys.executable, "manage.py", "evaluate", "--model-base-url", base_url, "--model", model,
                "--price", "0,0", "--report", str(report_path), "--min-pass-rate", "0"]
        for name in names:
            args += ["--scenario", name]
        done = subprocess.run(args, cwd=ROOT, env=env)
        if done.returncode != 0:
            raise CommandError(f"manage.py evaluate ended with status {done.returncode}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Site:
    """`./dev serve` (Redis, a Celery worker, the site) on a database and VAR_DIR of its own, stopped at the end."""

    def __init__(self, var: Path, env: dict):
        var.mkdir(parents=True)
        self.var, self.port = var, _free_port()
        self.env = {k: v for k, v in env.items() if k not in ("REDIS_URL", "SHOP_BACKEND", "SHOP_URL")}
        self.env.update(VAR_DIR=str(var), DATABASE_URL=f"sqlite:///{var / 'db.sqlite3'}", PORT=str(self.port),
                        REDIS_PORT=str(_free_port()), DJANGO_DEBUG="true")
        self.base = f"http://127.0.0.1:{self.port}"
        self.output = var / "serve.log"

    def __enter__(self):
        self.log = open(self.output, "wb")
        self.proc = subprocess.Popen([str(ROOT / "dev"), "serve"], cwd=ROOT, env=self.env, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 120
        while READY_LINE not in self.output.read_text(errors="replace"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.__exit__(None, None, None)
                raise CommandError(f"./dev serve did not come up; the end of {self.output}:\n"
                                   + self.output.read_text(errors="replace")[-3000:])
            time.sleep(0.5)
        return self

    def manage(self, *args: str) -> str:
        return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, check=True,
                              capture_output=True, text=True).stdout.strip()

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # ./dev serve stops what it started
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        self.log.close()


class _Conversation:
    """A customer's two messages over the HTTP API, then the conversation read back, as the customer and as staff.
    Every API request's status is recorded for the verdict."""

    def __init__(self, site: _Site, wait: float, say):
        self.site, self.wait, self.say = site, wait, say
        self.jar = CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        self.token = ""
        self.seen = {"requests": [], "said": [], "read": [], "unsettled": [], "runs": [], "replies": []}

    def play(self) -> dict:
        token = self.site.manage("customer_token", CUSTOMER)
        status, body = self.request("POST", "/api/conversations", {
            "customer_token": token, "message": {"text": SAY[0], "client_id": "smoke-1"}})
        if status != 201:
            return self.seen
        cid, self.token = body["conversation"]["id"], body["token"]
        self.seen["said"].append(SAY[0])
        self.settle(cid, "the first message's run")
        status, body = self.request("POST", f"/api/conversations/{cid}/messages",
                                    {"text": SAY[1], "client_id": "smoke-2"})
        if status == 202:
            self.seen["said"].append(SAY[1])
            if body.get("run"):  # none when the conversation waits for a person: the message waits with it
                self.settle(cid, "the second message's run")
        status, body = self.request("GET", f"/api/conversations/{cid}/messages?after=0")
        if status == 200:
            self.seen["read"] = [m.get("content") or "" for m in body.get("messages", [])]
        self.seen["runs"] = self.staff_runs(cid)
        return self.seen

    def settle(self, cid: str, what: str) -> None:
        """Wait until the latest run is stopped or paused on an approval."""
        t0 = time.monotonic()
        while True:
            status, body = self.request("GET", f"/api/conversations/{cid}", record=False)
            run = (body.get("run") or {}) if status == 200 else {}
            if run.get("status") in ("stopped", "awaiting_approval"):
                self.say(f"› {what}: {run['status']} ({run.get('stop_reason') or '-'}) after "
                         f"{time.monotonic() - t0:.0f} s")
                return
            if status != 200 or time.monotonic() - t0 > self.wait:
                self.seen["requests"].append(["GET", f"/api/conversations/{cid}", status])
                self.seen["unsettled"].append(f"{what} ({run.get('status') or 'not started'})")
                return
            time.sleep(1)

    def staff_runs(self, cid: str) -> list[dict]:
        """The runs with their steps, from the staff API (the demo staff login)."""
        first = self.site.manage("demo_staff").strip().splitlines()[0]  # the demo's first login (a second follows)
        username, password = first.removeprefix("Demo staff login: ").split(" / ")
        self.open("/accounts/login/")
        csrf = next((c.value for c in self.jar if c.name == "csrftoken"), "")
        self.open("/accounts/login/", urlencode({"username": username, "password": password,
                                                 "csrfmiddlewaretoken": csrf}).encode(),
                  {"Referer": self.site.base + "/accounts/login/"})
        status, body = self.request("GET", f"/api/staff/conversations/{cid}")
        if status != 200:
            return []
        self.seen["replies"] = [m.get("content") for m in body.get("messages", []) if m.get("role") == "assistant"
                                and m.get("content")]
        return [{"status": r.get("status"), "stop_reason": r.get("stop_reason"),
                 "steps": [{"kind": s.get("kind"), "error": s.get("error"), "finish_reason": s.get("finish_reason"),
                            "duration_ms": s.get("duration_ms")} for s in r.get("steps", [])]}
                for r in body.get("runs", [])]

    def request(self, method: str, path: str, body: dict | None = None, record: bool = True) -> tuple[int, dict]:
        headers = {"Content-Type": "application/json"}
        if self.token and not path.startswith("/api/staff/"):
            headers["Authorization"] = f"Bearer {self.token}"
        status, raw = self.open(path, json.dumps(body).encode() if body is not None else None, headers, method)
        if record:
            self.seen["requests"].append([method, path, status])
        try:
            return status, json.loads(raw or b"{}")
        except ValueError:
            return status, {}

    def open(self, path: str, data: bytes | None = None, headers: dict | None = None,
             method: str | None = None) -> tuple[int, bytes]:
        req = urllib.request.Request(self.site.base + path, data=data, headers=headers or {}, method=method)
        try:
            with self.opener.open(req, timeout=30) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()
