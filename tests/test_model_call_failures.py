"""The model call when the reply is not a usable one: empty replies, hostile chunks, failed attempts' usage,
a used-up quota, and prices for models missing from the table."""

import json
import logging

import httpx2
import openai
import pytest

from support.agent.llm import OpenAIModel
from support.agent.types import EMPTY_REPLY, QUOTA_EXCEEDED, ModelError, ModelReply
from tests.standin_fixture import standin  # noqa: F401  (the fixture)
from tests.test_model_call import TOOLS, Sink, Sleeps, _sse_server, faults, make, requests_seen, ticket


def sse(*chunks, done=True) -> bytes:
    """A raw SSE body: each chunk a JSON value (or a ready string), then [DONE]."""
    lines = [f"data: {c if isinstance(c, str) else json.dumps(c)}\n\n" for c in chunks]
    return ("".join(lines) + ("data: [DONE]\n\n" if done else "")).encode()


def choice(delta, finish=None, **top):
    return {"model": "m", **top, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def usage(prompt, completion, model="m"):
    return {"model": model, "choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion}}


GOOD = sse(choice({"content": "Hello"}), choice({}, "stop"), usage(50, 5))


def serve(*bodies):
    """Complete one ticket against a loopback server answering with `bodies` in turn."""
    server = _sse_server(list(bodies))
    sleeps = Sleeps()
    model = OpenAIModel(base_url=f"http://127.0.0.1:{server.server_port}/v1", api_key="x", model="m",
                        sleep=sleeps, read_timeout=5.0)
    sink = Sink()
    try:
        return model.complete(ticket(), TOOLS, sink), sink, sleeps
    finally:
        server.shutdown()


# -- empty replies ---------------------------------------------------------------------------------

def test_an_empty_reply_is_retried_once_then_the_next_reply_is_returned(standin):
    faults(standin, "empty")
    model, sleeps = make(standin)
    sink = Sink()
    reply = model.complete(ticket(), TOOLS, sink)
    assert reply.attempts == 2 and sink.resets == 1 and len(sleeps) == 1
    assert reply.tool_calls and [r["fault"] for r in requests_seen(standin)] == ["empty", None]


def test_an_empty_reply_is_retried_once_then_stops_as_empty_reply(standin):
    faults(standin, "empty", "empty")
    model, _ = make(standin)
    with pytest.raises(ModelError) as e:
        model.complete(ticket(), TOOLS, Sink())
    assert e.value.code == EMPTY_REPLY and e.value.attempts == 2 and len(requests_seen(standin)) == 2


def test_a_reply_of_only_whitespace_is_empty_too():
    blank = sse(choice({"content": " \n "}), choice({}, "stop"), usage(10, 1))
    with pytest.raises(ModelError) as e:
        serve(blank, blank)
    assert e.value.code == EMPTY_REPLY


def test_a_reply_never_lacks_both_text_and_calls_whatever_the_finish_reason():
    silent = sse(choice({"role": "assistant", "content": None}), choice({}, "length"))
    reply, _, _ = serve(silent, GOOD)
    assert reply.content == "Hello" and reply.attempts == 2


# -- hostile chunks and model-controlled strings ---------------------------------------------------

HOSTILE = ["[1]", '"x"', "3", "null", '{"choices": 5}', '{"choices": [1]}', '{"choices": [{"delta": "x"}]}',
           '{"choices": [{"delta": {"tool_calls": {"index": 0}}}]}',
           '{"choices": [{"delta": {"tool_calls": ["call"]}}]}',
           '{"choices": [{"delta": {"tool_calls": [{"index": 0, "function": "get_order"}]}}]}']


@pytest.mark.parametrize("chunk", HOSTILE)
def test_a_chunk_of_the_wrong_shape_is_a_broken_stream_and_is_retried(chunk):
    reply, sink, sleeps = serve(sse(choice({"content": "Hel"}), chunk), GOOD)
    assert reply.content == "Hello" and reply.attempts == 2 and sink.resets == 1 and len(sleeps) == 1


def test_scalars_of_the_wrong_type_are_ignored():
    odd = sse(choice({"content": "Hello"}, model=7), choice({}, 42),
              {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": {"prompt_tokens": "many"}})
    reply, _, _ = serve(odd)
    assert (reply.content, reply.finish_reason, reply.model, reply.attempts) == ("Hello", "stop", "m", 1)


def test_model_controlled_strings_are_clipped_to_fit_their_columns():
    call = {"index": 0, "id": "c" * 300, "type": "function", "function": {"name": "n" * 100, "arguments": "{}"}}
    body = sse(choice({"tool_calls": [call]}), choice({}, "tool_calls" + "!" * 40, model="x" * 500))
    reply, _, _ = serve(body)
    wire = reply.message["tool_calls"][0]
    assert (len(wire["id"]), len(wire["function"]["name"])) == (128, 64)
    assert len(reply.finish_reason) == 20 and len(reply.model) == 120


# -- usage of failed attempts ----------------------------------------------------------------------

def test_usage_reported_before_a_mid_stream_error_is_added_to_the_reply():
    failed = sse(choice({"content": "Hel"}), usage(100, 7), '{"error": {"message": "overloaded"}}', done=False)
    reply, _, _ = serve(failed, GOOD)
    assert (reply.prompt_tokens, reply.completion_tokens, reply.attempts) == (150, 12, 2)


def test_a_retried_empty_replys_usage_is_counted_in_the_reply(standin):
    model, _ = make(standin)
    alone = model.complete(ticket(), TOOLS, Sink())
    faults(standin, "empty")
    retried = model.complete(ticket(), TOOLS, Sink())
    assert retried.prompt_tokens == 2 * alone.prompt_tokens
    assert retried.completion_tokens > alone.completion_tokens


def test_a_model_error_carries_the_failed_attempts_tokens_and_the_model_name():
    blank = sse(choice({"content": ""}, model="served-model"), choice({}, "stop"), usage(100, 3, "served-model"))
    with pytest.raises(ModelError) as e:
        serve(blank, blank)
    assert (e.value.prompt_tokens, e.value.completion_tokens, e.value.model) == (200, 6, "served-model")


# -- quota -----------------------------------------------------------------------------------------

def test_a_used_up_quota_stops_at_once_with_an_error_an_operator_sees(standin, caplog):
    faults(standin, "quota", "quota")
    model, sleeps = make(standin)
    with caplog.at_level(logging.ERROR, logger="support.agent.llm"), pytest.raises(ModelError) as e:
        model.complete(ticket(), TOOLS, Sink())
    assert (e.value.status, e.value.code, e.value.attempts, sleeps) == (429, QUOTA_EXCEEDED, 1, [])
    assert len(requests_seen(standin)) == 1
    [record] = [r for r in caplog.records if r.name == "support.agent.llm"]
    said = record.getMessage()
    assert record.levelno == logging.ERROR and "quota" in said and standin.base_url in said


def test_a_quota_named_only_by_the_error_type_is_not_retried_either():
    def handler(request):
        return httpx2.Response(429, json={"error": {"message": "You exceeded your current quota",
                                                    "type": "insufficient_quota", "param": None, "code": None}})

    sleeps = Sleeps()
    model = OpenAIModel(base_url="http://model.invalid/v1", api_key="x", model="m", sleep=sleeps)
    model.client = openai.OpenAI(base_url="http://model.invalid/v1", api_key="x", max_retries=0,
                                 http_client=httpx2.Client(transport=httpx2.MockTransport(handler)))
    with pytest.raises(ModelError) as e:
        model.complete(ticket(), TOOLS, Sink())
    assert e.value.code == QUOTA_EXCEEDED and sleeps == []


def test_a_rate_limit_is_still_retried(standin):
    faults(standin, "429:retry_after=1")
    model, sleeps = make(standin)
    assert model.complete(ticket(), TOOLS, Sink()).attempts == 2 and sleeps == [1.0]


# -- prices ----------------------------------------------------------------------------------------

def test_a_default_price_prices_models_missing_from_the_table():
    reply = ModelReply(message={}, finish_reason="stop", prompt_tokens=1_000_000, completion_tokens=1_000_000,
                       model="served-name")
    listed = OpenAIModel(base_url="http://x/v1", api_key="x", model="m", prices={"m": (1.0, 2.0)},
                         default_price=(5.0, 6.0))
    unlisted = OpenAIModel(base_url="http://x/v1", api_key="x", model="other", prices={"m": (1.0, 2.0)},
                           default_price=(5.0, 6.0))
    assert listed.cost(reply) == 3.0 and unlisted.cost(reply) == 11.0


def test_a_model_is_priced_when_listed_or_given_a_default_price():
    def model(**kw):
        return OpenAIModel(base_url="http://x/v1", api_key="x", model="m", **kw)

    assert model(prices={"m": (1.0, 2.0)}).is_priced()
    assert model(prices={"other": (1.0, 2.0)}, default_price=(0.5, 1.0)).is_priced()
    assert not model(prices={"other": (1.0, 2.0)}).is_priced()
    assert model(prices={"other": (1.0, 2.0)}).cost(
        ModelReply(message={}, finish_reason="stop", prompt_tokens=10, completion_tokens=10)) == 0.0
