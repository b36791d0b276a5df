"""The reference shop for tests: one server for the session, reset before each test, and an HttpShop aimed
at it whose Guard records the waits it asks for instead of sleeping.

Use `from tests.shop_fixture import reference_shop, http_shop` (both function-scoped; the server behind
them is started once per session by `reference_shop_server`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from standin.shop import ShopServer, start_in_thread
from support import shop as shop_package
from support.shop.http import HttpShop
from support.shop.resilience import Guard

KEY = "desk-test-key-one-0123456789abcdef"
OTHER_KEY = "desk-test-key-two-fedcba9876543210"  # the shop accepts both: a rotation under way

_shared: ShopServer | None = None



@pytest.fixture(scope="session")
def reference_shop_server(request) -> ShopServer:
    global _shared
    if _shared is None:
        _shared = start_in_thread(keys=(KEY, OTHER_KEY))
        request.config.add_cleanup(_shared.stop)
    return _shared


@pytest.fixture
def reference_shop(reference_shop_server) -> ShopServer:
    """The server as new, and the process's HTTP backend made afresh: one an earlier test left with its circuit
    open (the shop failed it three times) would refuse this test's first reads."""
    reference_shop_server.reset()
    shop_package.shop_forget("http")
    yield reference_shop_server
    shop_package.shop_forget("http")


@dataclass
class Waits:
    """What the Guard would have slept, in order."""

    asked: list[float] = field(default_factory=list)

    def __call__(self, seconds: float) -> None:
        self.asked.append(seconds)


@pytest.fixture
def shop_settings(settings, reference_shop):
    settings.SHOP_BACKEND = "http"
    settings.SHOP_URL = reference_shop.base_url
    settings.SHOP_API_KEY = KEY
    settings.SHOP_CONNECT_TIMEOUT_SECONDS = 1.0
    settings.SHOP_READ_TIMEOUT_SECONDS = 0.5
    settings.SHOP_READ_RETRIES = 2
    settings.SHOP_RETRY_MAX_WAIT_SECONDS = 5.0
    settings.SHOP_CIRCUIT_FAILURES = 3
    settings.SHOP_CIRCUIT_RESET_SECONDS = 30.0
    return settings


@pytest.fixture
def waits() -> Waits:
    return Waits()


@pytest.fixture
def http_shop(shop_settings, waits):
    shop = HttpShop(guard=Guard("reference", sleep=waits))
    yield shop
    shop.close()
