"""pass^k over trials, the gate on it, the flaky list, the history of reports and comparing two of them
(`manage.py evaluate --trials/--min-pass-hat-k/--compare`, and the console's evaluation page).
"""

import json
import math

import pytest
from django.core.management import CommandError, call_command

from support.desk import assistant
from support.evaluation import Evaluation, compare, evaluate, passk, report
from support.evaluation.criteria import Check
from support.evaluation.customer import CustomerModel
from support.evaluation.driver import ScenarioRun
from support.evaluation.scenario import load_all
from tests.desk_factories import make_user
from tests.redis_fixture import free_port
from tests.standin_fixture import standin  # noqa: F401


def test_pass_hat_k_is_c_choose_k_over_n_choose_k():
    assert passk.pass_hat(4, 3, 1) == 0.75
    assert passk.pass_hat(4, 3, 2) == 0.5  # C(3,2)/C(4,2) = 3/6
    assert passk.pass_hat(4, 3, 3) == 0.25  # 1/4
    assert passk.pass_hat(4, 3, 4) == 0.0
    assert passk.pass_hat(5, 5, 5) == 1.0
    assert passk.pass_hat(2, 2, 3) is None  # fewer trials than k: not defined
    for n in range(1, 7):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert math.isclose(passk.pass_hat(n, c, k), math.comb(c, k) / math.comb(n, k))
    assert passk.per_scenario(4, 3, 3) == {"1": 0.75, "2": 0.5, "3": 0.25}


def test_the_suite_number_is_the_mean_over_scenarios_and_ignores_those_with_too_few_trials():
    assert passk.overall([(4, 4), (4, 2)], 2) == {"1": 0.75, "2": round((1 + 1 / 6) / 2, 4)}
    assert passk.overall([(2, 1), (1, 1)], 2) == {"1": 0.75, "2": 0.0}  # (1, 1) has no pass^2
    assert passk.overall([], 2) == {"1": None, "2": None}
    assert passk.flaky(3, 1) and not passk.flaky(3, 3) and not passk.flaky(3, 0)


def _trial(name: str, attempt: int, ok: bool, cost: float = 0.001) -> ScenarioRun:
    run = ScenarioRun(name=name, title=name, attempt=attempt, cost_usd=cost, model_calls=3, prompt_tokens=100,
                      completion_tokens=10, checks=[Check("says the right thing", ok, "" if ok else "it did not")])
    run.transcript = [{"seq": 1, "role": "user", "author": "customer", "content": "hi", "tool_calls": []},
                      {"seq": 2, "role": "assistant", "author": "agent", "content": "hello", "tool_calls": []},
                      {"seq": 3, "role": "user", "author": "customer", "content": "thanks", "tool_calls": []}]
    return run


def _made(results: dict[str, list[bool]], **options) -> Evaluation:
    scenarios = [s for s in load_all() if not s.skip][: len(results)]
    ev = Evaluation(scenarios=scenarios, trials=max(len(v) for v in results.values()),
                    model={"name": "m"}, prompt={"version": 1, "fingerprint": "f"}, **options)
    for scenario, oks in zip(scenarios, results.values()):
        ev.runs[scenario.name] = [_trial(scenario.name, i, ok) for i, ok in enumerate(oks, 1)]
    return ev


def test_the_report_gives_pass_hat_k_per_scenario_and_overall_and_names_the_flaky_ones():
    ev = _made({"a": [True, True, True], "b": [True, False, True], "c": [False, False, False]})
    data = report.as_json(ev)
    names = [s["name"] for s in data["scenarios"]]
    assert data["trials"] == 3 and data["format"] == 2
    a, b, c = data["scenarios"]
    assert a["pass_hat_k"] == {"1": 1.0, "2": 1.0, "3": 1.0} and not a["flaky"]
    assert b["pass_hat_k"] == {"1": round(2 / 3, 4), "2": round(1 / 3, 4), "3": 0.0} and b["flaky"]
    assert c["pass_hat_k"] == {"1": 0.0, "2": 0.0, "3": 0.0} and not c["flaky"]
    assert data["flaky"] == [names[1]]
    assert data["pass_hat_k"]["3"] == round(1 / 3, 4)
    assert data["pass_hat_k"]["1"] == round((1 + 2 / 3 + 0) / 3, 4)
    assert [r["turns"] for r in a["runs"]] == [2, 2, 2]  # the customer's messages of each trial
    assert all(r["cost_usd"] == 0.001 for r in b["runs"])
    text = report.summary(data)
    assert "pass^3 33%" in text and f"flaky: {names[1]}" in text
    table = report.table(data)
    assert "pass^3" in table.splitlines()[0] and "2/3 flaky" in table
    html = report.as_html(data)
    assert "<th>pass^3</th>" in html and "flaky" in html and "2 customer turns" in html


