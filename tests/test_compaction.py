"""Compaction: a long conversation is sent to the model within its budget, the pinned facts kept word for
word, calls never separated from their results, and the saved history untouched."""

import json

import pytest
from django.contrib.auth import get_user_model

from support.agent.compaction import SUMMARY_HEADER, compact, estimate_tokens, summarise
from support.agent.llm import OpenAIModel
from support.agent.loop import run_loop
from support.agent.tools import Tool, ToolContext
from support.agent.types import AUTHOR, STAFF, Limits, Observer, Transcript, encode
from support.desk import runner, services, takeover
from support.models import Message, Run, Step
from tests.fake_model import ScriptedModel, answer, call

SCHEMA = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}


def big_order(ctx, order_id):
    return {"order_id": order_id, "status": "delivered", "total": "64.00", "refunded": "0.00",
            "refundable": "64.00", "fulfilled_by": {"seller_id": "S-HL"}, "notes": "x" * 3000}


def refund(ctx, order_id):
    return {"refund_id": "RF-7K2M9", "order_id": order_id, "amount": "64.00", "status": "issued"}


TOOLS = [Tool("get_order", "x", SCHEMA, big_order, read_only=True), Tool("issue_refund", "x", SCHEMA, refund)]


class Steps(Observer):
    def __init__(self):
        self.steps = []

    def step(self, s):
        self.steps.append(s)


def paired(messages):
    """Every tool result follows the assistant message that made its call (what servers check)."""
    open_ids = set()
    for m in messages:
        if m["role"] == "assistant":
            open_ids = {c["id"] for c in m.get("tool_calls") or []}
        elif m["role"] == "tool" and m["tool_call_id"] not in open_ids:
            return False
    return True


def long_history(turns: int) -> Transcript:
    t = Transcript([{"role": "system", "content": "You are Sundry's agent."}])
    for n in range(turns):
        c = call("get_order", {"order_id": f"SU-{41000 + n}"})
        t.append({"role": "user", "content": f"Where is SU-{41000 + n}?"})
        t.append({"role": "assistant", "content": "", "tool_calls": [c]})
        t.append({"role": "tool", "tool_call_id": c["id"], "content": json.dumps(big_order(None, f"SU-{41000 + n}"))})
        t.append({"role": "assistant", "content": f"SU-{41000 + n} was delivered."})
    r = call("issue_refund", {"order_id": "SU-41001"})
    t.append({"role": "user", "content": "Refund SU-41001 please"})
    t.append({"role": "assistant", "content": "", "tool_calls": [r]})
    t.append({"role": "tool", "tool_call_id": r["id"], "content": json.dumps(refund(None, "SU-41001"))})
    t.append({"role": "assistant", "content": "Refunded."})
    t.append({"role": "user", "content": "Thanks. And where is SU-41005 now?"})
    return t


def test_a_long_history_is_sent_within_its_budget_with_the_pinned_facts_and_the_recent_turns():
    t = long_history(30)
    saved = [dict(m) for m in t.messages]
    model, rec = ScriptedModel(*answer("Still delivered.")), Steps()
    run_loop(t, model=model, tools=TOOLS, ctx=ToolContext(customer_id=1, run_id="r"), observer=rec,
             limits=Limits(compact_above_tokens=4000))
    sent = model.sent[0]
    assert estimate_tokens(t.messages) > 4000 >= estimate_tokens(sent)
    assert paired(sent) and sent[-1]["content"] == "Thanks. And where is SU-41005 now?"
    assert sent[0] == t.messages[0]  # the system message as it is: the summary is a message of its own
    [summary] = [m["content"] for m in sent if SUMMARY_HEADER in json.dumps(m)]
    assert summary.startswith(SUMMARY_HEADER)
    assert "Order SU-41005: delivered, total 64.00" in summary or "SU-41005" in json.dumps(sent[:sent.index(
        next(m for m in sent if SUMMARY_HEADER in json.dumps(m)))])  # a fact of a summarised turn, or that turn
    assert "RF-7K2M9" in json.dumps(sent)  # the refund's turn is one of the two kept as they are
    assert t.messages[:len(saved)] == saved  # what is saved is not touched
    compactions = [s for s in rec.steps if s.kind == "compact"]
    assert len(compactions) == 1 and "saved" in compactions[0].result


