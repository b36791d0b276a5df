"""End-state checks, must_tell, the τ²-shaped simulated customer and its ending tokens, and the triage of failed
trials: each through the real desk against the stand-in where it can fail that way, else on plain values.
"""

import json

import pytest

from standin import customer as standin_customer
from support.agent.types import ModelError
from support.desk import assistant
from support.evaluation import evaluate, report
from support.evaluation.criteria import Check, EndSeen, check_end_state, told
from support.evaluation.customer import PROMPT, CustomerModel, ending, prompt
from support.evaluation.driver import ScenarioRun
from support.evaluation.scenario import EndState, ScenarioError, SellerNote, load_all, parse
from support.evaluation.triage import triage
from tests.standin_fixture import standin  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

REFUND_TURN = {"say": "My parcel SU-41310 never came, tracking says delivered last week.",
               "decision": [{"tool": "issue_refund", "action": "approve"}]}


@pytest.fixture
def on_standin(standin, settings):  # noqa: F811
    settings.MODEL_BASE_URL = standin.base_url
    settings.MODEL_MAX_RETRY_WAIT = 0.05
    return standin


def play(data: dict, name: str = "t", customer_model=None) -> ScenarioRun:
    scenario = parse({"title": "t", "customer": "maya@example.com", **data}, name)
    customer_model = customer_model or CustomerModel(assistant.model())
    (attempt,) = evaluate([scenario], customer_model=customer_model).runs[name]
    return attempt


def end_checks(attempt: ScenarioRun) -> dict[str, bool]:
    return {c.name: c.ok for c in attempt.checks if c.name.startswith("end state")}


# -- the end state, against the shop the desk really wrote to ------------------------------------------------------

def test_an_exact_end_state_passes(on_standin):
    attempt = play({"turn": [REFUND_TURN], "end_state": {
        "refunds": [{"order": "SU-41310", "amount": "64"}], "approvals": [{"tool": "issue_refund", "decision": "approved"}],
        "conversation_status": "open", "must_tell": ["€64", "48 hours", "SU-41310"]}})
    assert attempt.passed, attempt.failed
    assert end_checks(attempt) == {
        "end state: refund SU-41310 64.00": True, "end state: no other refunds": True,
        "end state: no other seller messages": True, "end state: approval issue_refund approved": True,
        "end state: no other approvals": True, "end state: no other hand-overs": True,
        "end state: conversation is open": True, "end state: the customer was told '€64'": True,
        "end state: the customer was told '48 hours'": True, "end state: the customer was told 'SU-41310'": True}
    assert attempt.triage is None


def test_the_shops_own_earlier_refunds_are_not_the_scenarios(on_standin):
    # SU-41290 had 40.00 refunded before the scenario: only the 80.00 the desk made is in its end state.
    (scenario,) = load_all(pattern="su-41290-rest-of-the-balance")
    (attempt,) = evaluate([scenario], customer_model=CustomerModel(assistant.model())).runs[scenario.name]
    assert attempt.passed, attempt.failed
    assert end_checks(attempt)["end state: refund SU-41290 80.00"]


def test_an_unexpected_refund_fails_naming_it_and_is_an_unintended_write(on_standin):
    attempt = play({"turn": [REFUND_TURN], "end_state": {"approvals": [{"tool": "issue_refund",
                                                                        "decision": "approved"}]}})
    assert attempt.failed == ["end state: unexpected refund SU-41310 64.00"]
    assert attempt.triage["label"] == "unintended_write"
    assert "SU-41310 64.00" in attempt.triage["why"]


