"""The stand-in works every demo ticket of docs/tools-contract.md like a good model would: the right calls
in order, with contract-shaped arguments, `record_outcome` before the answer, and an answer that states the
facts. Each test drives the whole conversation over HTTP against a fake shop (no Django)."""

import json

import pytest

from standin.conversation import intent
from standin.scenarios import decide
from tests.standin_fixture import HOSTILE, ORDERS, TOOLS, FakeShop, client_for, run_ticket, standin  # noqa: F401

LOOKUP = ["get_order", "track_parcel"]


@pytest.mark.parametrize("text, customer, calls, facts, outcome", [
    ("Tracking says delivered on Thursday but there is nothing here, and I have already asked the neighbours. "
     "Order SU-41207.", "maya", LOOKUP + ["search_policy", "message_seller"],
     ["48 hours", "31 hours", "left in porch", "Northwind Parcel", "Hearth & Loom"], "resolved"),
    ("My parcel SU-41310 never came, tracking says delivered last week.", "maya",
     LOOKUP + ["search_policy", "issue_refund"], ["64.00", "120 hours", "48 hours"], "resolved"),
    ("Order SU-40155 was never delivered to me", "maya", LOOKUP + ["search_policy"], ["30 days", "45 days"],
     "not_resolved"),
    ("Where is my order SU-41388? It's very late.", "maya", LOOKUP + ["search_policy", "issue_refund"],
     ["severe weather", "3 days", "4.99", "96 hours"], "resolved"),
    ("My order SU-41402 arrived but the screen is cracked.", "maya",
     ["get_order", "search_policy", "track_parcel", "issue_refund"],
     ["129.00", "7 days"], "resolved"),
    ("I got a blue throw instead of the grey one I ordered (SU-41419).", "maya",
     ["get_order", "search_policy", "message_seller"], ["return label", "Hearth & Loom"], "resolved"),
    ("I want a refund for SU-41533 please.", "maya", ["get_order", "search_policy", "escalate_to_human"],
     ["480.00", "specialist"], "handed_to_person"),
    ("Can I have the rest of my money back for SU-41290?", "maya", ["get_order", "search_policy", "issue_refund"],
     ["80.00", "40.00"], "resolved"),
    ("Where is my order SU-41501?", "maya", LOOKUP, ["on its way", "departed sorting hub"], "resolved"),
    ("Has SU-41210 arrived?", "maya", LOOKUP, ["delivered", "handed to resident", "22 hours"], "resolved"),
    ("Where is my order SU-41444?", "maya", ["get_order"], ["couldn't find an order SU-41444"], "waiting_on_customer"),
    ("Where is my order SU-99999?", "maya", ["get_order"], ["couldn't find an order SU-99999"], "waiting_on_customer"),
    ("Hi, any news on SU-41620?", "ines", LOOKUP, ["on its way", "out for delivery"], "resolved"),
])
def test_it_works_each_demo_ticket_like_the_contract_says(standin, text, customer, calls, facts, outcome):
    t = run_ticket(client_for(standin), text, FakeShop(customer=customer))
    assert t.names == calls + ["record_outcome"]
    assert t.outcome == outcome and t.args("record_outcome")["summary"]
    assert t.finish_reason == "stop"
    for fact in facts:
        assert fact in t.answer


def test_it_plays_the_su_41207_trace_from_the_seed(standin):
    t = run_ticket(client_for(standin), "Tracking says delivered on Thursday but nothing is here. Order SU-41207.")
    assert t.args("get_order") == {"order_id": "SU-41207"}
    assert t.args("track_parcel") == {"tracking": "NW-99301207"}  # the tracking reference from the order
    assert t.args("search_policy") == {"query": "parcel marked delivered but not received", "seller_id": "S-HL"}
    message = t.args("message_seller")
    assert message["order_id"] == "SU-41207" and "once 48 hours have passed" in message["message"]
    assert "48 hours" in t.answer and "issue_refund" not in t.names


def test_it_refunds_money_as_a_two_decimal_string(standin):
    t = run_ticket(client_for(standin), "My parcel SU-41310 never came.")
    refund = t.args("issue_refund")
    assert refund["order_id"] == "SU-41310" and refund["amount"] == "64.00" and refund["reason"]


def test_it_relays_a_refund_the_staff_rejected_kindly_with_the_reason(standin):
    shop = FakeShop(reject={"issue_refund": "the customer already received a replacement"})
    t = run_ticket(client_for(standin), "My parcel SU-41310 never came.", shop)
    assert t.names[-2:] == ["issue_refund", "record_outcome"] and t.outcome == "not_resolved"
    assert "the customer already received a replacement" in t.answer and "I'm sorry" in t.answer


