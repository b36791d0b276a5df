"""Who the customer is, verified on the server: the shop's signed e-mail, an order number with its
e-mail, and the conversation token the widget holds instead of a login."""

from __future__ import annotations

import re
import unicodedata
import uuid
from dataclasses import dataclass

from django.conf import settings
from django.core import signing

from support.customers.cleaning import token_or_none
from support.models import Conversation, Customer, FollowUp
from support.ops.prepared import Prepared, columns, instance
from support.shop import port, shop

CUSTOMER_SALT = "sundry.customer"
CUSTOMER_TOKEN_MAX_AGE = 24 * 3600  # the shop mints a fresh one with each page it serves
CONVERSATION_SALT = "support.conversation"


# -- the shop's signed customer ---------------------------------------------------------------------

def customer_token(email: str) -> str:
    """What the shop puts in its page for its logged-in customer: the e-mail, signed with the shop's key."""
    return signing.dumps(email, key=settings.SHOP_SIGNING_KEY, salt=CUSTOMER_SALT)


def customer_from_token(token) -> Customer | None:
    """The customer the shop vouched for within the last day, or None (forged, expired, unknown)."""
    if token_or_none(token) is None:
        return None
    try:
        email = signing.loads(token, key=settings.SHOP_SIGNING_KEY, salt=CUSTOMER_SALT,
                              max_age=CUSTOMER_TOKEN_MAX_AGE)
    except signing.BadSignature:  # SignatureExpired is one too
        return None
    return _customer_by_email(email) if isinstance(email, str) else None


def _customer_by_email(email: str) -> Customer | None:
    # The exact address first; otherwise a case-insensitive match, but only when it is unambiguous.
    exact = _EXACT.instances(email=email)
    if exact:
        return exact[0]
    matches = list(Customer.objects.filter(email__iexact=email)[:2])
    return matches[0] if len(matches) == 1 else None


# The customer record of an exact address (compiled once: read for every shop token a page opens a chat with).
_EXACT = Prepared(Customer, lambda email: Customer.objects.filter(email=email).order_by("pk").values(
    *columns(Customer))[:1], text=("email",))


# A conversation by its public id with its customer (compiled once: read for every socket a customer opens).
_WITH_CUSTOMER = Prepared(Conversation, lambda public_id: Conversation.objects.filter(public_id=public_id).values(
    *columns(Conversation), *columns(Customer, "customer__"))[:1], uuids=("public_id",))


# -- order number + e-mail ----------------------------------------------------------------------------

# What an address may look like once canonical: plain ASCII, a local part and a dotted domain.
_PLAIN_EMAIL = re.compile(r"[a-z0-9!#$%&'*+/=?^_`{|}~.-]{1,64}@[a-z0-9-]{1,63}(\.[a-z0-9-]{1,63})+")
_ORDER_NUMBER = re.compile(r"[A-Z0-9][A-Z0-9-]{0,19}")


def canonical_email(raw) -> str | None:
    """The one form of an e-mail address that limits count and look-ups compare: NFKC, case-folded, NFKC
    again (Unicode's NFKC_Casefold), stripped; None unless that is a plain ASCII address. So "Ineſ@Example.com"
    (a long s) is "ines@example.com" for the lock-outs as for the sign-in, and nothing else passes."""
    if not isinstance(raw, str) or len(raw) > 320:
        return None
    email = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", raw).casefold()).strip()
    return email if len(email) <= 254 and _PLAIN_EMAIL.fullmatch(email) else None


def canonical_order_number(raw) -> str | None:
    """"su-41207 " -> "SU-41207"; None for anything that is not letters, digits and dashes (a NUL byte...)."""
    if not isinstance(raw, str) or len(raw) > 40:
        return None
    number = unicodedata.normalize("NFKC", raw).strip().upper()
    return number if _ORDER_NUMBER.fullmatch(number) else None


def customer_by_email(email: str) -> Customer | None:
    """The desk's record of the shop's customer whose address is `email` once both are canonical, or None."""
    found = _shop_customer(email)
    return customer_record(found) if found is not None else None