def test_a_missing_write_fails_naming_it(on_standin):
    attempt = play({"turn": [REFUND_TURN], "end_state": {
        "refunds": [{"order": "SU-41310", "amount": "64.00"}],
        "seller_messages": [{"order": "SU-41310", "seller": "S-HL", "contains": "never arrived"}],
        "approvals": [{"tool": "issue_refund", "decision": "approved"}]}})
    assert attempt.failed == ["end state: seller message SU-41310 to S-HL ('never arrived')"]
    details = {c.name: c.detail for c in attempt.checks}
    assert details["end state: seller message SU-41310 to S-HL ('never arrived')"] == "not there; there: none"
    assert attempt.triage["label"] == "partial_goal"


def test_a_refund_of_the_wrong_amount_is_wrong_arguments(on_standin):
    # Staff cut the refund to 40.00: the scenario's end state wanted 64.00 on that order.
    turn = {**REFUND_TURN, "decision": [{"tool": "issue_refund", "action": "edit", "arguments": {"amount": "40.00"}}]}
    attempt = play({"turn": [turn], "end_state": {"refunds": [{"order": "SU-41310", "amount": "64.00"}],
                                                  "approvals": [{"tool": "issue_refund", "decision": "edited"}]}})
    assert set(attempt.failed) == {"end state: refund SU-41310 64.00", "end state: unexpected refund SU-41310 40.00"}
    assert attempt.triage["label"] == "wrong_arguments"


def test_must_tell_missing_fails(on_standin):
    attempt = play({"turn": [{"say": "Has SU-41210 arrived?"}],
                    "end_state": {"must_tell": ["delivered", "SU-41311", "€38.50"]}})
    assert set(attempt.failed) == {"end state: the customer was told 'SU-41311'",
                                   "end state: the customer was told '€38.50'"}
    assert attempt.triage["label"] == "partial_goal"


def test_an_expected_approval_never_requested_is_a_missing_approval_request(on_standin):
    attempt = play({"turn": [{"say": "Has SU-41210 arrived?"}],
                    "end_state": {"approvals": [{"tool": "issue_refund", "decision": "approved"}]}})
    assert attempt.failed == ["end state: approval issue_refund approved"]
    assert attempt.triage["label"] == "missing_approval_request"
    unused = play({"turn": [{"say": "Has SU-41210 arrived?",
                             "decision": [{"tool": "issue_refund", "action": "approve"}]}]})
    assert unused.triage["label"] == "missing_approval_request"


def test_an_expected_call_never_made_is_the_wrong_tool_and_a_failing_model_the_environment(on_standin, settings):
    wrong = play({"turn": [{"say": "Has SU-41210 arrived?", "expect": {"calls": [{"tool": "escalate_to_human"}]}}]})
    assert wrong.failed == ["turn 1: calls escalate_to_human()"]
    assert wrong.triage["label"] == "wrong_tool"
    settings.MODEL_MAX_RETRIES = 1
    broken = play({"turn": [{"say": "Has SU-41210 arrived? #fault:500x5", "expect": {"says": ["delivered"]}}]})
    assert "model_error" in broken.stop_reasons
    assert broken.triage["label"] == "environment"


@pytest.mark.parametrize("end, seen, failed", [
    (EndState(refunds=(("SU-1", "5.00"),)), EndSeen(refunds=[("SU-1", "5.00"), ("SU-1", "5.00")]),
     ["end state: unexpected refund SU-1 5.00"]),  # the same refund twice is one too many
    (EndState(seller_messages=(SellerNote("SU-1", contains="Photo"),)),
     EndSeen(seller_messages=[("SU-1", "S-HL", "please send a photo")]), []),
    (EndState(seller_messages=(SellerNote("SU-1", seller="S-BE"),)),
     EndSeen(seller_messages=[("SU-1", "S-HL", "x")]),
     ["end state: seller message SU-1 to S-BE", "end state: unexpected seller message SU-1 S-HL x"]),  # the wrong seller
    (EndState(escalations=("",)), EndSeen(), ["end state: hand-over (any)"]),
    (EndState(), EndSeen(escalations=["Refund above the limit"]),
     ["end state: unexpected hand-over Refund above the limit"]),
    (EndState(approvals=(("issue_refund", "approved"),)), EndSeen(approvals=[("issue_refund", "rejected")]),
     ["end state: approval issue_refund approved", "end state: unexpected approval issue_refund rejected"]),
])
def test_end_state_comparison_is_exact(end, seen, failed):
    assert [c.name for c in check_end_state(end, seen) if not c.ok] == failed


