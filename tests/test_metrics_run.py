"""Metrics after a scripted run: a customer asks for a refund, the run pauses, a person approves it, the run
resumes and answers; then the customer writes too fast. /metrics is scraped before and after each part,
as Prometheus reads it, and every counter the operator watches has moved by what happened.

The run goes through the Celery task in this process (`run_agent.apply`: the same signals as a worker), on
the model stand-in over HTTP. Counters are per process and never reset, so each is compared with itself.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client

from support.customers import identity
from support.desk import gate, services
from support.live import events
from support.models import Approval, Run
from support.ops import sweeper
from support.tasks import run_agent, sweep
from tests.desk_factories import make_user, start_conversation

MODEL = "sundry-standin-1"
pytestmark = pytest.mark.django_db(transaction=True)  # the runs are queued after their message's commit


def scrape(client: Client) -> dict[str, float]:
    response = client.get("/metrics")
    assert response.status_code == 200, response.content
    samples = {}
    for line in response.content.decode().splitlines():
        if line and not line.startswith("#"):
            key, _, number = line.rpartition(" ")
            samples[key] = float(number)
    return samples


def moved(before: dict, after: dict, key: str) -> float:
    return after.get(key, 0.0) - before.get(key, 0.0)


@pytest.fixture
def broker(settings, limits_redis):
    """The queue gauges and the sweeper's pulse read the broker's Redis: the session's own server here."""
    settings.CELERY_BROKER_URL = limits_redis
    return limits_redis


def test_a_scripted_refund_run_moves_every_counter_an_operator_watches(desk, queued, broker, settings):
    web = Client()
    before = scrape(web)

    # The customer asks; the run pauses on the refund, which waits for a person.
    conversation = start_conversation(desk.maya)
    services.conversation_post_message(conversation=conversation, text="My parcel SU-41310 never came.")
    run_agent.apply(args=[queued.pop()])
    run = Run.objects.get(conversation=conversation)
    assert run.status == Run.AWAITING_APPROVAL
    paused = scrape(web)
    assert paused['desk_runs{status="awaiting_approval"}'] == 1
    assert paused["desk_approvals_pending"] == 1
    assert paused["desk_oldest_pending_approval_seconds"] >= 0
    assert moved(before, paused, 'desk_run_tasks_total{result="awaiting_approval"}') == 1

    # A person approves; the run resumes on the worker and answers.
    approval = Approval.objects.get(run=run)
    gate.approval_decide(approval=approval, user=make_user("lee", staff=True, group="leads"), approve=True)
    run_agent.apply(args=[queued.pop()])
    run.refresh_from_db()
    assert (run.status, run.stop_reason) == (Run.STOPPED, "answered")
    events.publisher.flush()
    after = scrape(web)

    assert moved(before, after, 'desk_runs_stopped_total{stop_reason="answered"}') == 1
    assert moved(before, after, f'desk_model_calls_total{{model="{MODEL}",result="ok"}}') == run.turns
    assert moved(before, after, f'desk_model_tokens_total{{kind="prompt",model="{MODEL}"}}') == run.prompt_tokens
    assert moved(before, after, f'desk_model_tokens_total{{kind="completion",model="{MODEL}"}}') == \
        run.completion_tokens
    # The run's cost is stored in micro-dollars (6 places) and each model call's share is rounded as it is
    # added; the counter adds the unrounded floats: up to half a micro-dollar apart per call.
    assert moved(before, after, f'desk_model_cost_usd_total{{model="{MODEL}"}}') == pytest.approx(
        float(run.cost_usd), abs=0.5e-6 * run.turns + 1e-9)
    assert moved(before, after, f'desk_model_call_seconds_count{{model="{MODEL}"}}') == run.turns
    # Every reply that streamed text had its first token timed (the refund call's reply may stream none).
    assert 1 <= moved(before, after, f'desk_model_first_token_seconds_count{{model="{MODEL}"}}') <= run.turns
    assert moved(before, after, 'desk_tool_calls_total{result="ok",server="desk",tool="issue_refund"}') == 1
    assert moved(before, after, 'desk_approval_decision_seconds_count{decision="approved"}') == 1
    assert moved(before, after, 'desk_events_published_total{type="message.saved"}') >= 4
    assert moved(before, after, 'desk_events_published_total{type="run.status"}') >= 2
    assert after["desk_approvals_pending"] == 0 and after['desk_runs{status="awaiting_approval"}'] == 0
    assert after['desk_queue_messages{state="waiting"}'] == 0  # read from the broker's Redis

    # The beat's sweeper leaves its pulse, and the scrape shows when it last ran.
    assert "desk_sweeper_last_run_timestamp_seconds" not in after
    sweep.apply()
    assert scrape(web)["desk_sweeper_last_run_timestamp_seconds"] == pytest.approx(sweeper.sweeper_last_run())

    # The customer writes faster than MESSAGES_PER_MINUTE: the refusal is counted by what the limit counts.
    settings.MESSAGES_PER_MINUTE = 2
    token = identity.conversation_token(conversation)
    statuses = []
    while 429 not in statuses and len(statuses) < 5:
        statuses.append(web.post(f"/api/conversations/{conversation.public_id}/messages",
                                 json.dumps({"text": f"One more thing ({len(statuses)})."}),
                                 content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}").status_code)
    assert statuses[-1] == 429 and set(statuses[:-1]) <= {202}, statuses
    limited = scrape(web)
    assert moved(after, limited, 'desk_rate_limit_refusals_total{limit="messages"}') == 1
    route = "/api/conversations/<str:public_id>/messages"
    assert moved(after, limited, f'desk_http_requests_total{{method="POST",route="{route}",status="429"}}') == 1
    assert moved(before, limited, f'desk_http_requests_total{{method="POST",route="{route}",status="202"}}') == \
        len(statuses) - 1


def test_a_failed_model_call_moves_the_error_counters_and_the_stop_reason(desk, queued, broker, standin):
    web = Client()
    before = scrape(web)
    standin.queue_faults(["quota"])  # 429 insufficient_quota: not retried, the run stops
    conversation = start_conversation(desk.tom)
    services.conversation_post_message(conversation=conversation, text="Where is SU-41210?")
    run_agent.apply(args=[queued.pop()])
    after = scrape(web)
    assert moved(before, after, 'desk_runs_stopped_total{stop_reason="quota_exceeded"}') == 1
    assert moved(before, after, f'desk_model_calls_total{{model="{MODEL}",result="error"}}') == 1
