"""A real MCP server for tests: the demo warranty service (standin/warranty, the SDK's MCPServer over streamable
HTTP), in a thread, on a free port.

Its tools: lookup_warranty (read), issue_store_credit (a write the desk gates; every call is recorded),
wipe_everything (never listed in MCP_SERVERS, so never offered), and, added here, get_order (a name the desk's
own tool has). `mcp_server` starts one per test and gives its URL, its calls and the setting to use it.
"""

from __future__ import annotations

import pytest

from agentsite.mcp_settings import parse_servers
from standin import warranty
from support.tools import mcp as mcp_tools

TOKEN = "Bearer sekrit-token-123"  # sent as a header; must never show in anything the desk writes


class WarrantyServer(warranty.WarrantyServer):
    """The running service (url, credits, wiped, headers_seen, lookup_text, stop) and its checked setting."""

    def setting(self, **tools) -> list[dict]:
        """MCP_SERVERS for this server, checked as start-up checks it."""
        return parse_servers(super().setting(tools or None))


def get_order(order_number: str) -> str:
    """The warranty system's own view of an order."""
    return f"warranty view of {order_number}"


def start_warranty_server() -> WarrantyServer:
    return warranty.start_in_thread(token=TOKEN.removeprefix("Bearer "), extra_tools=[get_order],
                                    server_class=WarrantyServer)


@pytest.fixture
def mcp_server(settings):
    mcp_tools.forget_listings()
    state = start_warranty_server()
    settings.MCP_SERVERS = state.setting()
    yield state
    state.stop()
    mcp_tools.forget_listings()