def test_each_end_state_failure_says_what_kind_it_is():
    def tags(end, seen):
        return {c.name: c.tag for c in check_end_state(end, seen) if not c.ok}
    assert tags(EndState(seller_messages=(SellerNote("SU-1", seller="S-BE"),)),
                EndSeen(seller_messages=[("SU-1", "S-HL", "x")])) == {
        "end state: seller message SU-1 to S-BE": "partial_goal",
        "end state: unexpected seller message SU-1 S-HL x": "wrong_arguments"}  # the right order, the wrong seller
    assert tags(EndState(), EndSeen(seller_messages=[("SU-2", "S-HL", "x")], refunds=[("SU-2", "1.00")])) == {
        "end state: unexpected seller message SU-2 S-HL x": "unintended_write",
        "end state: unexpected refund SU-2 1.00": "unintended_write"}
    assert tags(EndState(approvals=(("issue_refund", "approved"),)), EndSeen(approvals=[("issue_refund", "rejected")])) \
        == {"end state: approval issue_refund approved": "partial_goal",  # asked for, decided otherwise
            "end state: unexpected approval issue_refund rejected": ""}


def test_the_per_turn_criteria_say_what_kind_of_failure_they_show():
    from support.evaluation.criteria import Observed, check
    from support.evaluation.scenario import CallRule, Expect

    def tags(expect, seen):
        return {c.name: c.tag for c in check(expect, seen, "turn 1") if not c.ok}
    seen = Observed(calls=[("get_order", {"order_id": "SU-1"}), ("issue_refund", {"order_id": "SU-1", "amount": "9"})],
                    refunds=[("SU-1", "9.00")], seller_messages=[("SU-1", "hello")])
    assert tags(Expect(calls=(CallRule("issue_refund", {"amount": "5"}), CallRule("track_parcel")),
                       no_calls=(CallRule("get_order"),), refunds=(("SU-1", "5.00"),), seller_messages=()), seen) == {
        "turn 1: calls issue_refund(amount=5)": "wrong_arguments", "turn 1: calls track_parcel()": "wrong_tool",
        "turn 1: never calls get_order()": "wrong_tool", "turn 1: refunds issued: SU-1 5.00": "wrong_arguments",
        "turn 1: seller messages: none": "unintended_write"}
    assert tags(Expect(refunds=(), seller_messages=(("SU-1", "bye"), ("SU-2", ""))), seen) == {
        "turn 1: refunds issued: none": "unintended_write", "turn 1: seller messages: SU-1 ('bye'), SU-2": ""}


@pytest.mark.parametrize("fact, text, found", [
    ("30.00", "We refunded €30 today.", True), ("30.00", "30,00 EUR back", True), ("€30", "a refund of 30.00.", True),
    ("30.00", "EUR 30", True), ("30.00", "30 euros", True),
    ("30.00", "within 30 days", False), ("30.00", "130.00", False), ("30.00", "30.50", False),
    ("64.00", "64,000 people", False), ("48 hours", "after 48\nHours", True), ("SU-41207", "order su-41207", True),
    ("SU-41207", "SU-41270", False),
])
def test_must_tell_amounts_match_however_they_are_written_and_nothing_else(fact, text, found):
    assert told(fact, text) is found


