"""The evaluation suite: every scenario of evaluation/scenarios/ passes against the stand-in, through the
real runner, loop and tools; a failing criterion names itself; the reports say what ran with what.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.desk import assistant
from support.evaluation import evaluate, report
from support.evaluation.customer import CustomerModel
from support.evaluation.scenario import SCENARIO_DIR, ScenarioError, load, load_all, parse
from support.models import PolicyDocument, PolicyVersion
from tests.mcp_fixture import mcp_server  # noqa: F401
from tests.redis_fixture import free_port
from tests.standin_fixture import standin  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

CONTRACT_ORDERS = {"SU-41207", "SU-41310", "SU-40155", "SU-41388", "SU-41402", "SU-41419", "SU-41533", "SU-41290",
                   "SU-41501", "SU-41210", "SU-41444", "SU-99999", "SU-41620"}


@pytest.fixture
def on_standin(standin, settings):
    settings.MODEL_BASE_URL = standin.base_url
    settings.MODEL_MAX_RETRY_WAIT = 0.05
    return standin


def run(scenarios, **options):
    return evaluate(scenarios, customer_model=CustomerModel(assistant.model()),
                    model={"name": "sundry-standin-1", "endpoint": "test"},
                    prompt={"version": assistant.PROMPT_VERSION, "fingerprint": assistant.prompt_fingerprint()},
                    **options)


def test_every_scenario_passes_against_the_stand_in(on_standin):
    scenarios = load_all()
    result = run(scenarios)
    failures = {name: [f"{c.name}: {c.detail}" for r in runs for c in r.checks if not c.ok]
                for name, runs in result.runs.items() if any(not r.passed and not r.skipped for r in runs)}
    assert not failures, "failing criteria:\n" + json.dumps(failures, indent=1)
    assert result.pass_rate == 1.0 and result.ok


def test_the_suite_covers_every_demo_order_and_the_hard_cases():
    scenarios = load_all()
    runnable = [s for s in scenarios if not s.skip]
    assert len(runnable) >= 25
    assert CONTRACT_ORDERS <= {o for s in runnable for o in s.covers}
    tags = {t for s in runnable for t in s.tags}
    assert {"injection", "privacy", "ceiling", "insisting", "second-look", "multi-turn", "simulated-customer",
            "unrecognised", "mcp", "store-credit", "imported-policy"} <= tags
    assert any(len(s.turns) > 1 and any(t.after_hours >= 24 for t in s.turns) for s in runnable)  # the next day


def test_a_failing_criterion_names_itself(on_standin):
    scenario = parse({
        "title": "wrong on purpose", "customer": "maya@example.com",
        "turn": [{"say": "Has SU-41210 arrived?", "expect": {
            "stop_reason": "escalated", "says": ["a fact nobody states"], "no_calls": [{"tool": "track_parcel"}],
            "refunds": [{"order": "SU-41210", "amount": "4.99"}], "max_model_calls": 1}}],
    }, "deliberately-failing")
    (attempt,) = run([scenario]).runs["deliberately-failing"]
    assert not attempt.passed
    assert set(attempt.failed) == {
        "turn 1: stop_reason is escalated", "turn 1: says 'a fact nobody states'",
        "turn 1: never calls track_parcel()", "turn 1: refunds issued: SU-41210 4.99", "turn 1: at most 1 model calls"}
    details = {c.name: c.detail for c in attempt.checks}
    assert details["turn 1: stop_reason is escalated"] == "was answered"
    assert details["turn 1: refunds issued: SU-41210 4.99"] == "issued: none"


def test_a_scripted_decision_the_agent_never_needed_fails_by_name(on_standin):
    scenario = parse({"title": "t", "customer": "maya@example.com", "turn": [
        {"say": "Has SU-41210 arrived?", "decision": [{"tool": "issue_refund", "action": "approve"}]}]}, "unneeded")
    (attempt,) = run([scenario]).runs["unneeded"]
    assert attempt.failed == ["turn 1: decision approve issue_refund"]


def test_repeats_give_a_pass_rate_per_scenario_and_the_reports_record_model_and_prompt(on_standin, tmp_path):
    scenarios = [s for s in load_all(pattern="su-41210*")]
    result = run(scenarios, repeat=2)
    data = report.as_json(result)
    (entry,) = data["scenarios"]
    assert entry["attempts"] == 2 and entry["pass_rate"] == 1.0 and data["pass_rate"] == 1.0
    assert data["prompt"] == {"version": assistant.PROMPT_VERSION, "fingerprint": assistant.prompt_fingerprint()}
    assert data["model"]["name"] == "sundry-standin-1"
    assert "2/2" in report.table(data)
    report.write(data, tmp_path / "r.json", tmp_path / "r.html")
    assert json.loads((tmp_path / "r.json").read_text())["scenarios"][0]["runs"][0]["transcript"]
    page = (tmp_path / "r.html").read_text()
    assert "<script" not in page and "✓" in page and "get_order" in page


def test_the_html_report_escapes_every_text():
    data = {"started_at": "now", "seconds": 1, "model": {"name": "<b>m</b>", "endpoint": "e"},
            "prompt": {"version": "1", "fingerprint": "f"}, "repeat": 1, "min_pass_rate": 1, "pass_rate": 0,
            "ok": False, "attempts": 1, "passed": 0, "skipped": [], "totals": {"model_calls": 1, "tokens": 1,
                                                                              "cost_usd": 0},
            "scenarios": [{"name": "x", "title": "<img src=x onerror=alert(1)>", "skipped": "", "attempts": 1,
                           "passes": 0, "runs": [{
                               "attempt": 1, "passed": False, "skipped": "", "failed": ["<i>c</i>"],
                               "checks": [{"name": "<i>c</i>", "ok": False, "detail": "<script>x</script>"}],
                               "model_calls": 1, "prompt_tokens": 1, "completion_tokens": 1, "cost_usd": 0,
                               "seconds": 0, "decisions": [], "trace": [],
                               "transcript": [{"seq": 1, "role": "user", "author": "customer",
                                               "content": "<script>alert(1)</script>", "tool_calls": []}]}]}]}
    page = report.as_html(data)
    assert "<script" not in page and "<img" not in page and "<b>m" not in page and "<i>c" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


FAILING = """
title = "expects a hand-over for a plain status question"
customer = "maya@example.com"

