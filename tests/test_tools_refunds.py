"""issue_refund: within the agent's ceiling and the order's refundable balance, once per tool call.

Maya owns SU-41533 (480.00), SU-41290 (120.00, 40.00 already refunded) and SU-41310 (64.00);
Tom owns SU-41444. The ceiling is settings.REFUND_CEILING (150.00).
"""

from __future__ import annotations

import threading
from decimal import Decimal
from unittest import mock

import pytest
from django.db import connection

from support.agent.tools import ToolError
from support.models import Order, Refund, ShopEffect
from support.shop import demo as shop_demo
from support.tools.orders import get_order
from support.tools.refunds import issue_refund

MAYA = "maya@example.com"


def refuse(ctx, **arguments) -> str:
    with pytest.raises(ToolError) as raised:
        issue_refund(ctx, **arguments)
    return str(raised.value)


def test_it_issues_a_refund_in_the_contract_shape(ctx_for, any_shop):
    result = issue_refund(ctx_for(MAYA, "call_r1"), order_id="SU-41310", amount="64.00", reason="parcel missing")
    assert set(result) == {"refund_id", "order_id", "amount", "status", "refundable_remaining"}
    assert (result["order_id"], result["amount"], result["status"]) == ("SU-41310", "64.00", "issued")
    assert result["refundable_remaining"] == "0.00"
    assert any_shop.refunds("SU-41310") == [Decimal("64.00")]
    record = ShopEffect.objects.get(kind=ShopEffect.REFUND, key="run-test:call_r1")  # the desk's own, once
    assert (record.reference, record.amount, record.text, record.backend) == (
        result["refund_id"], Decimal("64.00"), "parcel missing", any_shop.name)


def test_the_demo_keeps_the_refund_under_the_calls_key(ctx_for):
    result = issue_refund(ctx_for(MAYA, "call_r1"), order_id="SU-41310", amount="64.00", reason="parcel missing")
    refund = Refund.objects.get(tool_call_id="run-test:call_r1")
    assert refund.reference == result["refund_id"]
    assert (refund.amount, refund.reason) == (Decimal("64.00"), "parcel missing")


def test_it_refuses_a_refund_over_the_ceiling(ctx_for, any_shop):
    message = refuse(ctx_for(MAYA), order_id="SU-41533", amount="480", reason="wants a refund")
    assert message == (
        "Refund of 480.00 exceeds the 150.00 limit an agent may issue; escalate to a person instead."
    )
    assert any_shop.refunds("SU-41533") == []


def test_it_takes_the_ceiling_from_settings(ctx_for, settings, any_shop):
    settings.REFUND_CEILING = Decimal("500.00")
    assert issue_refund(ctx_for(MAYA), order_id="SU-41533", amount="480.00", reason="approved")["amount"] == "480.00"
    settings.REFUND_CEILING = Decimal("20.00")
    assert "exceeds the 20.00 limit" in refuse(ctx_for(MAYA, "call_r2"), order_id="SU-41310", amount="21", reason="x")


def test_it_refuses_more_than_the_refundable_balance(ctx_for, any_shop):
    message = refuse(ctx_for(MAYA), order_id="SU-41290", amount="120.00", reason="the rest")
    assert message == "Order SU-41290 has 80.00 left to refund; 120.00 was asked."
    assert any_shop.refunds("SU-41290") == [Decimal("40.00")]  # the catalogue's own
    result = issue_refund(ctx_for(MAYA, "call_r3"), order_id="SU-41290", amount="80.00", reason="the rest")
    assert result["refundable_remaining"] == "0.00"


def test_it_issues_one_refund_for_the_same_call_id_twice(ctx_for, any_shop):
    ctx = ctx_for(MAYA, "call_twice")
    first = issue_refund(ctx, order_id="SU-41290", amount="80.00", reason="the rest")
    # Run again (a retried task or a resumed run): the balance is 0.00 now, yet the answer is the first refund.
    second = issue_refund(ctx, order_id="SU-41290", amount="80.00", reason="the rest")
    assert second["refund_id"] == first["refund_id"]
    assert any_shop.refunds("SU-41290") == [Decimal("40.00"), Decimal("80.00")]  # the seeded one and this one
    assert ShopEffect.objects.filter(key="run-test:call_twice").count() == 1


def test_a_refund_the_shop_made_but_the_desk_never_recorded_is_found_by_its_key(ctx_for, any_shop):
    # A worker killed after the shop answered, before the desk's commit: the shop has it, the desk does not.
    ctx = ctx_for(MAYA, "call_lost")
    first = issue_refund(ctx, order_id="SU-41310", amount="30.00", reason="parcel missing")
    ShopEffect.objects.filter(key="run-test:call_lost").delete()
    again = issue_refund(ctx, order_id="SU-41310", amount="30.00", reason="parcel missing")
    assert (again["refund_id"], again["refundable_remaining"]) == (first["refund_id"], "34.00")
    assert any_shop.refunds("SU-41310") == [Decimal("30.00")]
    assert ShopEffect.objects.filter(key="run-test:call_lost").count() == 1