@pytest.mark.parametrize("end_state, words", [
    ({"refunds": [{"order": "SU-1"}]}, "end_state refunds 1: amount is required"),
    ({"refunds": [{"order": "SU-1", "amount": "lots"}]}, "amount 'lots' is not a number"),
    ({"approvals": [{"tool": "issue_refund", "decision": "ok"}]}, "decision is one of approved, edited"),
    ({"seller_messages": [{"order": "SU-1", "text": "x"}]}, "seller_messages 1: unknown key(s) text"),
    ({"must_tell": ["48 hours", " "]}, "must_tell has an empty fact"),
    ({"must_tell": "48 hours"}, "must_tell must be a list of texts"),
    ({"refund": []}, "end_state: unknown key(s) refund"),
    ({"conversation_status": "closed"}, "conversation_status is one of open, needs_attention, taken_over, not 'closed'"),
])
def test_a_mistake_in_an_end_state_is_named(end_state, words):
    with pytest.raises(ScenarioError) as refused:
        parse({"title": "t", "customer": "maya@example.com", "turn": [{"say": "hi"}], "end_state": end_state}, "bad")
    assert words in str(refused.value)


# -- the simulated customer ----------------------------------------------------------------------------------------

SIM = {"reason_for_call": "My parcel never arrived.", "known_info": "The order is SU-41310.",
       "unknown_info": "You do not know the tracking number.", "task_instructions": "Be brief.",
       "persona": "Maya, busy.", "max_turns": 4, "expect_end": "transfer"}


def test_the_new_simulated_customer_fields_are_parsed_and_the_old_goal_still_works():
    scenario = parse({"title": "t", "customer": "maya@example.com", "simulated_customer": SIM}, "sim")
    sim = scenario.simulated
    assert (sim.reason_for_call, sim.known_info, sim.unknown_info, sim.task_instructions, sim.persona,
            sim.max_turns, sim.expect_end) == ("My parcel never arrived.", "The order is SU-41310.",
                                               "You do not know the tracking number.", "Be brief.", "Maya, busy.",
                                               4, "transfer")
    text = prompt(sim)
    assert text.startswith(standin_customer.CUSTOMER_PROMPT_START)
    assert standin_customer.sections(text)["What you know"] == "The order is SU-41310."
    old = parse({"title": "t", "customer": "maya@example.com",
                 "simulated_customer": {"persona": "p", "goal": "Get a refund for SU-41310."}}, "old").simulated
    assert old.reason_for_call == old.goal == "Get a refund for SU-41310." and old.expect_end == ""


@pytest.mark.parametrize("change, words", [
    ({"reason_for_call": ""}, "reason_for_call is required"),
    ({"goal": "x"}, "goal is the older name of reason_for_call: give one of them"),
    ({"expect_end": "hang-up"}, "expect_end is one of stop, transfer, out-of-scope, not 'hang-up'"),
    ({"known_info": ["SU-41310"]}, "known_info must be text"),
    ({"max_turns": 0}, "max_turns must be at least 1"),
    ({"mood": "angry"}, "unknown key(s) mood"),
])
def test_a_mistake_in_the_simulated_customer_is_named(change, words):
    with pytest.raises(ScenarioError) as refused:
        parse({"title": "t", "customer": "maya@example.com", "simulated_customer": {**SIM, **change}}, "bad")
    assert words in str(refused.value)


@pytest.mark.parametrize("reply, end", [
    ("Thanks, that's all. ###STOP###", "stop"), ("###TRANSFER###", "transfer"),
    ("I don't have that. ###OUT-OF-SCOPE###", "out-of-scope"), ("###OUT-OF-SCOPE### ###STOP###", "out-of-scope"),
    ("It's SU-41310.", ""),
])
def test_the_ending_token_is_read_anywhere_in_a_reply(reply, end):
    assert ending(reply) == end


class Scripted:
    """A customer model that answers from a list, and records what it was sent."""

    model = "scripted-customer"

    def __init__(self, *replies):
        self.replies, self.sent = list(replies), []

    def complete(self, transcript, tools, sink):
        from support.agent.types import ModelReply

        self.sent.append((list(transcript.messages) if hasattr(transcript, "messages") else transcript, tools))
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return ModelReply(message={"role": "assistant", "content": reply}, finish_reason="stop")