def test_the_gate_on_pass_hat_k_fails_a_suite_whose_pass_rate_alone_would_do():
    ev = _made({"a": [True, True], "b": [True, False]}, min_pass_rate=0.7)
    assert ev.pass_rate == 0.75
    assert ev.ok  # no gate on pass^k: the pass rate is enough
    ev.min_pass_hat_k = 0.6
    assert ev.pass_hat()["2"] == 0.5 and not ev.ok
    ev.min_pass_hat_k = 0.5
    assert ev.ok


@pytest.fixture
def on_standin(standin, settings, tmp_path):  # noqa: F811
    settings.MODEL_BASE_URL = standin.base_url
    settings.MODEL_MAX_RETRY_WAIT = 0.05
    settings.VAR_DIR = tmp_path
    return standin


@pytest.mark.django_db(transaction=True)
def test_trials_play_each_scenario_k_times_on_a_fresh_shop(on_standin):
    scenarios = [s for s in load_all() if s.name == "su-41310-missing-refund-approved"]
    ev = evaluate(scenarios, trials=2, customer_model=CustomerModel(assistant.model()),
                  model={"name": "sundry-standin-1"}, prompt={"version": assistant.PROMPT_VERSION})
    runs = ev.runs["su-41310-missing-refund-approved"]
    assert [r.attempt for r in runs] == [1, 2]
    # The refund of the first trial is gone before the second: both trials refund the same order afresh.
    assert all(r.passed for r in runs), [r.failed for r in runs]
    assert ev.pass_hat() == {"1": 1.0, "2": 1.0}


@pytest.mark.django_db(transaction=True)
def test_the_command_gates_on_pass_hat_k_keeps_the_report_and_compares_two(on_standin, tmp_path, capsys):
    out = tmp_path / "a.json"
    call_command("evaluate", "--scenario", "su-41207*", "--trials", "2", "--min-pass-hat-k", "1.0",
                 "--report", str(out))
    data = json.loads(out.read_text())
    assert data["trials"] == 2 and data["pass_hat_k"] == {"1": 1.0, "2": 1.0} and data["ok"]
    assert data["prompt"]["tools_fingerprint"] == assistant.tools_fingerprint()
    assert data["desk"]["version"]
    assert [p.name for p in report.kept()] and json.loads(report.kept()[0].read_text())["trials"] == 2

    worse = json.loads(out.read_text())
    worse["scenarios"][0]["passes"] = 1
    worse["scenarios"][0]["runs"][1]["cost_usd"] = 0.5
    (tmp_path / "b.json").write_text(json.dumps(worse))
    capsys.readouterr()
    call_command("evaluate", "--compare", str(out), str(tmp_path / "b.json"))
    printed = capsys.readouterr().out
    line = next(x for x in printed.splitlines() if x.startswith("su-41207"))
    assert "100% -> 50%" in line and "100% -> 0%" in line and "WORSE" in line
    assert "suite pass^1: 100% -> 50%; pass^2: 100% -> 0%" in printed

    with pytest.raises(CommandError, match="not an evaluation report"):
        (tmp_path / "c.json").write_text("[1, 2]")
        call_command("evaluate", "--compare", str(out), str(tmp_path / "c.json"))
    with pytest.raises(CommandError, match="--min-pass-hat-k"):
        call_command("evaluate", "--min-pass-hat-k", "2")


@pytest.mark.django_db(transaction=True)
def test_below_the_pass_hat_k_gate_the_command_exits_with_status_1(on_standin, settings, tmp_path):
    settings.MODEL_BASE_URL = "http://127.0.0.1:9/v1"  # nobody answers: every trial fails
    settings.MODEL_MAX_RETRIES = 0
    with pytest.raises(SystemExit) as stopped:
        call_command("evaluate", "--scenario", "su-41210*", "--trials", "2", "--min-pass-rate", "0",
                     "--min-pass-hat-k", "0.5", "--report", str(tmp_path / "r.json"))
    assert stopped.value.code == 1
    assert json.loads((tmp_path / "r.json").read_text())["pass_hat_k"]["2"] == 0.0


