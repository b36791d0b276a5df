"""The stand-in speaks OpenAI's chat-completions protocol: shapes, streaming, usage, and the 400s for
broken conversations, checked with the real `openai` client over HTTP (and raw HTTP where bytes matter)."""

import json
import subprocess
import sys

import httpx2
import openai
import pytest

from standin.rules import validate_request
from tests.standin_fixture import TOOLS, client_for, standin  # noqa: F401

MODEL = "sundry-standin-1"
ASK = [{"role": "user", "content": "Where is my order SU-41210?"}]


def call_message(call_id="call_a", name="get_order", arguments='{"order_id": "SU-41210"}'):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def asked(*calls):
    return {"role": "assistant", "content": None, "tool_calls": list(calls)}


def answer(call_id="call_a", content='{"order_id": "SU-41210"}'):
    return {"role": "tool", "tool_call_id": call_id, "content": content}


# --- shapes ---------------------------------------------------------------------------------------


def test_it_answers_a_completion_the_openai_client_parses(standin):
    r = client_for(standin).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-") and r.model == MODEL
    assert r.choices[0].message.role == "assistant" and r.choices[0].message.content
    assert r.choices[0].finish_reason == "stop"
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_it_estimates_prompt_tokens_at_about_four_characters_each(standin):
    client = client_for(standin)
    short = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    long_text = "word " * 400
    big = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": long_text}], tools=TOOLS)
    assert big.usage.prompt_tokens > short.usage.prompt_tokens + 400  # 2,000 characters of text, plus the tools
    serialised = len(json.dumps([{"role": "user", "content": long_text}])) + len(json.dumps(TOOLS))
    assert abs(big.usage.prompt_tokens - serialised / 4) < serialised / 20


def test_it_returns_tool_calls_with_call_ids_and_arguments_as_a_json_string(standin):
    r = client_for(standin).chat.completions.create(model=MODEL, messages=ASK, tools=TOOLS)
    call = r.choices[0].message.tool_calls[0]
    assert r.choices[0].finish_reason == "tool_calls"
    assert call.id.startswith("call_") and len(call.id) > 10 and call.type == "function"
    assert call.function.name == "get_order"
    assert json.loads(call.function.arguments) == {"order_id": "SU-41210"}


def test_it_streams_text_in_several_deltas_with_the_role_first_and_usage_last(standin):
    chunks = list(client_for(standin).chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "hello"}], stream=True,
        stream_options={"include_usage": True}))
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(pieces) > 5 and "order number" in "".join(pieces)
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0


def test_it_streams_tool_calls_by_index_with_arguments_split_across_deltas(standin):
    chunks = list(client_for(standin).chat.completions.create(
        model=MODEL, messages=ASK, tools=TOOLS, stream=True))
    deltas = [d for c in chunks for d in (c.choices[0].delta.tool_calls or [])]
    assert deltas[0].index == 0 and deltas[0].id.startswith("call_") and deltas[0].type == "function"
    assert deltas[0].function.name == "get_order"
    assert all(d.index == 0 and d.id is None for d in deltas[1:])
    assert len(deltas) > 2
    assert json.loads("".join(d.function.arguments for d in deltas)) == {"order_id": "SU-41210"}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    assert chunks[-1].usage is None  # usage only when stream_options asks for it


def test_it_frames_server_sent_events_exactly_like_openai(standin):
    body = {"model": MODEL, "messages": ASK, "stream": True, "stream_options": {"include_usage": True}}
    r = httpx2.post(f"{standin.base_url}/chat/completions", json=body)
    assert r.headers["content-type"].startswith("text/event-stream")
    events = r.text.split("\n\n")
    assert events[-1] == "" and events[-2] == "data: [DONE]"
    payloads = [json.loads(e.removeprefix("data: ")) for e in events[:-2]]
    assert all(e.startswith("data: ") for e in events[:-1])
    assert payloads[-1]["choices"] == [] and payloads[-1]["usage"]["total_tokens"] > 0
    assert all(p["usage"] is None for p in payloads[:-1])
    assert len({p["id"] for p in payloads}) == 1


