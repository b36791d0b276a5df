"""The shop contract's wire forms (docs/shop-contract.md): how a request is signed (version 2 by default), and each answer read
strictly into the port's values. No HTTP here: http.py sends, check_shop probes, both read through this.

Anything not as the contract says raises port.BadAnswer naming the field and what was wrong with it; fields
the contract does not know are ignored. Shop text in an error is cut short: it ends up in a trace.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import re
import secrets
from datetime import datetime
from decimal import Decimal
from typing import Any

from support.shop import port

ORDER_STATUSES = ("placed", "shipped", "in_transit", "delivered", "cancelled")
MAX_KEY_LENGTH = 255
_MONEY = re.compile(r"^[0-9]+\.[0-9]{2}$")
_SHOWN = 200  # characters of the shop's own text an error may quote


def signature(key: str, timestamp: str, method: str, path_and_query: str, body: bytes) -> str:
    """Version 1: `v1=` + hex HMAC-SHA256 over `timestamp.METHOD.path_and_query.body`; path_and_query exactly as
    sent. It signs neither the Idempotency-Key nor anything used once: a captured request can be sent again."""
    message = f"{timestamp}.{method.upper()}.{path_and_query}.".encode() + body
    return "v1=" + hmac.new(key.encode(), message, hashlib.sha256).hexdigest()


def signature_v2(key: str, timestamp: str, nonce: str, method: str, path_and_query: str, idempotency_key: str,
                 body: bytes) -> str:
    """Version 2: `v2=` + hex HMAC-SHA256 over `timestamp.nonce.METHOD.path_and_query.idempotency_key.body`,
    the key as the header carries it ("" without one). The shop takes each nonce once."""
    message = f"{timestamp}.{nonce}.{method.upper()}.{path_and_query}.{idempotency_key}.".encode() + body
    return "v2=" + hmac.new(key.encode(), message, hashlib.sha256).hexdigest()


def new_nonce() -> str:
    """32 characters of [A-Za-z0-9_-], new for every request (a retry included)."""
    return secrets.token_urlsafe(24)


def signed_headers(key: str, *, version: int, timestamp: str, method: str, path_and_query: str, body: bytes,
                   idempotency_key: str | None) -> dict[str, str]:
    """The headers that sign one request in the contract's `version`: a fresh nonce each call."""
    if version == 1:
        return {"X-Desk-Timestamp": timestamp,
                "X-Desk-Signature": signature(key, timestamp, method, path_and_query, body)}
    nonce = new_nonce()
    return {"X-Desk-Timestamp": timestamp, "X-Desk-Nonce": nonce,
            "X-Desk-Signature": signature_v2(key, timestamp, nonce, method, path_and_query, idempotency_key or "",
                                             body)}


def wire_key(key: str) -> str:
    """An idempotency key as the shop takes it: a longer one than the contract allows becomes a stable hash
    of itself, so the same key always reaches the shop as the same text."""
    if len(key) <= MAX_KEY_LENGTH:
        return key
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def shown(text: Any) -> str:
    text = str(text)
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "…"


def quoted(value: Any) -> str:
    """A value from an answer as an error quotes it: Python's repr (so "1" and 1 differ), cut short."""
    return shown(repr(value))


# -- the answers ------------------------------------------------------------------------------------------

def decode(content: bytes, status: int) -> dict:
    """An answer's body as the JSON object the contract says every body is."""
    try:
        data = json.loads(content)
    except ValueError:
        text = content.decode("utf-8", "replace")
        raise port.BadAnswer(f"the answer ({status}) is not JSON: {quoted(text)}") from None
    if not isinstance(data, dict):
        raise port.BadAnswer(f"the answer ({status}) is not a JSON object")
    return data


def envelope(data: Any, name: str) -> dict:
    """The object under `name` in an answer such as {"order": {...}}."""
    return _object(_object(data, "the answer").get(name), name)


def customer(data: Any, where: str = "customer") -> port.ShopCustomer:
    obj = _object(data, where)
    return port.ShopCustomer(id=_id(obj, "id", where), name=_text(obj, "name", where),
                             email=_text(obj, "email", where))


def orders(data: Any) -> list[port.Order]:
    items = _list(_object(data, "the answer"), "orders", "the answer")
    return [order(o, f"orders[{i}]") for i, o in enumerate(items)]


def order(data: Any, where: str = "order") -> port.Order:
    obj = _object(data, where)
    number = _id(obj, "number", where)
    status = _text(obj, "status", where)
    if status not in ORDER_STATUSES:
        raise port.BadAnswer(f"{where}.status: {quoted(status)} is not one of {', '.join(ORDER_STATUSES)}")
    seller_where = f"{where}.seller"
    seller = _object(obj.get("seller"), seller_where)
    return port.Order(
        number=number, customer_id=_id(obj, "customer_id", where), status=status,
        placed_at=_time(obj, "placed_at", where), currency=_text(obj, "currency", where),
        seller=port.Seller(id=_id(seller, "id", seller_where), name=_text(seller, "name", seller_where),
                           is_marketplace=_bool(seller, "is_marketplace", seller_where)),
        items=tuple(_item(x, f"{where}.items[{i}]") for i, x in enumerate(_list(obj, "items", where))),
        shipping_fee=_money(obj, "shipping_fee", where), total=_money(obj, "total", where),
        refunded=_money(obj, "refunded", where), refundable=_money(obj, "refundable", where),
        note=_text(obj, "note", where),
        parcels=tuple(_parcel(x, f"{where}.parcels[{i}]") for i, x in enumerate(_list(obj, "parcels", where))),
        # An extension: a shop that does not list an order's refunds sends none.
        refunds=tuple(_refund_record(x, f"{where}.refunds[{i}]", number)
                      for i, x in enumerate(_list(obj, "refunds", where, optional=True))),
    )


