"""Prompt caching: the request laid out so each call's prefix is the call before it, cached tokens read from each
server's usage and priced at the cached-input price, prompt_cache_key only where the dialect takes it, and the
stand-in caching like OpenAI (from 1,024 tokens, in steps of 128)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from standin.cache import SHARED_KEPT, PromptCache, prompt_text, shared_prefix
from support.agent.llm import OpenAIModel, _Reply
from support.agent.compaction import compact
from support.agent.types import NOTE, NOTED, ModelReply, Observer, Transcript, from_customer
from support.customers import notify
from support.desk import assistant, runner, services
from support.models import Step


TURNS = ["Where is my parcel for order SU-41207? Tracking says delivered but nothing arrived.",
         "It is still not here, can you check again?",
         "Thank you, that helps."]


class Clock(datetime):
    """The desk's clock, moved by the test: turns minutes apart tell the model a new local time."""
    at = datetime(2024, 5, 14, 9, 0, tzinfo=timezone.utc)

    @classmethod
    def now(cls, tz=None):
        return cls.at if tz is None else cls.at.astimezone(tz)


def three_turns(desk, queued, monkeypatch):
    monkeypatch.setattr(assistant, "datetime", Clock)
    monkeypatch.setattr(Clock, "at", datetime(2024, 5, 14, 9, 0, tzinfo=timezone.utc))
    conversation = services.conversation_start(customer=desk.maya)
    notify.set_time_zone(conversation, "Europe/Berlin")
    for text in TURNS:
        services.conversation_post_message(conversation=conversation, text=text)
        while queued:
            runner.run_execute(queued.pop(0))
        Clock.at += timedelta(minutes=7)
    return conversation


def last_message(text: str) -> str:
    """The last message of a request as the stand-in serialized it (prompt_text: the tools, then the messages)."""
    decoder = json.JSONDecoder()
    _, end = decoder.raw_decode(text)
    messages, _ = decoder.raw_decode(text, end)
    return json.dumps(messages[-1], ensure_ascii=False)


@pytest.mark.django_db(transaction=True)
def test_each_model_call_of_a_conversation_repeats_the_call_before_it_as_its_prefix(desk, standin, queued, monkeypatch):
    three_turns(desk, queued, monkeypatch)
    prompts = standin.state.prompt_cache.prompts()
    assert len(prompts) >= 6
    for before, after in zip(prompts, prompts[1:]):
        # The layout's prefix: the whole of the call before but its closing bracket, across runs too (the run's
        # note stays where the run first read it).
        assert shared_prefix(before, after) >= len(before) - len("]}")
    last = prompts[-1]
    # One note per run, in the history: the time zone and how to write times once, then only the time now;
    # the orders once (they did not change).
    assert last.count("The customer's time zone is Europe/Berlin") == 3
    for time in ("11:00", "11:07", "11:14"):
        assert last.count(f"it is now Tuesday 14 May 2024, {time} there.") == 1
    assert last.count("never in UTC") == 1
    assert last.count("Their most recent orders") == 1


@pytest.mark.django_db(transaction=True)
def test_three_turns_minutes_apart_are_mostly_served_from_the_cache(desk, standin, queued, monkeypatch):
    conversation = three_turns(desk, queued, monkeypatch)
    served = [e for e in standin.requests() if e["status"] == 200]
    prompt = sum(e["prompt_tokens"] for e in served)
    cached = sum(e["cached_tokens"] for e in served)
    assert cached > 0.6 * prompt
    steps = Step.objects.filter(run__conversation=conversation, kind="model")
    assert sum(s.cached_tokens for s in steps) == cached  # stored per step as the stand-in reported them


@pytest.mark.parametrize("chunk, cached", [
    ({"usage": {"prompt_tokens": 2000, "completion_tokens": 5,
                "prompt_tokens_details": {"cached_tokens": 1920}}}, 1920),  # OpenAI, vLLM with details on
    ({"usage": {"prompt_tokens": 2000, "completion_tokens": 5}, "timings": {"cache_n": 1500, "prompt_n": 500}},
     1500),  # llama.cpp's llama-server
    ({"usage": {"prompt_tokens": 2000, "completion_tokens": 5, "prompt_tokens_details": None}}, 0),  # vLLM, off
    ({"usage": {"prompt_tokens": 100, "completion_tokens": 5,
                "prompt_tokens_details": {"cached_tokens": 900}}}, 100),  # never more than the prompt
])
def test_cached_tokens_are_read_from_each_server_s_usage(chunk, cached):
    reply = _Reply("m")
    reply.read({**chunk, "choices": []}, Observer())
    assert reply.usage[2] == cached


def model(**options) -> OpenAIModel:
    return OpenAIModel(base_url="http://127.0.0.1:9/v1", api_key="k", model="m", **options)


def test_cached_tokens_are_priced_at_the_cached_input_price():
    reply = ModelReply(message={}, finish_reason="stop", prompt_tokens=1_000_000, completion_tokens=0,
                       cached_tokens=800_000, model="m")
    assert model(prices={"m": (1.0, 4.0, 0.1)}).cost(reply) == pytest.approx(0.2 + 0.08)
    assert model(prices={"m": (1.0, 4.0)}).cost(reply) == pytest.approx(1.0)  # no cached price: the input price


