"""A fake Shopify Admin GraphQL API for tests and local runs: the Sundry catalogue as a Shopify store.

No Django and nothing from `support`. `schema.graphql` is the subset of Shopify's published schema it serves
(graphql-core executes it), `store.py` the data, `views.py` the resolvers, `cost.py` the query cost and the
leaky bucket, `app.py` the HTTP face and its faults. Start it with `start_in_thread()` or
`python -m standin.shopify`.
"""

from __future__ import annotations

import json

from ..threaded import Threaded, serve_in_thread
from .app import FakeState, create_app

API_VERSION = "2026-01"
TOKEN = "shpat_fake_sundry_token"


class FakeShopify:
    """A running fake: where to reach it, what it holds, the faults to inject, and how to stop it."""

    def __init__(self, running: Threaded, state: FakeState, host: str):
        self._running, self.state = running, state
        self.host, self.port = host, running.port

    @property
    def base_url(self) -> str:
        """What goes in SHOPIFY_SHOP_DOMAIN: a scheme and host, where a real shop has only its domain."""
        return f"http://{self.host}:{self.port}"

    @property
    def token(self) -> str:
        return self.state.token

    @property
    def api_version(self) -> str:
        return self.state.api_version

    def endpoint(self, version: str | None = None) -> str:
        return f"{self.base_url}/admin/api/{version or self.api_version}/graphql.json"

    def reset(self) -> None:
        """The catalogue as first seeded, the bucket full, no faults, an empty request log."""
        self.state.reset()

    def configure(self, **faults) -> dict:
        """latency_ms, fail_next=[502, 402, ...], malformed_next="not_json"|"missing_field"|"negative_amount"
        (or a list), hold_after_write_seconds, drop_after_write, down, bucket_size, restore_rate."""
        return self.state.configure(**faults)

    def advance(self, seconds: float) -> None:
        """Let the buckets refill as if `seconds` had passed (a test's sleep, without sleeping)."""
        self.state.advance(seconds)

    def freeze_clock(self) -> None:
        """The buckets refill only when advance() says time passed, until the next reset."""
        self.state.freeze_clock()

    def requests(self) -> list[dict]:
        with self.state.lock:
            return [dict(e) for e in self.state.log]

    def refunds(self) -> list[dict]:
        """Every refund, the catalogue's included: order name, amount, note, id, the @idempotent key."""
        with self.state.lock:
            store = self.state.store
            keys = {refund_id: key for key, (_, refund_id) in store.refund_keys.items()}
            return [{"order": o["name"], "id": r["id"], "amount": r["amount"], "note": r["note"],
                     "key": keys.get(r["id"]), "created_at": r["createdAt"]}
                    for o in store.orders for r in o["refunds"]]

    def seller_messages(self, namespace: str = "desk_seller_messages") -> list[dict]:
        """The order metafields in that namespace: order name, metafield id and key, the JSON value read."""
        with self.state.lock:
            return [{"order": o["name"], "id": m["id"], "key": m["key"], "value": json.loads(m["value"])}
                    for o in self.state.store.orders for (ns, _), m in o["metafields"].items() if ns == namespace]

    def stop(self, timeout: float = 5.0) -> None:
        self._running.stop(timeout)


def start_in_thread(host: str = "127.0.0.1", port: int = 0, token: str = TOKEN, api_version: str = API_VERSION,
                    bucket_size: float = 1000, restore_rate: float = 50, timeout: float = 10.0) -> FakeShopify:
    state = FakeState(token, api_version, bucket_size, restore_rate)
    return FakeShopify(serve_in_thread(create_app(state), host, port, "fake Shopify", timeout), state, host)
