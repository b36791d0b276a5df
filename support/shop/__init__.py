"""The shop behind a port: shop() is the configured backend (SHOP_BACKEND); port.py the interface, demo.py the
demo's tables behind it, search.py the policy search."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from support.shop.demo import DemoShop
from support.shop.http import HttpShop
from support.shop.port import Shop
from support.shop.shopify import ShopifyShop

BACKENDS = {"demo": DemoShop, "http": HttpShop, "shopify": ShopifyShop}  # agentsite/settings.py accepts these names

_made: dict[str, Shop] = {}


def shop() -> Shop:
    """The configured shop, one per process and backend name (a test that changes the setting gets the
    other backend)."""
    name = settings.SHOP_BACKEND
    if name not in BACKENDS:
        raise ImproperlyConfigured(f"SHOP_BACKEND must be one of {', '.join(BACKENDS)}, got {name!r}")
    if name not in _made:
        _made[name] = BACKENDS[name]()
    return _made[name]
