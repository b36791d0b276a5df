"""The reference shop keeps the shop contract on its own side: it checks signatures with code of its own, seeds
the Sundry catalogue, writes idempotently per kind of write, never overspends a balance, keeps what it wrote
across a restart with a file, and switches its faults on and off (in process and over /_control).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import jsonschema
import pytest
import yaml
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate

from standin.shop import start_in_thread
from support.shop.contract import new_nonce, signature, signature_v2
from tests.redis_fixture import free_port
from tests.shop_fixture import KEY, OTHER_KEY, reference_shop, reference_shop_server  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]


def signed(request: httpx2.Request, content: bytes, *, key: str = KEY, timestamp: float | None = None,
           signed_as: str | None = None, nonce: str | None = None, signed_key: str | None = None) -> httpx2.Request:
    """The request signed as version 2 says (the desk's code); `signed_as` signs another target than the one
    sent, `signed_key` another Idempotency-Key than the one sent."""
    ts, nonce = str(int(time.time() if timestamp is None else timestamp)), nonce or new_nonce()
    sent_key = request.headers.get("Idempotency-Key", "")
    request.headers.update({"X-Desk-Timestamp": ts, "X-Desk-Nonce": nonce, "X-Desk-Signature": signature_v2(
        key, ts, nonce, request.method, signed_as or request.url.raw_path.decode(),
        sent_key if signed_key is None else signed_key, content)})
    return request


def call(server, method: str, target: str, body: dict | None = None, *, headers: dict | None = None,
         **signing) -> httpx2.Response:
    """One request as a desk sends it (see `signed` for the ways to sign it wrong)."""
    content = json.dumps(body).encode() if body is not None else b""
    with httpx2.Client(base_url=server.base_url, timeout=5) as client:
        request = client.build_request(method, target, content=content or None, headers=headers or {})
        return client.send(signed(request, content, **signing))


def refund(server, number: str, amount: str, key: str | None, reason: str = "r", **signing) -> httpx2.Response:
    return call(server, "POST", f"/orders/{number}/refunds", {"amount": amount, "reason": reason},
                headers={"Idempotency-Key": key} if key is not None else {}, **signing)


# -- signing ----------------------------------------------------------------------------------------------

def test_a_request_signed_with_either_key_is_served(reference_shop):
    for key in (KEY, OTHER_KEY):
        answer = call(reference_shop, "GET", "/customers?email=maya%40example.com", key=key)
        assert answer.status_code == 200 and answer.json()["customer"]["id"] == "cus_1"


def test_a_missing_or_wrong_signature_is_refused_as_bad(reference_shop):
    with httpx2.Client(base_url=reference_shop.base_url) as client:
        unsigned = client.get("/orders/SU-41290")
    assert (unsigned.status_code, unsigned.json()) == (401, {"error": "bad_signature"})
    wrong = call(reference_shop, "GET", "/orders/SU-41290", key="someone-elses-key")
    assert (wrong.status_code, wrong.json()) == (401, {"error": "bad_signature"})


def test_the_signature_covers_the_target_exactly_as_sent_and_the_body(reference_shop):
    # Signed over the decoded address but sent percent-encoded: not the same bytes, so refused.
    answer = call(reference_shop, "GET", "/customers?email=maya%40example.com",
                  signed_as="/customers?email=maya@example.com")
    assert answer.status_code == 401
    with httpx2.Client(base_url=reference_shop.base_url) as client:
        request = client.build_request("POST", "/orders/SU-41290/refunds", content=b'{"amount":"80.00","reason":"r"}',
                                       headers={"Idempotency-Key": "k"})
        tampered = client.send(signed(request, b'{"amount":"1.00","reason":"r"}'))
    assert (tampered.status_code, tampered.json()) == (401, {"error": "bad_signature"})
    assert reference_shop.refunds()[1:] == []


def test_a_captured_request_sent_again_is_refused_as_replayed_and_makes_one_refund(reference_shop):
    with httpx2.Client(base_url=reference_shop.base_url) as client:
        body = b'{"amount":"5.00","reason":"chipped"}'
        captured = signed(client.build_request("POST", "/orders/SU-41290/refunds", content=body,
                                               headers={"Idempotency-Key": "k-once"}), body)
        first = client.send(captured)
        again = client.send(captured)
        # The same capture with a fresh key: the key is signed, so it is someone else's request now.
        captured.headers["Idempotency-Key"] = "k-fresh"
        fresh_key = client.send(captured)
    assert first.status_code == 201
    assert (again.status_code, again.json()) == (401, {"error": "replayed"})
    assert (fresh_key.status_code, fresh_key.json()) == (401, {"error": "bad_signature"})
    assert [r["amount"] for r in reference_shop.refunds() if r["idempotency_key"]] == ["5.00"]


def test_a_read_sent_again_with_its_nonce_is_refused_but_a_new_nonce_is_served(reference_shop):
    nonce = new_nonce()
    assert call(reference_shop, "GET", "/orders/SU-41290", nonce=nonce).status_code == 200
    assert call(reference_shop, "GET", "/orders/SU-41290", nonce=nonce).json() == {"error": "replayed"}
    assert call(reference_shop, "GET", "/orders/SU-41290").status_code == 200


@pytest.mark.parametrize("how", [{"signed_key": ""}, {"signed_key": "k-other"}, {"nonce": "short"}])
def test_a_signature_without_the_key_or_with_another_key_or_a_bad_nonce_is_refused(reference_shop, how):
    answer = refund(reference_shop, "SU-41290", "1.00", "k-signed", **how)
    assert (answer.status_code, answer.json()) == (401, {"error": "bad_signature"})
    assert [r for r in reference_shop.refunds() if r["idempotency_key"]] == []


def test_a_refused_request_does_not_spend_its_nonce(reference_shop):
    nonce = new_nonce()
    assert call(reference_shop, "GET", "/orders/SU-41290", nonce=nonce, key="wrong").status_code == 401
    assert call(reference_shop, "GET", "/orders/SU-41290", nonce=nonce).status_code == 200


def test_a_version_1_signature_is_refused_unless_the_shop_still_takes_it(reference_shop):
    def v1() -> httpx2.Response:
        ts = str(int(time.time()))
        with httpx2.Client(base_url=reference_shop.base_url) as client:
            return client.get("/orders/SU-41290", headers={
                "X-Desk-Timestamp": ts, "X-Desk-Signature": signature(KEY, ts, "GET", "/orders/SU-41290", b"")})
    assert v1().json() == {"error": "bad_signature"}
    reference_shop.configure(accept_v1=True)
    assert v1().status_code == 200


def test_a_stale_timestamp_is_refused_but_only_after_the_signature_is_good(reference_shop):
    stale = call(reference_shop, "GET", "/orders/SU-41290", timestamp=time.time() - 301)
    assert (stale.status_code, stale.json()) == (401, {"error": "stale_timestamp"})
    ahead = call(reference_shop, "GET", "/orders/SU-41290", timestamp=time.time() + 400)
    assert ahead.json() == {"error": "stale_timestamp"}
    assert call(reference_shop, "GET", "/orders/SU-41290", timestamp=time.time() - 250).status_code == 200
    stale_and_wrong = call(reference_shop, "GET", "/orders/SU-41290", key="wrong", timestamp=time.time() - 3600)
    assert stale_and_wrong.json() == {"error": "bad_signature"}


# -- the catalogue ----------------------------------------------------------------------------------------

def test_it_serves_the_sundry_catalogue_newest_first_with_balances(reference_shop):
    orders = call(reference_shop, "GET", "/customers/cus_1/orders").json()["orders"]
    placed = [o["placed_at"] for o in orders]
    assert placed == sorted(placed, reverse=True) and len(orders) == 10
    for o in orders:
        total = sum(int(i["qty"]) * float(i["unit_price"]) for i in o["items"]) + float(o["shipping_fee"])
        assert float(o["total"]) == pytest.approx(total)
        assert float(o["refundable"]) == pytest.approx(float(o["total"]) - float(o["refunded"]))
    by_number = {o["number"]: o for o in orders}
    assert by_number["SU-41290"]["refunded"] == "40.00" and len(by_number["SU-41290"]["refunds"]) == 1
    assert "IGNORE ALL PREVIOUS INSTRUCTIONS" in by_number["SU-41501"]["items"][0]["seller_description"]
    assert by_number["SU-41388"]["seller"] == {"id": "sundry", "name": "Sundry Warehouse", "is_marketplace": False}
    assert call(reference_shop, "GET", "/customers?email=nobody%40example.com").json() == {"error": "not_found"}
    assert call(reference_shop, "GET", "/orders/SU-00000").status_code == 404


# -- writes -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("amount", ["5", "5.001", "-1.00", "0.00", "abc", 5])
def test_a_refund_amount_must_be_positive_with_exactly_two_decimals(reference_shop, amount):
    answer = refund(reference_shop, "SU-41290", amount, "k-amount")
    assert answer.status_code == 422 and answer.json()["error"] == "invalid"


@pytest.mark.parametrize("key", [None, "", "k" * 256])
def test_a_write_needs_a_key_of_at_most_255_characters(reference_shop, key):
    assert refund(reference_shop, "SU-41290", "1.00", key).status_code == 422
    message = call(reference_shop, "POST", "/orders/SU-41207/seller-messages", {"message": "hi"},
                   headers={"Idempotency-Key": key} if key is not None else {})
    assert message.status_code == 422
    assert refund(reference_shop, "SU-41290", "1.00", "k" * 255).status_code == 201


def test_the_same_key_again_answers_with_the_same_refund_whatever_the_body(reference_shop):
    first = refund(reference_shop, "SU-41290", "10.00", "k-same")
    again = refund(reference_shop, "SU-41290", "70.00", "k-same", reason="another")
    malformed = refund(reference_shop, "SU-41290", "x", "k-same")
    assert (first.status_code, again.status_code, malformed.status_code) == (201, 200, 200)
    assert first.json() == again.json() == malformed.json()
    assert [r["amount"] for r in reference_shop.refunds()] == ["40.00", "10.00"]
    looked_up = call(reference_shop, "GET", "/refunds?idempotency_key=k-same")
    assert looked_up.json() == first.json()


def test_only_a_success_is_remembered_under_a_key(reference_shop):
    over = refund(reference_shop, "SU-41290", "80.01", "k-retry")
    assert (over.status_code, over.json()) == (409, {"error": "exceeds_refundable", "refundable": "80.00"})
    assert call(reference_shop, "GET", "/refunds?idempotency_key=k-retry").status_code == 404
    assert refund(reference_shop, "SU-41290", "80.00", "k-retry").status_code == 201
    assert refund(reference_shop, "SU-41290", "0.01", "k-after").json()["refundable"] == "0.00"


def test_keys_are_per_kind_of_write_across_the_whole_shop(reference_shop):
    assert refund(reference_shop, "SU-41207", "1.00", "k-shared").status_code == 201
    message = call(reference_shop, "POST", "/orders/SU-41207/seller-messages", {"message": "hi"},
                   headers={"Idempotency-Key": "k-shared"})
    assert message.status_code == 201
    elsewhere = refund(reference_shop, "SU-41310", "2.00", "k-shared")  # another order, the same key
    assert elsewhere.status_code == 200 and elsewhere.json()["refund"]["order_number"] == "SU-41207"


def test_a_seller_message_on_an_order_the_shop_ships_itself_is_invalid(reference_shop):
    answer = call(reference_shop, "POST", "/orders/SU-41290/seller-messages", {"message": "hi"},
                  headers={"Idempotency-Key": "m-own"})
    assert answer.status_code == 422 and answer.json()["error"] == "invalid"
    assert call(reference_shop, "GET", "/seller-messages?idempotency_key=m-own").status_code == 404


def test_what_it_wrote_survives_a_restart_on_a_file(tmp_path):
    db = str(tmp_path / "shop.sqlite3")
    first = start_in_thread(keys=(KEY,), db_path=db)
    try:
        made = refund(first, "SU-41290", "5.00", "k-kept").json()
    finally:
        first.stop()
    second = start_in_thread(keys=(KEY,), db_path=db)
    try:
        assert refund(second, "SU-41290", "5.00", "k-kept").json() == made
        assert call(second, "GET", "/orders/SU-41290").json()["order"]["refundable"] == "75.00"
        second.reset()
        assert call(second, "GET", "/orders/SU-41290").json()["order"]["refundable"] == "80.00"
    finally:
        second.stop()


# -- faults -----------------------------------------------------------------------------------------------

def test_a_shop_that_is_down_answers_503_to_everything_until_reset(reference_shop):
    reference_shop.configure(down=True)
    answer = call(reference_shop, "GET", "/orders/SU-41290")
    assert (answer.status_code, answer.json()) == (503, {"error": "unavailable"})
    reference_shop.reset()
    assert call(reference_shop, "GET", "/orders/SU-41290").status_code == 200
    assert reference_shop.requests() == [{"method": "GET", "path": "/orders/SU-41290", "status": 200}]


def test_queued_failures_come_in_order_with_retry_after(reference_shop):
    reference_shop.configure(fail_next=[429, 500], retry_after=3)
    first, second, third = (call(reference_shop, "GET", "/orders/SU-41290") for _ in range(3))
    assert (first.status_code, first.headers["Retry-After"], first.json()) == (429, "3", {"error": "rate_limited"})
    assert (second.status_code, "retry-after" in second.headers) == (500, False)
    assert third.status_code == 200


def test_an_unknown_fault_is_refused_by_name(reference_shop):
    with pytest.raises(ValueError, match="unknown faults: slow"):
        reference_shop.configure(slow=True)
    with pytest.raises(ValueError, match="malformed_next"):
        reference_shop.configure(malformed_next="garbled")


def test_faults_over_http_need_the_control_token():
    server = start_in_thread(keys=(KEY,), control_token="ctl-token")
    try:
        with httpx2.Client(base_url=server.base_url) as client:
            assert client.post("/_control", json={"down": True}).status_code == 403
            assert client.post("/_control", json={"down": True},
                               headers={"X-Control-Token": "wrong"}).status_code == 403
            assert call(server, "GET", "/orders/SU-41290").status_code == 200
            ok = client.post("/_control", json={"down": True}, headers={"X-Control-Token": "ctl-token"})
            assert ok.status_code == 200 and ok.json()["faults"]["down"] is True
            assert call(server, "GET", "/orders/SU-41290").status_code == 503
            client.post("/_control", json={"reset": True}, headers={"X-Control-Token": "ctl-token"})
            assert call(server, "GET", "/orders/SU-41290").status_code == 200
    finally:
        server.stop()


def test_without_a_control_token_there_is_no_control_route(reference_shop):
    with httpx2.Client(base_url=reference_shop.base_url) as client:
        assert client.post("/_control", json={"down": True}, headers={"X-Control-Token": ""}).status_code == 404


# -- a foreign shop ---------------------------------------------------------------------------------------

def test_it_imports_nothing_of_the_desk_or_django():
    code = ("import sys, standin.shop, standin.shop.__main__; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'django', 'support', 'agentsite'}))")
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=env, timeout=60,
                          check=False)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr


def test_it_runs_as_a_command(tmp_path):
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "standin.shop", "--port", str(port), "--key", KEY,
                                "--key", OTHER_KEY, "--db", str(tmp_path / "shop.sqlite3")], cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    server = type("Remote", (), {"base_url": f"http://127.0.0.1:{port}"})()
    try:
        deadline = time.monotonic() + 20
        while True:  # until it listens
            try:
                answer = call(server, "GET", "/customers?email=tom%40example.com", key=OTHER_KEY)
                break
            except httpx2.ConnectError:
                assert process.poll() is None and time.monotonic() < deadline, process.stderr.read()
                time.sleep(0.05)
        assert answer.json()["customer"]["id"] == "cus_2"
    finally:
        process.terminate()
        process.wait(10)


# -- the documents ----------------------------------------------------------------------------------------

def test_the_worked_signing_example_is_what_desk_and_shop_compute(reference_shop):
    text = (ROOT / "docs" / "shop-contract.md").read_text()
    documented = re.findall(r"X-Desk-Nonce: (\S+)\n.*?X-Desk-Signature: (v2=[0-9a-f]{64})", text, re.S)
    body = b'{"amount":"12.50","reason":"Two plates arrived chipped"}'
    requests = [("GET", "/customers?email=maya%40example.com", "", None),
                ("POST", "/orders/SU-41290/refunds", "run-7f3a:call_2", body)]
    assert [sig for _, sig in documented] == [
        signature_v2("example-key-do-not-use", "1767225600", nonce, method, target, key, content or b"")
        for (nonce, _), (method, target, key, content) in zip(documented, requests, strict=True)]
    # The shop's own code: with the example's key, the example's signatures pass, and only the (fixed, long
    # past) timestamp is refused.
    shop = start_in_thread(keys=("example-key-do-not-use",))
    try:
        with httpx2.Client(base_url=shop.base_url) as client:
            for (nonce, sig), (method, target, key, content) in zip(documented, requests, strict=True):
                answer = client.request(method, target, content=content, headers={
                    "X-Desk-Timestamp": "1767225600", "X-Desk-Nonce": nonce, "X-Desk-Signature": sig,
                    **({"Idempotency-Key": key} if key else {})})
                assert answer.json() == {"error": "stale_timestamp"}
    finally:
        shop.stop()


def _openapi() -> dict:
    return yaml.safe_load((ROOT / "docs" / "shop-openapi.yaml").read_text())


def test_the_openapi_description_is_valid_openapi_3_1():
    spec = _openapi()
    validate(spec)
    assert spec["openapi"].startswith("3.1")
    assert set(spec["paths"]) == {"/customers", "/customers/{customer_id}/orders", "/orders/{number}",
                                  "/orders/{number}/refunds", "/orders/{number}/seller-messages", "/refunds",
                                  "/seller-messages", "/capabilities"}


def _check_against_openapi(spec: dict, path: str, method: str, answer: httpx2.Response) -> None:
    response = spec["paths"][path][method.lower()]["responses"][str(answer.status_code)]
    if "$ref" in response:
        response = spec["components"]["responses"][response["$ref"].rsplit("/", 1)[1]]
    schema = response["content"]["application/json"]["schema"]
    Draft202012Validator({**schema, "components": spec["components"]}).validate(answer.json())


def test_the_reference_shops_answers_are_as_the_openapi_description_says(reference_shop):
    spec = _openapi()
    message = {"message": "Where is the parcel?"}
    k = {"Idempotency-Key": "k-doc"}
    answers = [
        ("/customers", call(reference_shop, "GET", "/customers?email=maya%40example.com")),
        ("/customers", call(reference_shop, "GET", "/customers?email=nobody%40example.com")),
        ("/customers", call(reference_shop, "GET", "/customers?email=x", key="wrong")),
        ("/customers/{customer_id}/orders", call(reference_shop, "GET", "/customers/cus_1/orders")),
        ("/orders/{number}", call(reference_shop, "GET", "/orders/SU-41290")),
        ("/orders/{number}", call(reference_shop, "GET", "/orders/SU-00000")),
        ("/orders/{number}/refunds", refund(reference_shop, "SU-41290", "1.00", "k-doc")),
        ("/orders/{number}/refunds", refund(reference_shop, "SU-41290", "1.00", "k-doc")),
        ("/orders/{number}/refunds", refund(reference_shop, "SU-41290", "999.00", "k-doc-2")),
        ("/orders/{number}/refunds", refund(reference_shop, "SU-41290", "1.5", "k-doc-3")),
        ("/refunds", call(reference_shop, "GET", "/refunds?idempotency_key=k-doc")),
        ("/refunds", call(reference_shop, "GET", "/refunds?idempotency_key=k-none")),
        ("/orders/{number}/seller-messages", call(reference_shop, "POST", "/orders/SU-41207/seller-messages",
                                                  message, headers=k)),
        ("/orders/{number}/seller-messages", call(reference_shop, "POST", "/orders/SU-41290/seller-messages",
                                                  message, headers={"Idempotency-Key": "k-doc-own"})),
        ("/seller-messages", call(reference_shop, "GET", "/seller-messages?idempotency_key=k-doc")),
        ("/capabilities", call(reference_shop, "GET", "/capabilities")),
    ]
    reference_shop.configure(fail_next=[429, 503], retry_after=1)
    answers += [("/orders/{number}", call(reference_shop, "GET", "/orders/SU-41290")) for _ in range(2)]
    statuses = [a.status_code for _, a in answers]
    assert statuses == [200, 404, 401, 200, 200, 404, 201, 200, 409, 422, 200, 404, 201, 422, 200, 200, 429, 503]
    for path, answer in answers:
        _check_against_openapi(spec, path, answer.request.method, answer)


def test_the_openapi_schemas_can_fail(reference_shop):
    spec = _openapi()
    answer = call(reference_shop, "GET", "/orders/SU-41290")
    broken = httpx2.Response(200, json={"order": {**answer.json()["order"], "total": "-1.00"}},
                             request=answer.request)
    with pytest.raises(jsonschema.ValidationError):
        _check_against_openapi(spec, "/orders/{number}", "GET", broken)
