"""The customer's side, as the widget does it: start conversations over the customer API, then talk over the
websocket (resume, send a message, read events). asyncio; every wait is bounded.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import httpx2
from websockets.asyncio.client import connect

DEMO_CUSTOMERS = ("maya@example.com", "tom@example.com", "ines@example.com")


def customer_tokens() -> list[str]:
    """The shop's signed tokens for the demo customers (Django must be set up with the servers' settings)."""
    from support.customers import identity

    return [identity.customer_token(e) for e in DEMO_CUSTOMERS]


async def create_conversations(base: str, n: int, tokens: list[str], *, limit: int = 20,
                               customer_index=None, message: str | None = None) -> tuple[list[dict], list[str]]:
    """POST /api/conversations n times (at most `limit` at once). Returns ([{id, token}], errors). `message`: each
    conversation opens with it, as the widget sends a customer's first message (then each dict also has the
    moment it was sent: sent_at on the perf_counter clock, sent_wall on the wall clock)."""
    out: list[dict | None] = [None] * n
    errors: list[str] = []
    limits = httpx2.Limits(max_connections=limit, max_keepalive_connections=limit)
    sem = asyncio.Semaphore(limit)
    async with httpx2.AsyncClient(base_url=base, limits=limits, timeout=30) as client:
        async def one(i: int):
            token = tokens[(customer_index(i) if customer_index else i) % len(tokens)]
            body = {"customer_token": token}
            if message is not None:
                body["message"] = {"text": message, "client_id": uuid.uuid4().hex}
            async with sem:
                sent_at, sent_wall = time.perf_counter(), time.time()
                try:
                    r = await client.post("/api/conversations", json=body)
                except httpx2.HTTPError as e:
                    errors.append(f"create: {type(e).__name__}: {e}")
                    return
            if r.status_code != 201:
                errors.append(f"create: HTTP {r.status_code} {r.text[:200]}")
                return
            answer = r.json()
            out[i] = {"id": answer["conversation"]["id"], "token": answer["token"]}
            if message is not None:
                out[i].update(sent_at=sent_at, sent_wall=sent_wall)

        await asyncio.gather(*(one(i) for i in range(n)))
    return [c for c in out if c is not None], errors


STOPPED = ("stopped", "awaiting_approval")  # a run's statuses that end a turn


class Widget:
    """One customer's socket on one conversation, with the arrival time of each event it receives."""

    def __init__(self, base: str, conversation: dict):
        self.url = base.replace("http://", "ws://") + f"/ws/conversations/{conversation['id']}/"
        self.origin = base
        self.conversation = conversation
        self.ws = None
        self.events: list[tuple[float, dict]] = []
        self.sent_at: float | None = conversation.get("sent_at")  # set: it opened with its first message
        self.sent_wall: float | None = conversation.get("sent_wall")  # the same instant on the wall clock
        self.error: str | None = None
        self._reader: asyncio.Task | None = None
        self._stopped = asyncio.Event()
        self._first_token = asyncio.Event()
        self.first_token_at: float | None = None
        self.accepted_at: float | None = None
        self.running_at: float | None = None
        self.stopped_at: float | None = None
        self.stop_event: dict | None = None

    async def open(self, timeout: float = 20.0) -> None:
        """Connect, authenticate with `resume`, and wait for the end of the replay."""
        self.ws = await connect(self.url, origin=self.origin, compression=None, open_timeout=timeout,
                                max_size=2 ** 22, ping_interval=None)
        await self.ws.send(json.dumps({"type": "resume", "token": self.conversation["token"], "last_seq": 0}))
        deadline = time.monotonic() + timeout
        while True:
            event = json.loads(await asyncio.wait_for(self.ws.recv(), max(0.01, deadline - time.monotonic())))
            if self.sent_at is not None:  # it opened with a message: its run's events may come before the replay's end
                self._take(time.perf_counter(), event)
            if event.get("type") == "replay.done":
                run = (event.get("state") or {}).get("run") or {}
                if self.sent_at is not None and self.stopped_at is None and run.get("status") in STOPPED:
                    self.stopped_at, self.stop_event = time.perf_counter(), {"type": "run.status", **run}
                    self._stopped.set()  # it ended before the replay read it: no event for it comes
                break
        self._reader = asyncio.create_task(self._read())

    def _take(self, now: float, event: dict) -> None:
        self.events.append((now, event))
        kind = event.get("type")
        if kind == "token.delta" and event.get("text") and self.first_token_at is None:
            self.first_token_at = now
            self._first_token.set()
        elif kind == "message.accepted" and self.accepted_at is None:
            self.accepted_at = now
        elif kind == "message.rejected":
            self.error = f"rejected: {event.get('error')}"
            self._stopped.set()
            self._first_token.set()
        elif kind == "run.status":
            if event.get("status") == "running" and self.running_at is None:
                self.running_at = now
            if event.get("status") in STOPPED and self.sent_at is not None and self.stopped_at is None:
                self.stopped_at, self.stop_event = now, event
                self._stopped.set()

    async def _read(self) -> None:
        try:
            async for raw in self.ws:
                self._take(time.perf_counter(), json.loads(raw))
        except Exception as e:  # noqa: BLE001 - the socket closed under us: an error of the run's client
            if not self._stopped.is_set():
                self.error = f"socket: {type(e).__name__}: {e}"
        finally:
            self._stopped.set()
            self._first_token.set()

    def first_after_send(self, event_type: str, **match) -> float | None:
        """Seconds from send to the first event of that type (with those fields), or None."""
        for at, event in self.events:
            if at >= (self.sent_at or 0) and event.get("type") == event_type and all(event.get(k) == v
                                                                                for k, v in match.items()):
                return at - self.sent_at
        return None

    async def next_turn(self, text: str) -> None:
        """Forget the previous turn's timings and send the next message on the same socket."""
        self.events.clear()
        self.first_token_at = self.accepted_at = self.running_at = self.stopped_at = None
        self.stop_event = None
        if self._reader is not None and not self._reader.done():
            self._stopped.clear()
            self._first_token.clear()
        await self.send(text)

    async def send(self, text: str) -> None:
        self.sent_at, self.sent_wall = time.perf_counter(), time.time()
        await self.ws.send(json.dumps({"type": "message", "text": text, "client_id": uuid.uuid4().hex}))

    async def wait_first_token(self, timeout: float) -> float | None:
        """Seconds from send to the first non-empty token.delta, or None."""
        try:
            await asyncio.wait_for(self._first_token.wait(), timeout)
        except asyncio.TimeoutError:
            self.error = self.error or f"no token within {timeout} s"
        return None if self.first_token_at is None else self.first_token_at - self.sent_at

    async def wait_stopped(self, timeout: float) -> float | None:
        """Seconds from send to run.status stopped (or awaiting_approval), or None."""
        try:
            await asyncio.wait_for(self._stopped.wait(), timeout)
        except asyncio.TimeoutError:
            self.error = self.error or f"run not finished within {timeout} s"
        return None if self.stopped_at is None else self.stopped_at - self.sent_at

    async def close(self) -> None:
        if self.ws is not None:
            try:
                await asyncio.wait_for(self.ws.close(), 5)
            except Exception:  # noqa: BLE001
                pass
        if self._reader is not None:
            self._reader.cancel()
            try:
                await self._reader
            except BaseException:  # noqa: BLE001
                pass


