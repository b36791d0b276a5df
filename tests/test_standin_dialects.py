"""The stand-in's dialects: each server family's stream shapes and validator refusals, over raw HTTP."""

import json
import re

import httpx2
import pytest

from standin.dialects import DIALECTS, THINKING
from tests.standin_fixture import TOOLS, standin  # noqa: F401

ASK = [{"role": "user", "content": "Where is my order SU-41210? #fault:parallel"}]
HELLO = [{"role": "user", "content": "Hello, can you help me?"}]


def post(server, messages, stream=True, usage=True, dialect="openai"):
    server.configure(dialect=dialect)
    body = {"model": "m", "messages": messages, "tools": TOOLS, "stream": stream}
    if stream and usage:
        body["stream_options"] = {"include_usage": True}
    return httpx2.post(server.base_url + "/chat/completions", json=body, timeout=10)


def chunks(response) -> list[dict]:
    events = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    return [json.loads(e) for e in events[:-1]]


def calls_in(chunks_: list[dict]) -> list[dict]:
    return [tc for c in chunks_ for ch in c["choices"] for tc in ch["delta"].get("tool_calls") or []]


def finish_of(chunks_: list[dict]) -> str:
    return next(ch["finish_reason"] for c in chunks_ for ch in c["choices"] if ch["finish_reason"])


def test_the_dialect_is_a_setting_and_an_unknown_one_is_refused(standin):
    assert standin.configure(dialect="vllm")["dialect"] == "vllm"
    r = httpx2.post(standin.url + "/_standin/config", json={"dialect": "gpt-9"})
    assert r.status_code == 400 and "dialect must be one of" in r.json()["error"]
    standin.reset()
    assert standin.state.config["dialect"] == "openai"


def test_openai_streams_argument_pieces_with_an_index_and_asked_for_usage(standin):
    got = chunks(post(standin, ASK))
    calls = calls_in(got)
    assert [c["index"] for c in calls if "id" in c] == [0, 1] and len(calls) > 2
    assert finish_of(got) == "tool_calls" and got[-1]["choices"] == [] and got[-1]["usage"]["prompt_tokens"] > 0


def test_vllm_numbers_ids_per_reply_and_streams_reasoning_content(standin):
    got = chunks(post(standin, ASK, dialect="vllm"))
    assert [c["id"] for c in calls_in(got) if "id" in c] == ["functions.get_order:0", "functions.search_policy:1"]
    assert "".join(ch["delta"].get("reasoning_content", "") for c in got for ch in c["choices"]) == THINKING


def test_mistral_makes_nine_character_ids(standin):
    ids = [c["id"] for c in calls_in(chunks(post(standin, ASK, dialect="mistral"))) if "id" in c]
    assert len(ids) == 2 and all(re.fullmatch(r"[a-zA-Z0-9]{9}", i) for i in ids)


def test_ollama_sends_whole_calls_at_index_0_finishes_with_stop_and_reports_no_usage(standin):
    got = chunks(post(standin, ASK, dialect="ollama"))
    calls = calls_in(got)
    assert [c["index"] for c in calls] == [0, 0] and all(re.fullmatch(r"call_[a-z0-9]{8}", c["id"]) for c in calls)
    assert json.loads(calls[0]["function"]["arguments"]) == {"order_id": "SU-41210"}
    assert finish_of(got) == "stop" and not any(c.get("usage") for c in got)
    assert any("reasoning" in ch["delta"] for c in got for ch in c["choices"])


def test_llamacpp_sends_empty_ids_without_index_arguments_as_objects_and_usage_unasked(standin):
    got = chunks(post(standin, ASK, usage=False, dialect="llamacpp"))
    calls = calls_in(got)
    assert [c["id"] for c in calls] == ["", ""] and not any("index" in c for c in calls)
    assert calls[0]["function"]["arguments"] == {"order_id": "SU-41210"}
    assert got[-1]["choices"][0]["finish_reason"] == "tool_calls" and got[-1]["usage"]["completion_tokens"] > 0


def test_azure_opens_with_a_chunk_without_choices(standin):
    got = chunks(post(standin, HELLO, dialect="azure"))
    assert got[0]["choices"] == [] and "prompt_filter_results" in got[0]


def test_a_non_streaming_reply_speaks_the_dialect_too(standin):
    body = post(standin, ASK, stream=False, dialect="llamacpp").json()
    message = body["choices"][0]["message"]
    assert message["tool_calls"][0]["function"]["arguments"] == {"order_id": "SU-41210"}
    assert message["reasoning_content"] == THINKING


# --- what each dialect's validator refuses --------------------------------------------------------

CALL = {"id": "call_abc", "type": "function",
        "function": {"name": "get_order", "arguments": '{"order_id": "SU-41210"}'}}
RESULT = {"role": "tool", "tool_call_id": "call_abc", "content": "{}"}
USER = {"role": "user", "content": "Where is SU-41210?"}


@pytest.mark.parametrize("dialect,history,error", [
    ("ollama", [USER, {"role": "assistant", "content": None}, USER], "invalid message content type: <nil>"),
    ("llamacpp", [USER, {"role": "assistant", "content": None, "tool_calls": [CALL]}, RESULT],
     "Expected 'content' to be a string or an array"),
    ("mistral", [USER, {"role": "assistant", "content": "", "tool_calls": [CALL]}, RESULT],
     "Tool call id was call_abc but must be a-z, A-Z, 0-9, with a length of 9."),
    ("mistral", [USER, {"role": "assistant", "content": " "}, USER],
     "Assistant message must have either content or tool_calls, but not none."),
    ("ollama", [USER, {"role": "assistant", "content": "", "tool_calls": [
        {**CALL, "function": {"name": "get_order", "arguments": '{"order_id": "SU-4'}}]}, RESULT],
     "invalid tool call arguments"),
])
def test_each_dialect_refuses_what_its_server_refuses(standin, dialect, history, error):
    r = post(standin, history, dialect=dialect)
    assert r.status_code == 400 and r.json()["error"]["message"] == error


@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_every_dialect_accepts_a_call_reply_with_empty_text(standin, dialect):
    call = {**CALL, "id": "abcDEF123"}
    history = [USER, {"role": "assistant", "content": "", "tool_calls": [call]},
               {**RESULT, "tool_call_id": "abcDEF123"}]
    assert post(standin, history, dialect=dialect).status_code == 200


def test_openai_accepts_null_content_beside_calls(standin):
    history = [USER, {"role": "assistant", "content": None, "tool_calls": [CALL]}, RESULT]
    assert post(standin, history).status_code == 200


def test_the_empty_and_quota_faults(standin):
    standin.queue_faults(["empty", "quota"])
    got = chunks(post(standin, HELLO))
    assert not any(ch["delta"].get("content") or ch["delta"].get("tool_calls") for c in got for ch in c["choices"])
    r = post(standin, HELLO)
    assert r.status_code == 429 and r.json()["error"]["code"] == "insufficient_quota" and "retry-after" not in r.headers
