"""The Shopify backend against the fake Shopify: the queries fit Shopify's schema, orders read as the port's
values, a refund and a seller message are made once per key, and each way Shopify fails maps to the port's
error for it."""

from __future__ import annotations

import pathlib
import threading
from decimal import Decimal

import graphql
import pytest

from support.shop import BACKENDS, port, shopify
from tests.shopify_fixture import fake_shopify, fake_shopify_server, shopify_shop  # noqa: F401  (fixtures)

SCHEMA = graphql.build_schema(pathlib.Path("standin/shopify/schema.graphql").read_text())


@pytest.mark.parametrize("query", shopify.QUERIES, ids=lambda q: q.split("(")[0].split()[-1])
def test_every_query_is_valid_against_shopifys_schema(query):
    assert graphql.validate(SCHEMA, graphql.parse(query)) == []


def test_it_is_the_backend_named_shopify():
    assert BACKENDS["shopify"] is shopify.ShopifyShop


# -- reads ------------------------------------------------------------------------------------------------

def test_customer_by_email_matches_the_address_ignoring_case(shopify_shop):
    shop = shopify_shop()
    maya = shop.customer_by_email("Maya@Example.com")
    assert maya.name == "Maya Okafor" and maya.email == "maya@example.com"
    assert maya.id.startswith("gid://shopify/Customer/")
    assert shop.customer_by_email("nobody@example.com") is None


def test_a_marketplace_order_reads_with_its_seller_items_and_parcel(shopify_shop):
    order = shopify_shop().order("SU-41207")
    assert order.number == "SU-41207" and order.status == "delivered" and order.currency == "EUR"
    assert order.seller == port.Seller(id="S-HL", name="Hearth & Loom", is_marketplace=True)
    assert order.items == (port.Item(sku="HL-CUS-RUST", title="Hand-loomed wool cushion cover, rust", qty=2,
                                     unit_price=Decimal("34.50"),
                                     seller_description="Woven on our looms in Yorkshire."),)  # the product's
    assert (order.total, order.shipping_fee, order.refunded, order.refundable) == \
        (Decimal("69.00"), Decimal("0.00"), Decimal("0.00"), Decimal("69.00"))
    (parcel,) = order.parcels
    assert (parcel.tracking, parcel.carrier, parcel.status) == ("HL40120771", "Royal Mail", "delivered")
    assert [s.event for s in parcel.scans] == ["label_created", "picked_up", "in_transit", "out_for_delivery",
                                               "delivered"]
    assert parcel.scans[-1].detail == "Delivered: left in porch" and parcel.scans[-1].location == "Leeds"
    assert parcel.scans == tuple(sorted(parcel.scans, key=lambda s: s.at))


def test_an_order_the_shop_ships_itself_has_sundry_as_its_seller(shopify_shop):
    order = shopify_shop().order("SU-41210")
    assert order.seller == port.Seller(id="sundry", name="Sundry Warehouse", is_marketplace=False)
    assert order.shipping_fee == Decimal("4.99") and order.total == Decimal("42.99")


def test_an_earlier_refund_lowers_the_refundable_balance(shopify_shop):
    order = shopify_shop().order("SU-41290")
    assert (order.total, order.refunded, order.refundable) == (Decimal("120.00"), Decimal("40.00"), Decimal("80.00"))
    (refund,) = order.refunds
    assert refund.amount == Decimal("40.00") and refund.reason.startswith("Two plates arrived chipped")
    assert refund.idempotency_key is None and refund.reference.startswith("RF-")


def test_the_held_parcel_reads_as_in_transit_and_delayed(shopify_shop):
    order = shopify_shop().order("SU-41388")
    assert order.status == "in_transit"
    (parcel,) = order.parcels
    assert parcel.status == "delayed" and parcel.scans[-1].event == "held"
    assert parcel.scans[-1].detail == "Held: severe weather, depot closed"
    assert parcel.scans[-1].location == "Carlisle depot"