[[turn]]
say = "Has SU-41210 arrived?"

[turn.expect]
stop_reason = "escalated"
"""


def test_the_command_works_on_a_throwaway_database_and_fails_below_the_threshold(tmp_path):
    # A process of its own, as CI runs it: its site database would be VAR_DIR/db.sqlite3, never created.
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    (scenarios / "expects-too-much.toml").write_text(FAILING)
    shutil.copy(SCENARIO_DIR / "su-41210-delivered-status.toml", scenarios)
    env = {**os.environ, "VAR_DIR": str(tmp_path / "var"), "MODEL_BASE_URL": ""}
    env.pop("DATABASE_URL", None)
    command = [sys.executable, "manage.py", "evaluate", "--scenario-dir", str(scenarios), "--report",
               str(tmp_path / "out" / "r.json")]
    failed = subprocess.run(command + ["--min-pass-rate", "0.9"], env=env, capture_output=True, text=True,
                            timeout=300, cwd=settings_module_dir())
    assert failed.returncode == 1, failed.stderr[-2000:]
    assert "expects-too-much" in failed.stdout and "turn 1: stop_reason is escalated" in failed.stdout
    data = json.loads((tmp_path / "out" / "r.json").read_text())
    assert (data["passed"], data["attempts"], data["ok"]) == (1, 2, False)
    assert (tmp_path / "out" / "r.html").exists()
    assert not (tmp_path / "var" / "db.sqlite3").exists()  # the site's database was never opened
    assert not list((tmp_path / "var").glob("evaluation-*"))  # the throwaway one is gone
    passed = subprocess.run(command + ["--min-pass-rate", "0.5"], env=env, capture_output=True, text=True,
                            timeout=300, cwd=settings_module_dir())
    assert passed.returncode == 0, passed.stderr[-2000:]


def test_without_a_redis_the_command_counts_limits_in_one_of_its_own_as_a_site_does(tmp_path):
    # Mail names an order number: it is a sign-in guess, which needs the counters (with none, nothing is tried,
    # and the scenario would fail). A process of its own whose LIMITS_REDIS_URL answers nowhere.
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    shutil.copy(SCENARIO_DIR / "email-missing-parcel-refund-approved.toml", scenarios)
    env = {**os.environ, "VAR_DIR": str(tmp_path / "var"), "MODEL_BASE_URL": "",
           "LIMITS_REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"}
    env.pop("DATABASE_URL", None)
    done = subprocess.run([sys.executable, "manage.py", "evaluate", "--scenario-dir", str(scenarios), "--report",
                           str(tmp_path / "out" / "r.json")], env=env, capture_output=True, text=True, timeout=300,
                          cwd=settings_module_dir())
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "rate limits counted in an embedded Redis started for it" in done.stdout
    assert json.loads((tmp_path / "out" / "r.json").read_text())["passed"] == 1


def settings_module_dir() -> str:
    return str(Path(__file__).resolve().parents[1])


def test_over_http_the_command_starts_the_reference_shop_and_the_refund_is_made_there(tmp_path):
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    shutil.copy(SCENARIO_DIR / "su-41310-missing-refund-approved.toml", scenarios)
    env = {**os.environ, "VAR_DIR": str(tmp_path / "var"), "MODEL_BASE_URL": "", "SHOP_BACKEND": "http"}
    env.pop("DATABASE_URL", None)
    env.pop("SHOP_URL", None)
    command = [sys.executable, "manage.py", "evaluate", "--scenario-dir", str(scenarios), "--report",
               str(tmp_path / "r.json")]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, cwd=settings_module_dir())
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "shop: the reference shop over HTTP at http://127.0.0.1:" in done.stdout
    trace = json.loads((tmp_path / "r.json").read_text())["scenarios"][0]["runs"][0]["trace"]
    refund = [s for s in trace if s["tool"] == "issue_refund"]
    assert refund and refund[-1]["result"].startswith('{"refund_id": "RF-') and not refund[-1]["error"]
    refused = subprocess.run(command, env={**env, "SHOP_URL": "http://shop.example"}, capture_output=True,
                             text=True, timeout=300, cwd=settings_module_dir())
    assert refused.returncode != 0 and "resets the shop before every scenario" in refused.stderr


# -- the demo MCP server and imported policies ---------------------------------------------------------------

CREDIT_REQUEST = "The kettle from order SU-41210 stopped working. Could I have 38.00 EUR store credit instead?"


def credit_scenario(**extra) -> dict:
    return {"title": "t", "customer": "maya@example.com", "mcp_servers": ["warranty"], "turn": [
        {"say": CREDIT_REQUEST, "decision": [{"tool": "issue_store_credit", "action": "approve"}]}], **extra}


def test_a_scenario_names_the_mcp_servers_it_uses_and_the_policies_it_imports_first(tmp_path):
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "returns.md").write_text("# Returns\n\nThirty days.\n")
    path = tmp_path / "scenarios" / "with-both.toml"
    path.write_text('title = "t"\ncustomer = "maya@example.com"\nmcp_servers = ["warranty"]\n'
                    'import_policies = ["../policies/returns.md", "../policies"]\n'
                    '[[turn]]\nsay = "hi"\n[turn.expect]\nstore_credits = [{ order = "SU-41210", amount = "38" }]\n'
                    'policies_read = [{ doc_id = "POL-RETURNS" }, { doc_id = "POL-LOSS", version = 1 }]\n')
    scenario = load(path)
    assert scenario.mcp_servers == ("warranty",)
    assert scenario.import_policies == (str(tmp_path / "policies" / "returns.md"), str(tmp_path / "policies"))
    assert scenario.turns[0].expect.store_credits == (("SU-41210", "38.00"),)
    assert scenario.turns[0].expect.policies_read == (("POL-RETURNS", None), ("POL-LOSS", 1))
    assert load_all(SCENARIO_DIR, "mcp-warranty-lookup")[0].mcp_servers == ("warranty",)


@pytest.mark.parametrize("extra, words", [
    ({"mcp_servers": ["billing"]}, "mcp_servers may name warranty; not billing"),
    ({"mcp_servers": "warranty"}, "mcp_servers must be a list of texts"),
    ({"mcp_server": ["warranty"]}, "unknown key(s) mcp_server"),
    ({"import_policies": ["../policies/no-such-file.md"]}, "import_policies: no file or folder '../policies/no-such"),
    ({"import_policy": ["../policies"]}, "unknown key(s) import_policy"),
    ({"mcp_servers": [], "expect": {"store_credits": []}}, 'add mcp_servers = ["warranty"]'),
    ({"expect": {"store_credits": [{"order": "SU-41210", "amount": "lots"}]}}, "amount 'lots' is not a number"),
    ({"expect": {"policies_read": [{"doc_id": "POL-LOSS", "versoin": 2}]}}, "policies_read 1: unknown key(s) versoin"),
    ({"expect": {"policies_read": [{"version": 2}]}}, "doc_id is required"),
])
def test_a_mistake_in_the_new_keys_is_named(extra, words):
    with pytest.raises(ScenarioError) as refused:
        parse(credit_scenario(**extra), "bad")
    assert words in str(refused.value)


def test_the_warranty_service_is_started_for_the_scenario_and_counts_each_store_credit(on_standin):
    expect = {"store_credits": [], "policies_read": [{"doc_id": "POL-HL-LOSS", "version": 2}]}
    scenario = parse(credit_scenario(expect=expect), "credit-counted")
    (attempt,) = run([scenario]).runs["credit-counted"]
    assert set(attempt.failed) == {"conversation: store credits recorded by the warranty service: none",
                                   "conversation: reads policy POL-HL-LOSS v2"}
    details = {c.name: c.detail for c in attempt.checks}
    assert details["conversation: store credits recorded by the warranty service: none"] == \
        "recorded: SU-41210 38.00"  # approved once, recorded once
    assert details["conversation: reads policy POL-HL-LOSS v2"] == "search results read: none"
    assert [d["tool"] for d in attempt.decisions] == ["issue_store_credit"]
    assert [s["tool"] for s in attempt.trace if s["kind"] == "tool"] == [
        "get_order", "lookup_warranty", "issue_store_credit", "record_outcome"]


def test_a_scenario_never_reaches_the_sites_own_mcp_servers(on_standin, mcp_server):  # noqa: F811
    scenario = parse({"title": "t", "customer": "maya@example.com", "turn": [{"say": CREDIT_REQUEST}]}, "no-servers")
    customer = CustomerModel(assistant.model())
    asked = len(mcp_server.headers_seen)
    (attempt,) = evaluate([scenario], customer_model=customer).runs["no-servers"]
    assert attempt.passed
    assert not [s for s in attempt.trace if s["tool"] in ("lookup_warranty", "issue_store_credit")]
    assert mcp_server.credits == [] and len(mcp_server.headers_seen) == asked  # not even asked for its tools


def test_an_imported_policy_is_read_and_gone_for_the_next_scenario(on_standin):
    imported, before = load_all(pattern="policy-imported-hearth-and-loom-24-hours") + \
        load_all(pattern="su-41207-porch-48-hours")
    result = run([imported, before])
    assert [r.passed for runs in result.runs.values() for r in runs] == [True, True]
    assert PolicyDocument.objects.get(doc_id="POL-HL-LOSS").version == 1  # the demo's words, as seeded
    assert not PolicyVersion.objects.exists()


# -- e-mail scenarios: the customer writes through the desk's way in for mail ------------------------------------

def email_scenario(**extra) -> dict:
    return {"title": "by e-mail", "customer": "maya@example.com", "channel": "email",
            "turn": [{"say": "Where is my order SU-41210?"}, {"email": "reply", "say": "Thank you!"},
                     {"email": "auto-reply", "say": "I am out of the office."}], **extra}


@pytest.mark.parametrize("extra, words", [
    ({"channel": "fax"}, "channel is one of widget, email, not 'fax'"),
    ({"turn": [{"email": "reply", "say": "Hi"}]}, "the first e-mail starts the thread: it cannot be a reply"),
    ({"turn": [{"say": "Hi"}, {"email": "forward", "say": "x"}]}, "email is one of '', 'reply', 'auto-reply'"),
    ({"channel": "widget"}, 'email = "..." is for turns of a scenario with channel = "email"'),
    ({"turn": [{"say": "Hi", "attach": ["photo"]}]}, "an e-mail scenario has scripted turns without attachments"),
])
def test_a_mistake_in_an_email_scenario_is_named(extra, words):
    with pytest.raises(ScenarioError) as refused:
        parse(email_scenario(**extra), "bad")
    assert words in str(refused.value)


def test_an_email_thread_is_received_threaded_stripped_and_the_auto_reply_ignored(on_standin):
    (attempt,) = run([parse(email_scenario(), "by-mail")]).runs["by-mail"]
    assert attempt.failed == []
    passed = {c.name for c in attempt.checks if c.ok}
    assert {"turn 1: the mail lands in a new conversation", "turn 2: the desk's answer reached the customer by e-mail",
            "turn 2: the mail lands in its conversation", "turn 2: only the customer's new words are saved",
            "turn 3: the automatic reply is kept, not answered"} <= passed
    customer_words = [m["content"] for m in attempt.transcript if m.get("author") == "customer"]
    assert customer_words == ["Where is my order SU-41210?", "Thank you!"]  # no quote, no out-of-office


def test_no_answer_e_mail_fails_the_reply_by_name(on_standin, monkeypatch):
    monkeypatch.setattr("support.customers.notify.send_reply_emails", lambda now=None: [])
    (attempt,) = run([parse(email_scenario(), "unanswered")]).runs["unanswered"]
    assert "turn 2: the desk's answer reached the customer by e-mail" in attempt.failed
