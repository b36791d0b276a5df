"""/readyz against real outages: a daphne process, a redis-server that is stopped, frozen and started again,
and (on PostgreSQL) the database's connection cut and restored.

The bound docs/deploy.md states: every probe checks afresh (nothing is cached), and each check gives up
within its timeout (Redis 1 s, the database DB_CONNECT_TIMEOUT), so the first probe after a dependency is
lost answers 503, and the first probe after it is back answers 200. The tests ask exactly that: no clock.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.db import connection

from tests.redis_fixture import RestartableRedis
from tests.system.conftest import database_url

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def readyz(base: str) -> tuple[int, dict]:
    import json

    try:
        with urllib.request.urlopen(base + "/readyz", timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def wait_until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.1)


class Forwarder:
    """A TCP relay from a local port to the database server: cutting it is the database going away for the
    site (open connections reset, new ones refused); starting it again on the same port brings it back."""

    def __init__(self, target: tuple[str, int]):
        self.target, self.port = target, _free_port()
        self.listener, self.sockets = None, []

    def start(self) -> None:
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", self.port))
        self.listener.listen(64)
        threading.Thread(target=self._accept, args=(self.listener,), daemon=True).start()

    def _accept(self, listener) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            self.sockets += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source, sink) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> None:
        try:  # wakes the thread blocked in accept(); a close alone would leave it accepting
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        for s in self.sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
                s.close()
            except OSError:
                pass
        self.sockets = []


@pytest.fixture
def redis_server():
    server = RestartableRedis()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def site(redis_server, tmp_path):
    """site(database_url=None): a daphne process on the test database (or the URL given), Redis above."""
    started = []

    def start(db_url: str | None = None) -> str:
        port = _free_port()
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "agentsite.settings", "DATABASE_URL": db_url or database_url(),
               "REDIS_URL": redis_server.url, "LIMITS_REDIS_URL": redis_server.url, "PYTHONUNBUFFERED": "1"}
        log = open(tmp_path / "daphne.log", "wb")
        proc = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                                 "agentsite.asgi:application"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        started.append(proc)
        base = f"http://127.0.0.1:{port}"

        def up():
            try:
                return readyz(base)[0] == 200
            except OSError:
                return proc.poll() is not None and pytest.fail((tmp_path / "daphne.log").read_text())

        wait_until(up, 30, "daphne to be ready")
        return base

    yield start
    for proc in started:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_readyz_is_not_ready_at_the_first_probe_after_redis_stops_and_ready_at_the_first_after_it_returns(
        site, redis_server):
    base = site()
    redis_server.stop()
    status, body = readyz(base)
    assert status == 503 and body["checks"]["redis"]["ok"] is False and body["checks"]["database"]["ok"]
    redis_server.start()
    status, body = readyz(base)
    assert status == 200, body


def test_readyz_is_not_ready_while_redis_is_frozen_the_check_gives_up_within_its_timeout(site, redis_server):
    base = site()
    redis_server.proc.send_signal(signal.SIGSTOP)  # accepts nothing, answers nothing: a hung server
    try:
        status, body = readyz(base)
        assert status == 503 and body["checks"]["redis"]["error"] in ("TimeoutError", "ConnectionError")
    finally:
        redis_server.proc.send_signal(signal.SIGCONT)
    assert readyz(base)[0] == 200


def test_readyz_is_not_ready_at_the_first_probe_after_the_database_goes_and_ready_at_the_first_after_it_returns(
        site):
    if connection.vendor != "postgresql":
        pytest.skip("the database can be taken away only from PostgreSQL (SQLite is a file)")
    s = connection.settings_dict
    relay = Forwarder((s["HOST"] or "127.0.0.1", int(s["PORT"] or 5432)))
    relay.start()
    url = database_url()
    host_port = f"{s['HOST'] or 'localhost'}:{s['PORT']}" if s.get("PORT") else (s["HOST"] or "localhost")
    base = site(url.replace(f"@{host_port}/", f"@127.0.0.1:{relay.port}/"))
    try:
        relay.cut()
        status, body = readyz(base)
        assert status == 503 and body["checks"]["database"]["ok"] is False and body["checks"]["redis"]["ok"]
        relay.start()
        status, body = readyz(base)
        assert status == 200, body
    finally:
        relay.cut()