def test_an_unknown_or_odd_order_number_is_none(shopify_shop, fake_shopify):
    shop = shopify_shop()
    assert shop.order("SU-99999") is None
    assert shop.order('SU-1" OR name:*') is None  # never reaches the search syntax
    assert len(fake_shopify.requests()) == 1


def test_orders_of_a_customer_come_newest_first_over_several_pages(shopify_shop, fake_shopify):
    shop = shopify_shop()
    maya = shop.customer_by_email("maya@example.com")
    orders = shop.orders_of(maya.id)
    assert len(orders) == 10 and {o.customer_id for o in orders} == {maya.id}
    assert [o.placed_at for o in orders] == sorted((o.placed_at for o in orders), reverse=True)
    assert orders[0].number == "SU-41501"
    pages = [r for r in fake_shopify.requests() if r["status"] == 200][1:]
    assert len(pages) == 4 and all(r["cost"] < 1000 for r in pages)
    assert shop.orders_of("12") == []


def test_a_customers_orders_are_read_from_at_most_shopify_max_order_pages_pages(shopify_shop, fake_shopify, settings):
    settings.SHOPIFY_MAX_ORDER_PAGES = 2
    shop = shopify_shop()
    maya = shop.customer_by_email("maya@example.com")
    before = len(fake_shopify.requests())
    orders = shop.orders_of(maya.id)
    assert [o.number for o in orders][:1] == ["SU-41501"] and len(orders) == 6  # the newest, 3 a page
    assert len(fake_shopify.requests()) - before == 2


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind, says", [("huge", "larger than SHOP_MAX_ANSWER_BYTES"),
                                        ("trickle", "still coming after SHOP_ANSWER_DEADLINE_SECONDS")])
def test_an_answer_without_end_is_cut_off_as_unavailable_and_a_write_as_unknown(shopify_shop, fake_shopify, settings,
                                                                                 kind, says):
    settings.SHOP_ANSWER_DEADLINE_SECONDS, settings.SHOP_READ_RETRIES = 0.5, 0
    fake_shopify.configure(endless_answer=kind)
    with pytest.raises(port.ShopUnavailable, match=says) as read:
        shopify_shop().order("SU-41207")
    assert not isinstance(read.value, port.OutcomeUnknown)
    with pytest.raises(port.OutcomeUnknown, match=says):
        shopify_shop()._write(shopify.METAFIELDS_SET, {"metafields": []})



# -- refunds ----------------------------------------------------------------------------------------------

def test_a_refund_is_made_once_per_key_even_when_sent_twice(shopify_shop, fake_shopify):
    shop = shopify_shop()
    first = shop.refund(order_number="SU-41207", amount=Decimal("20.00"), reason="cover faded",
                        idempotency_key="run-1:call_1")
    again = shop.refund(order_number="SU-41207", amount=Decimal("25.00"), reason="other words",
                        idempotency_key="run-1:call_1")
    assert again == first and first.amount == Decimal("20.00") and first.order_number == "SU-41207"
    made = [r for r in fake_shopify.refunds() if r["order"] == "SU-41207"]
    assert len(made) == 1 and made[0]["amount"] == Decimal("20.00")
    assert made[0]["note"] == "cover faded\ndesk-key: run-1:call_1" and made[0]["key"] == "run-1:call_1"
    assert shop.order("SU-41207").refundable == Decimal("49.00")


def test_a_refund_is_found_again_by_its_key_on_its_order(shopify_shop):
    shop = shopify_shop()
    made = shop.refund(order_number="SU-41290", amount=Decimal("30.00"), reason="late", idempotency_key="k-7")
    assert shop.refund_by_key("k-7", "SU-41290") == made
    assert shop.refund_by_key("k-8", "SU-41290") is None
    assert shop.refund_by_key("k-7") is None  # Shopify is searched per order
    assert shop.order("SU-41290").refunds[-1].idempotency_key == "k-7"


