"""Refunds on someone else's system, exactly once: the reference shop over HTTP and the fake Shopify, with a
real worker process killed (SIGKILL) at each point of a refund, and a connection dropped after the shop wrote.

At every point: one refund at the shop, one record of it in the desk (ShopEffect), one answer to the customer,
and a history the model can be sent again. The refund is approved by policy (AUTO_APPROVE_REFUNDS_UP_TO), so
the kill lands inside it with nobody in the loop.
"""

from __future__ import annotations

import time
from decimal import Decimal

import pytest

from support.models import Run, ShopEffect, ToolCall
from tests.shop_fixture import KEY

from .conftest import (
    ask,
    assert_history_sound,
    assert_trace_complete,
    customer_messages,
    final_answer,
    requeue_when_stale,
    snapshot,
    wait_for,
    wait_run,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

MISSING_41310 = "My parcel SU-41310 never came."
AUTO_REFUNDS = {"AUTO_APPROVE_REFUNDS_UP_TO": "100"}


class Remote:
    """The shop under test, the environment a worker needs to reach it, and what it holds."""

    def __init__(self, name: str, server, env: dict):
        self.name, self.server, self.env = name, server, env

    def refunds(self) -> list[Decimal]:
        key = "order_number" if self.name == "http" else "order"
        return [Decimal(str(r["amount"])) for r in self.server.refunds() if r[key] == "SU-41310"]


@pytest.fixture(params=["http", "shopify"])
def remote(request, settings, demo):
    if request.param == "http":
        server = request.getfixturevalue("reference_shop")
        env = {"SHOP_BACKEND": "http", "SHOP_URL": server.base_url, "SHOP_API_KEY": KEY}
    else:
        server = request.getfixturevalue("fake_shopify")
        env = {"SHOP_BACKEND": "shopify", "SHOPIFY_SHOP_DOMAIN": server.base_url,
               "SHOPIFY_ACCESS_TOKEN": server.token, "SHOPIFY_API_VERSION": server.api_version}
    for name, value in env.items():
        setattr(settings, name, value)
    return Remote(request.param, server, {**env, "SHOP_READ_TIMEOUT_SECONDS": "10", **AUTO_REFUNDS})


def refund_running(run):
    return lambda: ToolCall.objects.filter(run=run, name="issue_refund", status=ToolCall.RUNNING).exists()


def resumed_and_refunded_once(remote: Remote, worker, conversation, run) -> Run:
    """A fresh worker takes the run over once its heartbeat is stale; it ends answered, with one refund."""
    worker(wait=False, **remote.env)
    requeue_when_stale(run)
    run = wait_run(run, Run.STOPPED, timeout=40)
    assert (run.stop_reason, run.attempts) == ("answered", 2), snapshot(conversation)
    assert remote.refunds() == [Decimal("64.00")]
    (record,) = ShopEffect.objects.filter(kind=ShopEffect.REFUND)
    assert (record.order_number, record.amount, record.backend) == ("SU-41310", Decimal("64.00"), remote.name)
    call = ToolCall.objects.get(run=run, name="issue_refund")
    assert (call.status, call.attempts, record.key) == (ToolCall.EXECUTED, 2, call.idempotency_key)
    answer = final_answer(conversation).content
    assert "64.00" in answer and record.reference in answer  # told once, with the shop's reference
    assert customer_messages(conversation, MISSING_41310) == 1
    assert_history_sound(conversation)
    assert_trace_complete(run)
    return run


def test_killed_before_the_request_the_refund_is_made_once_on_resume(remote, worker):
    doomed = worker(**remote.env, FAULT_PAUSE_BEFORE_TOOL="issue_refund:6")
    conversation, _, run = ask(remote_customer(), MISSING_41310)
    wait_for(refund_running(run), message="the refund call to start", describe=lambda: snapshot(conversation))
    time.sleep(0.3)
    doomed.kill()
    assert remote.refunds() == []  # the intent is saved, nothing was sent
    resumed_and_refunded_once(remote, worker, conversation, run)


def test_killed_while_the_shop_holds_its_answer_the_refund_is_found_by_its_key(remote, worker):
    # The shop wrote the refund and has not answered yet: the worker dies without knowing it was made.
    remote.server.configure(hold_after_write_seconds=30)
    doomed = worker(**remote.env)
    conversation, _, run = ask(remote_customer(), MISSING_41310)
    wait_for(lambda: remote.refunds(), timeout=30, message="the shop to make the refund",
             describe=lambda: snapshot(conversation))
    doomed.kill()
    remote.server.configure(hold_after_write_seconds=0)
    assert not ShopEffect.objects.exists()  # the desk never heard
    resumed_and_refunded_once(remote, worker, conversation, run)


def test_killed_after_the_answer_before_the_desk_commits_the_refund_is_recorded_once(remote, worker):
    doomed = worker(**remote.env, FAULT_PAUSE_AFTER_TOOL="issue_refund:6")
    conversation, _, run = ask(remote_customer(), MISSING_41310)
    wait_for(lambda: remote.refunds(), timeout=30, message="the shop to make the refund",
             describe=lambda: snapshot(conversation))
    time.sleep(0.5)  # inside the pause that follows the answer, before the commit
    doomed.kill()
    assert not ShopEffect.objects.exists()  # rolled back with the result it belongs to
    resumed_and_refunded_once(remote, worker, conversation, run)


def test_a_connection_dropped_after_the_shop_wrote_is_resolved_by_the_key_not_sent_twice(remote, worker):
    remote.server.configure(drop_after_write=True)
    worker(**remote.env)
    conversation, _, run = ask(remote_customer(), MISSING_41310)
    run = wait_run(run, Run.STOPPED, timeout=40)
    assert run.stop_reason == "answered", snapshot(conversation)
    assert remote.refunds() == [Decimal("64.00")]
    assert ShopEffect.objects.filter(kind=ShopEffect.REFUND).count() == 1
    assert "64.00" in final_answer(conversation).content
    assert_history_sound(conversation)


def test_a_shop_that_is_down_hands_the_conversation_to_a_person_in_plain_words(remote, worker):
    remote.server.configure(down=True)
    worker(**remote.env, SHOP_READ_RETRIES="1", SHOP_RETRY_MAX_WAIT_SECONDS="0.2")
    conversation, _, run = ask(remote_customer(), MISSING_41310)
    run = wait_run(run, Run.STOPPED, timeout=40)
    assert run.stop_reason == "tool_unavailable", snapshot(conversation)
    conversation.refresh_from_db()
    assert conversation.status == conversation.NEEDS_ATTENTION
    notice = final_answer(conversation).content
    assert notice.startswith("I can't reach our order system right now") and "support team" in notice
    assert remote.refunds() == [] and not ShopEffect.objects.exists()
    assert_history_sound(conversation)


def remote_customer():
    from support.models import Customer

    return Customer.objects.get(email="maya@example.com")
