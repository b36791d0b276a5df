"""Hostile socket input through the real server (daphne), which decides what reaches a client: the close
codes a frame we cannot read ends with, bytes that are not UTF-8, and paths that lead nowhere.

A daphne process on a free port, with the session's redis-server as channel layer and limits store; no
conversation is needed, since a frame is parsed before anything else is done with it.
"""

from __future__ import annotations

import os

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from tests.otlp_fixture import start_daphne
from tests.redis_fixture import limits_redis_server  # noqa: F401  (fixture)

SOME_CONVERSATION = "/ws/conversations/00000000-0000-0000-0000-000000000000/"


@pytest.fixture(scope="module")
def daphne(limits_redis_server, tmp_path_factory):  # noqa: F811
    env = {**os.environ, "REDIS_URL": limits_redis_server, "LIMITS_REDIS_URL": limits_redis_server,
           "VAR_DIR": str(tmp_path_factory.mktemp("daphne-var"))}
    log = tmp_path_factory.mktemp("daphne-log") / "daphne.log"
    proc, port = start_daphne(env, log)
    yield port, log
    proc.terminate()
    proc.wait(10)


def closing(port: int, payload: bytes, *, binary: bool = False):
    """What the server answers to one raw frame: (the error frame, the close code), or (None, None) for a
    dropped connection."""
    with connect(f"ws://127.0.0.1:{port}{SOME_CONVERSATION}", origin=f"http://127.0.0.1:{port}") as ws:
        with ws.send_context():
            (ws.protocol.send_binary if binary else ws.protocol.send_text)(payload)
        error = None
        try:
            error = ws.recv(timeout=5)
            ws.recv(timeout=5)
        except ConnectionClosed as closed:
            return error, closed.rcvd.code if closed.rcvd else None
    return error, "still open"


@pytest.mark.parametrize("payload, binary, close_code, error_code", [
    (b"not json", False, 4400, "invalid_json"),
    (b"[" * 1000 + b"]" * 1000, False, 4400, "too_deep"),
    (b'{"type": "ping"}', True, 4415, "binary_frame"),
])
def test_a_frame_it_cannot_read_reaches_the_client_as_an_error_frame_and_its_close_code(daphne, payload, binary,
                                                                                      close_code, error_code):
    port, log = daphne
    error, code = closing(port, payload, binary=binary)
    assert code == close_code and f'"code": "{error_code}"' in error
    assert "Traceback" not in log.read_text()


def test_bytes_that_are_not_utf8_in_a_text_frame_end_the_connection_without_a_traceback(daphne):
    port, log = daphne
    _, code = closing(port, b'{"type": "\xff"}')
    assert code in (None, 1007)  # the server's websocket library fails the connection before we see it
    assert "Traceback" not in log.read_text()


@pytest.mark.parametrize("path", ["/ws/nothing/", "/ws/conversations/not-a-uuid/"])
def test_an_unknown_socket_path_is_refused_at_the_handshake_not_a_500(daphne, path):
    port, log = daphne
    with pytest.raises(InvalidStatus) as refused:
        connect(f"ws://127.0.0.1:{port}{path}", origin=f"http://127.0.0.1:{port}")
    assert refused.value.response.status_code == 403
    assert "Traceback" not in log.read_text()
