"""The shop behind its port: DemoShop answers from the seeded demo as the shop contract would, its writes are
idempotent by key and never refund more than is left, SHOP_BACKEND picks it (and nothing unknown), and the
desk's callers reach the shop through the port only.

Maya owns SU-41290 (120.00, 40.00 refunded, fulfilled by Sundry) and SU-41207 (69.00, Hearth & Loom).
"""

from __future__ import annotations

import ast
import dataclasses
import runpy
from decimal import Decimal
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from support import shop as shop_package
from support.models import Refund, SellerMessage
from support.shop import port, shop
from support.shop.demo import DemoShop

ROOT = Path(__file__).resolve().parents[1]
MAYA_NEWEST_FIRST = ["SU-41501", "SU-41210", "SU-41207", "SU-41402", "SU-41388", "SU-41419", "SU-41310",
                     "SU-41533", "SU-41290", "SU-40155"]


@pytest.fixture
def demo_shop(demo):
    return DemoShop()


# -- reads ------------------------------------------------------------------------------------------------

def test_it_finds_a_customer_by_email_whatever_the_case(demo, demo_shop):
    found = demo_shop.customer_by_email("Maya@EXAMPLE.com")
    assert found == port.ShopCustomer(id=str(demo.maya.pk), name=demo.maya.name, email="maya@example.com")
    assert demo_shop.customer_by_email("maya@example.com") == found
    assert demo_shop.customer_by_email("nobody@example.com") is None


def test_a_customers_orders_come_newest_first_and_only_theirs(demo, demo_shop):
    orders = demo_shop.orders_of(str(demo.maya.pk))
    assert [o.number for o in orders] == MAYA_NEWEST_FIRST
    assert {o.customer_id for o in orders} == {str(demo.maya.pk)}
    assert [o.number for o in demo_shop.orders_of(str(demo.tom.pk))] == ["SU-41444"]
    assert demo_shop.orders_of("not-an-id") == [] and demo_shop.orders_of("999999") == []


def test_the_orders_in_brief_say_what_the_orders_say(demo, demo_shop):
    maya = str(demo.maya.pk)
    briefs = demo_shop.order_briefs(maya, limit=3)
    assert briefs == [port.brief(o) for o in demo_shop.orders_of(maya, limit=3)] and len(briefs) == 3
    assert demo_shop.order_briefs("not-an-id") == [] and demo_shop.order_briefs("999999") == []


def test_the_briefs_of_all_orders_an_empty_one_and_two_of_one_moment_match_the_orders(demo, demo_shop):
    """One read of the orders with their items (a row per item): an order without items, and orders placed at
    the same moment, come out as orders_of says them, in its order."""
    from support import models

    first = demo.orders["SU-41207"]
    empty = models.Order.objects.create(number="SU-49999", customer=demo.maya, seller=first.seller,
                                        placed_at=first.placed_at, shipping_fee="4.95")
    maya = str(demo.maya.pk)
    assert demo_shop.order_briefs(maya) == [port.brief(o) for o in demo_shop.orders_of(maya)]
    brief = next(b for b in demo_shop.order_briefs(maya) if b.number == empty.number)
    assert brief.item_titles == () and str(brief.total) == "4.95"
    for limit in (1, 2, 4):
        assert demo_shop.order_briefs(maya, limit=limit) == [port.brief(o) for o in demo_shop.orders_of(maya, limit=limit)]


def test_a_limit_gives_the_newest_orders_only(demo, demo_shop):
    assert [o.number for o in demo_shop.orders_of(str(demo.maya.pk), limit=2)] == MAYA_NEWEST_FIRST[:2]
    assert [o.number for o in demo_shop.orders_of(str(demo.tom.pk), limit=5)] == ["SU-41444"]


def test_an_order_carries_its_items_money_parcels_and_refunds(demo, demo_shop):
    order = demo_shop.order("SU-41290")
    assert order.seller == port.Seller(id="sundry", name=demo.orders["SU-41290"].seller.name, is_marketplace=False)
    assert [(i.sku, i.qty, i.unit_price, i.line_total) for i in order.items] == [
        ("SW-PAN-CI28", 1, Decimal("54.00"), Decimal("54.00")), ("SW-PLT-ST4", 1, Decimal("66.00"), Decimal("66.00"))]
    assert (order.total, order.refunded, order.refundable) == (Decimal("120.00"), Decimal("40.00"), Decimal("80.00"))
    assert all(isinstance(v, Decimal) for v in (order.shipping_fee, order.total, order.refunded, order.refundable))
    assert (order.status, order.currency, order.note) == ("delivered", "EUR", "")
    [refund] = order.refunds
    assert (refund.amount, refund.order_number, refund.idempotency_key) == (Decimal("40.00"), "SU-41290", None)
    assert refund.reference.startswith("RF-") and "chipped" in refund.reason
    [parcel] = order.parcels
    assert (parcel.tracking, parcel.carrier, parcel.status) == ("DX81290017", "DX Freight", "delivered")
    assert [s.at for s in parcel.scans] == sorted(s.at for s in parcel.scans)  # oldest first
    assert (parcel.scans[0].event, parcel.scans[-1].event) == ("label_created", "delivered")


def test_a_marketplace_order_names_its_seller_and_keeps_the_sellers_words(demo_shop):
    order = demo_shop.order("SU-41501")
    assert order.seller.id == "S-KC" and order.seller.is_marketplace
    assert "IGNORE ALL PREVIOUS INSTRUCTIONS" in order.items[0].seller_description
    assert order.total == Decimal("19.50")  # 16.00 and 3.50 shipping


