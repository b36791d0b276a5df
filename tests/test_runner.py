"""The runner in-process: claim, persistence as the loop appends, pause and resume, stops that go to a person.

Tasks are recorded instead of sent; tests call runner.run_execute the way the worker does.
"""

import json

import pytest

from support.desk import gate, runner, services
from support.models import Approval, Conversation, Message, Refund, Run, Step, ToolCall
from tests.standin_fixture import standin  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def ask(customer, text, queued):
    conversation = services.conversation_start(customer=customer)
    services.conversation_post_message(conversation=conversation, text=text)
    return conversation, queued.pop()


def maya(demo):
    return demo.maya


def test_it_saves_every_message_with_a_gapless_seq_and_a_trace_row_per_step(desk, queued):
    conversation, run_id = ask(maya(desk), "Tracking says delivered but nothing arrived. Order SU-41207", queued)
    assert runner.run_execute(run_id) == "answered"
    seqs = list(conversation.messages.values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    run = Run.objects.get(pk=run_id)
    assert (run.status, run.stop_reason, run.outcome, run.attempts) == ("stopped", "answered", "waiting", 1)  # on the seller
    model_steps = Step.objects.filter(run=run, kind="model")
    assert model_steps.count() == run.turns and all(s.prompt_tokens > 0 for s in model_steps)
    assert run.cost_usd > 0 and run.prompt_tokens == sum(s.prompt_tokens for s in model_steps)
    assert set(ToolCall.objects.filter(run=run).values_list("status", flat=True)) == {"executed"}
    last = conversation.messages.last()
    assert last.author == Message.AGENT and "48 hours" in last.content


def test_a_run_is_claimed_once(desk, queued):
    conversation, run_id = ask(maya(desk), "Where is SU-41210?", queued)
    assert runner.run_execute(run_id) == "answered"
    count = conversation.messages.count()
    assert runner.run_execute(run_id) == "not claimed"  # a late duplicate task
    assert conversation.messages.count() == count and Run.objects.get(pk=run_id).attempts == 1


def test_a_gated_call_pauses_and_the_decision_resumes_it(desk, queued):
    conversation, run_id = ask(maya(desk), "My parcel SU-41310 never came.", queued)
    assert runner.run_execute(run_id) == "awaiting_approval"
    approval = Approval.objects.get(run_id=run_id)
    assert approval.pending and approval.requested_arguments["amount"] == "64.00"
    assert not Refund.objects.filter(order__number="SU-41310").exists() and queued == []
    gate.approval_decide(approval=approval, user=None, approve=True)
    assert queued == [run_id]  # the decision queued the resume
    assert runner.run_execute(queued.pop()) == "answered"
    assert Refund.objects.filter(order__number="SU-41310").count() == 1
    assert ToolCall.objects.get(run_id=run_id, name="issue_refund").status == "executed"


def test_a_message_written_while_a_call_waits_is_read_after_the_calls_result(desk, queued):
    conversation, run_id = ask(maya(desk), "My parcel SU-41310 never came.", queued)
    runner.run_execute(run_id)
    _, same_run, _ = services.conversation_post_message(conversation=conversation, text="Any news?")
    assert same_run.pk == run_id and queued == []  # handed to the paused run, no second run
    gate.approval_decide(approval=Approval.objects.get(run_id=run_id), user=None, approve=False,
                             reason="the carrier is still searching")
    # The stand-in enforces OpenAI's ordering rules: a misplaced message would be a 400 (model_error).
    assert runner.run_execute(queued.pop()) == "answered"


def test_history_holds_back_a_message_written_between_a_call_and_its_result():
    def m(seq, role, **kw):
        return Message(seq=seq, role=role, content=kw.get("content", "x"), tool_calls=kw.get("calls"),
                       tool_call_id=kw.get("answers", ""))
    calls = [{"id": "a", "type": "function", "function": {"name": "get_order", "arguments": "{}"}},
             {"id": "b", "type": "function", "function": {"name": "get_order", "arguments": "{}"}}]
    saved = [m(1, "system"), m(2, "user"), m(3, "assistant", calls=calls), m(4, "tool", answers="a"),
             m(5, "user", content="hello?"), m(6, "tool", answers="b")]
    history, held = runner.history_for_model(saved)
    assert [(x["role"], x.get("tool_call_id")) for x in history] == [
        ("system", None), ("user", None), ("assistant", None), ("tool", "a"), ("tool", "b"), ("user", None)]
    assert held == []
    history, held = runner.history_for_model(saved[:5])  # b still open: "hello?" waits
    assert history[-1]["tool_call_id"] == "a" and [h["content"] for h in held] == ["hello?"]


def test_a_spinning_run_goes_to_a_person_with_a_notice_for_the_customer(desk, queued, standin):
    standin.queue_faults(["repeat"] * 10, match="SU-41210")
    conversation, run_id = ask(maya(desk), "Where is SU-41210?", queued)
    assert runner.run_execute(run_id) == "spinning"
    conversation.refresh_from_db()
    assert conversation.status == Conversation.NEEDS_ATTENTION and "repeating" in conversation.attention_reason
    notice = conversation.messages.last()
    assert notice.author == Message.SYSTEM and "A member of our team will reply here" in notice.content
    run = Run.objects.get(pk=run_id)
    assert "repeating" in run.summary and run.outcome == "handed_to_person"
    # While a person has it, a new message starts no run.
    _, run, _ = services.conversation_post_message(conversation=conversation, text="Hello?")
    assert run is None and queued == []


def test_small_refunds_can_be_approved_by_policy_and_the_decision_is_on_record(desk, queued, settings):
    settings.AUTO_APPROVE_REFUNDS_UP_TO = 100
    conversation, run_id = ask(maya(desk), "My parcel SU-41310 never came.", queued)
    assert runner.run_execute(run_id) == "answered"
    approval = Approval.objects.get(run_id=run_id)
    assert approval.decision == "approved" and approval.decided_by is None
    assert approval.reason.startswith("auto-approved") and Refund.objects.filter(order__number="SU-41310").count() == 1


def test_a_worker_that_lost_its_lease_cannot_write(desk, queued):
    conversation, run_id = ask(maya(desk), "Where is SU-41210?", queued)
    Run.objects.filter(pk=run_id).update(status=Run.RUNNING, lease="new-owner")
    run = Run.objects.get(pk=run_id)
    with pytest.raises(services.LeaseLost):
        services.message_append(conversation=conversation, wire={"role": "assistant", "content": "late"},
                                author=Message.AGENT, run=run, lease="old-owner")
    assert not conversation.messages.filter(content="late").exists()


def test_an_escalation_approved_ends_the_run_escalated_and_waits_for_a_person(desk, queued):
    conversation, run_id = ask(maya(desk), "I want a full refund for order SU-41533.", queued)
    while True:
        status = runner.run_execute(run_id)
        if status != "awaiting_approval":
            break
        for approval in Approval.objects.filter(run_id=run_id, decided_at__isnull=True):
            gate.approval_decide(approval=approval, user=None, approve=True)
        run_id = queued.pop()
    assert status == "escalated"
    conversation.refresh_from_db()
    assert conversation.status == Conversation.NEEDS_ATTENTION
    assert not Refund.objects.filter(order__number="SU-41533").exists()
    last = conversation.messages.last()
    assert last.author == Message.SYSTEM and json.dumps(last.content)


@pytest.mark.parametrize("when", ["while the tool runs", "after the tool's result is saved"])
def test_a_message_written_during_a_run_reaches_the_next_model_call_once(desk, queued, monkeypatch, when):
    # The runner reads new customer messages only when something may have arrived: a seq its own append
    # skipped, or a conversation newer than its last append. Both ways in must be seen, and only once.
    from support.desk import assistant

    conversation, run_id = ask(maya(desk), "Where is SU-41210?", queued)
    late = "Also, could you tell me which carrier it is with?"
    sent = []

    def post_once():
        if not sent:
            sent.append(services.conversation_post_message(conversation=conversation, text=late))

    original_started, original_step = runner.DbObserver.step_started, runner.DbObserver.step

    def step_started(self, step):
        original_started(self, step)
        if step.kind == "tool" and when == "while the tool runs":
            post_once()

    def step(self, step):
        original_step(self, step)
        if step.kind == "tool" and when == "after the tool's result is saved":
            post_once()

    monkeypatch.setattr(runner.DbObserver, "step_started", step_started)
    monkeypatch.setattr(runner.DbObserver, "step", step)
    requests = []
    model = assistant.shared_model()
    original_complete = model.complete

    def complete(transcript, tools, sink):
        requests.append([dict(m) for m in transcript.messages])
        return original_complete(transcript, tools, sink)

    monkeypatch.setattr(model, "complete", complete)
    assert runner.run_execute(run_id) == "answered"
    assert sent and sent[0][1].pk == run_id  # handed to the working run, not a second one
    first_with = next(i for i, r in enumerate(requests) if any(m.get("content") == late for m in r))
    assert first_with >= 1  # read before a later model call, not lost until the end
    before = requests[first_with]
    position = next(i for i, m in enumerate(before) if m.get("content") == late)
    assert before[position - 1]["role"] == "tool"  # after the result of the call it arrived during
    assert all(sum(m.get("content") == late for m in r) <= 1 for r in requests)  # never twice
    assert list(conversation.messages.values_list("seq", flat=True)) == list(
        range(1, conversation.messages.count() + 1))


def test_a_worker_that_lost_its_lease_does_not_start_a_tool(desk, queued, monkeypatch):
    # The call's start is recorded only under the run's current claim: a worker presumed dead stops
    # there, before the tool runs, and leaves the call's row as the new owner has it.
    conversation, run_id = ask(maya(desk), "Where is SU-41210?", queued)
    original = runner.DbObserver.step_started

    def step_started(self, step):
        if step.kind == "tool":
            Run.objects.filter(pk=run_id).update(lease="another-worker")
        original(self, step)

    monkeypatch.setattr(runner.DbObserver, "step_started", step_started)
    assert runner.run_execute(run_id) == "lease lost"
    assert not ToolCall.objects.filter(run_id=run_id).exists()
    assert not Step.objects.filter(run_id=run_id, kind="tool").exists()
    assert not conversation.messages.filter(role="tool").exists()
