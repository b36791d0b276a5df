"""Does a shop's server keep the shop contract? The checks `manage.py check_shop` runs, one result each.

Requests are made here directly (not through HttpShop) so that each check sees the status the shop really
answered, including the refusals HttpShop would only turn into an error; answers are read by contract.py,
the same strict reading the desk applies.
"""

from __future__ import annotations

import itertools
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from decimal import Decimal
from urllib.parse import quote

import httpx2

from support.shop import contract, port


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    problem: str = ""  # what is wrong, in plain words, when not ok

    def as_dict(self) -> dict:
        return asdict(self)


NO_ANSWER = "the shop did not answer in time"


class Failed(Exception):
    """A check found the shop not as the contract says."""


class _Shop:
    """Signed (or deliberately mis-signed) requests to the shop under test."""

    def __init__(self, url: str, key: str, timeout: float):
        self.key = key
        self.client = httpx2.Client(base_url=url.rstrip("/"), timeout=timeout)

    def send(self, method: str, target: str, body: dict | None = None, *, key: str | None = None,
             age: float = 0, signed: bool = True, idempotency_key: str | None = None, nonce: str | None = None,
             signed_key: str | None = None) -> httpx2.Response:
        """A request signed as version 2 says; `nonce` one used before, `signed_key` another Idempotency-Key
        in the signature than the one sent (a key changed after signing)."""
        content = json.dumps(body, separators=(",", ":")).encode() if body is not None else b""
        headers = {"Content-Type": "application/json"} if body is not None else {}
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key
        request = self.client.build_request(method, target, content=content or None, headers=headers)
        if signed:
            timestamp, nonce = str(int(time.time() - age)), nonce or contract.new_nonce()
            signed_key = idempotency_key if signed_key is None else signed_key
            request.headers.update({"X-Desk-Timestamp": timestamp, "X-Desk-Nonce": nonce,
                                    "X-Desk-Signature": contract.signature_v2(
                                        key or self.key, timestamp, nonce, method,
                                        request.url.raw_path.decode("ascii"), signed_key or "", content)})
        return self.client.send(request)

    def answer(self, response: httpx2.Response, status: int | tuple[int, ...] = 200) -> dict:
        statuses = status if isinstance(status, tuple) else (status,)
        if response.status_code not in statuses:
            raise Failed(f"expected {' or '.join(map(str, statuses))}, got {_said(response)}")
        return contract.decode(response.content, response.status_code)