def test_a_refund_over_the_balance_is_exceeds_refundable(shopify_shop, fake_shopify):
    shop = shopify_shop()
    with pytest.raises(port.ExceedsRefundable) as e:
        shop.refund(order_number="SU-41290", amount=Decimal("80.01"), reason="x", idempotency_key="k-9")
    assert e.value.refundable == Decimal("80.00")
    assert len(fake_shopify.refunds()) == 1  # the catalogue's own


def test_shopifys_own_refusal_of_an_over_refund_is_exceeds_refundable(shopify_shop, fake_shopify, monkeypatch):
    """The balance shrank between the desk's read and its write: Shopify's userError says so."""
    shop = shopify_shop()
    real = shop._find
    reads = []

    def stale_first_read(number, message_key=None):
        found = real(number, message_key)
        reads.append(number)
        if len(reads) == 1:
            fake_shopify.state.store.refund_create(
                {"orderId": found.node["id"], "transactions": [{"parentId": found.node["transactions"][0]["id"],
                                                                 "kind": "REFUND", "amount": "60.00"}]},
                None, fake_shopify.state.now())
        return found

    monkeypatch.setattr(shop, "_find", stale_first_read)
    with pytest.raises(port.ExceedsRefundable) as e:
        shop.refund(order_number="SU-41290", amount=Decimal("50.00"), reason="x", idempotency_key="k-10")
    assert e.value.refundable == Decimal("20.00") and len(reads) == 2


def test_a_refund_on_no_such_order_is_not_found(shopify_shop):
    with pytest.raises(port.NotFound):
        shopify_shop().refund(order_number="SU-1", amount=Decimal("1.00"), reason="x", idempotency_key="k")


def test_a_refund_whose_answer_is_held_past_the_timeout_is_outcome_unknown_then_found_by_key(
        shopify_shop, fake_shopify, settings):
    shop = shopify_shop()
    settings.SHOP_READ_TIMEOUT_SECONDS = 0.3
    fake_shopify.configure(hold_after_write_seconds=2.0)
    with pytest.raises(port.OutcomeUnknown):
        shop.refund(order_number="SU-41402", amount=Decimal("29.00"), reason="scratch", idempotency_key="k-held")
    made = [r for r in fake_shopify.refunds() if r["order"] == "SU-41402"]
    assert len(made) == 1
    found = shop.refund_by_key("k-held", "SU-41402")
    assert found is not None and found.id == made[0]["id"] and found.amount == Decimal("29.00")
    assert len([r for r in fake_shopify.requests() if r["operation"] == "mutation"]) == 1


def test_a_refund_whose_connection_drops_after_the_write_is_outcome_unknown(shopify_shop, fake_shopify):
    shop = shopify_shop()
    fake_shopify.configure(drop_after_write=True)
    with pytest.raises(port.OutcomeUnknown):
        shop.refund(order_number="SU-41402", amount=Decimal("9.00"), reason="x", idempotency_key="k-drop")
    assert shop.refund_by_key("k-drop", "SU-41402").amount == Decimal("9.00")


def test_a_5xx_answer_to_a_refund_is_outcome_unknown_and_not_sent_again(shopify_shop, fake_shopify):
    shop = shopify_shop()
    shop.order("SU-41402")  # the read before the write is answered; the write meets the 502
    fake_shopify.configure(fail_next=[])
    real_post = shop._post

    def fail_the_write(query, variables, *, write):
        if write:
            fake_shopify.configure(fail_next=[502])
        return real_post(query, variables, write=write)

    shop._post = fail_the_write
    with pytest.raises(port.OutcomeUnknown):
        shop.refund(order_number="SU-41402", amount=Decimal("5.00"), reason="x", idempotency_key="k-502")
    assert len([r for r in fake_shopify.requests() if r["status"] == 502]) == 1


# -- seller messages --------------------------------------------------------------------------------------

