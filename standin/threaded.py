"""Serving an ASGI app from uvicorn in a daemon thread of this process (the stand-ins' tests and demos).

Port 0 lets the OS choose a free port, read back from the listening socket once the server has started.
"""

from __future__ import annotations

import threading
import time

import uvicorn


class Threaded:
    """A uvicorn server running in a thread, and how to stop it."""

    def __init__(self, server: uvicorn.Server, thread: threading.Thread, port: int):
        self.server, self.thread, self.port = server, thread, port

    def stop(self, timeout: float = 5.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout)
        if self.thread.is_alive():
            self.server.force_exit = True
            self.thread.join(timeout)


def serve_in_thread(app, host: str, port: int, what: str, timeout: float = 10.0, **options) -> Threaded:
    options = {"log_level": "warning", "access_log": False, "lifespan": "off", "timeout_graceful_shutdown": 1,
               **options}
    config = uvicorn.Config(app, host=host, port=port, **options)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"{what}-{host}:{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"the {what} did not start on {host}:{port}")
        time.sleep(0.01)
    return Threaded(server, thread, server.servers[0].sockets[0].getsockname()[1])
