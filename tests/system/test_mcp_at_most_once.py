"""A gated MCP call is made at most once, across a worker killed while the call is in flight: the call reached
the service, the worker died before its answer was saved, and the next worker does not send it again; the
conversation goes to a person with what may have run."""

import json
import time

import pytest

from agentsite.mcp_settings import parse_servers
from standin import warranty
from support.desk import gate
from support.models import Approval, Conversation, Run, ToolCall

from .conftest import (
    ask,
    assert_history_sound,
    final_answer,
    requeue_when_stale,
    snapshot,
    wait_for,
    wait_run,
)

pytestmark = pytest.mark.django_db(transaction=True)

CREDIT_REQUEST = ("The stovetop kettle from order SU-41210 has stopped heating evenly. Could I have 38.00 EUR "
                  "store credit instead of sending it back?")


@pytest.fixture
def service():
    running = warranty.start_in_thread()
    yield running
    running.stop()


def test_a_worker_killed_during_a_gated_mcp_call_never_sends_it_again(demo, worker, staff, service, settings):
    setting = warranty.setting(service.url, timeout=30)
    env = {"MCP_SERVERS": json.dumps(setting)}
    settings.MCP_SERVERS = parse_servers(setting)  # this process decides the approval: it knows the tool too
    doomed = worker(**env)
    conversation, _, run = ask(demo.maya, CREDIT_REQUEST)
    run = wait_run(run, Run.AWAITING_APPROVAL)
    approval = Approval.objects.get(run=run)
    assert approval.tool_call.name == "issue_store_credit"
    assert approval.requested_arguments["order_number"] == "SU-41210"

    service.records.answer_after = 60  # the service records the credit, then takes its time to answer
    gate.approval_decide(approval=approval, user=staff, approve=True)
    wait_for(lambda: service.credits, message="the store credit to reach the service",
             describe=lambda: snapshot(conversation))
    assert ToolCall.objects.get(pk=approval.tool_call_id).status == ToolCall.RUNNING
    doomed.kill()  # SIGKILL: the answer is never read, nothing after the call is saved
    time.sleep(0.2)
    service.records.answer_after = 0

    worker(wait=False, **env)
    requeue_when_stale(run)
    run = wait_run(run, Run.STOPPED, timeout=40)
    assert len(service.credits) == 1, service.credits  # not sent a second time
    call = ToolCall.objects.get(pk=approval.tool_call_id)
    assert call.attempts == 2 and "may have run" in call.result
    conversation.refresh_from_db()
    assert conversation.status == Conversation.NEEDS_ATTENTION
    assert conversation.attention_reason.startswith(
        "issue_store_credit 38.00 on SU-41210 may have run; check the warranty system")
    assert conversation.notes.filter(text__startswith="issue_store_credit 38.00 on SU-41210 may have run").count() == 1
    assert "our team" in final_answer(conversation).content.lower()  # the customer is told someone will check
    assert_history_sound(conversation)
