"""One test, every shop backend: `any_shop` runs the test it is asked by against the demo shop, the reference shop
over HTTP and the fake Shopify, each serving the same Sundry catalogue, and says what each shop now holds.

    def test_it_refunds_once(any_shop, ctx_for):
        issue_refund(...)
        assert any_shop.refunds("SU-41310") == [Decimal("64.00")]

The desk reaches the remote ones through the backend the setting names, exactly as in production (a fresh
backend per test: a circuit one test opened does not leak into the next).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal

import pytest

from support import shop as shop_package
from support.models import Refund, SellerMessage
from tests.shop_fixture import KEY

BACKENDS = ("demo", "http", "shopify")


@dataclass
class ShopUnderTest:
    name: str
    server: object | None  # the reference shop or the fake Shopify; None for the demo

    def refunds(self, order: str | None = None) -> list[Decimal]:
        """The amounts refunded on that order (every order: None), as the shop itself holds them, oldest first;
        the catalogue's own refunds included."""
        if self.name == "demo":
            rows = Refund.objects.select_related("order").order_by("created_at", "pk")
            found = [(r.order.number, r.amount) for r in rows]
        elif self.name == "http":
            found = [(r["order_number"], Decimal(r["amount"])) for r in self.server.refunds()]
        else:
            found = [(r["order"], Decimal(str(r["amount"]))) for r in self.server.refunds()]
        return [amount for number, amount in found if order is None or number == order]

    def seller_messages(self, order: str | None = None) -> list[str]:
        """The texts sent to sellers about that order (every order: None), as the shop holds them."""
        if self.name == "demo":
            found = [(m.order.number, m.body) for m in SellerMessage.objects.select_related("order").order_by("pk")]
        elif self.name == "http":
            found = [(m["order_number"], m["body"]) for m in self.server.seller_messages()]
        else:
            found = [(m["order"], _text(m["value"])) for m in self.server.seller_messages()]
        return [text for number, text in found if order is None or number == order]

    def configure(self, **faults) -> None:
        if self.server is None:
            raise AssertionError("the demo shop has no faults to switch on")
        self.server.configure(**faults)


def _text(value) -> str:
    value = json.loads(value) if isinstance(value, str) else value
    return value.get("text") or value.get("message") or value.get("body") or ""


@pytest.fixture(params=BACKENDS)
def any_shop(request, settings, demo):
    """The desk's shop is each backend in turn (the demo tables are seeded for all: the desk's customers live
    there, and the remote shops serve the same catalogue)."""
    yield from _use(request, settings, request.param)


@pytest.fixture(params=BACKENDS[1:])
def remote_shop(request, settings, demo):
    """Each remote backend in turn: the ones that can be down, slow or wrong."""
    yield from _use(request, settings, request.param)


def _use(request, settings, name: str):
    server = None
    if name == "http":
        server = request.getfixturevalue("reference_shop")
        settings.SHOP_URL, settings.SHOP_API_KEY = server.base_url, KEY
        settings.SHOP_READ_TIMEOUT_SECONDS = 2.0
    elif name == "shopify":
        server = request.getfixturevalue("fake_shopify")
        settings.SHOPIFY_VENDORS_ARE_SELLERS = True  # the fake serves the Sundry catalogue: a marketplace
    settings.SHOP_BACKEND = name
    _fresh(name)
    yield ShopUnderTest(name, server)
    _fresh(name)


def _fresh(name: str) -> None:
    shop_package.shop_forget(name)
