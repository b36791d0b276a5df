"""An answer that never ends, for the remote shops' stand-ins (the reference shop, the fake Shopify): what a
broken or hostile shop sends to a desk that reads an answer whole.

- "huge": the body streams 64 KiB pieces as fast as the client takes them;
- "trickle": one byte every 50 ms, always soon enough for a per-read timeout, never done.
Either ends when `going()` turns false (a reset, so the server can stop) or the client goes away.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from starlette.responses import StreamingResponse

KINDS = ("huge", "trickle")


def endless_answer(kind: str, going: Callable[[], bool]) -> StreamingResponse:
    return StreamingResponse(_pieces(kind, going), media_type="application/json")


async def _pieces(kind: str, going: Callable[[], bool]) -> AsyncIterator[bytes]:
    yield b'{"padding": "'
    while going():
        if kind == "huge":
            yield b"x" * 65536
            await asyncio.sleep(0)
        else:
            yield b"x"
            await asyncio.sleep(0.05)
