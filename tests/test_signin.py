"""Signing in without the shop's token: an e-mail with one of its order numbers (that order only), or a
one-time code sent to the e-mail (every order). A stranger's guesses never lock the owner out.

Maya (maya@example.com) owns SU-41207 and SU-41310; Tom owns SU-41444; Inès is ines@example.com. The
stranger guesses from 203.0.113.66; Maya comes from 198.51.100.7 unless a test says otherwise. Codes travel
through a real SMTP server in this process (aiosmtpd), and the tests read them from what it received.
"""

from __future__ import annotations

import threading

import pytest
from django.test import Client

from sundry import ORDERS
from support.agent.tools import ToolContext, ToolError
from support.customers import identity, signin
from support.models import Conversation
from support.ops import limits
from support.tools.common import customer_orders, order_for_customer
from tests.redis_fixture import limits_redis, limits_redis_server  # noqa: F401  (fixtures)
from tests.smtp_fixture import smtp_inbox  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("limits_redis")
STRANGER, MAYA_HOME, MAYA_PHONE = "203.0.113.66", "198.51.100.7", "198.51.100.200"


@pytest.fixture
def smtp(smtp_inbox):
    return smtp_inbox


def start(body, address=MAYA_HOME):
    return Client(REMOTE_ADDR=address).post("/api/conversations", body, content_type="application/json")


def guess(n, address=STRANGER, who="maya@example.com"):
    return start({"email": who, "order_number": f"SU-9{n:04d}"}, address=address)


def opened(response) -> Conversation:
    assert response.status_code == 201, response.content
    return Conversation.objects.get(public_id=response.json()["conversation"]["id"])


# -- one canonical e-mail -------------------------------------------------------------------------------

@pytest.mark.parametrize("raw, canonical", [
    ("Maya@Example.COM", "maya@example.com"),
    (" ines@example.com ", "ines@example.com"),
    ("ine\u017f@example.com", "ines@example.com"),  # a long s: the same address for limits and look-up
    ("\uff4d\uff41\uff59\uff41@example.com", "maya@example.com"),  # full-width letters
])
def test_an_email_has_one_canonical_form(raw, canonical):
    assert identity.canonical_email(raw) == canonical


@pytest.mark.parametrize("raw", ["maya@example.com\x00", "ma\u200bya@example.com", "мая@example.com",
                                 "maya", "maya@localhost", "a@b@example.com", "x" * 400 + "@example.com", 42])
def test_what_does_not_canonicalise_to_a_plain_address_is_refused(raw):
    assert identity.canonical_email(raw) is None


def test_a_long_s_spelling_shares_the_guess_budget_of_the_plain_address(demo, smtp):
    for n in range(5):
        assert guess(n, who="ine\u017f@example.com" if n % 2 else "ines@example.com").status_code == 403
    assert guess(5, who="ine\u017f@example.com").json()["code"] == "code_required"
    assert guess(6, who="INES@example.com").json()["code"] == "code_required"


# -- lock-outs a stranger cannot impose -----------------------------------------------------------------

def test_a_strangers_ten_wrong_guesses_do_not_keep_the_owner_out_from_her_own_address(demo, smtp):
    for n in range(10):
        assert guess(n).status_code in (403,)
    assert opened(start({"email": "maya@example.com", "order_number": "SU-41207"})).customer == demo.maya


def test_once_an_email_is_under_attack_the_owner_signs_in_with_the_code_sent_to_her(demo, smtp, settings):
    settings.SIGNIN_FAILURES_PER_EMAIL = 6
    for n in range(6):  # from two addresses: the e-mail's own budget is spent
        guess(n, address=STRANGER if n % 2 else "203.0.113.67")
    refused = start({"email": "maya@example.com", "order_number": "SU-41207"}, address=MAYA_PHONE)
    assert (refused.status_code, refused.json()["code"]) == (403, "code_required")
    [code] = smtp.codes_for("maya@example.com")
    conversation = opened(start({"email": "maya@example.com", "code": code}, address=MAYA_PHONE))
    assert (conversation.customer, conversation.order_scope) == (demo.maya, "")


def test_past_the_limit_right_and_wrong_numbers_get_the_same_answer_and_only_the_right_one_sends_a_code(demo, smtp):
    for n in range(5):
        guess(n)
    wrong, right = guess(9), start({"email": "maya@example.com", "order_number": "SU-41207"}, address=STRANGER)
    assert wrong.json() == right.json() and wrong.status_code == right.status_code == 403
    assert len(smtp.codes_for("maya@example.com")) == 1