def test_a_seller_message_is_stored_once_per_key(shopify_shop, fake_shopify):
    shop = shopify_shop()
    first = shop.message_seller(order_number="SU-41207", message="Please trace the parcel.",
                                idempotency_key="run-2:call_1", conversation="conv-1")
    again = shop.message_seller(order_number="SU-41207", message="Other text", idempotency_key="run-2:call_1")
    assert again == first and first.order_number == "SU-41207"
    (stored,) = fake_shopify.seller_messages()
    assert stored["order"] == "SU-41207" and stored["id"] == first.id
    assert stored["value"]["text"] == "Please trace the parcel." and stored["value"]["seller"] == "S-HL"
    assert shop.seller_message_by_key("run-2:call_1", "SU-41207") == first
    assert shop.seller_message_by_key("run-2:call_2", "SU-41207") is None
    assert shop.seller_message_by_key("run-2:call_1") is None


def test_a_seller_message_on_an_order_the_shop_ships_itself_is_invalid(shopify_shop, fake_shopify):
    with pytest.raises(port.Invalid):
        shopify_shop().message_seller(order_number="SU-41388", message="hi", idempotency_key="k")
    assert fake_shopify.seller_messages() == []


# -- throttling and failures ------------------------------------------------------------------------------

def test_a_throttled_read_waits_for_the_bucket_to_refill_then_succeeds(shopify_shop, fake_shopify):
    waits = []
    shop = shopify_shop(waits)
    shop.order("SU-41207")
    requested = fake_shopify.requests()[0]["cost"]
    fake_shopify.reset()
    fake_shopify.freeze_clock()  # the bucket refills only by the desk's waits, however slowly this test runs
    fake_shopify.configure(bucket_size=requested + 10, restore_rate=20)
    assert shop.order("SU-41207").number == "SU-41207"  # the bucket held it
    assert shop.order("SU-41210").number == "SU-41210"  # what the first answer used is missing: throttled once
    seen = fake_shopify.requests()
    assert [r["throttled"] for r in seen] == [False, True, False]
    # The wait asked for is what refills the bucket to the query's cost at the restore rate.
    assert waits == [pytest.approx((requested - seen[1]["available"]) / 20)] and waits[0] > 0


def test_a_throttled_write_is_sent_again_after_the_wait_and_made_once(shopify_shop, fake_shopify):
    waits = []
    shop = shopify_shop(waits)
    fake_shopify.freeze_clock()  # the bucket refills only by the desk's waits, however slowly this test runs
    fake_shopify.configure(restore_rate=10)
    real_post = shop._post

    def drain_before_the_write(query, variables, *, write):
        if write and not waits:
            fake_shopify.configure(bucket_available=4)  # a mutation costs 10
        return real_post(query, variables, write=write)

    shop._post = drain_before_the_write
    made = shop.refund(order_number="SU-41207", amount=Decimal("3.00"), reason="x", idempotency_key="k-t")
    seen = fake_shopify.requests()
    assert [(r["operation"], r["throttled"]) for r in seen] == [("query", False), ("mutation", True),
                                                                ("mutation", False)]
    # What refills the bucket to the mutation's cost (10) at 10 a second, from what it held when throttled (4).
    assert seen[1]["available"] == 4 and waits == [pytest.approx(0.6)]
    assert [r["id"] for r in fake_shopify.refunds() if r["order"] == "SU-41207"] == [made.id]


@pytest.mark.parametrize("status, words", [(401, "access token"), (402, "frozen"), (423, "locked")])
def test_a_shop_that_refuses_the_desk_is_unavailable_with_a_plain_reason(shopify_shop, fake_shopify, status, words):
    fake_shopify.configure(fail_next=[status])
    with pytest.raises(port.ShopUnavailable) as e:
        shopify_shop().order("SU-41207")
    assert words in str(e.value) and not isinstance(e.value, port.OutcomeUnknown)
    assert len(fake_shopify.requests()) == 1


def test_a_wrong_token_is_unavailable(shopify_shop, fake_shopify, settings):
    settings.SHOPIFY_ACCESS_TOKEN = "shpat_wrong"
    with pytest.raises(port.ShopUnavailable, match="access token"):
        shopify_shop().customer_by_email("maya@example.com")
    assert [r["status"] for r in fake_shopify.requests()] == [401]