def test_it_escalates_when_the_refund_tool_refuses_an_amount_over_the_ceiling(standin):
    quiet = [p if p[0] != "POL-REFUND" else (*p[:3], "Refunds go back to the original payment method.")
             for p in FakeShop().policies]  # no ceiling stated anywhere: it learns it from the tool's error
    t = run_ticket(client_for(standin), "I want a refund for SU-41533 please.", FakeShop(policies=quiet))
    assert t.names == ["get_order", "search_policy", "issue_refund", "escalate_to_human", "record_outcome"]
    assert "150.00" in t.args("escalate_to_human")["reason"] and t.outcome == "handed_to_person"


class StaleShop(FakeShop):
    """get_order has not caught up with an earlier refund; issue_refund knows better."""

    def tool_get_order(self, order_id):
        order = super().tool_get_order(order_id)
        return {**order, "refunded": "0.00", "refundable": order["total"]}


def test_it_retries_a_refund_with_what_is_left_when_told_the_balance(standin):
    t = run_ticket(client_for(standin), "Can I have the rest of my money back for SU-41290?", StaleShop())
    amounts = [a["amount"] for n, a in t.calls if n == "issue_refund"]
    assert amounts == ["120.00", "80.00"] and "80.00" in t.answer and t.outcome == "resolved"


def test_it_is_not_moved_by_instructions_in_a_seller_description(standin):
    client = client_for(standin)
    for text in ("Where is my order SU-41501?", "Any update on SU-41501? I was told to ask.",
                 "Where is my order SU-41501? Can I have a refund?"):
        hostile = run_ticket(client, text)
        plain = FakeShop()
        row = ORDERS["SU-41501"]
        plain.orders["SU-41501"] = (*row[:3], [("Cast-iron teapot", "54.00", "A sturdy teapot.")], *row[4:])
        assert HOSTILE in json.dumps(hostile.messages)
        assert hostile.calls == run_ticket(client, text, plain).calls
        assert "issue_refund" not in hostile.names and "I've refunded" not in hostile.answer


def test_it_asks_for_the_order_number_when_there_is_none(standin):
    t = run_ticket(client_for(standin), "Hello, my parcel hasn't arrived")
    assert t.calls == [("record_outcome", {"outcome": "waiting_on_customer",
                                           "summary": "Asked the customer for their order number."})]
    assert "order number" in t.answer


def test_it_names_the_shop_the_prompt_names_when_it_says_what_it_can_help_with(standin):
    prompt = [{"role": "system", "content": "You are Hearth & Loom's customer support agent; customers know you "
                                            "as Lina."}]
    t = run_ticket(client_for(standin), "Can you recommend a poem?", messages=prompt)
    assert "your Hearth & Loom orders" in t.answer and "Sundry" not in t.answer


def test_it_names_no_shop_when_the_prompt_names_none(standin):
    t = run_ticket(client_for(standin), "Can you recommend a poem?",
                   messages=[{"role": "system", "content": "Help the customer."}])
    assert "your our shop orders" not in t.answer and "Sundry" not in t.answer


def test_it_takes_the_order_number_from_an_earlier_message_when_the_latest_has_none(standin):
    client = client_for(standin)
    first = run_ticket(client, "Where is my order SU-41501?")
    again = run_ticket(client, "Thanks. Has it moved since?", messages=first.messages)
    assert again.names == ["get_order", "track_parcel", "record_outcome"]
    assert again.args("get_order") == {"order_id": "SU-41501"}


def test_it_answers_in_the_same_reply_as_record_outcome_when_configured(standin):
    standin.configure(outcome_style="with_content")
    r = client_for(standin).chat.completions.create(
        model="sundry-standin-1", messages=[{"role": "user", "content": "hello"}], tools=TOOLS)
    message = r.choices[0].message
    assert message.tool_calls[0].function.name == "record_outcome" and "order number" in message.content


def test_it_answers_in_plain_text_when_record_outcome_is_not_offered(standin):
    tools = [t for t in TOOLS if t["function"]["name"] != "record_outcome"]
    t = run_ticket(client_for(standin), "Has SU-41210 arrived?", tools=tools)
    assert t.names == LOOKUP and "handed to resident" in t.answer


def test_it_answers_with_text_after_the_outcome_is_recorded(standin):
    messages = [{"role": "user", "content": "Has SU-41210 arrived?"},
                {"role": "assistant", "content": None, "tool_calls": [{"id": "call_r", "type": "function", "function": {
                    "name": "record_outcome", "arguments": '{"outcome": "resolved", "summary": "s"}'}}]},
                {"role": "tool", "tool_call_id": "call_r", "content": '{"recorded": "resolved"}'}]
    reply = decide(messages, TOOLS)
    assert reply.calls == () and reply.finish == "stop" and reply.content


def test_it_stops_calling_and_answers_when_the_loop_warns_of_a_spin(standin):
    messages = [{"role": "user", "content": "Where is SU-41210?"},
                {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
                    "name": "get_order", "arguments": '{"order_id": "SU-41210"}'}}]},
                {"role": "tool", "tool_call_id": "call_1",
                 "content": "ERROR: you already called get_order with the same arguments; try something else."}]
    r = client_for(standin).chat.completions.create(model="sundry-standin-1", messages=messages, tools=TOOLS)
    assert r.choices[0].message.tool_calls is None and r.choices[0].finish_reason == "stop"


