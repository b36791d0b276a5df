"""The reference shop: a foreign shop that serves the shop contract (docs/shop-contract.md) over the Sundry
catalogue, for tests, the demo and `manage.py check_shop`. It imports nothing of the desk.

`start_in_thread()` runs it in a background thread of this process (uvicorn in a daemon thread, as the model
stand-in in standin/server.py); `python -m standin.shop` runs it in the foreground.
"""

from __future__ import annotations

import threading
import time

import uvicorn

from .app import ShopState, create_app
from .store import Store

DEFAULT_KEY = "reference-shop-key"


class ShopServer:
    """A running reference shop: where it is, what it holds, its faults, and how to stop it."""

    def __init__(self, server: uvicorn.Server, thread: threading.Thread, store: Store, state: ShopState,
                 host: str, port: int, keys: tuple[str, ...]):
        self._server, self._thread = server, thread
        self.store, self.state = store, state
        self.host, self.port, self.keys = host, port, keys

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def reset(self) -> None:
        """The catalogue reseeded; refunds, messages, keys, faults and the request log gone."""
        self.store.seed()
        self.state.reset()

    def time_passes(self, hours: float) -> None:
        """Every time the shop holds moves `hours` into the past."""
        self.store.time_passes(hours)

    def configure(self, **faults) -> dict:
        """Switch faults on (see app.DEFAULT_FAULTS for their names); the ones not named stay as they are."""
        return self.state.configure(**faults)

    def refunds(self) -> list[dict]:
        return self.store.refunds()

    def seller_messages(self) -> list[dict]:
        return self.store.seller_messages()

    def requests(self) -> list[dict]:
        """Each request the shop saw, oldest first: method, path (without the query), status ("dropped" for
        a connection closed without an answer; None while one is still being answered)."""
        return self.state.requests()

    def stop(self, timeout: float = 5.0) -> None:
        self.state.reset()  # answers still held end now, so the server can stop gracefully
        self._server.should_exit = True
        self._thread.join(timeout)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(timeout)


def start_in_thread(host: str = "127.0.0.1", port: int = 0, keys: tuple[str, ...] = (DEFAULT_KEY,),
                    db_path: str | None = None, control_token: str | None = None,
                    timeout: float = 10.0) -> ShopServer:
    keys = tuple(keys)
    store, state = Store(db_path), ShopState()
    config = uvicorn.Config(create_app(store, state, keys, control_token), host=host, port=port,
                            log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=1,
                            http="h11")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"reference-shop-{host}:{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"the reference shop did not start on {host}:{port}")
        time.sleep(0.01)
    bound = server.servers[0].sockets[0].getsockname()[1]
    return ShopServer(server, thread, store, state, host, bound, keys)
