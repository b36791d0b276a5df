"""What a stranger gets from guessing at the sign-in: nothing to learn, and nothing that costs the owner.

Past the guess limits an order number is refused before anything is looked up or sent, so sweeping order
numbers asks the shop nothing; a code is asked for in the request and looked up and mailed by a worker, so
the answer and its time are the same for a customer as for anyone; persistent guessing raises an alert.

Timing tests compare medians of TRIALS requests per outcome, taken in turn, with the shop's look-ups in the
path (the demo's database reads, or a remote shop answering 20 ms late) and an SMTP server that takes 100 ms
to accept a message, as a real one may. The ratio must be near 1 (under 3): a look-up or an e-mail inside
the request makes it 10 to 100 times slower; noise on a busy machine moves it by half at most.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import statistics
import time

import pytest
import redis
from django.test import Client
from prometheus_client import REGISTRY

from agentsite.celery import app
from support import tasks
from support.customers import signin
from support.desk import inbound_mail
from support.models import Conversation, InboundEmail
from tests.redis_fixture import free_port, limits_redis, limits_redis_server  # noqa: F401  (fixtures)
from tests.signin_fixture import code_tasks  # noqa: F401  (fixture)
from tests.smtp_fixture import Inbox, smtp_inbox  # noqa: F401  (fixture)
from tests.mail_factories import mail
from tests.test_api_errors import broker_at

pytestmark = pytest.mark.usefixtures("limits_redis")
STRANGER, MAYA_HOME = "203.0.113.66", "198.51.100.7"
TRIALS = 60


def start(body, address=STRANGER):
    return Client(REMOTE_ADDR=address).post("/api/conversations", body, content_type="application/json")


def spend_the_guesses(address=STRANGER, who="maya@example.com"):
    """Five wrong order numbers: this address is past its limit at that e-mail."""
    for n in range(5):
        assert start({"email": who, "order_number": f"SU-9{n:04d}"}, address=address).json()["code"] == "forbidden"


def medians_ms(**outcomes) -> dict[str, float]:
    """The median time of each outcome's request (a function that sends it and checks its answer): one of each
    first, untimed, then TRIALS of each, in turn, the order reversed every other round so neither always goes
    first."""
    taken = {name: [] for name in outcomes}
    for request in outcomes.values():
        request()
    for round_ in range(TRIALS):
        for name, request in (reversed(outcomes.items()) if round_ % 2 else outcomes.items()):
            began = time.perf_counter()
            request()
            taken[name].append((time.perf_counter() - began) * 1000)
    return {name: statistics.median(times) for name, times in taken.items()}


def assert_alike(medians: dict[str, float]) -> None:
    low, high = min(medians.values()), max(medians.values())
    assert high / low < 3, f"medians (ms) differ: {medians}"


@pytest.fixture
def slow_mail(smtp_inbox, monkeypatch):
    """The test's SMTP server, taking 100 ms to accept each message (each connection reads the handler anew)."""
    async def handle_data(server, session, envelope):
        await asyncio.sleep(0.1)
        return await Inbox.handle_DATA(smtp_inbox, server, session, envelope)

    monkeypatch.setattr(smtp_inbox, "handle_DATA", handle_data)
    return smtp_inbox


def slow_shop(shop) -> int:
    """A remote shop answers 20 ms late, so a look-up shows; how many requests it has seen so far."""
    if shop.server is None:
        return 0
    shop.configure(latency_ms=20)
    return len(shop.server.requests())


def requests_seen(shop) -> int:
    return 0 if shop.server is None else len(shop.server.requests())


def alerts(counted_per: str) -> float:
    return REGISTRY.get_sample_value("desk_signin_guessing_alerts_total", {"counted_per": counted_per}) or 0.0


def alert_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "support.security" and r.levelno == logging.ERROR
            and "persistent sign-in guessing" in r.getMessage()]


# -- sweeping order numbers -----------------------------------------------------------------------------

