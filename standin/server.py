"""Running the stand-in in a background thread of the current process (tests, the demo, benchmarks).

uvicorn serves from its own event loop in a daemon thread; port 0 lets the OS choose a free port, which
is read back from the listening socket once the server has started.
"""

from __future__ import annotations

import threading
import time

import uvicorn

from .app import MODEL, create_app
from .state import ControlState


class StandinServer:
    """A running stand-in: where to reach it, its control state, and how to stop it."""

    def __init__(self, server: uvicorn.Server, thread: threading.Thread, state: ControlState, host: str, port: int):
        self._server, self._thread = server, thread
        self.state, self.host, self.port = state, host, port
        self.model = MODEL

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """What an OpenAI client takes as base_url."""
        return f"{self.url}/v1"

    def reset(self) -> None:
        self.state.reset()

    def queue_faults(self, faults: list[str] | str, match: str | None = None) -> list[str]:
        return self.state.queue_faults(faults, match)

    def configure(self, **settings) -> dict:
        return self.state.configure(**settings)

    def requests(self) -> list[dict]:
        return self.state.requests()

    def stop(self, timeout: float = 5.0) -> None:
        self._server.should_exit = True
        self._thread.join(timeout)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(timeout)


def start_in_thread(host: str = "127.0.0.1", port: int = 0, timeout: float = 10.0) -> StandinServer:
    state = ControlState()
    config = uvicorn.Config(create_app(state), host=host, port=port, log_level="warning", access_log=False,
                            lifespan="off", timeout_graceful_shutdown=1, backlog=4096)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"standin-{host}:{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"the model stand-in did not start on {host}:{port}")
        time.sleep(0.01)
    bound = server.servers[0].sockets[0].getsockname()[1]
    return StandinServer(server, thread, state, host, bound)
