"""The facts a scenario reasons with, read from tool results: an order, a carrier scan, a policy rule.

Each reader is forgiving (a missing field is None, never an exception) because tool results are data
the stand-in does not control. Seller descriptions are never read: they are data, not instructions.
"""

from __future__ import annotations

import re
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

SENTENCE = re.compile(r"(?<=[.;!?])\s+|\n+")
MONEY = re.compile(r"\b(\d{1,7}\.\d{2})\b")
CEILING_WORDS = ("ceiling", "limit", "up to", "above", "maximum", "at most", "more than")  # "may not refund more than"


def money(value: Any) -> Decimal | None:
    try:
        amount = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None
    return amount if amount.is_finite() else None


def fmt(amount: Decimal) -> str:
    """Money as the tools want it: "64.00"."""
    return f"{amount:.2f}"


# The customer's time zone, when the desk told it ("The customer's time zone is Europe/Berlin: ..."); set for
# each request (standin/app.py), so times are written in the customer's own clock, as a model would.
CUSTOMER_ZONE: ContextVar[ZoneInfo | None] = ContextVar("customer_zone", default=None)
ZONE_LINE = re.compile(r"customer's time zone is ([A-Za-z0-9_+\-]+(?:/[A-Za-z0-9_+\-]+)*)")


def zone_in(messages: list) -> ZoneInfo | None:
    for m in messages:
        if isinstance(m, dict) and m.get("role") == "system" and isinstance(m.get("content"), str):
            found = ZONE_LINE.search(m["content"])
            if found:
                try:
                    return ZoneInfo(found.group(1))
                except (ValueError, ZoneInfoNotFoundError):
                    return None
    return None


def when(iso: Any) -> str:
    try:
        at = datetime.fromisoformat(str(iso).replace("Z", "+00:00"))
    except ValueError:
        return str(iso)
    zone = CUSTOMER_ZONE.get()
    if zone is None or at.tzinfo is None:
        return at.strftime("%a %d %b at %H:%M UTC")
    return at.astimezone(zone).strftime("%a %d %b at %H:%M") + " your time"


def ago(hours: int) -> str:
    if hours < 48:
        return f"{hours} hour{'s' if hours != 1 else ''} ago"
    return f"{hours // 24} days ago ({hours} hours)"


def plain(value) -> str:
    """A tool result's text, marked as a third party's ({"untrusted_text_from": ..., "text": ...}) or not."""
    if isinstance(value, dict) and "untrusted_text_from" in value:
        value = value.get("text")
    return str(value or "")


class Order:
    """A get_order result."""

    def __init__(self, data: dict):
        self.data = data
        self.id = str(data.get("order_id") or "")
        self.status = str(data.get("status") or "")
        seller = data.get("fulfilled_by") if isinstance(data.get("fulfilled_by"), dict) else {}
        self.marketplace = seller.get("type") == "marketplace_seller"
        self.seller_id = seller.get("seller_id") or ""
        self.seller_name = plain(seller.get("name")) or "the seller"
        self.items = [i for i in data.get("items") or [] if isinstance(i, dict)]
        self.parcels = [p for p in data.get("parcels") or [] if isinstance(p, dict) and p.get("tracking")]
        self.total = money(data.get("total")) or Decimal("0")
        self.refunded = money(data.get("refunded")) or Decimal("0")
        refundable = money(data.get("refundable"))
        self.refundable = refundable if refundable is not None else self.total - self.refunded

    @property
    def titles(self) -> str:
        names = [plain(i.get("title")) for i in self.items if plain(i.get("title")) and not _is_shipping(i)]
        return ", ".join(names) or "your items"

    def parcel(self, prefer_delivered: bool) -> dict | None:
        for p in self.parcels:
            if (p.get("status") == "delivered") == prefer_delivered:
                return p
        return self.parcels[0] if self.parcels else None

    def shipping_fee(self) -> Decimal | None:
        """The contract names no shipping field, so look where a shop would put it, most explicit first."""
        for key in ("shipping_fee", "shipping"):
            fee = money(self.data.get(key))
            if fee:
                return fee
        for item in self.items:
            if _is_shipping(item):
                return (money(item.get("unit_price")) or Decimal("0")) * int(item.get("qty") or 1)
        found = re.search(r"shipping[^0-9]{0,40}(\d+\.\d{2})", plain(self.data.get("note")), re.I)
        if found:
            return Decimal(found.group(1))
        goods = sum(((money(i.get("unit_price")) or Decimal("0")) * int(i.get("qty") or 1) for i in self.items),
                    Decimal("0"))
        return self.total - goods if self.items and self.total > goods else None


def _is_shipping(item: dict) -> bool:
    return "shipping" in f"{item.get('sku', '')} {plain(item.get('title'))}".lower()


@dataclass(frozen=True)
class Scan:
    """A track_parcel result: the carrier's latest word on a parcel."""

    tracking: str
    carrier: str
    status: str
    event: str
    detail: str
    location: str
    at: str
    hours: int

    @classmethod
    def of(cls, data: dict) -> "Scan":
        last = data.get("last_scan") if isinstance(data.get("last_scan"), dict) else {}
        try:
            hours = int(data.get("hours_since_last_scan") or 0)
        except (TypeError, ValueError):
            hours = 0
        return cls(str(data.get("tracking") or ""), str(data.get("carrier") or "The carrier"),
                   str(data.get("status") or ""), str(last.get("event") or ""), plain(last.get("detail")),
                   plain(last.get("location")), str(last.get("at") or ""), hours)

    @property
    def weather(self) -> bool:
        return "weather" in f"{self.event} {self.detail}".lower()

    @property
    def said(self) -> str:
        return self.detail or self.event or self.status


@dataclass(frozen=True)
class Rule:
    """A number found in a policy document, and the document it came from."""

    n: int
    title: str
    by_seller: bool


def rule(docs: list[dict], unit: str, near: tuple[str, ...], seller_id: str = "") -> Rule | None:
    """The first "<n> <unit>" in a sentence mentioning one of `near`; a seller's supplement wins."""
    number = re.compile(rf"(\d+)[\s-]*{unit}", re.IGNORECASE)
    own = [d for d in docs if d.get("scope") == "seller" and d.get("seller_id") in (None, "", seller_id)]
    for doc in own + [d for d in docs if d.get("scope") != "seller"]:
        for sentence in SENTENCE.split(str(doc.get("excerpt") or "")):
            found = number.search(sentence)
            if found and any(w in sentence.lower() for w in near):
                return Rule(int(found.group(1)), str(doc.get("title") or ""), doc.get("scope") == "seller")
    return None


# A shop's rule such as "Offer store credit before a refund under 10 EUR" (its guidance, in the system messages).
CREDIT_FIRST = re.compile(r"store credit\b.*\brefunds?\b.*\b(?:under|below|less than)\s+(?:EUR\s*|€\s*)?"
                          r"(\d{1,7}(?:\.\d{1,2})?)", re.IGNORECASE)


def credit_first_below(system: str) -> Decimal | None:
    """The amount under which the shop's rules say to offer store credit before a refund, when they say so."""
    for sentence in SENTENCE.split(system):
        found = CREDIT_FIRST.search(sentence)
        if found:
            return Decimal(found.group(1))
    return None


def ceiling(texts: list[str]) -> Decimal | None:
    """The refund ceiling an agent may issue, when a policy or the system prompt states it."""
    for text in texts:
        for sentence in SENTENCE.split(text):
            lowered = sentence.lower()
            if "refund" in lowered and any(w in lowered for w in CEILING_WORDS):
                found = MONEY.search(sentence)
                if found:
                    return Decimal(found.group(1))
    return None