def test_past_the_limit_a_sweep_of_order_numbers_asks_the_shop_nothing_and_sends_nothing(remote_shop, smtp_inbox,
                                                                                         code_tasks):
    spend_the_guesses()
    before = len(remote_shop.server.requests())
    answers = [start({"email": "maya@example.com", "order_number": f"SU-412{n:02d}"}) for n in range(20)]
    assert {(a.status_code, a.content) for a in answers} == {(403, answers[0].content)}  # SU-41207 among them
    assert answers[0].json()["code"] == "code_required"
    assert len(remote_shop.server.requests()) == before
    assert (list(code_tasks), smtp_inbox.messages) == ([], [])


def test_past_the_limit_a_right_and_a_wrong_order_number_take_the_same_time(any_shop, slow_mail, code_tasks, settings):
    settings.SIGNIN_CODE_SENDS_PER_EMAIL = 10 * TRIALS  # an e-mail sent by any of these requests would show in each
    slow_shop(any_shop)
    spend_the_guesses()

    def guess(number):
        def request():
            assert start({"email": "maya@example.com", "order_number": number}).json()["code"] == "code_required"
        return request

    assert_alike(medians_ms(right=guess("SU-41207"), wrong=guess("SU-41999")))
    assert slow_mail.messages == []


# -- asking for a code ------------------------------------------------------------------------------------

def test_asking_a_code_takes_the_same_time_for_a_customer_and_for_anyone_and_asks_the_shop_nothing(
        any_shop, slow_mail, settings, limits_redis):
    """Through the real broker (the test's Redis): the request counts, queues and answers; no worker runs."""
    settings.SIGNIN_CODE_REQUESTS_PER_ADDRESS = settings.SIGNIN_CODE_SENDS_PER_EMAIL = 10 * TRIALS
    before = slow_shop(any_shop)

    def ask(who):
        def request():
            assert start({"email": who, "send_code": True}).status_code == 202
        return request

    with broker_at(limits_redis):
        assert_alike(medians_ms(customer=ask("maya@example.com"), anyone=ask("nobody@example.com")))
    assert requests_seen(any_shop) == before and slow_mail.messages == []
    assert redis.Redis.from_url(limits_redis).llen("celery") == 2 * (TRIALS + 1)  # and one of each untimed


def test_a_code_asked_for_travels_to_the_worker_through_the_broker_without_the_email_in_its_log_line(
        demo, smtp_inbox, limits_redis):
    broker = redis.Redis.from_url(limits_redis)
    with broker_at(limits_redis):
        assert start({"email": "Maya@Example.com", "send_code": True}).status_code == 202
    [raw] = broker.lrange("celery", 0, -1)
    message = json.loads(raw)
    args, _kwargs, _embed = json.loads(base64.b64decode(message["body"]))
    assert message["headers"]["task"] == signin.SEND_CODE_TASK == tasks.send_signin_code.name
    assert "maya" not in message["headers"]["argsrepr"] and message["headers"]["expires"]
    assert args[0] == "maya@example.com" and smtp_inbox.messages == []  # nothing sent by the request
    tasks.send_signin_code(*args)  # what the worker does with it
    assert len(smtp_inbox.codes_for("maya@example.com")) == 1


def test_the_code_task_the_desk_sends_is_a_real_task():
    app.loader.import_default_modules()
    assert signin.SEND_CODE_TASK in app.tasks


def test_with_the_broker_down_asking_a_code_answers_503_for_every_address_alike(demo, smtp_inbox):
    with broker_at(f"redis://127.0.0.1:{free_port()}/0"):
        answers = [start({"email": who, "send_code": True}) for who in ("maya@example.com", "nobody@example.com")]
    assert [(a.status_code, a.content, a["Retry-After"]) for a in answers] == [(503, answers[0].content, "5")] * 2
    assert answers[0].json()["retryable"] is True and smtp_inbox.messages == []


# -- the alert on persistent guessing ---------------------------------------------------------------------