@pytest.mark.parametrize("token, end", [("###STOP###", "stop"), ("Bye! ###TRANSFER###", "transfer"),
                                        ("###OUT-OF-SCOPE###", "out-of-scope")])
def test_each_token_ends_the_conversation_and_is_recorded(on_standin, token, end):
    customer = Scripted("It's order SU-41210.", token, "never sent")
    attempt = play({"turn": [{"say": "Where is my parcel?"}],
                    "simulated_customer": {"reason_for_call": "Where is my parcel?", "max_turns": 5}},
                   customer_model=CustomerModel(customer))
    assert attempt.customer_end == end and attempt.customer_calls == 2
    said = [m["content"] for m in attempt.transcript if m["role"] == "user"]
    assert said == ["Where is my parcel?", "It's order SU-41210."]  # the token's message is not sent on
    assert attempt.as_dict()["customer_end"] == end


def test_the_stand_in_plays_the_customer_to_each_ending(on_standin):
    stop = play({"simulated_customer": {"reason_for_call": "Has SU-41210 arrived?", "expect_end": "stop"}})
    assert stop.passed and stop.customer_end == "stop", stop.failed
    transfer = play({"simulated_customer": {"reason_for_call": "I want all 480 euros back for SU-41533.",
                                            "expect_end": "transfer"}})
    assert transfer.passed and transfer.customer_end == "transfer", transfer.failed
    unknown = play({"simulated_customer": {"reason_for_call": "My parcel never arrived.",
                                           "unknown_info": "You do not know the order number.",
                                           "expect_end": "out-of-scope"}}, )
    # Maya has several orders: the desk asks which, naming them; the stand-in knows no number to give.
    assert unknown.customer_end == "out-of-scope", [m["content"] for m in unknown.transcript]
    assert unknown.passed, unknown.failed


def test_a_customer_that_fails_or_never_ends_is_the_customers_fault(on_standin):
    failing = play({"turn": [{"say": "Has SU-41210 arrived?"}],
                    "simulated_customer": {"reason_for_call": "Has it arrived?"}},
                   customer_model=CustomerModel(Scripted(ModelError("503: overloaded"))))
    assert failing.customer_end == "error"
    assert failing.failed == ["simulated turn 1: the customer model answers"]
    assert failing.triage == {"label": "customer_fault",
                              "why": "simulated turn 1: the customer model answers: 503: overloaded"}
    endless = play({"turn": [{"say": "Has SU-41210 arrived?"}],
                    "simulated_customer": {"reason_for_call": "Has it arrived?", "max_turns": 2,
                                           "expect_end": "stop"}},
                   customer_model=CustomerModel(Scripted("And SU-41210?", "What about SU-41210?")))
    assert endless.customer_end == "never"
    assert endless.failed == ["the simulated customer ends with stop"]
    assert endless.triage["label"] == "customer_fault"


def test_the_customer_model_says_what_it_is_and_sends_its_temperature_without_tools():
    class Client(Scripted):
        def body(self, transcript, tools):
            return b'{"model": "m", "stream": true,"tools":[],"messages":[]}'

        def complete(self, transcript, tools, sink):
            self.bodies = getattr(self, "bodies", []) + [self.body(transcript, tools)]
            return super().complete(transcript, tools, sink)

    client = Client("###STOP###")
    model = CustomerModel(client, temperature=0.3)
    info = model.info()
    assert info["model"] == "scripted-customer" and info["temperature"] == 0.3
    assert info["prompt_version"] and len(info["prompt_fingerprint"]) == 12
    sim = parse({"title": "t", "customer": "c", "simulated_customer": SIM}, "s").simulated
    turn = model.next_message(sim, [("desk", "A member of our team will reply.")])
    assert turn.text is None and turn.end == "stop"
    assert json.loads(client.bodies[0]) == {"temperature": 0.3, "model": "m", "stream": True, "messages": []}
    assert "body" not in vars(client)  # put back as it was
    assert PROMPT.count("###") == 6


