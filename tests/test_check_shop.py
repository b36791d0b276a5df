"""manage.py check_shop: a shop's server that keeps the contract passes every check; one that does not is
told what is wrong, check by check, and the command exits 1.

The reference shop is the conforming shop; the broken ones are the reference shop with one part of it
changed (its signature check, its order list, its money, its memory of keys) or no shop at all.
"""

from __future__ import annotations

import io
import json
import uuid

import pytest
from django.core.management import call_command

import standin.shop.app
from tests.redis_fixture import free_port
from tests.shop_fixture import KEY, OTHER_KEY
from tests.shop_fixture import reference_shop, reference_shop_server  # noqa: F401


def check(server_url: str, *extra: str, key: str = KEY, order: str = "SU-41207") -> tuple[int, str]:
    out = io.StringIO()
    try:
        call_command("check_shop", "--url", server_url, "--key", key, "--email", "maya@example.com",
                     "--order", order, *extra, stdout=out)
    except SystemExit as e:
        return int(e.code), out.getvalue()
    return 0, out.getvalue()


def failed(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("FAIL")]


def test_the_reference_shop_passes_every_check_with_writes(reference_shop):
    status, output = check(reference_shop.base_url, "--write")
    assert status == 0 and failed(output) == []
    assert output.count("\nok ") + output.startswith("ok ") == 18 and "18 of 18 checks passed" in output
    [made] = [r for r in reference_shop.refunds() if r["idempotency_key"]]  # twice sent, once made
    assert (made["order_number"], made["amount"]) == ("SU-41207", "0.01")
    assert len(reference_shop.seller_messages()) == 1


def test_the_second_key_passes_too_and_reads_write_nothing(reference_shop):
    status, output = check(reference_shop.base_url, key=OTHER_KEY)
    assert status == 0 and "14 of 14 checks passed" in output
    # The two key checks post a refund the shop must refuse either way (401, else 422): nothing is written.
    assert {(r["method"], r["status"]) for r in reference_shop.requests() if r["method"] != "GET"} == {("POST", 401)}
    assert reference_shop.refunds()[1:] == [] and reference_shop.seller_messages() == []


def test_an_order_the_shop_ships_itself_expects_422_for_a_seller_message(reference_shop):
    status, output = check(reference_shop.base_url, "--write", order="SU-41290")
    assert status == 0 and "18 of 18 checks passed" in output and reference_shop.seller_messages() == []


def test_a_shop_that_checks_no_signature_and_lists_oldest_first_fails(reference_shop, monkeypatch):
    monkeypatch.setattr(standin.shop.app, "_check_signature", lambda request, body, keys, v1=False: None)
    real = reference_shop.store.orders_of
    monkeypatch.setattr(reference_shop.store, "orders_of", lambda customer_id: list(reversed(real(customer_id))))
    status, output = check(reference_shop.base_url)
    assert status == 1
    lines = failed(output)
    assert len(lines) == 7, output
    assert any(line.startswith("FAIL  a request without a signature is refused") and "got 200" in line
               for line in lines)
    assert any("a timestamp an hour old" in line for line in lines)
    assert any(line.startswith("FAIL  the customer's orders come newest first: ") and "listed after it" in line
               for line in lines)
    assert any(line.startswith("FAIL  a request whose Idempotency-Key was changed after signing is refused")
               for line in lines)
    assert "7 of 14 checks passed" in output


def test_a_wrong_key_fails_every_signed_read_and_says_so_in_json(reference_shop):
    status, output = check(reference_shop.base_url, "--json", key="not-the-shops-key")
    report = json.loads(output)
    assert status == 1 and report["ok"] is False
    by_name = {c["name"]: c for c in report["checks"]}
    customer = by_name["the customer maya@example.com is found, as the contract shapes it"]
    assert customer["ok"] is False and customer["problem"].startswith('expected 200, got 401 {"error":"bad_signature"}')
    assert by_name["a request without a signature is refused (401 bad_signature)"]["ok"] is True
    assert by_name["the customer's orders come newest first"]["problem"].startswith("not checked")


def test_a_shop_that_takes_a_nonce_twice_fails_the_replay_check(reference_shop, monkeypatch):
    monkeypatch.setattr(reference_shop.state, "take_nonce", lambda nonce: True)
    status, output = check(reference_shop.base_url)
    [line] = failed(output)
    assert status == 1 and line.startswith("FAIL  a request sent again with the same nonce is refused (401 replayed): "
                                           'expected 401 {"error": "replayed"}, got 200')


def test_a_shop_that_does_not_sign_the_key_fails_the_key_check_and_writes_nothing(reference_shop, monkeypatch):
    real = standin.shop.app._signed_v2
    monkeypatch.setattr(standin.shop.app, "_signed_v2",
                        lambda timestamp, nonce, method, target, key, body: real(timestamp, nonce, method, target,
                                                                                 "", body))
    status, output = check(reference_shop.base_url)
    assert status == 1
    assert [line.split(":")[0] for line in failed(output)] == [
        "FAIL  a v2 signature without the Idempotency-Key in it is refused (401 bad_signature)"]
    assert 'got 422 {"error":"invalid"' in output and reference_shop.refunds()[1:] == []


def test_money_not_as_the_contract_says_is_reported_by_field(reference_shop, monkeypatch):
    real = reference_shop.store.order
    monkeypatch.setattr(reference_shop.store, "order",
                        lambda number: real(number) and {**real(number), "total": 69})
    status, output = check(reference_shop.base_url)
    [line] = failed(output)
    assert status == 1 and line == "FAIL  the order SU-41207 is as the contract shapes it: order.total: 69 is not " \
                                   'money (a string such as "12.50", never negative)'


def test_a_shop_that_forgets_its_keys_fails_the_write_checks(reference_shop, monkeypatch):
    real = reference_shop.store.refund
    monkeypatch.setattr(reference_shop.store, "refund",
                        lambda number, amount, reason, key: real(number, amount, reason, f"{key}-{uuid.uuid4()}"))
    status, output = check(reference_shop.base_url, "--write")
    assert status == 1
    assert [line.split(":")[0] for line in failed(output)] == [
        "FAIL  a refund of 0.01 is made once per Idempotency-Key",
        "FAIL  the refund is found by its key (and an unknown key is 404)"]
    assert "expected 200, got 201" in output


def test_a_shop_that_cannot_be_reached_fails_every_check(settings):
    closed = free_port()
    status, output = check(f"http://127.0.0.1:{closed}")
    assert status == 1 and len(failed(output)) == 14
    assert "could not reach the shop (ConnectError)" in failed(output)[0]


def test_without_a_shop_named_it_refuses_to_start(settings):
    settings.SHOP_URL, settings.SHOP_API_KEY = "", ""
    with pytest.raises(Exception, match="--url and --key"):
        call_command("check_shop", "--email", "maya@example.com", "--order", "SU-41207", stdout=io.StringIO())
