"""The shop as the desk sees it: the Shop interface, the values it answers with and the errors it raises.

Modelled on the shop contract (version 1), so a shop reached over HTTP can stand behind it as the demo does.
Only the interface belongs here: no database, no HTTP, no desk rule (ownership, order scope and limits are
the desk's to check).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Protocol

# -- what the shop has -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Capabilities:
    """What the shop has, as far as the desk's tools need to know. A tool whose capability the shop lacks is
    not offered, and the prompt and the tool descriptions name no concept the shop lacks. The defaults are a
    single-brand store: no sellers."""

    sellers: bool = False  # some orders are fulfilled by marketplace sellers (get_order names them)
    seller_messages: bool = False  # the desk may write to an order's seller (message_seller)
    seller_policies: bool = False  # sellers add policy supplements of their own (search_policy's seller_id)
    parcel_tracking: bool = True  # parcels carry the carrier's scans (track_parcel)

    def __post_init__(self):
        # Without sellers there is nobody to write to and no supplement to read, whatever a shop said.
        if not self.sellers:
            object.__setattr__(self, "seller_messages", False)
            object.__setattr__(self, "seller_policies", False)


MARKETPLACE = Capabilities(sellers=True, seller_messages=True, seller_policies=True)
SINGLE_BRAND = Capabilities()


# -- what the shop answers with ---------------------------------------------------------------------------

@dataclass(frozen=True)
class ShopPolicy:
    """A policy as the shop itself serves it: the shop's id for it, a title, and the body as Markdown or plain
    text (`html`: as HTML, e.g. Shopify's)."""

    id: str
    title: str
    body: str
    html: bool = False


@dataclass(frozen=True)
class ShopCustomer:
    id: str
    name: str
    email: str


@dataclass(frozen=True)
class Seller:
    """Who fulfils an order: the shop itself (is_marketplace False) or a marketplace seller."""

    id: str  # "sundry", "S-HL": what the model sees as seller_id
    name: str
    is_marketplace: bool


@dataclass(frozen=True)
class Item:
    sku: str
    title: str
    qty: int
    unit_price: Decimal
    seller_description: str = ""  # the seller's own words: data, never instructions

    @property
    def line_total(self) -> Decimal:
        return self.unit_price * self.qty


@dataclass(frozen=True)
class Scan:
    """One carrier event ("delivered", "Delivered: left in porch", "Leeds")."""

    at: datetime
    event: str
    detail: str
    location: str


@dataclass(frozen=True)
class Parcel:
    tracking: str
    carrier: str
    status: str
    scans: tuple[Scan, ...]  # oldest first


@dataclass(frozen=True)
class RefundRecord:
    """A refund an order already has."""

    id: str
    reference: str  # what the customer is told: "RF-7K2M9"
    amount: Decimal
    reason: str
    created_at: datetime
    order_number: str
    # The key it was issued under, when the shop says (the demo does); None for one made in the shop itself.
    idempotency_key: str | None = None


@dataclass(frozen=True)
class Order:
    number: str  # "SU-41207"
    customer_id: str
    status: str  # placed | shipped | in_transit | delivered | cancelled
    placed_at: datetime
    currency: str
    seller: Seller
    items: tuple[Item, ...]
    shipping_fee: Decimal
    total: Decimal
    refunded: Decimal
    refundable: Decimal  # what may still be refunded
    note: str  # shown to the agent with the order, e.g. a known carrier issue; may be ""
    parcels: tuple[Parcel, ...]
    refunds: tuple[RefundRecord, ...]  # oldest first


@dataclass(frozen=True)
class OrderBrief:
    """What a list of a customer's orders says of each: what the desk tells the model of their recent orders."""

    number: str
    status: str
    placed_at: datetime
    seller_name: str
    item_titles: tuple[str, ...]
    total: Decimal
    currency: str


def brief(order: Order) -> OrderBrief:
    return OrderBrief(number=order.number, status=order.status, placed_at=order.placed_at,
                      seller_name=order.seller.name, item_titles=tuple(i.title for i in order.items),
                      total=order.total, currency=order.currency)


@dataclass(frozen=True)
class RefundResult:
    """A refund issued, or found again by its idempotency key."""

    id: str
    reference: str
    amount: Decimal
    created_at: datetime
    order_number: str = ""  # "" when the shop does not say (a remote look-up by key may not)


@dataclass(frozen=True)
class SellerMessageResult:
    """A message sent to an order's seller, or found again by its idempotency key."""

    id: str
    order_number: str


# -- what can go wrong ------------------------------------------------------------------------------------

class ShopError(Exception):
    """The shop refused or failed a request."""


class NotFound(ShopError):
    """No such order (or customer, or refund)."""


class Invalid(ShopError):
    """The shop refused the request as malformed (e.g. a seller message on an order the shop ships itself)."""


class ExceedsRefundable(ShopError):
    def __init__(self, refundable: Decimal):
        super().__init__(f"only {refundable:.2f} is left to refund")
        self.refundable = refundable


class ShopUnavailable(ShopError):
    """The shop could not be reached, refused the desk's credentials, or failed (a 5xx, a timeout, a connection
    refused or reset, the circuit open after repeated failures). Nothing was written by a request that raises
    this one itself; see OutcomeUnknown."""


class OutcomeUnknown(ShopUnavailable):
    """A write was sent and its answer never came (a read timeout, a connection dropped after sending): the
    shop may or may not have made it. Resolved only by asking the shop by the idempotency key, never by
    sending the write again blindly."""


class BadAnswer(ShopUnavailable):
    """The shop answered, but not as the contract says (not JSON, a field missing or of the wrong kind, a
    negative amount). For a write, the outcome is as unknown as after a timeout."""


# -- the interface ----------------------------------------------------------------------------------------

class Shop(Protocol):
    def capabilities(self) -> Capabilities:
        """What the shop has (sellers, seller messages, seller policies, parcel tracking): read often, so a remote shop's
        answer is kept for a while; never raises (a shop that cannot say is taken as a single-brand store)."""

    def policies(self) -> list[ShopPolicy] | None:
        """The shop's own policies where the shop itself serves them (the contract's GET /policies, Shopify's shop
        policies); None: this shop serves none (the demo's are the desk's own). Raises ShopUnavailable."""

    def customer_by_email(self, email: str) -> ShopCustomer | None:
        """The customer with that address, compared case-insensitively; None when there is none."""

    def orders_of(self, customer_id: str, limit: int | None = None) -> list[Order]:
        """The customer's orders, newest first; only the first `limit` of them when it is given."""

    def order_briefs(self, customer_id: str, limit: int | None = None) -> list[OrderBrief]:
        """orders_of's orders in brief (a backend that reads less for them says so; the others: brief() of each)."""

    def order(self, number: str) -> Order | None:
        ...

    def lock_order(self, number: str) -> None:
        """Make other writers about this order wait until the caller's transaction ends (the demo: the
        order's row lock), for a desk check that must not race its own write. A shop without such a lock
        returns at once."""

    def refund(self, *, order_number: str, amount: Decimal, reason: str,
               idempotency_key: str | None) -> RefundResult:
        """Refund `amount` (positive, two decimals) on the order. The same key again answers with the same
        refund, whatever the rest; without a key nothing guards a retry. ExceedsRefundable when more than
        the refundable balance is asked, checked by the shop as it writes; NotFound for no such order."""

    def refund_by_key(self, key: str, order_number: str | None = None) -> RefundResult | None:
        """The refund issued under that key, if any: how a write whose answer was lost is resolved. The desk
        always says which order it was for; a shop that can look a key up only per order needs it."""

    def message_seller(self, *, order_number: str, message: str, idempotency_key: str | None,
                       conversation: str | None = None) -> SellerMessageResult:
        """Send `message` to the order's marketplace seller; the same key again answers with the same
        message. `conversation` (the desk's conversation public id) may be kept by the shop, for its own records.
        Invalid for an order the shop ships itself; NotFound for no such order."""

    def seller_message_by_key(self, key: str, order_number: str | None = None) -> SellerMessageResult | None:
        """The seller message sent under that key, if any (None also when the shop cannot say: the write is
        idempotent on the key, so sending it again with the same key is safe)."""