async def open_widgets(base: str, conversations: list[dict], *, limit: int = 50,
                       timeout: float = 30.0) -> tuple[list[Widget], list[str]]:
    """Open a socket per conversation (at most `limit` handshakes at once); those that failed are reported."""
    sem = asyncio.Semaphore(limit)
    widgets = [Widget(base, c) for c in conversations]
    errors: list[str] = []

    async def one(w: Widget):
        async with sem:
            try:
                await w.open(timeout)
            except Exception as e:  # noqa: BLE001
                errors.append(f"open: {type(e).__name__}: {e}")
                w.error = "open failed"

    await asyncio.gather(*(one(w) for w in widgets))
    return [w for w in widgets if w.error is None], errors


async def close_widgets(widgets: list[Widget]) -> None:
    await asyncio.gather(*(w.close() for w in widgets))


# -- the stand-in, directly: its own time to first token -------------------------------------------

async def standin_ttft(host: str, port: int, body: bytes, timeout: float = 30.0) -> float:
    """Seconds from sending a streaming request to the first non-empty content delta, on a new connection
    (connection set-up excluded from the time)."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    try:
        head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
                f"Authorization: Bearer bench\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
        t0 = time.perf_counter()
        writer.write(head + body)
        await writer.drain()
        deadline = time.monotonic() + timeout
        while True:
            line = await asyncio.wait_for(reader.readline(), max(0.01, deadline - time.monotonic()))
            if not line:
                raise RuntimeError("the stand-in closed the stream before any content")
            if line.startswith(b"data: {"):
                chunk = json.loads(line[6:])
                for choice in chunk.get("choices") or ():
                    if (choice.get("delta") or {}).get("content"):
                        return time.perf_counter() - t0
    finally:
        writer.close()