def refund(data: Any, order_number: str = "", where: str = "refund") -> port.RefundResult:
    obj = _object(data, where)
    said = _text(obj, "order_number", where, optional=True)  # an extension: the contract does not require it
    return port.RefundResult(id=_id(obj, "id", where), reference=_text(obj, "reference", where),
                             amount=_money(obj, "amount", where), created_at=_time(obj, "created_at", where),
                             order_number=said or order_number)


def seller_message(data: Any, order_number: str = "", where: str = "message") -> port.SellerMessageResult:
    obj = _object(data, where)
    said = _text(obj, "order_number", where, optional=True)
    return port.SellerMessageResult(id=_id(obj, "id", where), order_number=said or order_number)


def capabilities(data: Any, where: str = "capabilities") -> port.Capabilities:
    """What a shop says it has. A field it leaves out takes the single-brand default; one that is there must
    be true or false."""
    obj = _object(data, where)
    said = {f.name: _bool(obj, f.name, where) for f in dataclasses.fields(port.Capabilities) if f.name in obj}
    return port.Capabilities(**said)


MAX_POLICIES = 100  # the most policies one answer may list


def policies(data: Any) -> list[port.ShopPolicy]:
    """GET /policies: {"policies": [{"id", "title", "body"}, ...]}, the body Markdown or plain text."""
    items = _list(_object(data, "the answer"), "policies", "the answer")
    if len(items) > MAX_POLICIES:
        raise port.BadAnswer(f"the answer lists {len(items)} policies; at most {MAX_POLICIES} are read")
    return [_policy(item, f"policies[{i}]") for i, item in enumerate(items)]


def _policy(data: Any, where: str) -> port.ShopPolicy:
    obj = _object(data, where)
    return port.ShopPolicy(id=_id(obj, "id", where), title=_text(obj, "title", where), body=_text(obj, "body", where))


def money(value: Any, where: str) -> Decimal:
    if not isinstance(value, str) or not _MONEY.match(value):
        raise port.BadAnswer(f"{where}: {quoted(value)} is not money (a string such as \"12.50\", never negative)")
    return Decimal(value)


def _item(data: Any, where: str) -> port.Item:
    obj = _object(data, where)
    qty = obj.get("qty")
    if not isinstance(qty, int) or isinstance(qty, bool) or qty < 0:
        raise port.BadAnswer(f"{where}.qty: {quoted(qty)} is not a whole number of items")
    return port.Item(sku=_text(obj, "sku", where), title=_text(obj, "title", where), qty=qty,
                     unit_price=_money(obj, "unit_price", where),
                     seller_description=_text(obj, "seller_description", where, optional=True))


def _parcel(data: Any, where: str) -> port.Parcel:
    obj = _object(data, where)
    scans = []
    for i, x in enumerate(_list(obj, "scans", where)):
        scan_where = f"{where}.scans[{i}]"
        s = _object(x, scan_where)
        scans.append(port.Scan(at=_time(s, "at", scan_where), event=_text(s, "event", scan_where),
                               detail=_text(s, "detail", scan_where), location=_text(s, "location", scan_where)))
    return port.Parcel(tracking=_text(obj, "tracking", where), carrier=_text(obj, "carrier", where),
                       status=_text(obj, "status", where), scans=tuple(scans))


def _refund_record(data: Any, where: str, order_number: str) -> port.RefundRecord:
    obj = _object(data, where)
    return port.RefundRecord(id=_id(obj, "id", where), reference=_text(obj, "reference", where),
                             amount=_money(obj, "amount", where), reason=_text(obj, "reason", where),
                             created_at=_time(obj, "created_at", where), order_number=order_number,
                             idempotency_key=_text(obj, "idempotency_key", where, optional=True) or None)


# -- fields -----------------------------------------------------------------------------------------------

def _object(value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        raise port.BadAnswer(f"{where}: missing, or not an object")
    return value


def _present(obj: dict, name: str, where: str) -> Any:
    if name not in obj:
        raise port.BadAnswer(f"{where}.{name}: missing")
    return obj[name]


def _text(obj: dict, name: str, where: str, optional: bool = False) -> str:
    if optional and obj.get(name) is None:
        return ""
    value = _present(obj, name, where)
    if not isinstance(value, str):
        raise port.BadAnswer(f"{where}.{name}: {quoted(value)} is not a string")
    return value


def _id(obj: dict, name: str, where: str) -> str:
    value = _text(obj, name, where)
    if not value.strip():
        raise port.BadAnswer(f"{where}.{name}: empty")
    return value


def _bool(obj: dict, name: str, where: str) -> bool:
    value = _present(obj, name, where)
    if not isinstance(value, bool):
        raise port.BadAnswer(f"{where}.{name}: {quoted(value)} is not true or false")
    return value


def _money(obj: dict, name: str, where: str) -> Decimal:
    return money(_present(obj, name, where), f"{where}.{name}")


def _time(obj: dict, name: str, where: str) -> datetime:
    value = _present(obj, name, where)
    try:
        at = datetime.fromisoformat(value) if isinstance(value, str) and "T" in value else None
    except ValueError:
        at = None
    if at is None or at.tzinfo is None:
        raise port.BadAnswer(f"{where}.{name}: {quoted(value)} is not an ISO 8601 time with an offset")
    return at


def _list(obj: dict, name: str, where: str, optional: bool = False) -> list:
    if optional and obj.get(name) is None:
        return []
    value = _present(obj, name, where)
    if not isinstance(value, list):
        raise port.BadAnswer(f"{where}.{name}: not a list")
    return value
