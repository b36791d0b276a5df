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

_made: dict[tuple, Shop] = {}


def shop() -> Shop:
    """The configured shop, one per process and configuration: the backend's name and where and as whom it
    connects (settings changed at run time, as tests do, get a backend of their own, never a stale one)."""
    name = settings.SHOP_BACKEND
    if name not in BACKENDS:
        raise ImproperlyConfigured(f"SHOP_BACKEND must be one of {', '.join(BACKENDS)}, got {name!r}")
    key = (name, settings.SHOP_URL, settings.SHOP_API_KEY, settings.SHOPIFY_SHOP_DOMAIN,
           settings.SHOPIFY_ACCESS_TOKEN)
    if key not in _made:
        _made[key] = BACKENDS[name]()
    return _made[key]


def shop_forget(name: str | None = None) -> None:
    """Close and drop the backends made (every one, or one backend's): the next shop() makes it afresh, with a
    circuit and a client of its own (a test that needs a shop no earlier test has touched)."""
    for key in [k for k in _made if name is None or k[0] == name]:
        made = _made.pop(key)
        if hasattr(made, "close"):
            made.close()