def test_it_lists_its_model(standin):
    assert [m.id for m in client_for(standin).models.list()] == [MODEL]


def test_it_answers_unknown_urls_with_an_openai_error(standin):
    r = httpx2.post(f"{standin.url}/v1/embeddings", json={})
    assert r.status_code == 404 and r.json()["error"]["message"] == "Invalid URL (POST /v1/embeddings)"


def test_it_imports_no_django_and_nothing_from_support():
    code = ("import sys, standin.app, standin.server, standin.__main__; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('django', 'support')]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- the seed's bugs, through the real client -------------------------------------------------------


def bad_request(standin, messages, **kwargs) -> openai.BadRequestError:
    with pytest.raises(openai.BadRequestError) as caught:
        client_for(standin).chat.completions.create(model=MODEL, messages=messages, tools=TOOLS, **kwargs)
    assert caught.value.status_code == 400 and caught.value.body["type"] == "invalid_request_error"
    return caught.value


def test_it_rejects_tool_results_sent_without_the_assistant_message_that_asked(standin):
    e = bad_request(standin, [{"role": "system", "content": "s"}, *ASK, answer()])
    assert e.body["message"] == ("Invalid parameter: messages with role 'tool' must be a response to a "
                                 "preceeding message with 'tool_calls'.")
    assert e.body["param"] == "messages.[2].role"


def test_it_rejects_answering_only_some_of_the_tool_calls(standin):
    calls = [call_message("call_x"), call_message("call_y", "track_parcel"), call_message("call_z", "search_policy")]
    e = bad_request(standin, [*ASK, asked(*calls), answer("call_x"), {"role": "user", "content": "and?"}])
    assert e.body["message"] == (
        "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
        "'tool_call_id'. The following tool_call_ids did not have response messages: call_y, call_z")
    assert e.body["param"] == "messages.[1].role"


def test_it_rejects_arguments_sent_back_as_an_object(standin):
    parsed = call_message()
    parsed["function"]["arguments"] = {"order_id": "SU-41210"}
    e = bad_request(standin, [*ASK, asked(parsed), answer()])
    assert e.body["message"] == ("Invalid type for 'messages[1].tool_calls[0].function.arguments': expected a "
                                 "string, but got an object instead.")
    assert e.body["code"] == "invalid_type"


def test_it_rejects_a_tool_result_for_a_call_the_previous_message_did_not_make(standin):
    e = bad_request(standin, [*ASK, asked(call_message("call_a")), answer("call_a"), answer("call_q")])
    assert e.body["message"] == ("Invalid parameter: 'tool_call_id' of 'call_q' not found in 'tool_calls' of "
                                 "previous message.")


def test_it_accepts_every_call_answered_in_any_order(standin):
    calls = [call_message("call_x"), call_message("call_y", "track_parcel", '{"tracking": "PX-41210"}')]
    r = client_for(standin).chat.completions.create(
        model=MODEL, messages=[*ASK, asked(*calls), answer("call_y", "{}"), answer("call_x")], tools=TOOLS)
    assert r.choices[0].message is not None


def test_it_answers_a_body_that_is_not_json_with_openais_parse_error(standin):
    r = httpx2.post(f"{standin.base_url}/chat/completions", content=b'{"model": "x", "messages": [',
                    headers={"content-type": "application/json"})
    assert r.status_code == 400
    assert r.json()["error"]["message"].startswith("We could not parse the JSON body of your request.")


# --- the rules as a pure function -------------------------------------------------------------------

GOOD = {"model": MODEL, "messages": ASK, "tools": TOOLS}


def with_(**changes):
    return {**GOOD, **changes}


@pytest.mark.parametrize("body, message, param", [
    ({"messages": ASK}, "you must provide a model parameter", None),
    ({"model": MODEL}, "Missing required parameter: 'messages'.", "messages"),
    (with_(messages=[]), "[] is too short - 'messages'", "messages"),
    (with_(messages="hi"), "Invalid type for 'messages': expected an array of objects, but got a string instead.",
     "messages"),
    (with_(messages=[{"content": "hi"}]), "Missing required parameter: 'messages[0].role'.", "messages[0].role"),
    (with_(messages=[{"role": "bot", "content": "hi"}]), "Invalid value: 'bot'. Supported values are: 'system', "
     "'assistant', 'user', 'function', 'tool', and 'developer'.", "messages[0].role"),
    (with_(messages=[{"role": "user", "content": None}]), "Invalid value for 'content': expected a string, got null.",
     "messages.[0].content"),
    (with_(messages=[*ASK, {"role": "assistant"}]), "Missing required parameter: 'messages[1].content'.",
     "messages[1].content"),
    (with_(messages=[*ASK, asked(call_message()), {"role": "tool", "content": "{}"}]),
     "Missing required parameter: 'messages[2].tool_call_id'.", "messages[2].tool_call_id"),
    (with_(messages=[*ASK, asked(call_message()), {"role": "tool", "tool_call_id": "call_a"}]),
     "Missing required parameter: 'messages[2].content'.", "messages[2].content"),
    (with_(messages=[*ASK, {"role": "assistant", "tool_calls": []}]), "Invalid 'messages[1].tool_calls': empty "
     "array. Expected an array with minimum length 1, but got an empty array instead.", "messages[1].tool_calls"),
    (with_(messages=[*ASK, asked({"type": "function", "function": {"name": "x", "arguments": "{}"}})]),
     "Missing required parameter: 'messages[1].tool_calls[0].id'.", "messages[1].tool_calls[0].id"),
    (with_(messages=[*ASK, asked(call_message())]), "An assistant message with 'tool_calls' must be followed by "
     "tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response "
     "messages: call_a", "messages.[1].role"),
    (with_(tools={"type": "function"}), "Invalid type for 'tools': expected an array of objects, but got an "
     "object instead.", "tools"),
    (with_(tools=[{"type": "function", "function": {"name": "look up order"}}]), "Invalid 'tools[0].function.name'"
     ": string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.",
     "tools[0].function.name"),
    (with_(tools=[{"type": "function", "function": {"name": "x" * 65}}]), "Invalid 'tools[0].function.name': "
     "string too long. Expected a string with maximum length 64, but got a string with length 65 instead.",
     "tools[0].function.name"),
    (with_(tools=[{"type": "function", "function": {}}]), "Missing required parameter: 'tools[0].function.name'.",
     "tools[0].function.name"),
    (with_(tools=[{"type": "retrieval"}]), "Invalid value: 'retrieval'. Supported values are: 'function' and "
     "'custom'.", "tools[0].type"),
    (with_(tools=[{"type": "function", "function": {"name": "x", "parameters": "{}"}}]), "Invalid type for "
     "'tools[0].function.parameters': expected an object, but got a string instead.", "tools[0].function.parameters"),
    ({"model": MODEL, "messages": ASK, "tool_choice": "auto"}, "Invalid value for 'tool_choice': 'tool_choice' is "
     "only allowed when 'tools' are specified.", "tool_choice"),
    (with_(stream_options={"include_usage": True}), "The 'stream_options' parameter is only allowed when 'stream' "
     "is enabled.", "stream_options"),
    ([1, 2], "We could not parse the JSON body of your request.", None),
])
def test_it_rejects_requests_openai_would_reject(body, message, param):
    status, error = validate_request(body)
    assert status == 400 and error["error"]["type"] == "invalid_request_error"
    assert error["error"]["message"].startswith(message) and error["error"]["param"] == param


def test_it_accepts_a_whole_well_formed_conversation():
    messages = [{"role": "system", "content": "s"}, *ASK, asked(call_message("call_a"), call_message("call_b")),
                answer("call_a"), answer("call_b"), {"role": "assistant", "content": "Done."},
                {"role": "user", "content": [{"type": "text", "text": "thanks"}]}]
    assert validate_request(with_(messages=messages, stream=True, stream_options={"include_usage": True})) is None