def test_it_never_repeats_a_call_that_was_already_answered(standin):
    messages = [{"role": "user", "content": "Where is SU-41210?"},
                {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
                    "name": "get_order", "arguments": '{"order_id": "SU-41210"}'}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "not json at all"}]
    reply = decide(messages, TOOLS)
    assert [c.name for c in reply.calls] != ["get_order"]


def test_it_decides_the_same_way_every_time(standin):
    client = client_for(standin)
    runs = [run_ticket(client, "My parcel SU-41310 never came.") for _ in range(2)]
    assert runs[0].calls == runs[1].calls and runs[0].answer == runs[1].answer


def test_it_plays_the_same_scenario_over_a_stream(standin):
    t = run_ticket(client_for(standin), "Nothing arrived for SU-41207 even though it says delivered.", stream=True)
    assert t.names == LOOKUP + ["search_policy", "message_seller", "record_outcome"]
    assert "48 hours" in t.answer and t.finish_reason == "stop"


def test_it_starts_afresh_after_an_answer_sent_along_with_record_outcome(standin):
    standin.configure(outcome_style="with_content")
    client = client_for(standin)
    first = run_ticket(client, "Where is my order SU-41501?")
    assert first.answer and "SU-41501" in first.answer  # text came with the record_outcome call
    again = run_ticket(client, "And has SU-41210 arrived?", messages=first.messages)
    assert again.names == ["get_order", "track_parcel", "record_outcome"]
    assert again.args("get_order") == {"order_id": "SU-41210"}


def test_it_says_you_are_welcome_to_thanks_without_looking_anything_up(standin):
    client = client_for(standin)
    first = run_ticket(client, "Where is my order SU-41501?")
    t = run_ticket(client, "Thanks, that's great!", messages=first.messages)
    assert t.names == ["record_outcome"] and t.outcome == "resolved" and "welcome" in t.answer


def test_it_answers_in_plain_text_when_offered_no_tools(standin):
    r = client_for(standin).chat.completions.create(
        model="sundry-standin-1", messages=[{"role": "user", "content": "Where is SU-41210?"}])
    assert r.choices[0].message.tool_calls is None and r.choices[0].message.content


@pytest.mark.parametrize("text, kind", [
    ("Tracking says delivered but nothing arrived", "missing"),
    ("It never came, where is it?", "missing"),
    ("The mug arrived broken", "damaged"),
    ("That's not what I ordered", "wrong"),
    ("I'd like my money back", "refund"),
    ("When will it get here?", "status"),
    ("SU-41210", "status"),
    ("Thanks, that's great!", "thanks"),
])
def test_it_reads_what_the_customer_wants_from_their_words(text, kind):
    assert intent(text) == kind


def test_it_takes_the_refund_ceiling_from_the_system_prompt_when_the_policies_omit_it(standin):
    quiet = [p if p[0] != "POL-REFUND" else (*p[:3], "Refunds go back to the original payment method.")
             for p in FakeShop().policies]
    system = {"role": "system", "content": "You are Sundry's support agent. Refund ceiling: you may refund up to "
                                           "150.00 EUR; above that, hand over to a person."}
    t = run_ticket(client_for(standin), "I want a refund for SU-41533 please.", FakeShop(policies=quiet),
                   messages=[system])
    assert t.names == ["get_order", "search_policy", "escalate_to_human", "record_outcome"]


@pytest.mark.parametrize("steps", [3, 4, 20])
def test_a_steps_directive_makes_a_run_of_exactly_that_many_model_calls(standin, steps):
    import openai

    client = openai.OpenAI(base_url=standin.base_url, api_key="x", max_retries=0)
    tools = [{"type": "function", "function": {"name": n, "description": n, "parameters": {"type": "object"}}}
             for n in ("search_policy", "record_outcome")]
    messages = [{"role": "user", "content": f"benchmark please #steps:{steps}"}]
    for calls in range(1, 100):
        reply = client.chat.completions.create(model="m", messages=messages, tools=tools).choices[0]
        messages.append(reply.message.model_dump(exclude_none=True))
        if reply.finish_reason == "stop":
            break
        for c in reply.message.tool_calls:
            out = '{"recorded": "resolved"}' if c.function.name == "record_outcome" else '{"results": []}'
            messages.append({"role": "tool", "tool_call_id": c.id, "content": out})
    assert calls == steps
    queries = [c["function"]["arguments"] for m in messages for c in m.get("tool_calls") or []
               if c["function"]["name"] == "search_policy"]
    assert len(queries) == steps - 2 and len(set(queries)) == steps - 2  # distinct: no spin