def test_it_lowers_the_refundable_balance_with_a_partial_refund(ctx_for, any_shop):
    result = issue_refund(ctx_for(MAYA, "call_p1"), order_id="SU-41310", amount="20.00", reason="goodwill")
    assert result["refundable_remaining"] == "44.00"
    order = get_order(ctx_for(MAYA), order_id="SU-41310")
    assert (order["refunded"], order["refundable"]) == ("20.00", "44.00")
    message = refuse(ctx_for(MAYA, "call_p2"), order_id="SU-41310", amount="50", reason="more")
    assert message == "Order SU-41310 has 44.00 left to refund; 50.00 was asked."


@pytest.mark.parametrize("amount", ["0", "0.00", "-5", "abc", "1.234", "", 12.5, True, None])
def test_it_refuses_a_zero_or_malformed_amount_even_when_called_directly(ctx_for, amount):
    refuse(ctx_for(MAYA), order_id="SU-41310", amount=amount, reason="x")
    assert not Refund.objects.filter(order__number="SU-41310").exists()


def test_it_says_zero_is_not_an_amount(ctx_for):
    message = refuse(ctx_for(MAYA), order_id="SU-41310", amount="0.00", reason="x")
    assert message == "Refund amount must be more than 0.00."


def test_it_refunds_nothing_on_another_customers_order(ctx_for, any_shop):
    message = refuse(ctx_for(MAYA), order_id="SU-41444", amount="10.00", reason="x")
    assert message == "No order SU-41444 was found for this customer."
    assert any_shop.refunds("SU-41444") == []


def test_it_will_not_reuse_a_call_id_for_another_order(ctx_for, any_shop):
    issue_refund(ctx_for(MAYA, "call_once"), order_id="SU-41310", amount="10.00", reason="x")
    assert "another order" in refuse(ctx_for(MAYA, "call_once"), order_id="SU-41290", amount="10.00", reason="x")
    assert any_shop.refunds("SU-41290") == [Decimal("40.00")]


def test_it_answers_with_the_winners_refund_when_the_same_call_races(ctx_for, demo):
    # The other execution commits between our "already issued?" checks (the tool's, then the shop's under
    # the order's lock) and our insert.
    winner = Refund.objects.create(
        order=demo.orders["SU-41310"], amount=Decimal("5.00"), reason="x", tool_call_id="run-test:call_race"
    )
    real, checks = shop_demo._refund_by_key, []

    def checks_before_the_insert_miss(key):
        checks.append(key)
        return None if len(checks) <= 2 else real(key)

    with mock.patch.object(shop_demo, "_refund_by_key", side_effect=checks_before_the_insert_miss):
        result = issue_refund(ctx_for(MAYA, "call_race"), order_id="SU-41310", amount="5.00", reason="x")
    assert checks == ["run-test:call_race"] * 3  # missed twice, hit the unique key, read again
    assert result["refund_id"] == winner.reference
    assert Refund.objects.filter(order__number="SU-41310").count() == 1


def at_once(*calls) -> list:
    """Run the calls in threads (each with its own database connection), released together."""
    start, results = threading.Barrier(len(calls)), [None] * len(calls)

    def run(i, call):
        try:
            start.wait()
            results[i] = call()
        except Exception as e:  # noqa: BLE001 - the test inspects what each call ended with
            results[i] = e
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return results


@pytest.mark.django_db(transaction=True)
def test_it_never_overdraws_when_two_refunds_run_at_once(ctx_for):
    one, two = ctx_for(MAYA, "call_c1"), ctx_for(MAYA, "call_c2")
    results = at_once(
        lambda: issue_refund(one, order_id="SU-41290", amount="60.00", reason="x"),
        lambda: issue_refund(two, order_id="SU-41290", amount="60.00", reason="x"),
    )
    assert sorted(type(r).__name__ for r in results) == ["ToolError", "dict"], results
    assert Order.objects.get(number="SU-41290").refundable() == Decimal("20.00")


@pytest.mark.django_db(transaction=True)
def test_it_issues_one_refund_when_the_same_call_runs_twice_at_once(ctx_for):
    ctx = ctx_for(MAYA, "call_same")
    results = at_once(*[lambda: issue_refund(ctx, order_id="SU-41290", amount="60.00", reason="x")] * 2)
    assert all(isinstance(r, dict) for r in results), results
    assert results[0]["refund_id"] == results[1]["refund_id"]
    assert Refund.objects.filter(tool_call_id="run-test:call_same").count() == 1