def test_persistent_guessing_at_one_email_raises_one_alert_and_never_refuses_the_owner(demo, smtp_inbox, code_tasks,
                                                                                        settings, caplog):
    settings.SIGNIN_GUESSING_ALERT_PER_HOUR = 12
    caplog.set_level(logging.WARNING, logger="support.security")
    before = alerts("email"), alerts("address")
    for n in range(30):  # from ten addresses, three each: no address comes near the alert
        address = f"203.0.113.{10 + n % 10}"
        wrong = {"order_number": f"SU-9{n:04d}"} if n % 2 else {"code": f"{n:08d}"}
        assert start({"email": "maya@example.com", **wrong}, address=address).status_code == 403
    [line] = alert_lines(caplog)
    assert signin.email_digest("maya@example.com") in line and "maya@example.com" not in line
    assert (alerts("email"), alerts("address")) == (before[0] + 1, before[1])
    assert start({"email": "maya@example.com", "send_code": True}, address=MAYA_HOME).status_code == 202
    code_tasks.run()
    [code] = smtp_inbox.codes_for("maya@example.com")
    assert start({"email": "maya@example.com", "code": code}, address=MAYA_HOME).status_code == 201


def test_guesses_refused_over_the_limit_still_count_towards_the_alert_from_one_address(demo, settings, caplog):
    settings.SIGNIN_GUESSING_ALERT_PER_HOUR = 25  # past SIGNIN_FAILURES_PER_ADDRESS (20): refused ones must count
    caplog.set_level(logging.WARNING, logger="support.security")
    before = alerts("address")
    answers = [start({"email": f"someone{n}@example.com", "order_number": "SU-41207"}).json()["code"]
               for n in range(40)]
    assert answers == ["forbidden"] * 20 + ["code_required"] * 20
    [line] = alert_lines(caplog)
    assert STRANGER in line and "25 failed sign-ins" in line
    assert alerts("address") == before + 1


# -- order numbers named in e-mail --------------------------------------------------------------------------

def test_order_numbers_named_in_mail_are_sign_in_guesses_limited_and_alerted_like_the_widgets(demo, settings, queued,
                                                                                             caplog):
    """A From line is easy to forge: mail naming order numbers for Maya's address counts against the guess limits
    and the alert of her e-mail, together with the widget's sign-in, so e-mail is no oracle for order numbers.
    All mail counts as one client address: five wrong numbers at one e-mail, then nothing more is looked up."""
    settings.INBOUND_EMAIL_ADDRESS = "support@shop.example"
    settings.INBOUND_EMAILS_PER_SENDER_PER_HOUR = 100
    settings.SIGNIN_GUESSING_ALERT_PER_HOUR = 10
    caplog.set_level(logging.WARNING, logger="support.security")
    before = alerts("email")
    spend_the_guesses()  # five wrong in the widget, from a stranger's address
    for n in range(3):  # three numbers a mail are tried: five wrong, then refused, each counted for the alert
        inbound_mail.receive(mail(text=f"Is it SU-9{n}001, SU-9{n}002 or SU-9{n}003?"), source="imap")
    [line] = alert_lines(caplog)
    assert signin.email_digest("maya@example.com") in line and alerts("email") == before + 1
    # Past the limits her real order number opens nothing by mail, nor in the widget from her own address:
    record = inbound_mail.receive(mail(text="It is SU-41207."), source="imap")
    assert record.conversation.order_scope == Conversation.UNVERIFIED
    assert start({"email": "maya@example.com", "order_number": "SU-41207"}, address=MAYA_HOME).json()["code"] == \
        "code_required"


def test_with_redis_away_order_numbers_named_in_mail_are_not_tried(demo, settings, queued):
    settings.INBOUND_EMAIL_ADDRESS = "support@shop.example"
    settings.LIMITS_REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    record = inbound_mail.receive(mail(text="It is SU-41207."), source="imap")
    assert record.outcome == InboundEmail.STARTED and record.conversation.order_scope == Conversation.UNVERIFIED