def test_guesses_sent_at_once_are_counted_before_any_is_looked_up(demo, smtp):
    """30 wrong guesses at once from one address, 20 times over: only the 5 the limit allows are looked up
    each time (a check read before counting let most of them through)."""
    outcomes = []
    for _ in range(20):
        limits.store().flushdb()
        barrier, answers = threading.Barrier(30), []

        def one(n, barrier=barrier, answers=answers):
            barrier.wait()
            answers.append(guess(n).json()["code"])

        threads = [threading.Thread(target=one, args=(n,)) for n in range(30)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        outcomes.append((answers.count("forbidden"), answers.count("code_required")))
    assert outcomes == [(5, 25)] * 20


# -- one order, or every order --------------------------------------------------------------------------

def test_a_conversation_opened_with_an_order_number_sees_that_order_only(demo, any_shop):
    conversation = opened(start({"email": "maya@example.com", "order_number": "SU-41207"}))
    assert conversation.order_scope == "SU-41207"
    ctx = ToolContext(customer_id=demo.maya.pk, conversation_id=str(conversation.public_id))
    assert order_for_customer(ctx, "SU-41207").number == "SU-41207"
    with pytest.raises(ToolError, match="No order SU-41310 was found"):
        order_for_customer(ctx, "SU-41310")  # Maya's too, but not proven here
    assert [o.number for o in customer_orders(ctx)] == ["SU-41207"]


def test_a_conversation_opened_with_the_shops_token_sees_every_order_of_the_customer(demo, any_shop):
    conversation = opened(start({"customer_token": identity.customer_token("maya@example.com")}))
    ctx = ToolContext(customer_id=demo.maya.pk, conversation_id=str(conversation.public_id))
    assert sorted(o.number for o in customer_orders(ctx)) == sorted(o.number for o in ORDERS
                                                                    if o.customer == "maya@example.com")


# -- codes ----------------------------------------------------------------------------------------------

def test_a_code_is_sent_on_request_by_smtp_and_signs_in_once(demo, smtp):
    answer = start({"email": "Maya@Example.com", "send_code": True})
    assert answer.status_code == 202 and answer.json()["code_sent"] is True
    [(rcpt, message)] = smtp.messages
    assert rcpt == ["maya@example.com"] and "sign-in code" in message["Subject"]
    [code] = smtp.codes_for("maya@example.com")
    assert opened(start({"email": "maya@example.com", "code": code})).customer == demo.maya
    used = start({"email": "maya@example.com", "code": code})
    assert (used.status_code, used.json()["code"]) == (403, "wrong_code")


def test_asking_a_code_for_an_unknown_address_answers_the_same_and_sends_nothing(demo, smtp):
    assert start({"email": "nobody@example.com", "send_code": True}).json() == \
        start({"email": "maya@example.com", "send_code": True}).json()
    assert [rcpt for rcpt, _ in smtp.messages] == [["maya@example.com"]]


def test_codes_sent_to_one_address_are_capped_per_hour_and_each_one_sent_still_works(demo, smtp, settings):
    settings.SIGNIN_CODE_SENDS_PER_EMAIL = 2
    for _ in range(4):
        start({"email": "maya@example.com", "send_code": True}, address=STRANGER)
    first, second = smtp.codes_for("maya@example.com")
    assert opened(start({"email": "maya@example.com", "code": first})).customer == demo.maya


def test_wrong_codes_are_limited_and_a_strangers_wrong_codes_do_not_spend_the_owners(demo, smtp):
    start({"email": "maya@example.com", "send_code": True})
    [code] = smtp.codes_for("maya@example.com")
    for n in range(5):
        wrong = start({"email": "maya@example.com", "code": f"{n:08d}"}, address=STRANGER)
        assert wrong.json()["code"] == "wrong_code"
    refused = start({"email": "maya@example.com", "code": code}, address=STRANGER)
    assert refused.status_code == 429 and refused.json()["code"] == "rate_limited" and refused["Retry-After"]
    assert opened(start({"email": "maya@example.com", "code": code}, address=MAYA_HOME)).customer == demo.maya


def test_an_expired_code_does_not_sign_in(demo, smtp, settings, monkeypatch):
    start({"email": "maya@example.com", "send_code": True})
    [code] = smtp.codes_for("maya@example.com")
    later = signin._now_ms() + settings.SIGNIN_CODE_TTL * 1000 + 1
    monkeypatch.setattr(signin, "_now_ms", lambda: later)
    assert start({"email": "maya@example.com", "code": code}).json()["code"] == "wrong_code"


def test_without_redis_sign_in_by_order_is_refused_as_retryable_rather_than_uncounted(demo, settings):
    settings.LIMITS_REDIS_URL = "redis://127.0.0.1:1/0"
    refused = start({"email": "maya@example.com", "order_number": "SU-41207"})
    assert refused.status_code == 503 and refused.json()["retryable"] is True and refused["Retry-After"]
