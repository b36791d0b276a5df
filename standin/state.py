"""One server's control state: queued faults, settings, the request log. Thread-safe, per instance.

Tests drive it over HTTP (/_standin/...) or directly through `StandinServer.state` from their own
thread, while the server's event loop reads it; one lock guards it all and is never held across I/O.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from typing import Callable

from .cache import PromptCache
from .dialects import DIALECTS
from .faults import Fault, parse_all

DEFAULT_CONFIG = {"latency_ms": 0.0, "token_delay_ms": 0.0, "outcome_style": "separate", "dialect": "openai"}
OUTCOME_STYLES = ("separate", "with_content")
LOG_SIZE = 10_000
DIRECTIVE_KEYS = 10_000
SENT_KEPT = 1_000  # distinct system messages and tool specs kept (a test reads what the desk wrote)


class ControlState:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counted = 0  # requests since the server started; a reset keeps counting (see log)
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._queue: list[tuple[Fault, str | None]] = []
            self._config = dict(DEFAULT_CONFIG)
            self._log: deque[dict] = deque(maxlen=LOG_SIZE)
            self._before = self._counted  # requests numbered up to here came before this reset
            self._directive_seen: OrderedDict[str, int] = OrderedDict()
            self._sent: OrderedDict[str, None] = OrderedDict()
            self.prompt_cache = PromptCache()

    # --- faults ---------------------------------------------------------------------------------

    def queue_faults(self, specs: list[str] | str, match: str | None = None) -> list[str]:
        """Queue faults for the next requests (whose messages contain `match`); ValueError if a spec is bad."""
        if match is not None and not isinstance(match, str):
            raise ValueError('"match" must be a string')
        faults = parse_all(specs)
        with self._lock:
            self._queue += [(f, match or None) for f in faults]
        return [f.spec for f in faults]

    def pending(self) -> list[dict]:
        with self._lock:
            return [{"fault": f.spec, "match": m} for f, m in self._queue]

    def clear_faults(self) -> None:
        with self._lock:
            self._queue.clear()

    def take(self, serialized: Callable[[], str], accept: Callable[[Fault], bool]) -> Fault | None:
        """Remove and return the first queued fault that matches this request."""
        with self._lock:
            if not self._queue:
                return None
            text = serialized() if any(m for _, m in self._queue) else ""
            for i, (fault, match) in enumerate(self._queue):
                if (match is None or match in text) and accept(fault):
                    del self._queue[i]
                    return fault
        return None

    def count_directive_request(self, key: str) -> int:
        """How many requests this directive's conversation made before this one."""
        with self._lock:
            seen = self._directive_seen.pop(key, 0)
            self._directive_seen[key] = seen + 1
            if len(self._directive_seen) > DIRECTIVE_KEYS:
                self._directive_seen.popitem(last=False)
            return seen

    # --- settings -------------------------------------------------------------------------------

    def configure(self, **changes) -> dict:
        for key, value in changes.items():
            if key not in DEFAULT_CONFIG:
                raise ValueError(f"unknown setting {key!r}; known: {', '.join(DEFAULT_CONFIG)}")
            if key == "dialect":
                if value not in DIALECTS:
                    raise ValueError(f"dialect must be one of {', '.join(DIALECTS)}")
            elif key == "outcome_style":
                if value not in OUTCOME_STYLES:
                    raise ValueError(f"outcome_style must be one of {', '.join(OUTCOME_STYLES)}")
            elif isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"{key} must be a number >= 0")
        with self._lock:
            self._config.update(changes)
            return dict(self._config)

    @property
    def config(self) -> dict:
        with self._lock:
            return dict(self._config)

    # --- the request log ------------------------------------------------------------------------

    def next_n(self) -> int:
        """The request's number since the server started (log() numbers its entry from the last reset)."""
        with self._lock:
            self._counted += 1
            return self._counted

    def log(self, n: int, status: int, fault: Fault | None, stream: bool, n_messages: int, **extra) -> None:
        """A request's entry, numbered from the last reset. One that arrived before the reset and ends after
        it (a stalled answer, its client long gone) is not this test's: left out."""
        with self._lock:
            if n <= self._before:
                return
            self._log.append({"n": n - self._before, "status": status, "fault": fault.spec if fault else None,
                              "stream": stream, "n_messages": n_messages, "at": time.time(), **extra})

    def remember_sent(self, texts: list[str]) -> None:
        with self._lock:
            for text in texts:
                self._sent[text] = None
            while len(self._sent) > SENT_KEPT:
                self._sent.popitem(last=False)

    def sent(self) -> list[str]:
        """Each distinct system message and tool spec (as JSON) the desk sent since the reset, oldest first."""
        with self._lock:
            return list(self._sent)

    def requests(self) -> list[dict]:
        with self._lock:
            return sorted(self._log, key=lambda e: e["n"])
