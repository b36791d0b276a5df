"""The fake Shopify for tests: one server for the session, reset before each test that asks for it.

`fake_shopify` (function-scoped) also points the desk's SHOPIFY_* settings at it, with short timeouts.
`shopify_shop(sleep=...)` builds a ShopifyShop whose waits go to `sleep` and move the fake's clock on as
if they had passed, so a test of throttling neither sleeps nor races the bucket.
"""

from __future__ import annotations

import pytest

from standin.shopify import FakeShopify, start_in_thread
from support import shop as shop_package
from support.shop.shopify import ShopifyShop

_shared: FakeShopify | None = None


def _server(config) -> FakeShopify:
    global _shared
    if _shared is None:
        _shared = start_in_thread()
        config.add_cleanup(_shared.stop)  # once, when the whole session ends
    return _shared


@pytest.fixture(scope="session")
def fake_shopify_server(request) -> FakeShopify:
    return _server(request.config)


@pytest.fixture
def fake_shopify(request, settings) -> FakeShopify:
    fake = _server(request.config)
    fake.reset()
    settings.SHOPIFY_SHOP_DOMAIN = fake.base_url
    settings.SHOPIFY_ACCESS_TOKEN = fake.token
    settings.SHOPIFY_API_VERSION = fake.api_version
    settings.SHOP_CONNECT_TIMEOUT_SECONDS = 2.0
    settings.SHOP_READ_TIMEOUT_SECONDS = 2.0
    settings.SHOP_READ_RETRIES = 2
    settings.SHOP_RETRY_MAX_WAIT_SECONDS = 5.0
    settings.SHOP_CIRCUIT_FAILURES = 50
    shop_package.shop_forget("shopify")  # as new, like the fake: no circuit or client an earlier test left
    yield fake
    shop_package.shop_forget("shopify")


@pytest.fixture
def shopify_shop(fake_shopify):
    """shopify_shop() or shopify_shop(waits=[]): a ShopifyShop against the fake; the waits it asks for
    are appended to `waits` and advance the fake's clock instead of sleeping."""
    def build(waits: list | None = None) -> ShopifyShop:
        def sleep(seconds: float) -> None:
            if waits is not None:
                waits.append(seconds)
            fake_shopify.advance(seconds)

        return ShopifyShop(sleep=sleep)

    return build
