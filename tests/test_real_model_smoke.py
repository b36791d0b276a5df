"""The real-model smoke's verdict (support/evaluation/smoke.py): it fails when the pipeline broke, whatever the
model answered, and passes a weak model that only answered badly. The smoke itself (a real llama.cpp server)
runs in .ci/run through evaluation/real_model_smoke.sh; here its judgement is fed reports and conversations
built by hand, and the report of a real evaluation against the stand-in, healthy and answering 500.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.desk import assistant
from support.evaluation import evaluate, report, smoke
from support.evaluation.customer import CustomerModel
from support.evaluation.scenario import load_all
from tests.standin_fixture import standin  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]


def attempt(runs, trace=(), error="", name="su-41210-delivered-status"):
    return {"name": name, "attempt": 1, "skipped": "", "error": error, "runs": list(runs), "trace": list(trace)}


def a_report(*attempts, model_calls=3):
    return {"format": 1, "totals": {"model_calls": model_calls, "tokens": 10, "cost_usd": 0},
            "scenarios": [{"name": a["name"], "runs": [a]} for a in attempts]}


def run(n, status="stopped", stop_reason="answered"):
    return {"run": n, "status": status, "stop_reason": stop_reason, "outcome": "unstated"}


def model_step(n, error="", finish_reason="stop"):
    return {"run": n, "kind": "model", "error": error, "finish_reason": finish_reason}


# -- the evaluation's report --------------------------------------------------------------------------------

def test_runs_that_all_ended_with_a_defined_stop_pass_whatever_the_criteria_said():
    data = a_report(attempt([run(1), run(2, "awaiting_approval", None)], [model_step(1), model_step(2)]))
    assert smoke.report_problems(data, ["su-41210-delivered-status"]) == []


@pytest.mark.parametrize("stop_reason", ["model_error", "empty_reply", "turn_limit", "spinning", "escalated"])
def test_a_weak_models_stops_are_defined_stops(stop_reason):
    # A base model cut off at its length limit, an empty reply, going round in circles: the desk handled it.
    data = a_report(attempt([run(1, stop_reason=stop_reason)], [model_step(1, finish_reason="length")]))
    assert smoke.report_problems(data, ["su-41210-delivered-status"]) == []


def test_a_run_left_active_or_without_a_defined_stop_reason_is_named():
    data = a_report(attempt([run(1, status="running", stop_reason=None), run(2, stop_reason="gave_up"),
                             run(3, status="queued", stop_reason=None)]))
    assert smoke.report_problems(data, ["su-41210-delivered-status"]) == [
        "su-41210-delivered-status, run 1: the run was left running",
        "su-41210-delivered-status, run 2: the run stopped without a defined stop reason ('gave_up')",
        "su-41210-delivered-status, run 3: the run was left queued",
    ]


@pytest.mark.parametrize("stop_reason", ["internal_error", "stalled"])
def test_the_desks_own_failures_fail_the_smoke(stop_reason):
    data = a_report(attempt([run(1, stop_reason=stop_reason)]))
    assert smoke.report_problems(data, ["su-41210-delivered-status"]) == [
        f"su-41210-delivered-status, run 1: the run stopped as {stop_reason}"]


def test_a_failed_model_call_is_named_with_the_servers_words():
    error = "400: tools are not supported with this chat format"
    data = a_report(attempt([run(1), run(2, stop_reason="model_error")],
                            [model_step(1), model_step(2, error=error, finish_reason="")]))
    assert smoke.report_problems(data, ["su-41210-delivered-status"]) == [
        f"su-41210-delivered-status, run 2: a model call failed: {error}"]


def test_a_crashed_scenario_a_scenario_not_played_and_no_model_call_at_all_are_named():
    crashed = attempt([], error="RuntimeError: turn 1: more than 20 runs in one turn")
    problems = smoke.report_problems(a_report(crashed, model_calls=0),
                                     ["su-41210-delivered-status", "su-99999-no-such-order"])
    assert problems == [
        "su-41210-delivered-status: the scenario crashed: RuntimeError: turn 1: more than 20 runs in one turn",
        "su-41210-delivered-status: no run was started",
        "su-99999-no-such-order: not played",
        "the evaluation made no model call: the server was never asked",
    ]
    assert smoke.report_problems(None, ["x"]) == ["the evaluation wrote no JSON report"]


def test_both_reports_must_be_written(tmp_path):
    path = tmp_path / "report.json"
    assert smoke.reports_problems(path) == [f"no JSON report at {path}", f"no HTML report at {tmp_path / 'report.html'}"]
    path.write_text("{}")
    path.with_suffix(".html").write_text("<!doctype html>")
    assert smoke.reports_problems(path) == []


# -- the conversation over HTTP -----------------------------------------------------------------------------

CID = "/api/conversations/c1"


def conversation(**changes):
    seen = {
        "requests": [["POST", "/api/conversations", 201], ["POST", f"{CID}/messages", 202],
                     ["GET", f"{CID}/messages?after=0", 200], ["GET", "/api/staff/conversations/c1", 200]],
        "said": ["Has my order SU-41210 arrived?", "Thanks."],
        "read": ["Has my order SU-41210 arrived?", "It is on its way.", "Thanks."],
        "unsettled": [],
        "runs": [{"status": "stopped", "stop_reason": "answered", "steps": [model_step(1)]},
                 {"status": "awaiting_approval", "stop_reason": None, "steps": [model_step(2)]}],
    }
    seen.update(changes)
    return seen


def test_a_conversation_that_took_both_messages_and_ended_its_runs_passes():
    assert smoke.conversation_problems(conversation()) == []


def test_a_5xx_and_an_unexpected_status_from_the_desk_are_named():
    seen = conversation(requests=[["POST", "/api/conversations", 201], ["POST", f"{CID}/messages", 500],
                                  ["GET", f"{CID}/messages?after=0", 404]])
    assert smoke.conversation_problems(seen) == [
        f"POST {CID}/messages answered 500", f"GET {CID}/messages?after=0 answered 404, not 200"]


def test_a_message_that_was_not_kept_and_a_run_left_active_are_named():
    seen = conversation(read=["Has my order SU-41210 arrived?"], unsettled=["the second message's run (running)"])
    assert smoke.conversation_problems(seen) == [
        "the customer's message 'Thanks.' is not in the conversation",
        "the second message's run (running): still active when the smoke stopped waiting"]


def test_no_run_at_all_and_a_failed_model_call_in_the_site_are_named():
    assert smoke.conversation_problems(conversation(runs=[])) == ["no run was started for the customer's messages"]
    broken = [{"status": "stopped", "stop_reason": "model_error",
               "steps": [model_step(1, error="APITimeoutError: Request timed out.", finish_reason="")]}]
    assert smoke.conversation_problems(conversation(runs=broken)) == [
        "conversation, run 1: a model call failed: APITimeoutError: Request timed out."]


# -- a real evaluation's report, against the stand-in -----------------------------------------------------

@pytest.fixture
def on_standin(standin, settings):  # noqa: F811
    settings.MODEL_BASE_URL = standin.base_url
    settings.MODEL_MAX_RETRY_WAIT = 0.01
    return standin


def evaluated(name: str) -> dict:
    result = evaluate(load_all(pattern=name), customer_model=CustomerModel(assistant.model()),
                      model={"name": "sundry-standin-1", "endpoint": "test"}, prompt={})
    return report.as_json(result)


@pytest.mark.django_db(transaction=True)
def test_the_report_lists_each_runs_end_and_a_healthy_server_passes_the_smoke(on_standin):
    data = evaluated("su-41210-delivered-status")
    (attempt_,) = data["scenarios"][0]["runs"]
    assert attempt_["runs"] == [{"run": 1, "status": "stopped", "stop_reason": "answered", "outcome": "resolved"}]
    assert smoke.report_problems(data, ["su-41210-delivered-status"]) == []


@pytest.mark.django_db(transaction=True)
def test_a_server_that_answers_500_fails_the_smoke_even_though_the_run_stopped_as_defined(on_standin):
    on_standin.queue_faults(["500x10"])
    data = evaluated("su-41210-delivered-status")
    (attempt_,) = data["scenarios"][0]["runs"]
    assert [(r["status"], r["stop_reason"]) for r in attempt_["runs"]] == [("stopped", "model_error")]
    (problem,) = smoke.report_problems(data, ["su-41210-delivered-status"])
    assert problem.startswith("su-41210-delivered-status, run 1: a model call failed:") and "500" in problem


def test_evaluate_plays_every_scenario_named_by_a_repeated_scenario_option(tmp_path):
    env = {**os.environ, "VAR_DIR": str(tmp_path / "var"), "MODEL_BASE_URL": ""}
    env.pop("DATABASE_URL", None)
    done = subprocess.run([sys.executable, "manage.py", "evaluate", "--scenario", "su-41210*", "--scenario",
                           "su-99999-no-such-order", "--scenario", "su-41210-delivered-status", "--report",
                           str(tmp_path / "r.json")], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads((tmp_path / "r.json").read_text())
    assert [s["name"] for s in data["scenarios"]] == ["su-41210-delivered-status", "su-99999-no-such-order"]
    missing = subprocess.run([sys.executable, "manage.py", "evaluate", "--scenario", "nothing-*", "--scenario",
                              "nor-this"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert missing.returncode != 0 and "no scenario matches 'nothing-*' or 'nor-this'" in missing.stderr
