"""Signing in without the shop's token: an e-mail with one of its order numbers (that order only), or a
one-time code sent to the e-mail (every order). A stranger's guesses never lock the owner out.

Maya (maya@example.com) owns SU-41207 and SU-41310; Tom owns SU-41444; Inès is ines@example.com. The
stranger guesses from 203.0.113.66; Maya comes from 198.51.100.7 unless a test says otherwise. A code asked
for is handed to a worker (recorded here: `code_tasks`, run with `code_tasks.run()` as the worker would), and
travels through a real SMTP server in this process (aiosmtpd); the tests read it from what it received.
Sweeps, alerts, timing and the real broker: tests/test_signin_guessing.py.
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
from tests.signin_fixture import code_tasks  # noqa: F401  (fixture)
from tests.smtp_fixture import smtp_inbox  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("limits_redis")
STRANGER, MAYA_HOME, MAYA_PHONE = "203.0.113.66", "198.51.100.7", "198.51.100.200"


@pytest.fixture
def smtp(smtp_inbox):
    return smtp_inbox


def start(body, address=MAYA_HOME):
    return Client(REMOTE_ADDR=address).post("/api/conversations", body, content_type="application/json")


def ask_code(who="maya@example.com", address=MAYA_HOME):
    return start({"email": who, "send_code": True}, address=address)


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


def test_once_an_email_is_under_attack_the_owner_signs_in_with_a_code_she_asks_for(demo, smtp, settings, code_tasks):
    settings.SIGNIN_FAILURES_PER_EMAIL = 6
    for n in range(6):  # from two addresses: the e-mail's own budget is spent
        guess(n, address=STRANGER if n % 2 else "203.0.113.67")
    refused = start({"email": "maya@example.com", "order_number": "SU-41207"}, address=MAYA_PHONE)
    assert (refused.status_code, refused.json()["code"]) == (403, "code_required")
    assert "ask us to e-mail you a sign-in code" in refused.json()["error"].lower()
    assert ask_code(address=MAYA_PHONE).status_code == 202  # what the widget does on code_required
    assert code_tasks.run() == 1
    [code] = smtp.codes_for("maya@example.com")
    conversation = opened(start({"email": "maya@example.com", "code": code}, address=MAYA_PHONE))
    assert (conversation.customer, conversation.order_scope) == (demo.maya, "")


def test_past_the_limit_right_and_wrong_numbers_get_the_same_answer_and_neither_sends_a_code(demo, smtp, code_tasks):
    for n in range(5):
        guess(n)
    wrong, right = guess(9), start({"email": "maya@example.com", "order_number": "SU-41207"}, address=STRANGER)
    assert wrong.json() == right.json() and wrong.status_code == right.status_code == 403
    assert wrong.json()["code"] == "code_required"
    assert (list(code_tasks), smtp.messages) == ([], [])  # the owner asks for her code herself


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

def test_a_code_is_sent_on_request_by_a_worker_by_smtp_and_signs_in_once(demo, smtp, code_tasks):
    answer = start({"email": "Maya@Example.com", "send_code": True})
    assert answer.status_code == 202 and answer.json()["code_sent"] is True
    assert smtp.messages == [] and list(code_tasks) == [("maya@example.com", code_tasks[0][1])]  # not in the request
    code_tasks.run()
    [(rcpt, message)] = smtp.messages
    assert rcpt == ["maya@example.com"] and "sign-in code" in message["Subject"]
    [code] = smtp.codes_for("maya@example.com")
    assert opened(start({"email": "maya@example.com", "code": code})).customer == demo.maya
    used = start({"email": "maya@example.com", "code": code})
    assert (used.status_code, used.json()["code"]) == (403, "wrong_code")


def test_asking_a_code_for_an_unknown_address_answers_the_same_and_sends_nothing(demo, smtp, code_tasks):
    stranger, customer = ask_code("nobody@example.com"), ask_code("maya@example.com")
    assert (stranger.status_code, stranger.json()) == (customer.status_code, customer.json())
    assert code_tasks.run() == 2  # both handed to the worker: the request did the same for each
    assert [rcpt for rcpt, _ in smtp.messages] == [["maya@example.com"]]


def test_one_client_address_can_ask_for_a_limited_number_of_codes_whoever_they_are_for(demo, code_tasks, settings):
    settings.SIGNIN_CODE_REQUESTS_PER_ADDRESS = 3
    asked = [ask_code(who, address=STRANGER).status_code
             for who in ("maya@example.com", "tom@example.com", "nobody@example.com")]
    refused = ask_code("ines@example.com", address=STRANGER)
    assert asked == [202] * 3 and refused.status_code == 429 and refused.json()["code"] == "rate_limited"
    assert int(refused["Retry-After"]) > 0 and "codes asked for from here" in refused.json()["error"]
    assert ask_code("ines@example.com", address=MAYA_HOME).status_code == 202  # another address: its own count
    assert [who for who, _ in code_tasks] == ["maya@example.com", "tom@example.com", "nobody@example.com",
                                             "ines@example.com"]


def test_send_code_must_be_true(demo, code_tasks):
    refused = start({"email": "maya@example.com", "send_code": "yes"})
    assert (refused.status_code, refused.json()["code"]) == (400, "invalid_request") and list(code_tasks) == []


def test_codes_sent_to_one_address_are_capped_per_hour_and_each_one_sent_still_works(demo, smtp, settings, code_tasks):
    settings.SIGNIN_CODE_SENDS_PER_EMAIL = 2
    for _ in range(4):
        assert ask_code(address=STRANGER).status_code == 202  # the answer never says the cap is reached
    code_tasks.run()
    first, second = smtp.codes_for("maya@example.com")
    assert opened(start({"email": "maya@example.com", "code": first})).customer == demo.maya


def test_a_redelivered_code_task_sends_no_second_code(demo, smtp, code_tasks):
    ask_code()
    [task] = code_tasks
    code_tasks.run()
    code_tasks.append(task)  # the broker delivers it again (a worker lost after sending, say)
    code_tasks.run()
    assert len(smtp.codes_for("maya@example.com")) == 1


def test_wrong_codes_are_limited_and_a_strangers_wrong_codes_do_not_spend_the_owners(demo, smtp, code_tasks):
    ask_code()
    code_tasks.run()
    [code] = smtp.codes_for("maya@example.com")
    for n in range(5):
        wrong = start({"email": "maya@example.com", "code": f"{n:08d}"}, address=STRANGER)
        assert wrong.json()["code"] == "wrong_code"
    refused = start({"email": "maya@example.com", "code": code}, address=STRANGER)
    assert refused.status_code == 429 and refused.json()["code"] == "rate_limited" and refused["Retry-After"]
    assert opened(start({"email": "maya@example.com", "code": code}, address=MAYA_HOME)).customer == demo.maya


def test_wrong_codes_from_many_addresses_never_refuse_the_owners_right_code(demo, smtp, code_tasks):
    """Ten wrong codes from two addresses once filled a per-e-mail budget, and the owner's right code got 429.
    Codes sent are capped per e-mail; codes tried are limited per address only."""
    ask_code()
    code_tasks.run()
    [code] = smtp.codes_for("maya@example.com")
    strangers = [f"203.0.113.{n}" for n in range(10, 16)]
    answers = {start({"email": "maya@example.com", "code": f"{n:08d}"}, address=strangers[n % 6]).json()["code"]
               for n in range(30)}  # five from each: every one of those addresses is now at its limit
    assert answers == {"wrong_code"}
    assert opened(start({"email": "maya@example.com", "code": code}, address=MAYA_PHONE)).customer == demo.maya


def test_an_address_over_its_wrong_code_limit_is_refused_without_its_code_being_checked(demo, smtp, code_tasks,
                                                                                         settings):
    settings.SIGNIN_FAILURES_PER_ADDRESS = 8
    ask_code()
    code_tasks.run()
    [code] = smtp.codes_for("maya@example.com")
    for n in range(8):  # at other e-mails, under each pair's limit
        start({"email": ("tom@example.com", "ines@example.com")[n % 2], "code": f"{n:08d}"}, address=STRANGER)
    refused = start({"email": "maya@example.com", "code": code}, address=STRANGER)
    assert refused.status_code == 429 and refused["Retry-After"]
    assert opened(start({"email": "maya@example.com", "code": code}, address=MAYA_HOME)).customer == demo.maya


def test_an_expired_code_does_not_sign_in(demo, smtp, settings, monkeypatch, code_tasks):
    ask_code()
    code_tasks.run()
    [code] = smtp.codes_for("maya@example.com")
    later = signin._now_ms() + settings.SIGNIN_CODE_TTL * 1000 + 1
    monkeypatch.setattr(signin, "_now_ms", lambda: later)
    assert start({"email": "maya@example.com", "code": code}).json()["code"] == "wrong_code"


def test_without_redis_sign_in_by_order_is_refused_as_retryable_rather_than_uncounted(demo, settings):
    settings.LIMITS_REDIS_URL = "redis://127.0.0.1:1/0"
    refused = start({"email": "maya@example.com", "order_number": "SU-41207"})
    assert refused.status_code == 503 and refused.json()["retryable"] is True and refused["Retry-After"]


def test_without_redis_asking_a_code_answers_503_for_every_address_alike(demo, settings, code_tasks):
    """Sign-in fails closed, and the same for a customer as for anyone: the answer names no customer."""
    settings.LIMITS_REDIS_URL = "redis://127.0.0.1:1/0"
    answers = [ask_code(who) for who in ("maya@example.com", "nobody@example.com")]
    assert [(a.status_code, a.json(), a["Retry-After"]) for a in answers] == [(503, answers[0].json(), "5")] * 2
    assert list(code_tasks) == []