def test_a_short_history_is_sent_as_it_is():
    t = long_history(2)
    model = ScriptedModel(*answer("ok"))
    run_loop(t, model=model, tools=TOOLS, ctx=ToolContext(customer_id=1, run_id="r"),
             limits=Limits(compact_above_tokens=100_000))
    assert model.sent[0] == t.messages[:len(model.sent[0])] and len(model.sent[0]) == 14  # all of it


def test_a_refund_in_a_summarised_turn_is_kept_word_for_word():
    t = long_history(30)
    t.append({"role": "assistant", "content": "It is delivered."})
    t.append({"role": "user", "content": "One more question."})
    messages, done = compact(t.messages, 4000)
    assert done.startswith("summarised") and paired(messages)
    [summary] = [m["content"] for m in messages if SUMMARY_HEADER in json.dumps(m)]
    refund = next(m["content"] for m in t.messages if m.get("role") == "tool" and "RF-7K2M9" in m["content"])
    # The refund's turn is among the earliest, kept word for word, or in the summarised span, kept as a fact.
    assert refund in [m.get("content") for m in messages] or "Refund RF-7K2M9 of 64.00 on SU-41001 issued" in summary
    assert "Refund RF-7K2M9 of 64.00 on SU-41001 issued" in summarise(t.messages[1:-1])  # when summarised


def test_compaction_keeps_the_earliest_turns_word_for_word_so_a_growing_conversation_keeps_its_prefix():
    t = long_history(30)
    first, done = compact(t.messages, 4000)
    assert "earliest messages word for word" in done
    at = next(i for i, m in enumerate(first) if SUMMARY_HEADER in json.dumps(m))
    assert at > 1 and first[:at] == [m if m.get("role") != "tool" else first[i] for i, m in enumerate(t.messages[:at])]
    t.append({"role": "assistant", "content": "It is delivered."})
    t.append({"role": "user", "content": "One more question."})
    later, _ = compact(t.messages, 4000)
    # The next request starts with the same messages, up to where the summary was: a provider's cache serves them.
    assert [encode(m) for m in later[:at]] == [encode(m) for m in first[:at]]


def test_old_large_results_go_first():
    messages, done = compact(long_history(3).messages, estimate_tokens(long_history(3).messages) - 500)
    assert done.startswith("cut") and paired(messages)
    assert any("more characters left out of this old result" in (m.get("content") or "") for m in messages)
    assert SUMMARY_HEADER not in json.dumps(messages)


@pytest.mark.django_db(transaction=True)
def test_forty_turns_through_the_runner_stay_under_the_budget_and_answer_like_the_uncompacted_run(
        desk, queued, settings, standin):
    """The stand-in checks every request against OpenAI's rules; prompt tokens are what it counted."""
    settings.MODEL_CONTEXT_WINDOWS = {settings.MODEL_NAME: 12000}
    settings.COMPACT_AT_SHARE = 0.5
    settings.CONVERSATION_MAX_STEPS_PER_DAY = settings.CONVERSATION_MAX_TOKENS_PER_DAY = 0  # 40 turns: no daily cap
    settings.CONVERSATION_MAX_COST_USD_PER_DAY, settings.CUSTOMER_MESSAGES_PER_MINUTE = 0, 10_000
    settings.MESSAGES_PER_MINUTE = 10_000
    orders = ["SU-41210", "SU-41207", "SU-40155", "SU-41419"]

    def converse(window):
        settings.MODEL_CONTEXT_WINDOWS = {settings.MODEL_NAME: window}
        conversation = services.conversation_start(customer=desk.maya)
        for n in range(40):
            services.conversation_post_message(conversation=conversation, text=f"Where is {orders[n % 4]}? ({n})")
            assert runner.run_execute(queued.pop()) in ("answered", "escalated"), n
        return conversation

    compacted = converse(12000)
    prompts = list(Step.objects.filter(run__conversation=compacted, kind="model").values_list("prompt_tokens", flat=True))
    assert max(prompts) < 12000  # the window; the budget of 6000 covers the messages, the tools spec comes on top
    assert Step.objects.filter(run__conversation=compacted, kind="compact").exists()
    full = converse(0)  # 0: the model's window unknown, never compacted
    assert max(Step.objects.filter(run__conversation=full, kind="model").values_list("prompt_tokens", flat=True)) \
        > max(prompts)
    last = lambda c: c.messages.filter(role="assistant", author="agent").exclude(content="").last().content  # noqa: E731
    assert last(compacted) == last(full)
    assert [r.outcome for r in Run.objects.filter(conversation=compacted).order_by("pk")] == \
        [r.outcome for r in Run.objects.filter(conversation=full).order_by("pk")]


