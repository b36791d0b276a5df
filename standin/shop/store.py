"""The reference shop's storage: SQLite (a file survives a restart, else in memory), seeded from the Sundry
catalogue with its times counted back from now. Answers are the contract's JSON shapes, as plain dicts.

One lock guards the connection inside this process; a write runs in BEGIN IMMEDIATE, so the balance a refund
checks is the one it writes against even with another process on the same file.
"""

from __future__ import annotations

import secrets
import sqlite3
import threading
import uuid
from datetime import UTC, datetime, timedelta

import sundry

SCHEMA = """
CREATE TABLE IF NOT EXISTS customers (id TEXT PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL, pos INTEGER);
CREATE TABLE IF NOT EXISTS sellers (id TEXT PRIMARY KEY, name TEXT NOT NULL, is_marketplace INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS orders (number TEXT PRIMARY KEY, customer_id TEXT NOT NULL, seller_id TEXT NOT NULL,
    status TEXT NOT NULL, placed_at TEXT NOT NULL, currency TEXT NOT NULL, shipping_fee INTEGER NOT NULL,
    note TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS items (order_number TEXT NOT NULL, pos INTEGER NOT NULL, sku TEXT NOT NULL,
    title TEXT NOT NULL, qty INTEGER NOT NULL, unit_price INTEGER NOT NULL, seller_description TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS parcels (order_number TEXT NOT NULL, tracking TEXT PRIMARY KEY, carrier TEXT NOT NULL,
    status TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS scans (tracking TEXT NOT NULL, pos INTEGER NOT NULL, at TEXT NOT NULL,
    event TEXT NOT NULL, detail TEXT NOT NULL, location TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS refunds (id TEXT PRIMARY KEY, reference TEXT NOT NULL UNIQUE, order_number TEXT NOT NULL,
    amount INTEGER NOT NULL CHECK (amount > 0), reason TEXT NOT NULL, created_at TEXT NOT NULL,
    idempotency_key TEXT UNIQUE);
CREATE TABLE IF NOT EXISTS seller_messages (id TEXT PRIMARY KEY, order_number TEXT NOT NULL, body TEXT NOT NULL,
    created_at TEXT NOT NULL, idempotency_key TEXT UNIQUE);
"""
TABLES = ("customers", "sellers", "orders", "items", "parcels", "scans", "refunds", "seller_messages")
# References a customer reads out: no 0/O, 1/I/L or U/V look-alikes.
REFERENCE_ALPHABET = "23456789ABCDEFGHJKMNPQRSTWXYZ"


class NoSuchOrder(Exception):
    pass


class OverRefundable(Exception):
    def __init__(self, refundable: int):
        super().__init__(refundable)
        self.refundable = refundable  # cents


class ShippedByShop(Exception):
    """A seller message on an order the shop fulfils itself: there is no seller to write to."""