def test_a_price_table_takes_a_cached_input_price_and_keeps_the_old_format(monkeypatch):
    from agentsite.settings import env_prices

    monkeypatch.setenv("X_PRICES", '{"a": [1, 4], "b": [1, 4, 0.25]}')
    assert env_prices("X_PRICES") == {"a": (1.0, 4.0), "b": (1.0, 4.0, 0.25)}
    monkeypatch.setenv("X_PRICES", '{"a": [1, 4, 0.25, 9]}')
    with pytest.raises(Exception, match="cached_input"):
        env_prices("X_PRICES")


def body_of(dialect: str) -> dict:
    transcript = Transcript([{"role": "user", "content": "hi"}], context=[{"role": "system", "content": "now"}],
                            cache_key="k1")
    return json.loads(model(dialect=dialect).body(transcript, []))


def test_prompt_cache_key_goes_only_to_the_dialect_that_takes_it():
    assert body_of("openai")["prompt_cache_key"] == "k1"
    assert "prompt_cache_key" not in body_of("compatible")
    assert body_of("compatible")["messages"][-1]["content"] == "now"  # the context goes last either way


@pytest.mark.django_db
def test_the_context_is_a_user_note_for_servers_whose_templates_refuse_a_late_system_message(desk, settings):
    conversation = services.conversation_start(customer=desk.maya)
    settings.MODEL_DIALECT = "compatible"
    [note], _ = assistant.run_context(conversation)
    assert note["role"] == "user" and note["content"].startswith(assistant.CONTEXT_HEAD)


@pytest.mark.django_db
def test_the_cache_key_is_one_per_conversation_and_not_its_public_id(desk):
    one, two = (services.conversation_start(customer=desk.maya) for _ in range(2))
    assert assistant.cache_key(one) == assistant.cache_key(one) != assistant.cache_key(two)
    assert str(one.public_id).replace("-", "") not in assistant.cache_key(one)


def request(text: str, key: str | None = None) -> dict:
    body = {"model": "m", "messages": [{"role": "user", "content": text}]}
    return {**body, "prompt_cache_key": key} if key else body


def test_the_stand_in_caches_the_longest_prefix_seen_from_1024_tokens_in_steps_of_128():
    cache = PromptCache()
    base = "x" * 4 * 1100
    assert cache.read(request(base)) == 0  # nothing seen yet
    assert cache.read(request(base + "more")) == 1024  # 1,100 tokens shared: 1,024 of them in steps of 128
    assert cache.read(request("x" * 4 * 1000 + "y")) == 0  # under 1,024 tokens shared: nothing
    longer = base + "z" * 4 * 300
    cache.read(request(longer))
    shared = shared_prefix(prompt_text(request(longer + "!")), prompt_text(request(longer)))
    assert cache.read(request(longer + "!")) == shared // 4 // 128 * 128 == 1280
    assert cache.read(request(base + "more", key="other")) == 1024  # another conversation: the provider's cache


def test_the_stand_in_keeps_a_key_s_own_prefixes_longer_than_those_of_other_keys():
    cache = PromptCache()
    base = "x" * 4 * 1100
    cache.read(request(base, key="a"))
    for i in range(SHARED_KEPT):
        cache.read(request(f"{i}" + "y" * 4 * 1100, key=f"k{i}"))
    assert cache.read(request(base + "!", key="b")) == 0  # pushed out of the recent requests of all keys
    assert cache.read(request(base + "!", key="a")) == 1024  # still among the key's own


def test_a_run_s_note_is_placed_once_before_its_first_model_call_and_saved_with_the_reply_after_it():
    transcript = Transcript([{"role": "user", "content": "hi"}], context=[{"role": "user", "content": "note"}],
                            context_facts={"zone": "Europe/Berlin"})
    assert transcript.sent()[-1]["content"] == "note"  # not placed yet: sent last
    transcript.place_context()
    transcript.place_context()  # once
    assert [m["content"] for m in transcript.messages] == ["hi", "note"] and transcript.context == []
    assert transcript.messages[-1][NOTE] and not from_customer(transcript.messages[-1])
    assert json.loads(transcript.encoded[-1]) == {"role": "user", "content": "note"}  # the mark is never sent
    reply = transcript.noted({"role": "assistant", "content": "ok"})
    assert reply[NOTED] == {"messages": [{"role": "user", "content": "note"}], "zone": "Europe/Berlin"}
    assert NOTED not in transcript.noted({"role": "assistant", "content": "again"})  # only the first reply


def test_compaction_never_takes_a_note_for_the_customer_s_message():
    note = {"role": "user", "content": "The desk's note: it is now 11:00.", NOTE: True}
    turn = [{"role": "user", "content": "where is SU-1?"}, {"role": "assistant", "content": "x" * 4000}]
    messages = [{"role": "system", "content": "prompt"}, *turn, note, *turn, note,
                {"role": "user", "content": "and now?"}, note]
    sent, done = compact(messages, budget=1500)
    assert done
    # The customer's last two messages are kept: the second "where is SU-1?" and "and now?", not two notes.
    assert [m["content"] for m in sent if from_customer(m)][-2:] == ["where is SU-1?", "and now?"]
    assert "11:00" not in sent[1]["content"]  # the summary quotes the customer, never a note
