"""The fake Shopify answers as Shopify does: its token check, its query cost and bucket, THROTTLED, search
syntax, cursors, refundCreate with @idempotent, metafieldsSet, and the faults tests inject."""

from __future__ import annotations

import concurrent.futures
import subprocess
import sys
import time
from decimal import Decimal

import httpx2
import pytest

from tests.shopify_fixture import fake_shopify, fake_shopify_server  # noqa: F401  (fixtures)

ORDER = """query($q: String!) { orders(first: 2, query: $q) { nodes { id name
  transactions(first: 5) { id kind status gateway maximumRefundableV2 { amount } } } } }"""
REFUND = """mutation($input: RefundInput!, $key: String!) { refundCreate(input: $input) @idempotent(key: $key) {
  refund { id note totalRefundedSet { shopMoney { amount } } } userErrors { field message } } }"""
SET = """mutation($m: [MetafieldsSetInput!]!) { metafieldsSet(metafields: $m) {
  metafields { id key value } userErrors { code field message } } }"""


def post(fake, query, variables=None, token=None, version=None):
    return httpx2.post(fake.endpoint(version), json={"query": query, "variables": variables or {}}, timeout=5,
                       headers={"X-Shopify-Access-Token": fake.token if token is None else token})


def wait_until(condition, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


def order_node(fake, name):
    return post(fake, ORDER, {"q": f'name:"{name}"'}).json()["data"]["orders"]["nodes"][0]


def refund_input(node, amount):
    sale = node["transactions"][0]
    return {"orderId": node["id"], "note": "n", "transactions": [
        {"orderId": node["id"], "parentId": sale["id"], "kind": "REFUND", "gateway": sale["gateway"],
         "amount": amount}]}


def test_it_imports_no_django_and_nothing_from_support():
    code = ("import sys, standin.shopify; bad = [m for m in sys.modules if m.split('.')[0] in ('django', 'support')];"
            " sys.exit(1 if bad else 0)")
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0


@pytest.mark.parametrize("token", ["", "shpat_wrong"])
def test_a_missing_or_wrong_token_is_401_in_shopifys_words(fake_shopify, token):
    r = post(fake_shopify, "{ orders(first: 1) { nodes { id } } }", token=token)
    assert r.status_code == 401
    assert r.json() == {"errors": "[API] Invalid API key or access token (unrecognized login or wrong password)"}


def test_another_api_version_is_not_found(fake_shopify):
    assert post(fake_shopify, "{ orders(first: 1) { nodes { id } } }", version="2024-01").status_code == 404


def test_every_answer_reports_its_cost_and_the_bucket(fake_shopify):
    body = post(fake_shopify, "{ orders(first: 5) { nodes { id name } } }").json()
    cost = body["extensions"]["cost"]
    assert cost["requestedQueryCost"] == 2 + 5 * 1  # a connection: 2, plus first times one node
    assert cost["actualQueryCost"] <= cost["requestedQueryCost"]
    assert cost["throttleStatus"] == {"maximumAvailable": 1000.0, "restoreRate": 50.0,
                                      "currentlyAvailable": pytest.approx(1000 - cost["actualQueryCost"], abs=1)}


def test_a_query_over_what_the_bucket_holds_is_throttled_until_it_refills(fake_shopify):
    fake_shopify.freeze_clock()  # the bucket refills only by advance(), however slowly this test runs
    fake_shopify.configure(bucket_size=100, restore_rate=10)
    fake_shopify.configure(bucket_available=20)
    r = post(fake_shopify, "{ orders(first: 50) { nodes { id } } }")  # costs 52
    assert r.status_code == 200 and "data" not in r.json()
    (error,) = r.json()["errors"]
    assert error["message"] == "Throttled" and error["extensions"]["code"] == "THROTTLED"
    cost = r.json()["extensions"]["cost"]
    assert cost["requestedQueryCost"] == 52 and cost["actualQueryCost"] is None
    assert cost["throttleStatus"]["currentlyAvailable"] == 20
    fake_shopify.advance(3.1)
    assert "data" not in post(fake_shopify, "{ orders(first: 50) { nodes { id } } }").json()  # 51 of 52
    fake_shopify.advance(0.1)
    assert post(fake_shopify, "{ orders(first: 50) { nodes { id } } }").json()["data"]["orders"]["nodes"]


def test_a_query_dearer_than_the_whole_bucket_is_max_cost_exceeded(fake_shopify):
    r = post(fake_shopify, "{ orders(first: 250) { nodes { lineItems(first: 250) { nodes { id } } } } }")
    assert r.json()["errors"][0]["extensions"]["code"] == "MAX_COST_EXCEEDED"


def test_a_query_outside_the_schema_is_answered_with_errors(fake_shopify):
    r = post(fake_shopify, "{ orders(first: 1) { nodes { giftCard } } }")
    assert r.status_code == 200 and "giftCard" in r.json()["errors"][0]["message"]


def test_search_syntax_and_cursors_walk_every_order_of_a_customer_once(fake_shopify):
    q = """query($q: String, $after: String) { orders(first: 4, after: $after, query: $q, sortKey: PROCESSED_AT,
           reverse: true) { nodes { name processedAt } pageInfo { hasNextPage endCursor } } }"""
    customer = post(fake_shopify, '{ customers(first: 5, query: "email:\\"MAYA@example.com\\"") { nodes { id } } }')
    (maya,) = customer.json()["data"]["customers"]["nodes"]
    names, after = [], None
    while True:
        page = post(fake_shopify, q, {"q": f"customer_id:{maya['id'].rsplit('/', 1)[1]}", "after": after}).json()
        orders = page["data"]["orders"]
        names += [n["name"] for n in orders["nodes"]]
        if not orders["pageInfo"]["hasNextPage"]:
            break
        after = orders["pageInfo"]["endCursor"]
    assert len(names) == len(set(names)) == 10 and names[0] == "SU-41501" and "SU-41444" not in names


def test_refund_create_with_the_same_idempotent_key_makes_one_refund(fake_shopify):
    node = order_node(fake_shopify, "SU-41207")
    first = post(fake_shopify, REFUND, {"input": refund_input(node, "10.00"), "key": "k1"}).json()
    again = post(fake_shopify, REFUND, {"input": refund_input(node, "10.00"), "key": "k1"}).json()
    assert first["data"]["refundCreate"]["refund"]["id"] == again["data"]["refundCreate"]["refund"]["id"]
    assert first["extensions"]["cost"]["requestedQueryCost"] == 10
    made = [r for r in fake_shopify.refunds() if r["order"] == "SU-41207"]
    assert [(r["amount"], r["key"], r["note"]) for r in made] == [(Decimal("10.00"), "k1", "n")]
    assert order_node(fake_shopify, "SU-41207")["transactions"][0]["maximumRefundableV2"]["amount"] == "59.00"


def test_refund_create_over_the_balance_or_with_a_reused_key_is_a_user_error(fake_shopify):
    node = order_node(fake_shopify, "SU-41290")
    over = post(fake_shopify, REFUND, {"input": refund_input(node, "80.01"), "key": "k2"}).json()
    (error,) = over["data"]["refundCreate"]["userErrors"]
    assert error["field"] == ["transactions", "0", "amount"] and "80.00" in error["message"]
    post(fake_shopify, REFUND, {"input": refund_input(node, "1.00"), "key": "k3"})
    other = order_node(fake_shopify, "SU-41207")
    reused = post(fake_shopify, REFUND, {"input": refund_input(other, "1.00"), "key": "k3"}).json()
    assert "idempotency key" in reused["data"]["refundCreate"]["userErrors"][0]["message"]
    assert len(fake_shopify.refunds()) == 2  # the catalogue's and k3's


def test_metafields_set_twice_with_one_key_is_one_metafield(fake_shopify):
    node = order_node(fake_shopify, "SU-41207")
    entry = {"ownerId": node["id"], "namespace": "desk_seller_messages", "key": "msg_1", "type": "json",
             "value": '{"text": "hi"}'}
    first = post(fake_shopify, SET, {"m": [entry]}).json()["data"]["metafieldsSet"]
    again = post(fake_shopify, SET, {"m": [entry]}).json()["data"]["metafieldsSet"]
    assert first["metafields"][0]["id"] == again["metafields"][0]["id"]
    assert [m["value"] for m in fake_shopify.seller_messages()] == [{"text": "hi"}]
    bad = post(fake_shopify, SET, {"m": [{**entry, "value": "not json"}]}).json()["data"]["metafieldsSet"]
    assert bad["metafields"] is None and bad["userErrors"][0]["code"] == "INVALID_VALUE"


def test_queued_failures_come_once_each_in_order(fake_shopify):
    fake_shopify.configure(fail_next=[502, 423])
    statuses = [post(fake_shopify, "{ orders(first: 1) { nodes { id } } }").status_code for _ in range(3)]
    assert statuses == [502, 423, 200]
    assert [r["status"] for r in fake_shopify.requests()] == statuses


def test_reset_puts_the_catalogue_back_and_clears_faults(fake_shopify):
    node = order_node(fake_shopify, "SU-41207")
    post(fake_shopify, REFUND, {"input": refund_input(node, "5.00"), "key": "k4"})
    fake_shopify.configure(down=True)
    fake_shopify.reset()
    assert len(fake_shopify.refunds()) == 1 and fake_shopify.requests() == []
    assert post(fake_shopify, "{ orders(first: 1) { nodes { id } } }").status_code == 200


def test_a_write_held_across_a_reset_ends_and_takes_no_fault_set_up_after_it(fake_shopify):
    # A held answer from one test must not eat the fault the next test queued (it would answer that test's
    # own request unbent).
    node = order_node(fake_shopify, "SU-41207")
    fake_shopify.configure(hold_after_write_seconds=30)
    held = concurrent.futures.ThreadPoolExecutor(1).submit(
        lambda: post(fake_shopify, REFUND, {"input": refund_input(node, "5.00"), "key": "k-held"}))
    wait_until(lambda: fake_shopify.requests() and fake_shopify.requests()[-1]["operation"] == "mutation")
    fake_shopify.reset()
    fake_shopify.configure(malformed_next=["not_json"])
    answer = held.result(timeout=10)  # the reset ended the hold, long before its 30 s
    assert answer.status_code == 200 and answer.json()["data"]["refundCreate"]["refund"] is not None
    assert post(fake_shopify, "{ orders(first: 1) { nodes { id } } }").headers["content-type"].startswith("text/html")


def test_an_unknown_fault_is_refused(fake_shopify):
    with pytest.raises(ValueError):
        fake_shopify.configure(explode=True)
    with pytest.raises(ValueError):
        fake_shopify.configure(malformed_next="sideways")


def test_it_runs_from_the_command_line():
    done = subprocess.run([sys.executable, "-m", "standin.shopify", "--help"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and "--token" in done.stdout
