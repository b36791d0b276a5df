"""message_seller: one message per tool call to the marketplace seller of the customer's own order, sent inside
the template that names Sundry customer support, the order and the issue.

Maya owns SU-41207 and SU-41419 (Hearth & Loom) and SU-41388 (fulfilled by Sundry); Tom owns SU-41444.
"""

from __future__ import annotations

import pytest

from support.agent.tools import ToolError
from support.models import SellerMessage, ShopEffect
from support.tools.sellers import message_seller

MAYA = "maya@example.com"


def framed(text: str, order: str, issue: str = "other") -> str:
    """What the seller receives for `text` (the template of support/tools/sellers.py, written out)."""
    return f"Message from Sundry customer support about order {order}\nIssue: {issue}\n\n{text}"


def refuse(ctx, **arguments) -> str:
    with pytest.raises(ToolError) as raised:
        message_seller(ctx, **arguments)
    return str(raised.value)


def test_it_sends_a_message_to_the_orders_seller(ctx_for, any_shop):
    result = message_seller(ctx_for(MAYA, "call_m1"), order_id="SU-41419", message="Please send a return label.")
    assert set(result) == {"message_id", "order_id", "seller", "status", "waiting"}
    assert (result["order_id"], result["seller"], result["status"]) == (
        "SU-41419", {"untrusted_text_from": "seller", "text": "Hearth & Loom"}, "sent")
    assert any_shop.seller_messages() == [framed("Please send a return label.", "SU-41419")]
    record = ShopEffect.objects.get(kind=ShopEffect.SELLER_MESSAGE, key="run-test:call_m1")
    assert (record.order_number, record.shop_id, record.text) == ("SU-41419", result["message_id"],
                                                                  framed("Please send a return label.", "SU-41419"))


def test_the_demo_keeps_the_message_under_the_calls_key(ctx_for):
    result = message_seller(ctx_for(MAYA, "call_m1"), order_id="SU-41419", message="Please send a return label.")
    sent = SellerMessage.objects.get(tool_call_id="run-test:call_m1")
    assert (sent.seller.code, sent.order.number, sent.body) == ("S-HL", "SU-41419",
                                                                framed("Please send a return label.", "SU-41419"))
    assert str(sent.public_id) == result["message_id"]


def test_it_sends_one_message_for_the_same_call_id_twice(ctx_for, any_shop):
    ctx = ctx_for(MAYA, "call_twice")
    first = message_seller(ctx, order_id="SU-41207", message="Parcel missing since the delivered scan.")
    second = message_seller(ctx, order_id="SU-41207", message="Parcel missing since the delivered scan.")
    assert first == second
    sent = [framed("Parcel missing since the delivered scan.", "SU-41207")]
    assert any_shop.seller_messages() == sent
    # The desk's record lost (a worker killed before its commit): the shop, asked by the key, says it was sent.
    ShopEffect.objects.all().delete()
    assert message_seller(ctx, order_id="SU-41207", message="Parcel missing since the delivered scan.") == first
    assert any_shop.seller_messages() == sent


def test_it_sends_a_new_message_for_a_new_call(ctx_for, any_shop):
    message_seller(ctx_for(MAYA, "call_a"), order_id="SU-41207", message="First.")
    message_seller(ctx_for(MAYA, "call_b"), order_id="SU-41207", message="Second.")
    assert sorted(any_shop.seller_messages("SU-41207")) == [framed("First.", "SU-41207"), framed("Second.", "SU-41207")]


def test_it_refuses_an_order_fulfilled_by_sundry(ctx_for, any_shop):
    message = refuse(ctx_for(MAYA), order_id="SU-41388", message="Where is it?")
    assert message == "Order SU-41388 is fulfilled by Sundry itself; there is no seller to message."
    assert any_shop.seller_messages() == []


def test_it_refuses_another_customers_order_like_an_unknown_one(ctx_for, any_shop):
    theirs = refuse(ctx_for(MAYA), order_id="SU-41444", message="Hello")
    unknown = refuse(ctx_for(MAYA), order_id="SU-99999", message="Hello")
    assert theirs.replace("SU-41444", "X") == unknown.replace("SU-99999", "X")
    assert any_shop.seller_messages() == []


def test_it_refuses_an_empty_message_when_called_directly(ctx_for):
    assert "empty" in refuse(ctx_for(MAYA), order_id="SU-41207", message="   ")