@pytest.mark.django_db(transaction=True)
def test_what_staff_wrote_or_did_is_never_summarised(desk, queued, settings, standin, monkeypatch):
    """A staff reply and the notices of a take-over are marked as staff's in the history the loop reads (a note
    never sent: servers refuse keys they do not know); under a tight budget the promise is sent word for word."""
    sam = get_user_model().objects.create_user("sam", password="pw", first_name="Sam", is_staff=True)
    conversation = services.conversation_start(customer=desk.maya)
    services.conversation_post_message(conversation=conversation, text="Where is SU-41210?")
    assert runner.run_execute(queued.pop()) == "answered"
    takeover.conversation_take_over(conversation=conversation, user=sam)
    promise = "I have asked the seller for a replacement; it will reach you by Friday."
    takeover.conversation_staff_reply(conversation=conversation, user=sam, text=promise)
    takeover.conversation_hand_back(conversation=conversation, user=sam)
    settings.CONVERSATION_MAX_STEPS_PER_DAY = settings.CONVERSATION_MAX_TOKENS_PER_DAY = 0
    settings.MESSAGES_PER_MINUTE = settings.CUSTOMER_MESSAGES_PER_MINUTE = 10_000
    for n in range(6):
        services.conversation_post_message(conversation=conversation, text=f"Where is SU-41207? ({n})")
        assert runner.run_execute(queued.pop()) == "answered"

    history, _ = runner.history_for_model(list(conversation.messages.order_by("seq")))
    by_author = {m["content"]: m.get(AUTHOR) for m in history if m["role"] == "assistant" and m.get("content")}
    assert by_author[promise] == STAFF
    staff_rows = conversation.messages.filter(author__in=(Message.STAFF, Message.SYSTEM), author_user=sam)
    assert staff_rows.count() == 3 and all(by_author[r.content] == STAFF for r in staff_rows)  # joined, reply, back
    assert not [m for m in history if m.get(AUTHOR) and m["content"] not in {r.content for r in staff_rows}]

    sent = []
    original = OpenAIModel.complete
    monkeypatch.setattr(OpenAIModel, "complete",
                        lambda self, transcript, *rest: sent.append(self.body(transcript, *rest[:1]))
                        or original(self, transcript, *rest))
    settings.MODEL_CONTEXT_WINDOWS = {settings.MODEL_NAME: 3000}
    settings.COMPACT_AT_SHARE = 0.5
    services.conversation_post_message(conversation=conversation, text="And the replacement, still Friday?")
    assert runner.run_execute(queued.pop()) == "answered"
    assert Step.objects.filter(run__conversation=conversation, kind="compact").exists()
    request = json.loads(sent[0])["messages"]  # as it went over the wire
    assert sum(1 for m in request if str(m.get("content")).startswith(SUMMARY_HEADER)) == 1
    assert {"role": "assistant", "content": promise} in request and b"_author" not in sent[0]