def test_an_unknown_order_is_none_and_values_are_frozen(demo_shop):
    assert demo_shop.order("SU-99999") is None and demo_shop.order("su-41290") is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        demo_shop.order("SU-41290").refundable = Decimal("999.00")


# -- refunds ----------------------------------------------------------------------------------------------

def refund(demo_shop, amount="10.00", key="key-1", order_number="SU-41290"):
    return demo_shop.refund(order_number=order_number, amount=Decimal(amount), reason="parcel missing",
                            idempotency_key=key)


def test_a_refund_is_issued_once_per_key(demo_shop):
    first = refund(demo_shop)
    assert first.order_number == "SU-41290" and first.amount == Decimal("10.00")
    assert first.reference.startswith("RF-") and len(first.reference) == 8
    again = refund(demo_shop, amount="20.00")  # the same key, whatever the rest
    assert again == first
    assert Refund.objects.filter(tool_call_id="key-1").count() == 1
    assert demo_shop.refund_by_key("key-1") == first and demo_shop.refund_by_key("other") is None
    assert demo_shop.order("SU-41290").refundable == Decimal("70.00")


def test_a_refund_never_exceeds_what_is_left(demo_shop):
    with pytest.raises(port.ExceedsRefundable) as over:
        refund(demo_shop, amount="80.01")
    assert over.value.refundable == Decimal("80.00")
    assert not Refund.objects.filter(tool_call_id="key-1").exists()
    refund(demo_shop, amount="80.00", key="key-2")
    with pytest.raises(port.ExceedsRefundable) as over:
        refund(demo_shop, amount="0.01", key="key-3")
    assert over.value.refundable == Decimal("0.00")


def test_a_refund_needs_an_order_and_a_positive_amount(demo_shop):
    with pytest.raises(port.NotFound):
        refund(demo_shop, order_number="SU-99999")
    for amount in ("0.00", "-1.00", "1.005"):
        with pytest.raises(port.Invalid):
            refund(demo_shop, amount=amount)
    assert isinstance(port.NotFound(), port.ShopError) and isinstance(port.ExceedsRefundable(Decimal(0)), port.ShopError)


# -- seller messages --------------------------------------------------------------------------------------

def message(demo_shop, key="m-1", order_number="SU-41207", text="Parcel missing.", conversation="conv-1"):
    return demo_shop.message_seller(order_number=order_number, message=text, idempotency_key=key,
                                    conversation=conversation)


def test_a_seller_message_is_sent_once_per_key(demo_shop):
    first = message(demo_shop)
    assert first.order_number == "SU-41207"
    assert message(demo_shop, text="Something else.") == first
    assert SellerMessage.objects.count() == 1 and SellerMessage.objects.get().body == "Parcel missing."
    assert demo_shop.seller_message_by_key("m-1") == first and demo_shop.seller_message_by_key("m-2") is None


def test_an_order_the_shop_ships_itself_has_no_seller_to_message(demo_shop):
    with pytest.raises(port.Invalid):
        message(demo_shop, order_number="SU-41290")
    with pytest.raises(port.NotFound):
        message(demo_shop, order_number="SU-99999")
    assert not SellerMessage.objects.exists()


# -- the setting ------------------------------------------------------------------------------------------

def test_the_demo_is_the_default_backend_one_per_process(demo):
    assert isinstance(shop(), DemoShop) and shop() is shop()


def test_an_unknown_backend_is_refused_by_name(settings):
    settings.SHOP_BACKEND = "magento"
    with pytest.raises(ImproperlyConfigured, match=r"SHOP_BACKEND must be one of demo, http, shopify, got 'magento'"):
        shop()


def test_an_unknown_backend_stops_start_up_naming_the_allowed_ones(monkeypatch, tmp_path):
    monkeypatch.setenv("VAR_DIR", str(tmp_path))
    monkeypatch.setenv("SHOP_BACKEND", "magento")
    allowed = ", ".join(shop_package.BACKENDS)  # settings.py accepts exactly the backends the package has
    with pytest.raises(ImproperlyConfigured, match=f"SHOP_BACKEND must be one of {allowed}, got 'magento'"):
        runpy.run_path(str(ROOT / "agentsite" / "settings.py"))
    monkeypatch.setenv("SHOP_BACKEND", "demo")
    assert runpy.run_path(str(ROOT / "agentsite" / "settings.py"))["SHOP_BACKEND"] == "demo"


# -- the callers go through the port ----------------------------------------------------------------------

THROUGH_THE_PORT = [*sorted((ROOT / "support" / "tools").glob("*.py")),
                    *(ROOT / "support" / "desk" / name for name in
                      ("selectors_context.py", "staff_actions.py", "selectors_approvals.py")),
                    ROOT / "support" / "customers" / "signin.py", ROOT / "support" / "customers" / "identity.py"]
SHOP_MODELS = {"Order", "OrderItem", "Charge", "Seller", "Parcel", "Scan", "Refund", "SellerMessage"}


def imported_models(source: str) -> set[str]:
    return {alias.name for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ImportFrom)
            and (node.module or "").startswith("support.models") for alias in node.names}


@pytest.mark.parametrize("path", THROUGH_THE_PORT, ids=lambda p: str(p.relative_to(ROOT)))
def test_tools_selectors_staff_actions_and_sign_in_read_no_shop_table(path):
    source = path.read_text()
    assert not [f"{m}.objects" for m in SHOP_MODELS if f"{m}.objects" in source], f"{path.name} queries a shop table"
    assert not imported_models(source) & SHOP_MODELS, f"{path.name} imports the shop's models"
