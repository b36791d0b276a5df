"""The stand-in, like a good model, tells the customer what staff decided: a refund approved for another
amount says both amounts, a reviewer's reason keeps its own punctuation. Over HTTP against a fake shop."""

from tests.standin_fixture import FakeShop, client_for, run_ticket, standin  # noqa: F401


class LowerAmountShop(FakeShop):
    """Staff approve the refund for 40.00 of what was asked, and the result says so as the desk's loop does."""

    def tool_issue_refund(self, order_id, amount, reason):
        result = super().tool_issue_refund(order_id, "40.00", reason)
        return {**result, "staff_decision": f"Approved by staff with a change: amount 40.00 instead of {amount}. "
                                            "Tell the customer what was actually done."}


def test_it_tells_the_customer_the_amount_staff_approved_and_the_one_it_asked_for(standin):
    t = run_ticket(client_for(standin), "My parcel SU-41310 never came.", LowerAmountShop())
    assert t.args("issue_refund")["amount"] == "64.00" and t.outcome == "resolved"
    assert "approve a refund of 64.00 EUR" in t.answer and "they approved 40.00 EUR" in t.answer
    assert "I've refunded 40.00 EUR" in t.answer and "refunded 64.00" not in t.answer


def test_it_relays_a_reason_that_ends_with_a_full_stop_without_adding_another(standin):
    shop = FakeShop(reject={"issue_refund": "Please send us a photo of the label first."})
    t = run_ticket(client_for(standin), "My parcel SU-41310 never came.", shop)
    assert "Please send us a photo of the label first. I'm sorry" in t.answer and ".." not in t.answer
