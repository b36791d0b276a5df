"""HttpShop against the reference shop over real HTTP: every read mapped to the port's values, signing with
either key, reads retried within a bound (honouring Retry-After) and cut off by the circuit, every answer
read strictly, a write sent once and an unknown outcome found again by its key.

The reference shop serves the Sundry catalogue: Maya (cus_1) owns SU-41290 (120.00, 40.00 refunded before,
shipped by Sundry itself) and SU-41207 (69.00, Hearth & Loom, a marketplace seller).
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, timedelta
from decimal import Decimal

import httpx2
import pybreaker
import pytest

from support import shop as shop_package
from support.shop import port
from support.shop.http import HttpShop
from support.shop.resilience import Guard
from tests.redis_fixture import free_port
from tests.shop_fixture import KEY, OTHER_KEY
from tests.shop_fixture import http_shop, reference_shop, reference_shop_server, shop_settings, waits  # noqa: F401

MAYA_NEWEST_FIRST = ["SU-41501", "SU-41210", "SU-41207", "SU-41402", "SU-41388", "SU-41419", "SU-41310",
                     "SU-41533", "SU-41290", "SU-40155"]


def seen(server, method: str | None = None) -> list[dict]:
    return [r for r in server.requests() if method is None or r["method"] == method]


# -- reads ------------------------------------------------------------------------------------------------

def test_it_finds_a_customer_by_email_whatever_the_case(http_shop):
    found = http_shop.customer_by_email("Maya@EXAMPLE.com")
    assert found == port.ShopCustomer(id="cus_1", name="Maya Okafor", email="maya@example.com")
    assert http_shop.customer_by_email("nobody@example.com") is None


def test_a_customers_orders_come_newest_first_and_only_theirs(http_shop):
    orders = http_shop.orders_of("cus_1")
    assert [o.number for o in orders] == MAYA_NEWEST_FIRST
    assert {o.customer_id for o in orders} == {"cus_1"}
    assert [o.number for o in http_shop.orders_of("cus_2")] == ["SU-41444"]
    assert http_shop.orders_of("cus_404") == []
    assert [o.number for o in http_shop.orders_of("cus_1", limit=2)] == MAYA_NEWEST_FIRST[:2]
    assert http_shop.order_briefs("cus_1", limit=2) == [port.brief(o) for o in http_shop.orders_of("cus_1", limit=2)]


def test_an_order_carries_its_items_money_parcels_and_refunds(http_shop):
    order = http_shop.order("SU-41290")
    assert (order.number, order.customer_id, order.status, order.currency) == ("SU-41290", "cus_1", "delivered", "EUR")
    assert order.seller == port.Seller(id="sundry", name="Sundry Warehouse", is_marketplace=False)
    assert [(i.sku, i.qty, i.unit_price) for i in order.items] == [
        ("SW-PAN-CI28", 1, Decimal("54.00")), ("SW-PLT-ST4", 1, Decimal("66.00"))]
    assert (order.shipping_fee, order.total, order.refunded, order.refundable) == (
        Decimal("0.00"), Decimal("120.00"), Decimal("40.00"), Decimal("80.00"))
    assert order.note == ""
    assert order.placed_at.tzinfo is not None
    [parcel] = order.parcels
    assert (parcel.tracking, parcel.carrier, parcel.status) == ("DX81290017", "DX Freight", "delivered")
    assert parcel.scans[0].event == "label_created" and parcel.scans[-1].event == "delivered"
    assert [s.at for s in parcel.scans] == sorted(s.at for s in parcel.scans)
    [earlier] = order.refunds  # the extension: refunds the order already has
    assert (earlier.amount, earlier.order_number, earlier.idempotency_key) == (Decimal("40.00"), "SU-41290", None)
    assert earlier.reference.startswith("RF-") and "chipped" in earlier.reason


def test_a_marketplace_order_names_its_seller_and_keeps_the_sellers_words(http_shop):
    order = http_shop.order("SU-41207")
    assert order.seller == port.Seller(id="S-HL", name="Hearth & Loom", is_marketplace=True)
    assert order.items[0].seller_description == "Woven on our looms in Yorkshire."
    assert order.total == Decimal("69.00") and order.refunds == ()


def test_an_unknown_order_is_none(http_shop, reference_shop):
    assert http_shop.order("SU-00000") is None
    assert http_shop.order("SU-41290/refunds") is None  # one path segment, never another route
    assert [r["status"] for r in seen(reference_shop)] == [404, 404]


def test_the_http_backend_is_picked_by_name(shop_settings, monkeypatch):
    monkeypatch.setattr(shop_package, "_made", {})
    picked = shop_package.shop()
    assert isinstance(picked, HttpShop) and picked.url == shop_settings.SHOP_URL
    assert picked.customer_by_email("tom@example.com").id == "cus_2"


# -- signing ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("key", [KEY, OTHER_KEY])
def test_either_of_the_two_keys_the_shop_holds_is_accepted(shop_settings, key):
    assert HttpShop(key=key).customer_by_email("maya@example.com").id == "cus_1"


def test_a_wrong_key_is_refused_as_unavailable_and_not_retried(shop_settings, reference_shop, waits):
    shop = HttpShop(key="not-the-shops-key", guard=Guard("wrong key", sleep=waits))
    with pytest.raises(port.ShopUnavailable, match="signature .*SHOP_API_KEY"):
        shop.order("SU-41290")
    assert [r["status"] for r in seen(reference_shop)] == [401]
    assert waits.asked == []


def test_a_clock_far_from_the_shops_is_refused_as_unavailable(shop_settings, reference_shop):
    shop = HttpShop(clock=lambda: time.time() - 3600)
    with pytest.raises(port.ShopUnavailable, match="clock"):
        shop.customer_by_email("maya@example.com")
    assert [r["status"] for r in seen(reference_shop)] == [401]


def test_calls_are_logged_without_keys_addresses_or_signatures(http_shop, caplog):
    caplog.set_level(logging.INFO, logger="support.shop.http")
    http_shop.customer_by_email("maya@example.com")
    http_shop.refund_by_key("secret-key-123")
    text = caplog.text
    assert "GET /customers?email=… 200" in text and "GET /refunds?idempotency_key=… 404" in text
    assert "maya@" not in text and "secret-key-123" not in text and "v1=" not in text and KEY not in text


# -- retries and the circuit --------------------------------------------------------------------------------

def test_a_read_is_tried_again_after_the_wait_the_shop_asks_for(http_shop, reference_shop, waits):
    reference_shop.configure(fail_next=[429, 503], retry_after=2)
    assert http_shop.order("SU-41290").number == "SU-41290"
    assert [r["status"] for r in seen(reference_shop)] == [429, 503, 200]
    assert waits.asked == [2.0, 2.0]


def test_a_wait_longer_than_the_desk_allows_is_cut_to_its_maximum(http_shop, reference_shop, waits):
    reference_shop.configure(fail_next=[429], retry_after=600)
    assert http_shop.customer_by_email("maya@example.com") is not None
    assert waits.asked == [5.0]


def test_reads_are_tried_again_only_within_the_bound(http_shop, reference_shop, waits):
    reference_shop.configure(fail_next=[500, 502, 504, 503])
    with pytest.raises(port.ShopUnavailable, match="504"):
        http_shop.order("SU-41290")
    assert [r["status"] for r in seen(reference_shop)] == [500, 502, 504]  # 1 + SHOP_READ_RETRIES
    assert len(waits.asked) == 2 and all(0 < w < 1 for w in waits.asked)


def test_the_circuit_opens_after_repeated_failures_and_closes_after_the_reset(http_shop, reference_shop):
    reference_shop.configure(down=True)
    with pytest.raises(port.ShopUnavailable):
        http_shop.order("SU-41290")  # three attempts, three failures: SHOP_CIRCUIT_FAILURES
    assert len(seen(reference_shop)) == 3 and http_shop.guard.is_open
    with pytest.raises(port.ShopUnavailable, match="failed 3 times in a row"):
        http_shop.customer_by_email("maya@example.com")
    assert len(seen(reference_shop)) == 3  # the shop was not called at all

    reference_shop.configure(down=False)
    # The reset time passes (a circuit of 0.2 s, opened the same way, rather than 30 s of waiting).
    http_shop.guard = Guard("reference", failures=3, reset_seconds=0.2, sleep=lambda s: None)
    with pytest.raises(port.ShopUnavailable):
        reference_shop.configure(down=True)
        http_shop.order("SU-41290")
    reference_shop.configure(down=False)
    assert http_shop.guard.is_open
    time.sleep(0.3)  # the circuit's own clock: nothing else to wait for
    assert http_shop.order("SU-41290").number == "SU-41290"
    assert http_shop.guard.breaker.current_state == pybreaker.STATE_CLOSED
    assert len(seen(reference_shop)) == 7  # 3, 3 more for the second circuit, then the one let through


def test_a_shop_that_cannot_be_reached_is_unavailable(shop_settings, waits):
    closed = free_port()
    shop = HttpShop(url=f"http://127.0.0.1:{closed}", guard=Guard("closed", sleep=waits))
    with pytest.raises(port.ShopUnavailable, match="could not connect"):
        shop.order("SU-41290")
    assert len(waits.asked) == 2
    shop.guard = Guard("closed, a fresh circuit")  # the three failures above opened the first one
    with pytest.raises(port.ShopUnavailable, match="nothing was sent") as raised:
        shop.refund(order_number="SU-41290", amount=Decimal("1.00"), reason="r", idempotency_key="k-closed")
    assert not isinstance(raised.value, port.OutcomeUnknown)


# -- answers not as the contract says --------------------------------------------------------------------

@pytest.mark.parametrize("fault, says", [
    ("not_json", "not JSON"),
    ("missing_field", "order.number: missing"),
    ("negative_amount", "order.refundable: '-80.00' is not money"),
])
def test_an_order_not_as_the_contract_says_is_a_bad_answer(http_shop, reference_shop, fault, says):
    reference_shop.configure(malformed_next=fault)
    with pytest.raises(port.BadAnswer) as raised:
        http_shop.order("SU-41290")
    assert says in str(raised.value) and len(str(raised.value)) < 300
    assert len(seen(reference_shop)) == 1  # an answer, though a bad one: not tried again


def test_a_customer_or_order_list_missing_a_field_is_a_bad_answer(http_shop, reference_shop):
    reference_shop.configure(malformed_next="missing_field")
    with pytest.raises(port.BadAnswer, match=r"customer.id: missing"):
        http_shop.customer_by_email("maya@example.com")
    reference_shop.configure(malformed_next="missing_field")
    with pytest.raises(port.BadAnswer, match=r"orders\[0\].number: missing"):
        http_shop.orders_of("cus_1")


def _mocked(shop: HttpShop, answer: httpx2.Response) -> HttpShop:
    shop._client = httpx2.Client(base_url=shop.url, transport=httpx2.MockTransport(lambda request: answer))
    return shop


@pytest.mark.parametrize("change, says", [
    ({"status": "lost"}, "order.status: 'lost' is not one of"),
    ({"placed_at": "2025-01-02T10:00:00"}, "order.placed_at: '2025-01-02T10:00:00' is not an ISO 8601 time"),
    ({"total": 120.0}, "order.total: 120.0 is not money"),
    ({"total": "120"}, "order.total: '120' is not money"),
    ({"customer_id": 1}, "order.customer_id: 1 is not a string"),
    ({"seller": {"id": "S", "name": "S", "is_marketplace": "yes"}}, "order.seller.is_marketplace"),
    ({"items": [{"sku": "A", "title": "A", "qty": "1", "unit_price": "1.00"}]}, "order.items[0].qty"),
    ({"note": "x" * 5000, "status": "x" * 5000}, "is not one of"),
])
def test_each_field_is_checked_for_its_kind(http_shop, reference_shop, change, says):
    good = reference_shop.store.order("SU-41290")
    _mocked(http_shop, httpx2.Response(200, json={"order": {**good, **change}}))
    with pytest.raises(port.BadAnswer) as raised:
        http_shop.order("SU-41290")
    assert says in str(raised.value) and len(str(raised.value)) < 400


def test_fields_the_contract_does_not_know_are_ignored_and_times_may_end_in_z(http_shop, reference_shop):
    good = reference_shop.store.order("SU-41290")
    good.pop("refunds")  # an extension: a shop may not send it
    good["items"] = [{k: v for k, v in i.items() if k != "seller_description"} for i in good["items"]]
    _mocked(http_shop, httpx2.Response(200, json={"order": {**good, "loyalty_points": 12,
                                                            "placed_at": "2025-01-02T10:00:00+01:00"}}))
    order = http_shop.order("SU-41290")
    assert order.refunds == () and order.items[0].seller_description == ""
    assert order.placed_at.utcoffset() == timedelta(hours=1)
    assert order.parcels[0].scans[0].at.tzinfo == UTC


# -- writes -----------------------------------------------------------------------------------------------

def test_a_refund_is_issued_once_per_key(http_shop, reference_shop):
    first = http_shop.refund(order_number="SU-41290", amount=Decimal("12.50"), reason="chipped", idempotency_key="k-1")
    again = http_shop.refund(order_number="SU-41290", amount=Decimal("99.00"), reason="other", idempotency_key="k-1")
    assert again == first and (first.amount, first.order_number) == (Decimal("12.50"), "SU-41290")
    assert [r["status"] for r in seen(reference_shop, "POST")] == [201, 200]
    made = [r for r in reference_shop.refunds() if r["idempotency_key"] == "k-1"]
    assert len(made) == 1 and made[0]["id"] == first.id and made[0]["reference"] == first.reference
    assert http_shop.order("SU-41290").refundable == Decimal("67.50")
    assert http_shop.refund_by_key("k-1") == first


def test_a_key_longer_than_the_contract_allows_is_sent_as_a_stable_hash(http_shop, reference_shop):
    long_key = "run:" + "x" * 400
    first = http_shop.refund(order_number="SU-41290", amount=Decimal("1.00"), reason="r", idempotency_key=long_key)
    assert http_shop.refund(order_number="SU-41290", amount=Decimal("1.00"), reason="r",
                            idempotency_key=long_key) == first
    [stored] = [r["idempotency_key"] for r in reference_shop.refunds() if r["id"] == first.id]
    assert len(stored) <= 255 and "xxxx" not in stored
    assert http_shop.refund_by_key(long_key) == first


def test_a_refund_over_the_balance_says_what_is_left_and_writes_nothing(http_shop, reference_shop):
    with pytest.raises(port.ExceedsRefundable) as raised:
        http_shop.refund(order_number="SU-41290", amount=Decimal("80.01"), reason="r", idempotency_key="k-over")
    assert raised.value.refundable == Decimal("80.00")
    assert http_shop.refund_by_key("k-over") is None
    assert not http_shop.guard.is_open and http_shop.guard.breaker.fail_counter == 0  # meant, not a failure


def test_a_refund_on_no_such_order_is_not_found_and_a_bad_amount_never_leaves(http_shop, reference_shop):
    with pytest.raises(port.NotFound):
        http_shop.refund(order_number="SU-00000", amount=Decimal("1.00"), reason="r", idempotency_key="k-404")
    for amount in (Decimal("0.00"), Decimal("-1.00"), Decimal("1.005")):
        with pytest.raises(port.Invalid):
            http_shop.refund(order_number="SU-41290", amount=amount, reason="r", idempotency_key="k-bad")
    assert [r["status"] for r in seen(reference_shop)] == [404]


def test_a_refund_without_a_key_still_carries_one(http_shop, reference_shop):
    made = http_shop.refund(order_number="SU-41290", amount=Decimal("2.00"), reason="r", idempotency_key=None)
    [stored] = [r for r in reference_shop.refunds() if r["id"] == made.id]
    assert stored["idempotency_key"]


def test_concurrent_refunds_never_spend_more_than_is_left(http_shop, reference_shop):
    outcomes: list = []

    def ask(i: int) -> None:
        try:
            outcomes.append(http_shop.refund(order_number="SU-41290", amount=Decimal("50.00"), reason="r",
                                             idempotency_key=f"k-race-{i}"))
        except port.ExceedsRefundable as e:
            outcomes.append(e)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(isinstance(o, port.RefundResult) for o in outcomes) == 1
    assert sum(isinstance(o, port.ExceedsRefundable) for o in outcomes) == 5
    assert http_shop.order("SU-41290").refundable == Decimal("30.00")


def test_a_write_whose_answer_never_comes_is_an_unknown_outcome_found_again_by_key(http_shop, reference_shop):
    reference_shop.configure(hold_after_write_seconds=3)  # longer than SHOP_READ_TIMEOUT_SECONDS (0.5)
    with pytest.raises(port.OutcomeUnknown):
        http_shop.refund(order_number="SU-41290", amount=Decimal("10.00"), reason="r", idempotency_key="k-held")
    assert len(seen(reference_shop, "POST")) == 1  # sent once: never again by the client itself
    found = http_shop.refund_by_key("k-held", order_number="SU-41290")
    assert found is not None and (found.amount, found.order_number) == (Decimal("10.00"), "SU-41290")
    assert len(seen(reference_shop, "POST")) == 1


def test_a_connection_dropped_after_a_write_is_an_unknown_outcome(http_shop, reference_shop):
    reference_shop.configure(drop_after_write=True)
    with pytest.raises(port.OutcomeUnknown):
        http_shop.message_seller(order_number="SU-41207", message="Where is it?", idempotency_key="m-drop")
    assert [r["status"] for r in seen(reference_shop, "POST")] == ["dropped"]
    assert http_shop.seller_message_by_key("m-drop") == port.SellerMessageResult(
        id=reference_shop.seller_messages()[0]["id"], order_number="SU-41207")


def test_a_server_error_on_a_write_is_an_unknown_outcome_never_sent_again(http_shop, reference_shop):
    reference_shop.configure(fail_next=[503])
    with pytest.raises(port.OutcomeUnknown):
        http_shop.refund(order_number="SU-41290", amount=Decimal("1.00"), reason="r", idempotency_key="k-503")
    assert len(seen(reference_shop, "POST")) == 1
    assert http_shop.refund_by_key("k-503") is None  # this shop failed before writing: the desk may resend


def test_a_write_the_shop_is_too_busy_for_fails_plainly(http_shop, reference_shop):
    reference_shop.configure(fail_next=[429], retry_after=1)
    with pytest.raises(port.ShopUnavailable, match="busy") as raised:
        http_shop.refund(order_number="SU-41290", amount=Decimal("1.00"), reason="r", idempotency_key="k-429")
    assert not isinstance(raised.value, port.OutcomeUnknown)
    assert len(seen(reference_shop, "POST")) == 1


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind, says", [("huge", "larger than SHOP_MAX_ANSWER_BYTES"),
                                        ("trickle", "still coming after SHOP_ANSWER_DEADLINE_SECONDS")])
def test_an_answer_without_end_is_cut_off_as_unavailable_and_not_tried_again(http_shop, reference_shop, settings,
                                                                            kind, says):
    # trickle: a byte every 50 ms, never a read timeout (0.5 s) apart: only the deadline for the whole ends it.
    settings.SHOP_ANSWER_DEADLINE_SECONDS = 1.0
    reference_shop.configure(endless_answer=kind)
    with pytest.raises(port.ShopUnavailable, match=says) as raised:
        http_shop.order("SU-41290")
    assert not isinstance(raised.value, port.OutcomeUnknown)
    assert len(seen(reference_shop)) == 1


def test_an_answer_declared_larger_than_the_cap_is_not_read(http_shop, settings):
    settings.SHOP_MAX_ANSWER_BYTES = 1000  # an order of the catalogue is about 1.5 KB
    with pytest.raises(port.ShopUnavailable, match=r"answer is \d+ bytes, more than SHOP_MAX_ANSWER_BYTES \(1000\)"):
        http_shop.order("SU-41207")
    assert http_shop.customer_by_email("maya@example.com").id == "cus_1"  # small answers still read


@pytest.mark.timeout(30)
def test_a_write_whose_answer_has_no_end_is_an_unknown_outcome(http_shop, reference_shop, settings):
    settings.SHOP_ANSWER_DEADLINE_SECONDS = 1.0
    reference_shop.configure(endless_answer="trickle")
    with pytest.raises(port.OutcomeUnknown, match="cut off"):
        http_shop.refund(order_number="SU-41290", amount=Decimal("1.00"), reason="r", idempotency_key="k-endless")
    assert len(seen(reference_shop, "POST")) == 1


def test_a_malformed_answer_to_a_write_is_a_bad_answer(http_shop, reference_shop):
    reference_shop.configure(malformed_next="negative_amount")
    with pytest.raises(port.BadAnswer, match="refund.amount"):
        http_shop.refund(order_number="SU-41290", amount=Decimal("3.00"), reason="r", idempotency_key="k-neg")
    assert http_shop.refund_by_key("k-neg").amount == Decimal("3.00")


def test_a_seller_message_is_sent_once_per_key(http_shop, reference_shop):
    first = http_shop.message_seller(order_number="SU-41207", message="Parcel missing?", idempotency_key="m-1")
    assert http_shop.message_seller(order_number="SU-41207", message="again", idempotency_key="m-1") == first
    assert first.order_number == "SU-41207"
    assert [m["body"] for m in reference_shop.seller_messages()] == ["Parcel missing?"]
    assert http_shop.seller_message_by_key("m-1") == first
    assert http_shop.seller_message_by_key("m-unknown") is None


def test_an_order_the_shop_ships_itself_has_no_seller_to_message(http_shop, reference_shop):
    with pytest.raises(port.Invalid, match="shipped by the shop itself"):
        http_shop.message_seller(order_number="SU-41290", message="hello", idempotency_key="m-own")
    with pytest.raises(port.NotFound):
        http_shop.message_seller(order_number="SU-00000", message="hello", idempotency_key="m-404")
    assert reference_shop.seller_messages() == []


def test_a_shop_without_the_seller_message_look_up_answers_none(http_shop):
    _mocked(http_shop, httpx2.Response(404, text="Not Found"))
    assert http_shop.seller_message_by_key("m-1") is None


def test_the_shop_of_the_process_follows_its_settings_and_is_made_once_per_configuration(shop_settings):
    first = shop_package.shop()
    assert isinstance(first, HttpShop) and shop_package.shop() is first  # made once, kept for the process
    shop_settings.SHOP_URL = f"http://127.0.0.1:{free_port()}"  # another shop: another backend, never the old one
    moved = shop_package.shop()
    assert moved is not first and moved.url == shop_settings.SHOP_URL
    shop_settings.SHOP_URL = first.url
    assert shop_package.shop() is first