# -- triage rules on plain values, and the report -------------------------------------------------------------------

def failed_run(*checks, **fields) -> ScenarioRun:
    return ScenarioRun(name="x", title="x", checks=list(checks), **fields)


@pytest.mark.parametrize("run, label", [
    (failed_run(Check("a", False, "", "unintended_write"), error="RuntimeError: boom"), "environment"),
    (failed_run(Check("a", False, "", "unintended_write"), stop_reasons=["answered", "tool_unavailable"]),
     "environment"),
    (failed_run(Check("a", False, "", "wrong_tool"), customer_end="never"), "customer_fault"),
    (failed_run(Check("a", False, "", "wrong_tool"), Check("b", False, "", "unintended_write")), "unintended_write"),
    (failed_run(Check("a", False, "", "wrong_tool"), Check("b", False, "", "missing_approval_request")),
     "missing_approval_request"),
    (failed_run(Check("a", False, "", "wrong_tool"), Check("b", False, "", "wrong_arguments")), "wrong_arguments"),
    (failed_run(Check("a", True, "", "unintended_write"), Check("b", False, "", "wrong_tool")), "wrong_tool"),
    (failed_run(Check("a", False, "not in: ...")), "partial_goal"),
])
def test_the_first_rule_that_applies_labels_the_trial(run, label):
    assert triage(run)["label"] == label


def test_a_judge_is_asked_only_when_the_rules_say_no_more_than_partial_goal():
    asked = []

    def judge(system, user):
        asked.append(user)
        return 'Here: {"label": "wrong_tool", "why": "it never looked the order up"}'
    assert triage(failed_run(Check("b", False, "", "unintended_write")), judge)["label"] == "unintended_write"
    assert not asked
    labelled = triage(failed_run(Check("says x", False, "not in: hello")), judge)
    assert labelled["label"] == "wrong_tool" and labelled["why"] == "judge: it never looked the order up"
    assert "says x: not in: hello" in asked[0]
    nonsense = triage(failed_run(Check("says x", False)), lambda s, u: '{"label": "bad luck"}')
    assert nonsense == {"label": "partial_goal", "why": "says x"}


def test_with_a_judge_model_set_a_judge_that_answers_no_label_leaves_the_rules_label(on_standin, settings):
    settings.EVALUATION_TRIAGE_MODEL = "sundry-standin-1"  # the stand-in answers it, but with no label in JSON
    attempt = play({"turn": [{"say": "Has SU-41210 arrived?"}], "end_state": {"must_tell": ["SU-41311"]}})
    assert attempt.triage == {"label": "partial_goal", "why": "end state: the customer was told 'SU-41311'"}


def test_the_html_report_shows_why_a_trial_failed_escaped(on_standin, tmp_path):
    scenario = parse({"title": "t", "customer": "maya@example.com", "turn": [REFUND_TURN], "end_state": {}}, "tri")
    result = evaluate([scenario], customer_model=CustomerModel(assistant.model()),
                      model={"name": "m", "endpoint": "e"}, prompt={"version": "1", "fingerprint": "f"})
    data = report.as_json(result)
    run = data["scenarios"][0]["runs"][0]
    assert run["triage"]["label"] == "unintended_write"
    run["triage"]["why"] = "<script>alert(1)</script>"
    page = report.as_html(data)
    assert "Why it failed: unintended_write" in page and "&lt;script&gt;alert(1)" in page and "<script>" not in page


def test_the_statuses_an_end_state_may_name_are_the_conversations():
    from support.evaluation.scenario import CONVERSATION_STATUSES
    from support.models import Conversation

    assert set(CONVERSATION_STATUSES) == {status for status, _ in Conversation.STATUSES}