def check_shop(*, url: str, key: str, email: str, order_number: str, write: bool = False,
               timeout: float = 10.0, stop_on_timeout: bool = False) -> list[Check]:
    """Every check's result, in order. `stop_on_timeout`: once the shop did not answer one in time, the rest are
    reported as not tried instead of each waiting `timeout` again (a page waiting on the checks)."""
    shop = _Shop(url, key, timeout)
    found: dict = {}  # what earlier checks learnt, for the later ones
    q_email = f"/customers?email={quote(email, safe='')}"
    q_order = f"/orders/{quote(order_number, safe='')}"

    def refused(code: str, **how) -> Callable[[], None]:
        def check() -> None:
            _expect_error(shop.send("GET", q_email, **how), 401, code)
        return check

    def replayed() -> None:
        nonce = contract.new_nonce()
        shop.answer(shop.send("GET", q_email, nonce=nonce))
        _expect_error(shop.send("GET", q_email, nonce=nonce), 401, "replayed")

    def key_signed(**how) -> Callable[[], None]:
        # A refund the shop must refuse as invalid (three decimals) if it took the signature: nothing is made
        # either way, so the check needs no --write.
        def check() -> None:
            _expect_error(shop.send("POST", f"{q_order}/refunds", {"amount": "0.001", "reason": "check_shop"},
                                    idempotency_key=f"check-shop-{uuid.uuid4()}", **how), 401, "bad_signature")
        return check

    def customer() -> None:
        found["customer"] = contract.customer(contract.envelope(shop.answer(shop.send("GET", q_email)), "customer"))
        if found["customer"].email.lower() != email.lower():
            raise Failed(f"asked for {email}, the shop answered with {contract.shown(found['customer'].email)}")

    def any_case() -> None:
        other = contract.customer(contract.envelope(shop.answer(
            shop.send("GET", f"/customers?email={quote(email.swapcase(), safe='')}")), "customer"))
        if other.id != _needs(found, "customer").id:
            raise Failed(f"{email.swapcase()} found another customer than {email}")

    def orders() -> None:
        customer_id = _needs(found, "customer").id
        listed = contract.orders(shop.answer(shop.send("GET", f"/customers/{quote(customer_id, safe='')}/orders")))
        strangers = sorted({o.number for o in listed if o.customer_id != customer_id})
        if strangers:
            raise Failed(f"orders of another customer are listed: {', '.join(strangers)[:200]}")
        found["orders"] = listed

    def newest_first() -> None:
        listed = _needs(found, "orders")
        for earlier, later in itertools.pairwise(listed):
            if earlier.placed_at < later.placed_at:
                raise Failed(f"{later.number} is newer than {earlier.number} but listed after it")

    def order() -> None:
        got = contract.order(contract.envelope(shop.answer(shop.send("GET", q_order)), "order"))
        if got.number != order_number:
            raise Failed(f"asked for {order_number}, the shop answered with {contract.shown(got.number)}")
        if got.refundable != got.total - got.refunded:
            raise Failed(f"refundable {got.refundable} is not total {got.total} less refunded {got.refunded}")
        found["order"] = got

    def refund_once() -> None:
        key = f"check-shop-{uuid.uuid4()}"
        path = f"{q_order}/refunds"
        body = {"amount": "0.01", "reason": "check_shop: a conformance check"}
        first = contract.refund(contract.envelope(shop.answer(
            shop.send("POST", path, body, idempotency_key=key), 201), "refund"))
        if first.amount != Decimal("0.01"):
            raise Failed(f"asked to refund 0.01, the shop says it refunded {first.amount}")
        again = contract.refund(contract.envelope(shop.answer(
            shop.send("POST", path, body, idempotency_key=key), 200), "refund"))
        if (again.id, again.reference) != (first.id, first.reference):
            raise Failed("the same Idempotency-Key again made a second refund instead of answering with the first")
        found["refund"] = (key, first)

    def refund_by_key() -> None:
        key, made = _needs(found, "refund")
        looked_up = contract.refund(contract.envelope(shop.answer(
            shop.send("GET", f"/refunds?idempotency_key={quote(key, safe='')}")), "refund"))
        if looked_up.id != made.id:
            raise Failed("the look-up by key answered with another refund than the one made under the key")
        _expect_error(shop.send("GET", f"/refunds?idempotency_key=check-shop-none-{uuid.uuid4()}"), 404, "not_found")

    def bad_amount() -> None:
        answer = shop.send("POST", f"{q_order}/refunds", {"amount": "0.001", "reason": "check_shop"},
                           idempotency_key=f"check-shop-{uuid.uuid4()}")
        _expect_error(answer, 422, "invalid")

    def message_once() -> None:
        key, path = f"check-shop-{uuid.uuid4()}", f"{q_order}/seller-messages"
        body = {"message": "check_shop: a conformance check of the desk's connection; no answer is needed."}
        if not _needs(found, "order").seller.is_marketplace:
            # The shop ships this order itself: there is no seller, and the contract says 422.
            _expect_error(shop.send("POST", path, body, idempotency_key=key), 422, "invalid")
            return
        first = contract.seller_message(contract.envelope(shop.answer(
            shop.send("POST", path, body, idempotency_key=key), 201), "message"))
        again = contract.seller_message(contract.envelope(shop.answer(
            shop.send("POST", path, body, idempotency_key=key), 200), "message"))
        if again.id != first.id:
            raise Failed("the same Idempotency-Key again sent a second message instead of answering with the first")

    checks: list[tuple[str, Callable[[], None]]] = [
        ("a request without a signature is refused (401 bad_signature)", refused("bad_signature", signed=False)),
        ("a request signed with a wrong key is refused (401 bad_signature)",
         refused("bad_signature", key=key + "-wrong")),
        ("a timestamp an hour old is refused (401 stale_timestamp)", refused("stale_timestamp", age=3600)),
        ("a bad signature is reported before a stale timestamp",
         refused("bad_signature", key=key + "-wrong", age=3600)),
        ("a request sent again with the same nonce is refused (401 replayed)", replayed),
        ("a v2 signature without the Idempotency-Key in it is refused (401 bad_signature)",
         key_signed(signed_key="")),
        ("a request whose Idempotency-Key was changed after signing is refused (401 bad_signature)",
         key_signed(signed_key=f"check-shop-{uuid.uuid4()}")),
        (f"the customer {email} is found, as the contract shapes it", customer),
        ("the e-mail look-up ignores case", any_case),
        ("an unknown e-mail is 404 not_found",
         lambda: _expect_error(shop.send("GET", f"/customers?email=check-shop-{uuid.uuid4().hex}%40example.invalid"),
                               404, "not_found")),
        ("the customer's orders are as the contract shapes them, and only theirs", orders),
        ("the customer's orders come newest first", newest_first),
        (f"the order {order_number} is as the contract shapes it", order),
        ("an unknown order is 404 not_found",
         lambda: _expect_error(shop.send("GET", f"/orders/check-shop-{uuid.uuid4().hex}"), 404, "not_found")),
    ]
    if write:
        checks += [
            ("a refund of 0.01 is made once per Idempotency-Key", refund_once),
            ("the refund is found by its key (and an unknown key is 404)", refund_by_key),
            ("an amount with three decimals is refused (422 invalid)", bad_amount),
            ("a seller message is sent once per Idempotency-Key (422 when the shop ships the order itself)",
             message_once),
        ]
    results: list[Check] = []
    try:
        for name, check in checks:
            if stop_on_timeout and any(r.problem == NO_ANSWER for r in results):
                results.append(Check(name, False, "not tried: the shop did not answer an earlier check in time"))
                continue
            results.append(_run(name, check))
        return results
    finally:
        shop.client.close()


def _run(name: str, check: Callable[[], None]) -> Check:
    try:
        check()
    except (Failed, port.BadAnswer) as e:
        return Check(name, False, str(e))
    except httpx2.TimeoutException:
        return Check(name, False, NO_ANSWER)
    except httpx2.TransportError as e:
        return Check(name, False, f"could not reach the shop ({type(e).__name__})")
    return Check(name, True)


def _expect_error(response: httpx2.Response, status: int, code: str) -> None:
    if response.status_code != status:
        raise Failed(f'expected {status} {{"error": "{code}"}}, got {_said(response)}')
    said = contract.decode(response.content, status).get("error")
    if said != code:
        raise Failed(f'expected {status} {{"error": "{code}"}}, got {status} with error {contract.quoted(said)}')


def _needs(found: dict, what: str):
    if what not in found:
        raise Failed(f"not checked: the check that finds the {what} failed")
    return found[what]


def _said(response: httpx2.Response) -> str:
    return f"{response.status_code} {contract.shown(response.text[:120])}".strip()
