"""The warranty service's records and its MCP face: Sundry's demo orders (sundry/), a two-year warranty from
delivery on everything but food, and the store credit it has issued.

lookup_warranty only reads. issue_store_credit changes something (credit a customer can spend), so a desk
should gate it; every call that reaches it is recorded, in order, so a test or an evaluation can count them.
wipe_everything is here to be left out of any setting: a call that reaches it is recorded too.
"""

from __future__ import annotations

import hmac
import threading
from datetime import datetime, timedelta, timezone
from decimal import Decimal, InvalidOperation

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

from sundry import ORDERS, SELLERS, DemoOrder

WARRANTY_YEARS = 2
NOT_COVERED = {"S-KC": "food"}  # by seller, and why: Kettle & Crumb sells food
MAX_CREDIT = Decimal("1000.00")  # what this service issues at most in one go, whatever a caller asks


class Records:
    """What the service holds and what reached it. One lock; the server's thread writes, tests read."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._credits: list[dict] = []
        self._wiped: list[dict] = []
        self._headers: list[str] = []
        # When set, what lookup_warranty answers instead of the records ("{order_number}" filled in): a test's
        # odd or hostile answer.
        self.lookup_text: str | None = None
        # Seconds issue_store_credit takes to answer after it has recorded the credit: a slow back office (a test
        # stops the desk's worker while a call is in flight).
        self.answer_after: float = 0.0

    def credits(self) -> list[dict]:
        with self._lock:
            return [dict(c) for c in self._credits]

    def wiped(self) -> list[dict]:
        with self._lock:
            return [dict(w) for w in self._wiped]

    def headers_seen(self) -> list[str]:
        with self._lock:
            return list(self._headers)

    def saw(self, authorization: str) -> None:
        with self._lock:
            self._headers.append(authorization)

    def credit(self, order_number: str, amount: str, note: str) -> str:
        """Record one store credit; its reference."""
        with self._lock:
            self._credits.append({"order_number": order_number, "amount": amount, "note": note})
            return f"SC-{len(self._credits)}"

    def wipe(self, confirm: bool) -> None:
        with self._lock:
            self._wiped.append({"confirm": confirm})

    def reset(self) -> None:
        with self._lock:
            self._credits.clear()
            self._wiped.clear()
            self._headers.clear()
        self.lookup_text = None
        self.answer_after = 0.0


def _order(number: str) -> DemoOrder:
    wanted = str(number).strip().upper()
    found = next((o for o in ORDERS if o.number == wanted), None)
    if found is None:
        raise ToolError(f"No order {wanted} in the warranty records.")
    return found


def _years_later(day: datetime, years: int) -> datetime:
    try:
        return day.replace(year=day.year + years)
    except ValueError:  # 29 February
        return day.replace(year=day.year + years, day=28)


def _day(at: datetime) -> str:
    return f"{at.day} {at:%B %Y}"  # "3 May 2028"


def warranty_text(number: str, now: datetime | None = None) -> str:
    """The warranty of each item of a demo order, as the service words it."""
    order = _order(number)
    now = now or datetime.now(timezone.utc)
    seller = dict((code, name) for code, name, _ in SELLERS)[order.seller]
    delivered = order.parcel.status == "delivered"
    start = now - timedelta(hours=order.parcel.hours_ago)
    head = f"Order {order.number} ({seller})" + (f", delivered on {_day(start)}:" if delivered else
                                                 ", not delivered yet:")
    lines = [head]
    for _, title, _, _, _ in order.items:
        if order.seller in NOT_COVERED:
            lines.append(f"- {title}: no warranty ({NOT_COVERED[order.seller]}).")
        elif delivered:
            lines.append(f"- {title}: {WARRANTY_YEARS}-year warranty, valid until "
                         f"{_day(_years_later(start, WARRANTY_YEARS))}.")
        else:
            lines.append(f"- {title}: {WARRANTY_YEARS}-year warranty from the day it is delivered.")
    return "\n".join(lines)


def _amount(value: str) -> str:
    try:
        amount = Decimal(str(value).strip())
    except InvalidOperation:
        amount = None
    if amount is None or not amount.is_finite() or amount <= 0 or amount != amount.quantize(Decimal("0.01")):
        raise ToolError("The amount must be a positive amount in EUR with at most two decimals, such as 15.00.")
    if amount > MAX_CREDIT:
        raise ToolError(f"The warranty service issues at most {MAX_CREDIT} EUR of store credit at a time.")
    return f"{amount:.2f}"


def create_mcp(records: Records) -> MCPServer:
    """The MCP server with the service's tools; more may be added to it before it is served."""
    app = MCPServer("warranty", log_level="WARNING",
                    instructions="Sundry's warranty service: the warranty of an order, and store credit.")

    # What each tool does to the records, said as MCP tool annotations: a desk may check them (docs/tools.md).
    @app.tool(annotations=ToolAnnotations(read_only_hint=True))
    def lookup_warranty(order_number: str) -> str:
        """Look up the warranty of an order by its number: each item's cover and until when it runs."""
        if records.lookup_text is not None:
            return records.lookup_text.replace("{order_number}", order_number)
        return warranty_text(order_number)

    @app.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
    async def issue_store_credit(order_number: str, amount: str, note: str = "") -> str:
        """Give the customer store credit on an order, in EUR (e.g. "15.00"), to spend at Sundry; note says why."""
        order = _order(order_number)
        amount = _amount(amount)
        reference = records.credit(order.number, amount, str(note)[:500])
        if records.answer_after > 0:
            await anyio.sleep(records.answer_after)
        return f"Store credit of {amount} EUR issued on {order.number} ({reference})."

    @app.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
    def wipe_everything(confirm: bool) -> str:
        """Delete every warranty record."""
        records.wipe(confirm)
        return "Every warranty record was deleted."

    return app


def create_app(records: Records, mcp: MCPServer, host: str = "127.0.0.1", token: str | None = None):
    """The ASGI app: MCP over streamable HTTP at /mcp. With a token, a request must carry
    `Authorization: Bearer <token>`; every request's Authorization header is recorded."""
    inner = mcp.streamable_http_app(host=host)
    wanted = f"Bearer {token}" if token else None

    async def app(scope, receive, send):
        if scope["type"] == "http":
            given = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
            records.saw(given)
            if wanted is not None and not hmac.compare_digest(given.encode(), wanted.encode()):
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"www-authenticate", b'Bearer realm="warranty"')]})
                await send({"type": "http.response.body", "body": b'{"error": "unauthorized"}'})
                return
        await inner(scope, receive, send)

    return app
