"""`manage.py evaluate` scenarios for the copilot (evaluation/scenarios/copilot-*.toml): after the demo's
hand-overs a person asks the copilot for a draft and a suggestion; the draft must cite the right policy at its
current version, and the suggestion, made from the console's own action, must leave the expected end state."""

import dataclasses
import json

import pytest

from support.desk import assistant
from support.evaluation import evaluate
from support.evaluation.customer import CustomerModel
from support.evaluation.scenario import ScenarioError, load_all, parse
from tests.standin_fixture import standin  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def on_standin(standin, settings):  # noqa: F811
    settings.MODEL_BASE_URL = standin.base_url
    settings.MODEL_MAX_RETRY_WAIT = 0.05
    return standin


def played(scenarios):
    return evaluate(scenarios, customer_model=CustomerModel(assistant.model()),
                    model={"name": "sundry-standin-1", "endpoint": "test"},
                    prompt={"version": assistant.PROMPT_VERSION, "fingerprint": assistant.prompt_fingerprint()})


def failing(result) -> dict:
    return {name: [f"{c.name}: {c.detail}" for r in runs for c in r.checks if not c.ok]
            for name, runs in result.runs.items() if any(not r.passed for r in runs)}


def test_the_copilot_scenarios_pass_on_the_stand_in(on_standin):
    scenarios = load_all(pattern="copilot-*")
    assert {s.name for s in scenarios} == {"copilot-refund-above-the-ceiling", "copilot-disputed-refund"}
    result = played(scenarios)
    assert not failing(result), json.dumps(failing(result), indent=1)
    checks = {c.name for runs in result.runs.values() for r in runs for c in r.checks}
    assert "copilot: the draft cites POL-REFUND version 1" in checks and "copilot: suggests a refund" in checks


def test_a_draft_citing_another_policy_or_a_suggestion_that_misses_the_end_state_fails_by_name(on_standin):
    scenario = load_all(pattern="copilot-refund-above-the-ceiling")[0]
    end = dataclasses.replace(scenario.copilot.end_state, refunds=(("SU-41533", "150.00"),))
    wrong = dataclasses.replace(scenario, copilot=dataclasses.replace(scenario.copilot, draft_cites="POL-LOSS",
                                                                      end_state=end))
    names = failing(played([wrong]))[wrong.name]
    assert any(n.startswith("copilot: the draft cites POL-LOSS version 1") for n in names)
    assert any(n.startswith("copilot: ") and "SU-41533" in n for n in names if "cites" not in n)


@pytest.mark.parametrize("copilot, words", [({"suggests": "refund_all"}, "suggests is"),
                                             ({"draft_cite": "POL-REFUND"}, "unknown key(s) draft_cite")])
def test_a_mistake_in_the_copilot_table_is_named(copilot, words):
    with pytest.raises(ScenarioError, match=words.replace("(", r"\(").replace(")", r"\)")):
        parse({"title": "t", "customer": "maya@example.com", "turn": [{"say": "hi"}], "copilot": copilot}, "x")