def test_a_5xx_on_a_read_is_tried_again(shopify_shop, fake_shopify):
    waits = []
    fake_shopify.configure(fail_next=[502, 503])
    assert shopify_shop(waits).order("SU-41207").number == "SU-41207"
    assert [r["status"] for r in fake_shopify.requests()] == [502, 503, 200] and len(waits) == 2


def test_a_shop_down_for_longer_than_the_retries_is_unavailable(shopify_shop, fake_shopify):
    fake_shopify.configure(down=True)
    with pytest.raises(port.ShopUnavailable):
        shopify_shop().order("SU-41207")
    assert len(fake_shopify.requests()) == 3


@pytest.mark.parametrize("kind", ["not_json", "missing_field", "negative_amount"])
def test_a_malformed_answer_is_bad_answer(shopify_shop, fake_shopify, kind):
    fake_shopify.configure(malformed_next=[kind])
    with pytest.raises(port.BadAnswer):
        shopify_shop().order("SU-41207")


def test_a_malformed_answer_to_a_refund_leaves_it_to_the_lookup_by_key(shopify_shop, fake_shopify):
    shop = shopify_shop()
    shop.order("SU-41419")
    real_post = shop._post

    def bend_the_write(query, variables, *, write):
        if write:
            fake_shopify.configure(malformed_next=["not_json"])
        return real_post(query, variables, write=write)

    shop._post = bend_the_write
    with pytest.raises(port.BadAnswer):
        shop.refund(order_number="SU-41419", amount=Decimal("10.00"), reason="x", idempotency_key="k-bad")
    shop._post = real_post
    assert shop.refund_by_key("k-bad", "SU-41419").amount == Decimal("10.00")


def test_concurrent_refunds_with_one_key_make_one_refund(shopify_shop, fake_shopify):
    fake_shopify.configure(latency_ms=50)
    results, errors = [], []

    def go():
        try:
            results.append(shopify_shop().refund(order_number="SU-41533", amount=Decimal("15.00"), reason="x",
                                                  idempotency_key="k-race"))
        except port.ShopError as e:
            errors.append(e)

    threads = [threading.Thread(target=go) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert errors == [] and len({r.id for r in results}) == 1
    assert len([r for r in fake_shopify.refunds() if r["order"] == "SU-41533"]) == 1


def test_orders_of_with_a_limit_reads_only_the_pages_it_needs(shopify_shop, fake_shopify):
    shop = shopify_shop()
    maya = shop.customer_by_email("maya@example.com")
    everything = shop.orders_of(maya.id)
    before = len([r for r in fake_shopify.requests() if r["status"] == 200])
    newest = shop.orders_of(maya.id, limit=5)
    pages = len([r for r in fake_shopify.requests() if r["status"] == 200]) - before
    assert [o.number for o in newest] == [o.number for o in everything[:5]]
    assert pages == 2  # 3 orders a page: the newest 5 are on the first two of four


def test_the_orders_in_brief_say_what_the_full_orders_say_in_one_cheap_read(shopify_shop, fake_shopify):
    """What every run asks first (known_orders): a brief's fields only, in one request, for a fraction of the
    bucket the full orders take."""
    shop = shopify_shop()
    maya = shop.customer_by_email("maya@example.com")
    full = shop.orders_of(maya.id, limit=5)
    served = [r for r in fake_shopify.requests() if r["status"] == 200]
    before = len(served)
    briefs = shop.order_briefs(maya.id, limit=5)
    assert briefs == [port.brief(o) for o in full] and len(briefs) == 5
    cost = [r["cost"] for r in fake_shopify.requests() if r["status"] == 200][before:]
    assert len(cost) == 1 and cost[0] * 4 < sum(r["cost"] for r in served[1:])  # the full orders: two pages
    everything = shop.order_briefs(maya.id)
    assert [b.number for b in everything] == [o.number for o in shop.orders_of(maya.id)]
    assert shop.order_briefs("12") == [] and shop.order_briefs("gid://shopify/Customer/x") == []
