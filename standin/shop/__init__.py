"""The reference shop: a foreign shop that serves the shop contract (docs/shop-contract.md) over the Sundry
catalogue, for tests, the demo and `manage.py check_shop`. It imports nothing of the desk.

`start_in_thread()` runs it in a background thread of this process (uvicorn in a daemon thread, as the model
stand-in in standin/server.py); `python -m standin.shop` runs it in the foreground.
"""

from __future__ import annotations

from standin.threaded import Threaded, serve_in_thread

from .app import ShopState, create_app
from .store import Store

DEFAULT_KEY = "reference-shop-key"


class ShopServer:
    """A running reference shop: where it is, what it holds, its faults, and how to stop it."""

    def __init__(self, running: Threaded, store: Store, state: ShopState, host: str, port: int,
                 keys: tuple[str, ...]):
        self._running = running
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
        self._running.stop(timeout)


def start_in_thread(host: str = "127.0.0.1", port: int = 0, keys: tuple[str, ...] = (DEFAULT_KEY,),
                    db_path: str | None = None, control_token: str | None = None,
                    timeout: float = 10.0, single_brand: str | None = None) -> ShopServer:
    """single_brand: run as a single-brand store of that name (no sellers) instead of the Sundry marketplace."""
    keys = tuple(keys)
    store, state = Store(db_path, single_brand), ShopState()
    # h11: a fault closes a connection without answering, through h11's transport (app.py says how).
    running = serve_in_thread(create_app(store, state, keys, control_token), host, port, "reference shop",
                              timeout=timeout, http="h11")
    return ShopServer(running, store, state, host, running.port, keys)
