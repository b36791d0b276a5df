"""A real MCP server for tests (the SDK's MCPServer over streamable HTTP, in a thread, on a free port).

Its tools: lookup_warranty (read), issue_store_credit (a write the desk gates; every call is recorded),
wipe_everything (never listed in MCP_SERVERS, so never offered), and get_order (a name the desk's own
tool has). `mcp_server` starts one per test and gives its URL, its calls and the setting to use it.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field

import pytest
import uvicorn
from mcp.server.mcpserver import MCPServer

from agentsite.mcp_settings import parse_servers
from support.tools import mcp as mcp_tools

TOKEN = "Bearer sekrit-token-123"  # sent as a header; must never show in anything the desk writes


@dataclass
class WarrantyServer:
    url: str
    credits: list[dict] = field(default_factory=list)  # every issue_store_credit call that reached it
    wiped: list[dict] = field(default_factory=list)
    headers_seen: list[str] = field(default_factory=list)
    lookup_text: str = "Order {order_number}: 2-year warranty, valid until 2027-05-01."
    server: uvicorn.Server | None = None

    def setting(self, **tools) -> list[dict]:
        """MCP_SERVERS for this server, checked as start-up checks it."""
        tools = tools or {"lookup_warranty": {"kind": "read"},
                          "issue_store_credit": {"kind": "gated", "amount": "amount", "order": "order_number"}}
        return parse_servers([{"name": "warranty", "url": self.url, "headers": {"Authorization": TOKEN},
                               "timeout": 5, "connect_timeout": 2, "tools": tools}])

    def stop(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
            for _ in range(200):
                if not self.server.started or getattr(self.server, "_stopped", False):
                    break
                time.sleep(0.02)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_warranty_server() -> WarrantyServer:
    port = _free_port()
    state = WarrantyServer(url=f"http://127.0.0.1:{port}/mcp")
    app = MCPServer("warranty")

    @app.tool()
    def lookup_warranty(order_number: str) -> str:
        """Look up the warranty of an order by its number."""
        return state.lookup_text.format(order_number=order_number)

    @app.tool()
    def issue_store_credit(order_number: str, amount: str, note: str = "") -> str:
        """Give the customer store credit on an order."""
        state.credits.append({"order_number": order_number, "amount": amount, "note": note})
        return f"Store credit of {amount} EUR issued on {order_number} (SC-{len(state.credits)})."

    @app.tool()
    def wipe_everything(confirm: bool) -> str:
        """Delete every warranty record."""
        state.wiped.append({"confirm": confirm})
        return "wiped"

    @app.tool()
    def get_order(order_number: str) -> str:
        """The warranty system's own view of an order."""
        return f"warranty view of {order_number}"

    asgi = app.streamable_http_app()

    async def recording(scope, receive, send):  # the headers the desk sent, to check they arrive
        if scope["type"] == "http":
            state.headers_seen.append(dict(scope["headers"]).get(b"authorization", b"").decode())
        await asgi(scope, receive, send)

    server = uvicorn.Server(uvicorn.Config(recording, host="127.0.0.1", port=port, log_level="warning",
                                           lifespan="on"))
    state.server = server
    threading.Thread(target=server.run, daemon=True).start()
    for _ in range(500):
        if server.started:
            break
        time.sleep(0.01)
    assert server.started, "the MCP test server did not start"
    return state


@pytest.fixture
def mcp_server(settings):
    mcp_tools.forget_listings()
    state = start_warranty_server()
    settings.MCP_SERVERS = state.setting()
    yield state
    state.stop()
    mcp_tools.forget_listings()
