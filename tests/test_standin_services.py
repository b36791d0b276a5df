"""The stand-in uses another system's tools only when the desk offers them: a warranty question is looked up with
the warranty service and answered citing it; a store-credit request asks for issue_store_credit, which a person
approves, and the answer says what they decided. Over HTTP against a fake shop, the service's answers written
by the demo warranty service's own code (standin/warranty), marked as the desk marks them (no Django)."""

from dataclasses import dataclass, field

from standin.warranty import warranty_text
from tests.standin_fixture import S, TOOLS, FakeShop, _tool, client_for, run_ticket, standin  # noqa: F401

OFFERED = TOOLS + [_tool("lookup_warranty", order_number=S),
                   _tool("issue_store_credit", order_number=S, amount=S, note=S)]


def from_service(text: str, failed: bool = False) -> dict:
    out = {"untrusted_text_from": "mcp:warranty", "text": text}
    return {**out, "service_reported_error": True} if failed else out


@dataclass
class WarrantyShop(FakeShop):
    """The shop's tools and the warranty service's, as the desk offers them."""

    credits: list = field(default_factory=list)
    credit_answer: str = ""  # instead of the service's answer: what the desk said (an error, "may have run")

    def tool_lookup_warranty(self, order_number: str) -> dict:
        return from_service(warranty_text(order_number))

    def tool_issue_store_credit(self, order_number: str, amount: str, note: str = "") -> dict:
        self.credits.append((order_number, amount))
        return from_service(f"Store credit of {amount} EUR issued on {order_number} (SC-{len(self.credits)}).")

    def execute(self, name: str, arguments: str) -> str:
        if name == "issue_store_credit" and self.credit_answer:
            return self.credit_answer
        return super().execute(name, arguments)


def test_a_warranty_question_is_looked_up_and_the_answer_cites_the_service(standin):
    t = run_ticket(client_for(standin), "Is my speaker from order SU-41402 still under warranty?", WarrantyShop(),
                   tools=OFFERED)
    assert t.names == ["get_order", "lookup_warranty", "record_outcome"]  # the order is hers before anything
    assert t.args("lookup_warranty") == {"order_number": "SU-41402"} and t.outcome == "resolved"
    assert "warranty service" in t.answer and "2-year warranty, valid until " in t.answer
    assert "Bluetooth bookshelf speakers" in t.answer  # the service's own words, quoted


def test_without_the_service_tools_the_same_question_gets_the_shop_flows(standin):
    t = run_ticket(client_for(standin), "Is my speaker from order SU-41402 still under warranty?", WarrantyShop())
    assert "lookup_warranty" not in t.names and t.names[0] == "get_order"
    assert "warranty service" not in t.answer


def test_a_store_credit_request_asks_for_the_gated_call_and_says_what_was_issued(standin):
    shop = WarrantyShop()
    t = run_ticket(client_for(standin), "The kettle from SU-41210 stopped working. Could I have 18 EUR store "
                   "credit instead?", shop, tools=OFFERED)
    assert t.names == ["get_order", "lookup_warranty", "issue_store_credit", "record_outcome"]
    credit = t.args("issue_store_credit")
    assert credit["order_number"] == "SU-41210" and credit["amount"] == "18.00" and credit["note"]
    asking = next(m for m in t.messages if m.get("tool_calls") and
                  m["tool_calls"][0]["function"]["name"] == "issue_store_credit")
    assert "asked our team to approve store credit of 18.00 EUR" in asking["content"]  # not left in silence
    assert shop.credits == [("SU-41210", "18.00")] and t.outcome == "resolved"
    assert "store credit of 18.00 EUR has been added for order SU-41210 (reference SC-1)" in t.answer


def test_a_rejected_store_credit_relays_the_reviewers_reason(standin):
    shop = WarrantyShop(reject={"issue_store_credit": "the kettle has to come back to our warehouse first"})
    t = run_ticket(client_for(standin), "Can I get store credit for SU-41210? It stopped working.", shop,
                   tools=OFFERED)
    assert t.names[-2:] == ["issue_store_credit", "record_outcome"] and t.outcome == "not_resolved"
    assert "decided against it: the kettle has to come back to our warehouse first." in t.answer
    assert shop.credits == [] and "has been added" not in t.answer


def test_a_credit_that_may_have_run_is_left_to_a_person_without_asking_again(standin):
    shop = WarrantyShop(credit_answer="ERROR: not confirmed: issue_store_credit 38.00 on SU-41210 may have run; "
                                      "check the warranty system (the service did not answer in time).")
    t = run_ticket(client_for(standin), "Store credit for SU-41210 please", shop, tools=OFFERED)
    assert t.names.count("issue_store_credit") == 1 and t.outcome == "handed_to_person"
    assert "couldn't confirm that it went through" in t.answer


def test_food_has_no_warranty_so_no_store_credit_is_asked_for(standin):
    t = run_ticket(client_for(standin), "My order SU-41501 went off. Store credit please?", WarrantyShop(),
                   tools=OFFERED)
    assert "issue_store_credit" not in t.names and t.outcome == "not_resolved"
    assert "no warranty (food)" in t.answer


def test_a_tool_offered_under_its_servers_name_is_used_under_that_name(standin):
    renamed = TOOLS + [_tool("warranty__lookup_warranty", order_number=S)]

    class Renamed(WarrantyShop):
        def tool_warranty__lookup_warranty(self, order_number: str) -> dict:
            return self.tool_lookup_warranty(order_number)

    t = run_ticket(client_for(standin), "What warranty do I have on SU-41210?", Renamed(), tools=renamed)
    assert t.names == ["get_order", "warranty__lookup_warranty", "record_outcome"]
    assert "2-year warranty" in t.answer
