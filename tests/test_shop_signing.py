"""How the desk reaches a remote: version 2 of the shop contract by default (the key and a nonce signed, a new
nonce for every request), version 1 only behind SHOP_CONTRACT_VERSION with a start-up warning, and keys,
tokens and customers' data over https only with DEBUG off, unless PLAIN_HTTP_PRIVATE_HOSTS names the host.

Tests run with DEBUG off; tests/conftest.py names 127.0.0.1 (where the fake servers listen) a private host.
"""

from __future__ import annotations

import pytest
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from support.desk.checks import remotes_are_https, shop_contract_is_current
from support.shop import contract, port
from support.shop.http import HttpShop
from support.shop.shopify import ShopifyShop
from support.tools import mcp
from tests.mcp_fixture import mcp_server  # noqa: F401
from tests.shop_fixture import http_shop, reference_shop, reference_shop_server, shop_settings, waits  # noqa: F401


@pytest.fixture
def signed(monkeypatch) -> list[dict]:
    """The signing headers of each request the desk sends, in order."""
    made = []
    real = contract.signed_headers

    def record(*args, **kwargs):
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(contract, "signed_headers", record)
    return made


# -- version 2 ------------------------------------------------------------------------------------------

def test_it_signs_version_2_with_a_new_nonce_for_every_request_and_the_shop_takes_each(http_shop, signed,
                                                                                         reference_shop):
    http_shop.order("SU-41290")
    made = http_shop.refund(order_number="SU-41290", amount=contract.money("1.00", "amount"), reason="chipped",
                            idempotency_key="run-1:call_1")
    again = http_shop.refund(order_number="SU-41290", amount=contract.money("1.00", "amount"), reason="chipped",
                             idempotency_key="run-1:call_1")
    assert again.id == made.id and [r["status"] for r in reference_shop.requests()] == [200, 201, 200]
    assert all(h["X-Desk-Signature"].startswith("v2=") for h in signed)
    assert len({h["X-Desk-Nonce"] for h in signed}) == 3


def test_the_write_signature_covers_its_idempotency_key():
    base = dict(key="k", timestamp="1767225600", nonce="n" * 16, method="POST", path_and_query="/orders/SU-1/refunds",
                body=b"{}")
    assert contract.signature_v2(idempotency_key="run-1:call_1", **base) != \
        contract.signature_v2(idempotency_key="run-1:call_2", **base) != contract.signature_v2(idempotency_key="", **base)


def test_version_1_is_signed_only_when_the_setting_asks_and_the_check_warns_meanwhile(http_shop, reference_shop,
                                                                                     signed, settings):
    assert shop_contract_is_current(None) == []
    settings.SHOP_CONTRACT_VERSION = 1
    [warning] = shop_contract_is_current(None)
    assert (warning.id, warning.level) == ("support.W005", checks.WARNING) and "replayed" in warning.msg
    with pytest.raises(port.ShopUnavailable, match="signature"):  # a version 2 shop refuses it
        http_shop.order("SU-41290")
    reference_shop.configure(accept_v1=True)  # a shop not moved yet
    assert http_shop.order("SU-41290").number == "SU-41290"
    assert [h["X-Desk-Signature"][:3] for h in signed] == ["v1=", "v1="] and "X-Desk-Nonce" not in signed[0]


# -- https only -------------------------------------------------------------------------------------------

def test_a_plain_http_shop_url_is_refused_with_debug_off_unless_named_a_private_host(shop_settings, settings):
    settings.PLAIN_HTTP_PRIVATE_HOSTS = []
    with pytest.raises(ImproperlyConfigured, match=r"^SHOP_URL: 127\.0\.0\.1 is plain http"):
        HttpShop()
    settings.PLAIN_HTTP_PRIVATE_HOSTS = ["127.0.0.1"]
    assert HttpShop().customer_by_email("maya@example.com").id == "cus_1"


def test_https_is_always_allowed_and_plain_http_while_debug_is_on(settings):
    settings.PLAIN_HTTP_PRIVATE_HOSTS = []
    HttpShop(url="https://shop.example/desk-api", key="k").close()
    settings.DEBUG = True
    HttpShop(url="http://shop.example/desk-api", key="k").close()


@pytest.mark.parametrize("url, says", [
    ("http://1.1.1.1:8002", r"1\.1\.1\.1 is a public address"),
    ("ftp://shop.example", "shop.example is not an https URL"),
])
def test_a_public_address_cannot_be_named_private_and_other_schemes_are_refused(settings, url, says):
    settings.PLAIN_HTTP_PRIVATE_HOSTS = ["1.1.1.1"]
    with pytest.raises(ImproperlyConfigured, match=says):
        HttpShop(url=url, key="k")


def test_a_plain_http_shopify_domain_is_refused_before_the_token_is_sent(fake_shopify, settings):
    settings.PLAIN_HTTP_PRIVATE_HOSTS = []
    with pytest.raises(ImproperlyConfigured, match="SHOPIFY_SHOP_DOMAIN: 127.0.0.1 is plain http"):
        ShopifyShop().order("SU-41290")
    assert fake_shopify.requests() == []


def test_a_plain_http_mcp_server_is_not_connected_to(mcp_server, settings):
    settings.PLAIN_HTTP_PRIVATE_HOSTS = []
    [server] = settings.MCP_SERVERS
    assert mcp.listing(server) is None and mcp_server.headers_seen == []
    mcp.forget_listings()
    settings.PLAIN_HTTP_PRIVATE_HOSTS = ["127.0.0.1"]
    assert "lookup_warranty" in mcp.listing(server)


def test_the_start_up_check_names_each_remote_that_is_not_https(settings):
    settings.PLAIN_HTTP_PRIVATE_HOSTS = []
    settings.SHOP_BACKEND, settings.SHOP_URL = "http", "http://shop.internal:8002"
    settings.MCP_SERVERS = [{"name": "warranty", "url": "http://warranty.internal/mcp?token=sekrit"}]
    found = remotes_are_https(None)
    assert [(e.id, e.msg.split(":")[0]) for e in found] == [("support.E004", "SHOP_URL"),
                                                             ("support.E004", "MCP_SERVERS (warranty)")]
    assert "sekrit" not in " ".join(e.msg for e in found)
    settings.PLAIN_HTTP_PRIVATE_HOSTS = ["shop.internal", "warranty.internal"]
    assert remotes_are_https(None) == []
