"""The prompt cache, as OpenAI's works: a request's longest prefix already seen (tools first, then the messages,
as the stand-in counts tokens) is reported as cached, from 1,024 tokens, in steps of 128.

Prefixes are remembered per prompt_cache_key (a request without one shares the unkeyed bucket), the last
PROMPTS_KEPT requests of each, like a provider routing a key's requests to one machine; and the last SHARED_KEPT
requests of every key, as an organisation's requests share the provider's cache (a prefix common to all of them,
the tools and the system prompt, is warm wherever a busy desk's requests land). A fresh cache (reset) is a
provider that has seen nothing of the desk.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict, deque

from .reply import estimate_tokens, without_images

MIN_CACHED = 1024  # tokens: shorter prefixes are never cached
STEP = 128  # cached tokens come in steps of this many
PROMPTS_KEPT = 64  # per key
SHARED_KEPT = 16  # of all keys
KEYS_KEPT = 1_000


def prompt_text(body: dict) -> str:
    """The request as the model reads it, in order: the tools, then the messages (images by no text)."""
    tools = json.dumps(body["tools"], ensure_ascii=False) if body.get("tools") else ""
    return tools + json.dumps(without_images(body.get("messages") or []), ensure_ascii=False)


def shared_prefix(a: str, b: str) -> int:
    """How many characters `a` and `b` share from the start (a binary search over C-speed slice compares)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def cached_tokens(prefix_chars: int) -> int:
    tokens = estimate_tokens(prefix_chars) if prefix_chars else 0
    return 0 if tokens < MIN_CACHED else tokens // STEP * STEP


class PromptCache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_key: OrderedDict[str, deque[str]] = OrderedDict()
        self._shared: deque[str] = deque(maxlen=SHARED_KEPT)

    def read(self, body: dict) -> int:
        """The tokens of this request served from the cache; the request is remembered for the next ones."""
        key = body.get("prompt_cache_key") if isinstance(body.get("prompt_cache_key"), str) else ""
        text = prompt_text(body)
        with self._lock:
            seen = self._by_key.pop(key, None) or deque(maxlen=PROMPTS_KEPT)
            self._by_key[key] = seen
            if len(self._by_key) > KEYS_KEPT:
                self._by_key.popitem(last=False)
            longest = max((shared_prefix(text, earlier) for earlier in (*seen, *self._shared)), default=0)
            seen.append(text)
            self._shared.append(text)
        return cached_tokens(longest)

    def prompts(self) -> list[str]:
        """Every remembered request's text, oldest first within each key (tests compare consecutive calls)."""
        with self._lock:
            return [text for seen in self._by_key.values() for text in seen]
