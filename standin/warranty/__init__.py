"""The demo warranty service: an MCP server (the `mcp` SDK, streamable HTTP) over Sundry's demo orders, for the
demo, the evaluation and tests of the desk's MCP tools. It imports nothing of the desk.

Its tools: lookup_warranty (read), issue_store_credit (a write a desk gates; each call is recorded) and
wipe_everything (a tool no setting should list). `start_in_thread()` runs it in a background thread of this
process (as the reference shop in standin/shop); `python -m standin.warranty` runs it in the foreground.
`setting()` is the MCP_SERVERS value that offers its two tools to the desk.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from standin.threaded import Threaded, serve_in_thread

from .service import Records, create_app, create_mcp, warranty_text

NAME = "warranty"
# The two tools a desk is offered, and how it treats them (docs/tools.md): wipe_everything is never listed.
TOOLS = {"lookup_warranty": {"kind": "read"},
         "issue_store_credit": {"kind": "gated", "amount": "amount", "order": "order_number"}}

__all__ = ["NAME", "TOOLS", "Records", "WarrantyServer", "setting", "start_in_thread", "warranty_text"]


def setting(url: str, token: str | None = None, tools: dict | None = None, timeout: float = 10.0,
            connect_timeout: float = 5.0) -> list[dict]:
    """MCP_SERVERS (as JSON data) for a warranty service at `url`."""
    server = {"name": NAME, "url": url, "timeout": timeout, "connect_timeout": connect_timeout,
              "tools": tools or TOOLS}
    if token:
        server["headers"] = {"Authorization": f"Bearer {token}"}
    return [server]


class WarrantyServer:
    """A running warranty service: where it is, what reached it, and how to stop it."""

    def __init__(self, running: Threaded, records: Records, host: str, token: str | None):
        self._running, self.records = running, records
        self.host, self.port, self.token = host, running.port, token

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/mcp"

    @property
    def credits(self) -> list[dict]:
        """Every issue_store_credit call that reached it, oldest first: order_number, amount, note."""
        return self.records.credits()

    @property
    def wiped(self) -> list[dict]:
        return self.records.wiped()

    @property
    def headers_seen(self) -> list[str]:
        """The Authorization header of every HTTP request it was sent ("" when there was none)."""
        return self.records.headers_seen()

    @property
    def lookup_text(self) -> str | None:
        return self.records.lookup_text

    @lookup_text.setter
    def lookup_text(self, text: str | None) -> None:
        self.records.lookup_text = text

    def setting(self, tools: dict | None = None, timeout: float = 5.0, connect_timeout: float = 2.0) -> list[dict]:
        """MCP_SERVERS (as JSON data) for this server, its token included."""
        return setting(self.url, self.token, tools, timeout, connect_timeout)

    def reset(self) -> None:
        self.records.reset()

    def stop(self, timeout: float = 5.0) -> None:
        self._running.stop(timeout)


def start_in_thread(host: str = "127.0.0.1", port: int = 0, token: str | None = None,
                    extra_tools: Iterable[Callable] = (), timeout: float = 10.0,
                    server_class: type[WarrantyServer] = WarrantyServer) -> WarrantyServer:
    """Serve the service from a daemon thread (port 0: a free one). `extra_tools`: more tools for its MCP server,
    e.g. a test's tool whose name clashes with one of the desk's; `server_class`: what to return, a subclass
    adding to it."""
    records = Records()
    mcp = create_mcp(records)
    for fn in extra_tools:
        mcp.add_tool(fn)
    # lifespan on: the SDK's session manager starts and stops with the app.
    running = serve_in_thread(create_app(records, mcp, host, token), host, port, "warranty service",
                              timeout=timeout, lifespan="on")
    return server_class(running, records, host, token)