class Store:
    """single_brand: the name of a single-brand store this one is instead (every order fulfilled by the shop
    itself, under that name; no sellers); None: the Sundry marketplace."""

    def __init__(self, path: str | None = None, single_brand: str | None = None):
        self.single_brand = single_brand
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path or ":memory:", check_same_thread=False, isolation_level=None, timeout=10)
        self._db.row_factory = sqlite3.Row
        with self._lock:
            self._db.executescript(SCHEMA)
            seeded = self._db.execute("SELECT count(*) FROM orders").fetchone()[0]
        if not seeded:
            self.seed()

    def seed(self) -> None:
        """The catalogue afresh, its times counted back from now; no refund or message made since is kept."""
        now = datetime.now(UTC)

        def ago(hours: int) -> str:
            return iso(now - timedelta(hours=hours))

        with self._lock, self._transaction():
            for table in TABLES:
                self._db.execute(f"DELETE FROM {table}")
            ids = {}
            for pos, (name, email) in enumerate(sundry.CUSTOMERS, start=1):
                ids[email] = f"cus_{pos}"
                self._db.execute("INSERT INTO customers VALUES (?, ?, ?, ?)", (ids[email], name, email, pos))
            sellers = [("shop", self.single_brand, True)] if self.single_brand else sundry.SELLERS
            for code, name, is_shop in sellers:
                self._db.execute("INSERT INTO sellers VALUES (?, ?, ?)", (code, name, int(not is_shop)))
            for order in sundry.ORDERS:
                self._seed_order(order, ids[order.customer], ago)

    def _seed_order(self, order: sundry.DemoOrder, customer_id: str, ago) -> None:
        self._db.execute("INSERT INTO orders VALUES (?, ?, ?, ?, ?, 'EUR', ?, '')",
                         (order.number, customer_id, "shop" if self.single_brand else order.seller, order.status,
                          ago(order.placed), cents(order.shipping_fee)))
        for pos, (sku, title, qty, price, description) in enumerate(order.items):
            self._db.execute("INSERT INTO items VALUES (?, ?, ?, ?, ?, ?, ?)",
                             (order.number, pos, sku, title, qty, cents(price), description))
        parcel = order.parcel
        self._db.execute("INSERT INTO parcels VALUES (?, ?, ?, ?)",
                         (order.number, parcel.tracking, parcel.carrier, parcel.status))
        for pos, (hours, event, detail, location) in enumerate(parcel.scans()):
            self._db.execute("INSERT INTO scans VALUES (?, ?, ?, ?, ?, ?)",
                             (parcel.tracking, pos, ago(hours), event, detail, location))
        for amount, reason, hours in order.refunds:
            self._db.execute("INSERT INTO refunds VALUES (?, ?, ?, ?, ?, ?, NULL)",
                             (new_id("rf"), new_reference(), order.number, cents(amount), reason, ago(hours)))

    def time_passes(self, hours: float) -> None:
        """As if `hours` went by: every time the shop holds moves that far into the past (an evaluation's
        customer who comes back two days later finds the parcel's scans two days older)."""
        back = timedelta(hours=hours)
        moved = (("orders", "number", "placed_at"), ("scans", "rowid", "at"), ("refunds", "id", "created_at"),
                 ("seller_messages", "id", "created_at"))
        with self._lock, self._transaction():
            for table, key, column in moved:
                for row in self._db.execute(f"SELECT {key}, {column} FROM {table}").fetchall():
                    earlier = iso(datetime.fromisoformat(row[1].replace("Z", "+00:00")) - back)
                    self._db.execute(f"UPDATE {table} SET {column} = ? WHERE {key} = ?", (earlier, row[0]))

    # -- reads ------------------------------------------------------------------------------------------

    def policies(self) -> list[dict]:
        """GET /policies: the catalogue's shop-wide policies (sellers' supplements are the marketplace's own)."""
        return [{"id": doc_id, "title": title, "body": body}
                for doc_id, seller, title, body in sundry.POLICIES if seller is None]

    def customer_by_email(self, email: str) -> dict | None:
        with self._lock:
            row = self._db.execute("SELECT id, name, email FROM customers WHERE lower(email) = lower(?) "
                                   "ORDER BY pos LIMIT 1", (email,)).fetchone()
        return dict(row) if row is not None else None

    def orders_of(self, customer_id: str) -> list[dict] | None:
        """Newest first; None when there is no such customer."""
        with self._lock:
            if self._db.execute("SELECT 1 FROM customers WHERE id = ?", (customer_id,)).fetchone() is None:
                return None
            numbers = [r[0] for r in self._db.execute(
                "SELECT number FROM orders WHERE customer_id = ? ORDER BY placed_at DESC, number DESC",
                (customer_id,))]
            return [self._order(n) for n in numbers]

    def order(self, number: str) -> dict | None:
        with self._lock:
            return self._order(number)

    def refund_by_key(self, key: str) -> dict | None:
        with self._lock:
            return self._refund_by_key(key)

    def seller_message_by_key(self, key: str) -> dict | None:
        with self._lock:
            return self._message_by_key(key)

    def refunds(self) -> list[dict]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM refunds ORDER BY created_at, rowid").fetchall()
        return [{**_refund(r), "idempotency_key": r["idempotency_key"], "reason": r["reason"]} for r in rows]

    def seller_messages(self) -> list[dict]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM seller_messages ORDER BY created_at, rowid").fetchall()
        return [dict(r) for r in rows]

    # -- writes -----------------------------------------------------------------------------------------

    def refund(self, number: str, amount: int, reason: str, key: str) -> tuple[dict, bool]:
        """(the refund, whether it is new): the one under `key` when there is one, else a new one if the
        balance allows. The look-up, the balance and the insert are one transaction."""
        with self._lock, self._transaction():
            if (earlier := self._refund_by_key(key)) is not None:
                return earlier, False
            if self._db.execute("SELECT 1 FROM orders WHERE number = ?", (number,)).fetchone() is None:
                raise NoSuchOrder(number)
            left = self._refundable(number)
            if amount > left:
                raise OverRefundable(left)
            refund_id = new_id("rf")
            self._db.execute("INSERT INTO refunds VALUES (?, ?, ?, ?, ?, ?, ?)",
                             (refund_id, new_reference(), number, amount, reason, now_iso(), key))
            return self._refund_by_key(key), True

    def message_seller(self, number: str, body: str, key: str) -> tuple[dict, bool]:
        with self._lock, self._transaction():
            if (earlier := self._message_by_key(key)) is not None:
                return earlier, False
            row = self._db.execute("SELECT s.is_marketplace FROM orders o JOIN sellers s ON s.id = o.seller_id "
                                   "WHERE o.number = ?", (number,)).fetchone()
            if row is None:
                raise NoSuchOrder(number)
            if not row[0]:
                raise ShippedByShop(number)
            self._db.execute("INSERT INTO seller_messages VALUES (?, ?, ?, ?, ?)",
                             (new_id("msg"), number, body, now_iso(), key))
            return self._message_by_key(key), True

    # -- under the lock ---------------------------------------------------------------------------------

    def _transaction(self):
        return _Immediate(self._db)

    def _order(self, number: str) -> dict | None:
        db = self._db
        row = db.execute("SELECT o.*, s.name AS seller_name, s.is_marketplace FROM orders o "
                         "JOIN sellers s ON s.id = o.seller_id WHERE o.number = ?", (number,)).fetchone()
        if row is None:
            return None
        items = db.execute("SELECT * FROM items WHERE order_number = ? ORDER BY pos", (number,)).fetchall()
        refunds = db.execute("SELECT * FROM refunds WHERE order_number = ? ORDER BY created_at, rowid",
                             (number,)).fetchall()
        parcels = db.execute("SELECT * FROM parcels WHERE order_number = ? ORDER BY rowid", (number,)).fetchall()
        total = row["shipping_fee"] + sum(i["qty"] * i["unit_price"] for i in items)
        refunded = sum(r["amount"] for r in refunds)
        return {
            "number": row["number"], "customer_id": row["customer_id"], "status": row["status"],
            "placed_at": row["placed_at"], "currency": row["currency"],
            "seller": {"id": row["seller_id"], "name": row["seller_name"],
                       "is_marketplace": bool(row["is_marketplace"])},
            "items": [{"sku": i["sku"], "title": i["title"], "qty": i["qty"], "unit_price": money(i["unit_price"]),
                       "seller_description": i["seller_description"]} for i in items],
            "shipping_fee": money(row["shipping_fee"]), "total": money(total), "refunded": money(refunded),
            "refundable": money(total - refunded), "note": row["note"],
            "parcels": [{"tracking": p["tracking"], "carrier": p["carrier"], "status": p["status"],
                         "scans": [{"at": s["at"], "event": s["event"], "detail": s["detail"],
                                    "location": s["location"]} for s in db.execute(
                             "SELECT * FROM scans WHERE tracking = ? ORDER BY at, pos", (p["tracking"],))]}
                        for p in parcels],
            "refunds": [{**_refund(r), "reason": r["reason"], "idempotency_key": r["idempotency_key"]}
                        for r in refunds],
        }

    def _refundable(self, number: str) -> int:
        fee = self._db.execute("SELECT shipping_fee FROM orders WHERE number = ?", (number,)).fetchone()[0]
        items = self._db.execute("SELECT coalesce(sum(qty * unit_price), 0) FROM items WHERE order_number = ?",
                                 (number,)).fetchone()[0]
        refunded = self._db.execute("SELECT coalesce(sum(amount), 0) FROM refunds WHERE order_number = ?",
                                    (number,)).fetchone()[0]
        return fee + items - refunded

    def _refund_by_key(self, key: str) -> dict | None:
        row = self._db.execute("SELECT * FROM refunds WHERE idempotency_key = ?", (key,)).fetchone()
        return _refund(row) if row is not None else None

    def _message_by_key(self, key: str) -> dict | None:
        row = self._db.execute("SELECT id, order_number FROM seller_messages WHERE idempotency_key = ?",
                               (key,)).fetchone()
        return dict(row) if row is not None else None


class _Immediate:
    """BEGIN IMMEDIATE ... COMMIT (ROLLBACK on an error): the write lock is taken before the first read."""

    def __init__(self, db: sqlite3.Connection):
        self._db = db

    def __enter__(self):
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind, error, trace):
        self._db.execute("COMMIT" if kind is None else "ROLLBACK")
        return False


def _refund(row: sqlite3.Row) -> dict:
    return {"id": row["id"], "reference": row["reference"], "amount": money(row["amount"]),
            "created_at": row["created_at"], "order_number": row["order_number"]}


def cents(text: str) -> int:
    whole, _, fraction = text.partition(".")
    return int(whole) * 100 + int((fraction + "00")[:2])


def money(amount: int) -> str:
    return f"{amount // 100}.{amount % 100:02d}"


def iso(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_iso() -> str:
    return iso(datetime.now(UTC))


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def new_reference() -> str:
    return "RF-" + "".join(secrets.choice(REFERENCE_ALPHABET) for _ in range(5))
