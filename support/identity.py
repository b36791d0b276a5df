"""Who the customer is, verified on the server: the shop's signed e-mail, an order number with its
e-mail, and the conversation token the widget holds instead of a login."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.core import signing

from support.models import Conversation, Customer, Order

CUSTOMER_SALT = "sundry.customer"
CUSTOMER_TOKEN_MAX_AGE = 24 * 3600  # the shop mints a fresh one with each page it serves
CONVERSATION_SALT = "support.conversation"


# -- the shop's signed customer ---------------------------------------------------------------------

def customer_token(email: str) -> str:
    """What the shop puts in its page for its logged-in customer: the e-mail, signed with the shop's key."""
    return signing.dumps(email, key=settings.SHOP_SIGNING_KEY, salt=CUSTOMER_SALT)


def customer_from_token(token) -> Customer | None:
    """The customer the shop vouched for within the last day, or None (forged, expired, unknown)."""
    if not isinstance(token, str) or not token:
        return None
    try:
        email = signing.loads(token, key=settings.SHOP_SIGNING_KEY, salt=CUSTOMER_SALT,
                              max_age=CUSTOMER_TOKEN_MAX_AGE)
    except signing.BadSignature:  # SignatureExpired is one too
        return None
    return _customer_by_email(email) if isinstance(email, str) else None


def _customer_by_email(email: str) -> Customer | None:
    # The exact address first; otherwise a case-insensitive match, but only when it is unambiguous.
    exact = Customer.objects.filter(email=email).first()
    if exact is not None:
        return exact
    matches = list(Customer.objects.filter(email__iexact=email)[:2])
    return matches[0] if len(matches) == 1 else None


# -- order number + e-mail ----------------------------------------------------------------------------

def customer_from_order(email, order_number) -> Customer | None:
    """The customer when that order exists and is theirs; a missing order and someone else's look the same."""
    if not isinstance(email, str) or not isinstance(order_number, str):
        return None
    email, order_number = email.strip(), order_number.strip().upper()
    if not email or not order_number:
        return None
    order = Order.objects.select_related("customer").filter(number=order_number).first()
    # Compared in Python rather than with iexact, which SQLite and PostgreSQL fold differently.
    if order is None or order.customer.email.casefold() != email.casefold():
        return None
    return order.customer


# -- the conversation token ---------------------------------------------------------------------------

def conversation_token(conversation: Conversation) -> str:
    """The widget's proof that it may read and post to this one conversation (signed with SECRET_KEY)."""
    return signing.dumps(str(conversation.public_id), salt=CONVERSATION_SALT)


def conversation_for_token(token, public_id) -> Conversation | None:
    """The conversation when the token is valid, recent enough and names exactly that conversation."""
    wanted = parse_uuid(public_id)
    if wanted is None or not isinstance(token, str) or not token:
        return None
    try:
        named = signing.loads(token, salt=CONVERSATION_SALT, max_age=settings.CONVERSATION_TOKEN_MAX_AGE)
    except signing.BadSignature:
        return None
    if named != str(wanted):
        return None
    return Conversation.objects.filter(public_id=wanted).first()


def parse_uuid(value) -> uuid.UUID | None:
    """A UUID from a path or a payload, or None for anything malformed."""
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except (ValueError, TypeError, AttributeError):
        return None