def test_reports_of_the_first_format_compare_too():
    old = {"repeat": 1, "model": {"name": "a"}, "prompt": {}, "scenarios": [
        {"name": "x", "attempts": 1, "passes": 1, "runs": [{"prompt_tokens": 10, "completion_tokens": 5,
                                                            "cost_usd": 0.01, "model_calls": 2}]},
        {"name": "gone", "attempts": 1, "passes": 1, "runs": []}]}
    new = {"trials": 2, "model": {"name": "b"}, "prompt": {}, "scenarios": [
        {"name": "x", "attempts": 2, "passes": 2, "runs": []}, {"name": "fresh", "attempts": 2, "passes": 0}]}
    result = compare.compare(old, new)
    assert result["k"] == 1
    assert {r["name"]: r["change"] for r in result["scenarios"]} == {"x": "same", "gone": "gone", "fresh": "new"}
    assert result["scenarios"][0]["before"]["tokens"] == 15


@pytest.fixture
def two_reports(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    ev = _made({"a": [True, True], "b": [True, True]})
    before = report.as_json(ev)
    report.keep(before)
    ev.runs[ev.scenarios[1].name][1].checks = [Check("says the right thing", False, "no")]
    after = report.as_json(ev)
    after["started_at"] = "2026-12-03T11:00:00+00:00"
    report.write(after, report.latest_path(), report.latest_path().with_suffix(".html"))
    return before, after


@pytest.mark.django_db
def test_the_console_page_shows_pass_hat_k_the_flaky_ones_and_a_comparison(client, two_reports):
    before, after = two_reports
    client.force_login(make_user("sam", staff=True))
    page = client.get("/console/evaluation/").content.decode()
    flaky = after["scenarios"][1]["name"]
    assert "pass^2" in page and f"Passed some trials and failed others: {flaky}" in page
    assert 'data-testid="evaluation-compare-with"' in page
    name = report.kept()[0].name
    page = client.get("/console/evaluation/", {"compare": name}).content.decode()
    assert 'data-change="worse"' in page and page.count('data-testid="evaluation-compare-row"') == 2
    assert "100% → 50%" in page and "100% → 0%" in page
    # Only a kept report may be named: a path is not read.
    page = client.get("/console/evaluation/", {"compare": "../evaluation/report.json"}).content.decode()
    assert 'data-testid="evaluation-compare-missing"' in page and "evaluation-compare-row" not in page



@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("redis_up", [True, False], ids=["limits in Redis", "Redis away"])
def test_every_trial_counts_rate_limits_from_zero_and_the_plumbing_logs_no_error(on_standin, settings, caplog,
                                                                                  redis_up):
    """Trials of one demo customer's scenario follow each other within a minute. With the desk's per-customer
    limit shared between trials (in Redis, or without it counted from the customer's messages in the database),
    a later trial was refused ("please wait about a minute"). Each trial counts from zero: any number of trials
    gives the same verdict, and nothing the evaluation does itself is logged as an error."""
    settings.CUSTOMER_MESSAGES_PER_MINUTE = 2  # the photo scenario sends one message a trial
    if not redis_up:
        settings.LIMITS_REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    scenarios = [s for s in load_all() if s.name == "damaged-item-with-a-photo"]
    with caplog.at_level("ERROR"):
        ev = evaluate(scenarios, trials=4, customer_model=CustomerModel(assistant.model()),
                      model={"name": "sundry-standin-1"}, prompt={"version": assistant.PROMPT_VERSION})
    runs = ev.runs["damaged-item-with-a-photo"]
    assert [r.passed for r in runs] == [True] * 4, [(r.failed, r.error) for r in runs]
    assert ev.pass_hat()["4"] == 1.0
    # asyncio's "Task was destroyed but it is pending!" is logged when the garbage collector meets a task an
    # earlier test of this process left behind: whenever collection runs, not by the evaluation.
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"
            and not (r.name == "asyncio" and r.getMessage().startswith("Task was destroyed"))] == []


def test_reports_started_in_the_same_second_are_each_kept(settings, tmp_path):
    """CI runs its evaluations at once: two reports with the same start and model keep two files, not one."""
    settings.VAR_DIR = tmp_path
    data = report.as_json(_made({"a": [True]}))
    paths = [report.keep(data), report.keep(data), report.keep(data)]
    assert len(set(paths)) == 3
    assert sorted(p.name for p in report.kept()) == sorted(p.name for p in paths)
    assert all(json.loads(p.read_text())["started_at"] == data["started_at"] for p in paths)
