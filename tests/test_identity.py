"""Who the customer is: the shop's signed e-mail, an order number with its e-mail, the conversation token.

Maya owns SU-41207 and SU-41310; Tom owns SU-41444.
"""

from __future__ import annotations

import io
import time
import uuid
from unittest import mock

import pytest
from django.core import signing
from django.core.management import CommandError, call_command

from support.customers import identity
from tests.desk_factories import start_conversation
from tests.redis_fixture import limits_redis, limits_redis_server  # noqa: F401  (fixtures)

pytestmark = pytest.mark.usefixtures("limits_redis")


def minted_ago(seconds: float, mint):
    """A token minted `seconds` ago (signing reads the clock through time.time)."""
    with mock.patch("django.core.signing.time.time", return_value=time.time() - seconds):
        return mint()


# -- the shop's token -----------------------------------------------------------------------------------

def test_it_knows_the_customer_the_shop_signed_for(demo):
    assert identity.customer_from_token(identity.customer_token("maya@example.com")) == demo.maya
    assert identity.customer_from_token(identity.customer_token("tom@example.com")) == demo.tom


def test_it_matches_the_signed_email_case_insensitively(demo):
    assert identity.customer_from_token(identity.customer_token("Maya@Example.COM")) == demo.maya


def test_it_refuses_a_token_signed_with_another_key(demo, settings):
    token = signing.dumps("maya@example.com", key="not-the-shop", salt=identity.CUSTOMER_SALT)
    assert identity.customer_from_token(token) is None
    # The site's own SECRET_KEY is not the shop's key either.
    assert identity.customer_from_token(signing.dumps("maya@example.com", salt=identity.CUSTOMER_SALT)) is None


def test_it_refuses_a_customer_token_older_than_a_day(demo):
    old = minted_ago(24 * 3600 + 5, lambda: identity.customer_token("maya@example.com"))
    recent = minted_ago(24 * 3600 - 60, lambda: identity.customer_token("maya@example.com"))
    assert identity.customer_from_token(old) is None
    assert identity.customer_from_token(recent) == demo.maya


@pytest.mark.parametrize("token", [None, "", 42, "garbage", "bWF5YQ:1u:abc", "é:ü:ö"])
def test_it_refuses_tokens_that_are_not_tokens(demo, token):
    assert identity.customer_from_token(token) is None


def test_it_refuses_a_tampered_customer_token(demo):
    toms, mayas = identity.customer_token("tom@example.com"), identity.customer_token("maya@example.com")
    # Maya's signed payload with Tom's timestamp and signature; and Tom's token with one character changed.
    spliced = mayas.split(":", 1)[0] + ":" + toms.split(":", 1)[1]
    flipped = toms[:-1] + ("A" if toms[-1] != "A" else "B")
    assert identity.customer_from_token(spliced) is None
    assert identity.customer_from_token(flipped) is None


def test_it_knows_no_one_for_an_email_that_is_not_a_customer(demo):
    assert identity.customer_from_token(identity.customer_token("stranger@example.com")) is None


def test_a_conversation_token_is_not_a_customer_token(demo):
    conversation = start_conversation(demo.maya)
    assert identity.customer_from_token(identity.conversation_token(conversation)) is None


# -- order number and e-mail ----------------------------------------------------------------------------

def test_it_identifies_a_customer_by_an_order_and_its_email(demo):
    assert identity.customer_from_order("maya@example.com", "SU-41207") == demo.maya
    assert identity.customer_from_order("  MAYA@example.com ", " su-41310") == demo.maya
    assert identity.customer_from_order("tom@example.com", "SU-41444") == demo.tom


@pytest.mark.parametrize("email, order_number", [
    ("tom@example.com", "SU-41207"),  # Maya's order
    ("maya@example.com", "SU-41444"),  # Tom's order
    ("maya@example.com", "SU-99999"),  # no such order
    ("stranger@example.com", "SU-41207"),
    ("", "SU-41207"), ("maya@example.com", ""), (None, "SU-41207"), ("maya@example.com", 41207),
])
def test_it_identifies_no_one_when_order_and_email_do_not_match(demo, email, order_number):
    assert identity.customer_from_order(email, order_number) is None


# -- the conversation token -----------------------------------------------------------------------------

def test_a_conversation_token_opens_its_conversation(demo):
    conversation = start_conversation(demo.maya)
    token = identity.conversation_token(conversation)
    assert identity.conversation_for_token(token, conversation.public_id) == conversation
    assert identity.conversation_for_token(token, str(conversation.public_id)) == conversation


def test_a_conversation_token_opens_no_other_conversation(demo):
    mine, theirs = start_conversation(demo.maya), start_conversation(demo.tom)
    token = identity.conversation_token(theirs)
    assert identity.conversation_for_token(token, mine.public_id) is None
    assert identity.conversation_for_token(token, uuid.uuid4()) is None


def test_a_conversation_token_expires(demo, settings):
    settings.CONVERSATION_TOKEN_MAX_AGE = 3600
    conversation = start_conversation(demo.maya)
    old = minted_ago(3600 + 5, lambda: identity.conversation_token(conversation))
    recent = minted_ago(3600 - 60, lambda: identity.conversation_token(conversation))
    assert identity.conversation_for_token(old, conversation.public_id) is None
    assert identity.conversation_for_token(recent, conversation.public_id) == conversation


def test_a_conversation_token_must_be_signed_by_the_site(demo):
    conversation = start_conversation(demo.maya)
    forged = signing.dumps(str(conversation.public_id), key="guess", salt=identity.CONVERSATION_SALT)
    other_salt = signing.dumps(str(conversation.public_id), salt="something.else")
    shop_token = identity.customer_token(str(conversation.public_id))
    for token in (forged, other_salt, shop_token, "", None, 7):
        assert identity.conversation_for_token(token, conversation.public_id) is None


@pytest.mark.parametrize("public_id", ["not-a-uuid", "", None, "../etc"])
def test_a_conversation_token_with_a_malformed_id_opens_nothing(demo, public_id):
    token = identity.conversation_token(start_conversation(demo.maya))
    assert identity.conversation_for_token(token, public_id) is None


# -- the management command -----------------------------------------------------------------------------

def test_the_command_prints_a_token_the_api_accepts(demo):
    out = io.StringIO()
    call_command("customer_token", "tom@example.com", stdout=out)
    assert identity.customer_from_token(out.getvalue().strip()) == demo.tom


def test_the_command_refuses_an_unknown_email(demo):
    with pytest.raises(CommandError, match="No customer has the e-mail"):
        call_command("customer_token", "stranger@example.com", stdout=io.StringIO())