def _shop_customer(email: str) -> port.ShopCustomer | None:
    found = shop().customer_by_email(email)
    return found if found is not None and canonical_email(found.email) == email else None


def customer_record(found: port.ShopCustomer) -> Customer | None:
    """The desk's record of a shop customer, which conversations link to: keyed by e-mail (the demo's
    customers are these very rows)."""
    return Customer.objects.filter(email=found.email).first()


def shop_customer_id(customer_id, *, email: str | None = None) -> str | None:
    """The shop's id for the desk's customer record (its pk): the shop's customer with that e-mail. `email`:
    the record's, when the caller has read it already."""
    if email is None:
        email = Customer.objects.filter(pk=customer_id).values_list("email", flat=True).first()
    found = shop().customer_by_email(email) if email else None
    return found.id if found is not None else None


def order_of(email, order_number) -> port.Order | None:
    """The order when it exists and belongs to that e-mail (both as canonical); a missing order and someone
    else's look the same."""
    found = _order_and_owner(email, order_number)
    return found[1] if found is not None else None


def customer_from_order(email, order_number) -> Customer | None:
    """The customer when that order exists and is theirs; a missing order and someone else's look the same."""
    found = _order_and_owner(email, order_number)
    return customer_record(found[0]) if found is not None else None


def _order_and_owner(email, order_number) -> tuple[port.ShopCustomer, port.Order] | None:
    email, number = canonical_email(email), canonical_order_number(order_number)
    if email is None or number is None:
        return None
    order = shop().order(number)
    if order is None:
        return None
    # The ownership check is the desk's: the shop only says whose the order is.
    owner = _shop_customer(email)
    if owner is None or owner.id != order.customer_id:
        return None
    return owner, order


# -- the conversation token ---------------------------------------------------------------------------

def conversation_token(conversation: Conversation, *, link_version: int | None = None) -> str:
    """The widget's proof that it may read and post to this one conversation (signed with SECRET_KEY).

    A token exchanged for an e-mailed link carries that link's version: revoking the conversation's links
    (support.customers.notify.links_revoke) revokes it too. A token from signing in carries none."""
    claims = {"c": str(conversation.public_id)}
    if link_version is not None:
        claims["l"] = int(link_version)
    return signing.dumps(claims, salt=CONVERSATION_SALT)


@dataclass(frozen=True)
class Access:
    conversation: Conversation
    link_version: int | None  # the link it came from, None when signed in


def access_for_token(token, public_id) -> Access | None:
    """What a token grants when it is valid, recent enough, names exactly that conversation and, when it
    came from a link, that link is still the conversation's current one."""
    wanted = parse_uuid(public_id)
    if wanted is None or token_or_none(token) is None:
        return None
    try:
        claims = signing.loads(token, salt=CONVERSATION_SALT, max_age=settings.CONVERSATION_TOKEN_MAX_AGE)
    except signing.BadSignature:
        return None
    if isinstance(claims, str):  # the first form of the token: the id alone, minted at sign-in
        claims = {"c": claims}
    if not isinstance(claims, dict) or claims.get("c") != str(wanted):
        return None
    link_version = claims.get("l")
    if link_version is not None and (not isinstance(link_version, int) or link_version != current_link_version(wanted)):
        return None
    # With its customer: the socket's events describe the conversation with it (serializers.conversation_json).
    found = _WITH_CUSTOMER.rows(public_id=wanted)
    if not found:
        return None
    conversation = instance(Conversation, found[0])
    conversation.customer = instance(Customer, found[0], "customer__")
    return Access(conversation, link_version)


def conversation_for_token(token, public_id) -> Conversation | None:
    """The conversation the token opens (see access_for_token), or None."""
    access = access_for_token(token, public_id)
    return access.conversation if access else None


def current_link_version(public_id) -> int:
    """The version the conversation's links carry now; revoking them moves it on (1 before any revocation)."""
    version = (FollowUp.objects.filter(conversation__public_id=public_id)
               .values_list("link_version", flat=True).first())
    return version or 1


def parse_uuid(value) -> uuid.UUID | None:
    """A UUID from a path or a payload, or None for anything malformed."""
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except (ValueError, TypeError, AttributeError):
        return None
