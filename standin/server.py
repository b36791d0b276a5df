"""Running the stand-in in a background thread of the current process (tests, the demo, benchmarks).

uvicorn serves from its own event loop in a daemon thread; port 0 lets the OS choose a free port, which
is read back from the listening socket once the server has started.
"""

from __future__ import annotations

import threading

import uvicorn

from .app import MODEL, create_app
from .state import ControlState
from .threaded import Threaded, serve_in_thread


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

    def sent(self) -> list[str]:
        """The system messages and tool specs the desk sent, each once (what its model read of the shop)."""
        return self.state.sent()

    def stop(self, timeout: float = 5.0) -> None:
        Threaded(self._server, self._thread, self.port).stop(timeout)


def start_in_thread(host: str = "127.0.0.1", port: int = 0, timeout: float = 10.0) -> StandinServer:
    state = ControlState()
    running = serve_in_thread(create_app(state), host, port, "model stand-in", timeout, backlog=4096)
    return StandinServer(running.server, running.thread, state, host, running.port)
