"""Faults on request: queued through /_standin/faults or asked for with `#fault:` in the customer's message,
each doing to the client what a misbehaving model endpoint would; plus latency settings and the request log."""

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx2
import openai
import pytest

from standin.faults import parse
from tests.standin_fixture import TOOLS, client_for, run_ticket, standin  # noqa: F401

MODEL = "sundry-standin-1"
ASK = [{"role": "user", "content": "Where is my order SU-41210?"}]


def create(server, messages=ASK, **kwargs):
    return client_for(server).chat.completions.create(model=MODEL, messages=messages, tools=TOOLS, **kwargs)


def control(server, path, body=None):
    """POST `body` to a control endpoint, or GET it when there is no body (reset is always a POST)."""
    if body is None and path != "reset":
        return httpx2.get(f"{server.url}/_standin/{path}")
    return httpx2.post(f"{server.url}/_standin/{path}", json=body or {})


# --- the grammar ------------------------------------------------------------------------------------


def test_it_reads_a_fault_spec_with_parameters_and_a_count():
    assert [f.spec for f in parse("429x2")] == ["429", "429"]
    stall = parse("stall:after_chunks=3,seconds=2.5")[0]
    assert (stall.get("after_chunks"), stall.get("seconds")) == (3, 2.5)
    assert parse("stall")[0].get("seconds") == 30 and parse("429")[0].get("retry_after") == 1
    assert [f.spec for f in parse("delay:ms=300x3")] == ["delay:ms=300"] * 3


@pytest.mark.parametrize("spec", ["418", "stall:minutes=2", "delay:ms", "429x0", "repeat:forever=1"])
def test_it_refuses_a_fault_it_does_not_know(standin, spec):
    r = control(standin, "faults", {"faults": [spec]})
    assert r.status_code == 400 and r.json()["error"]
    assert control(standin, "faults").json() == {"pending": []}


# --- HTTP errors --------------------------------------------------------------------------------------


def test_it_answers_a_queued_429_with_retry_after_and_openais_rate_limit_body(standin):
    assert control(standin, "faults", {"faults": ["429:retry_after=7"]}).json() == {"queued": ["429:retry_after=7"],
                                                                                   "pending": 1}
    with pytest.raises(openai.RateLimitError) as caught:
        create(standin)
    assert caught.value.response.headers["retry-after"] == "7"
    assert caught.value.body["code"] == "rate_limit_exceeded"
    assert caught.value.body["message"].startswith("Rate limit reached for sundry-standin-1")
    assert create(standin).choices[0].finish_reason == "tool_calls"  # consumed: the next request is served


def test_it_lets_the_openai_client_retry_after_the_wait_it_asked_for(standin):
    standin.queue_faults(["429:retry_after=0.3"])
    started = time.monotonic()
    r = client_for(standin, max_retries=1).chat.completions.create(model=MODEL, messages=ASK, tools=TOOLS)
    assert r.choices[0].message.tool_calls and time.monotonic() - started >= 0.3
    assert [e["status"] for e in standin.requests()] == [429, 200]


@pytest.mark.parametrize("code", [500, 503])
def test_it_fails_with_an_openai_server_error(standin, code):
    standin.queue_faults([str(code)])
    with pytest.raises(openai.InternalServerError) as caught:
        create(standin)
    assert caught.value.status_code == code and caught.value.body["type"] == "server_error"


def test_it_uses_queued_faults_one_request_at_a_time_in_order(standin):
    standin.queue_faults(["500", "503"])
    for expected in (openai.InternalServerError, openai.InternalServerError):
        with pytest.raises(expected):
            create(standin)
    create(standin)
    assert [(e["status"], e["fault"]) for e in standin.requests()] == [(500, "500"), (503, "503"), (200, None)]


def test_it_keeps_a_matched_fault_for_the_conversation_it_names(standin):
    control(standin, "faults", {"faults": ["500"], "match": "SU-41388"})
    create(standin)  # about SU-41210: not this one
    with pytest.raises(openai.InternalServerError):
        create(standin, [{"role": "user", "content": "Where is SU-41388?"}])
    assert control(standin, "faults").json() == {"pending": []}


# --- slow and stalled ----------------------------------------------------------------------------------


def test_it_delays_an_answer_on_request(standin):
    standin.queue_faults(["delay:ms=300"])
    started = time.monotonic()
    create(standin)
    assert time.monotonic() - started >= 0.3


def test_it_stalls_a_stream_without_holding_up_other_requests(standin):
    standin.queue_faults(["stall:after_chunks=2,seconds=2"])
    slow = client_for(standin, timeout=httpx2.Timeout(5.0, read=0.5))
    got, others = [], []
    with pytest.raises((httpx2.ReadTimeout, openai.APITimeoutError)):
        for chunk in slow.chat.completions.create(model=MODEL, messages=ASK, tools=TOOLS, stream=True):
            got.append(chunk)
            if len(got) == 2:  # mid-stall: another conversation is served at once
                started = time.monotonic()
                create(standin)
                others.append(time.monotonic() - started)
    assert len(got) == 2 and got[0].choices[0].delta.role == "assistant"
    assert others and others[0] < 0.4


def test_it_hangs_a_plain_request_for_a_stall(standin):
    standin.queue_faults(["stall:seconds=2"])
    with pytest.raises(openai.APITimeoutError):
        client_for(standin, timeout=httpx2.Timeout(5.0, read=0.5)).chat.completions.create(
            model=MODEL, messages=ASK, tools=TOOLS)


def test_a_stalled_request_that_ends_after_a_reset_is_not_in_the_new_log(standin):
    # The next test's log is its own, even when the one before left a stalled answer running.
    standin.queue_faults(["stall:seconds=1"])
    with pytest.raises(openai.APITimeoutError):
        client_for(standin, timeout=httpx2.Timeout(5.0, read=0.2)).chat.completions.create(
            model=MODEL, messages=ASK, tools=TOOLS)
    standin.reset()
    create(standin)
    time.sleep(1.2)  # the stalled answer ends meanwhile
    assert [(e["n"], e["status"], e["fault"]) for e in standin.requests()] == [(1, 200, None)]


# --- bent replies ---------------------------------------------------------------------------------------


def test_it_sends_malformed_arguments_and_recovers_once_told(standin):
    standin.queue_faults(["malformed_args"])
    t = run_ticket(client_for(standin), ASK[0]["content"])
    assert t.calls[0] == ("get_order", '{"order_id": "SU-41210"')  # cut: not JSON
    assert t.names == ["get_order", "get_order", "track_parcel", "record_outcome"]
    assert t.messages[3]["content"].startswith("ERROR:")


def test_it_calls_a_tool_that_does_not_exist_on_request(standin):
    standin.queue_faults(["unknown_tool"])
    t = run_ticket(client_for(standin), ASK[0]["content"])
    assert t.calls[0] == ("cancel_everything", {"order_id": "SU-41210"})
    assert t.names[1:] == ["get_order", "track_parcel", "record_outcome"]


def test_it_repeats_the_same_call_forever_until_the_loop_warns_it(standin):
    messages = list(ASK)
    names, args = [], []
    standin.queue_faults(["repeat"])  # waits for a request with a previous call to repeat
    for n in range(4):
        message = create(standin, messages).choices[0].message
        call = message.tool_calls[0]
        names.append(call.function.name)
        args.append(call.function.arguments)
        messages += [message.model_dump(exclude_none=True, include={"role", "content", "tool_calls"}),
                     {"role": "tool", "tool_call_id": call.id, "content": '{"order_id": "SU-41210", "status": "x"}'}]
    assert names == ["get_order"] * 4 and len(set(args)) == 1
    messages[-1]["content"] = "ERROR: get_order was called 4 times with the same arguments; stop and answer."
    r = create(standin, messages)
    assert r.choices[0].message.tool_calls is None and r.choices[0].message.content


def test_it_cuts_a_text_reply_short_with_finish_reason_length(standin):
    standin.queue_faults(["length"])
    r = create(standin, [{"role": "user", "content": "hello"}])
    assert r.choices[0].finish_reason == "length" and r.choices[0].message.content


def test_it_honours_max_tokens_on_text(standin):
    r = client_for(standin).chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "hello"}], max_tokens=5)
    assert r.choices[0].finish_reason == "length" and len(r.choices[0].message.content) <= 20


# --- directives in the customer's message ---------------------------------------------------------------


def test_it_fails_the_first_requests_after_a_429_directive(standin):
    messages = [{"role": "user", "content": "#fault:429x2 Where is my order SU-41210?"}]
    for _ in range(2):
        with pytest.raises(openai.RateLimitError):
            create(standin, messages)
    r = create(standin, messages)
    assert json.loads(r.choices[0].message.tool_calls[0].function.arguments) == {"order_id": "SU-41210"}


def test_it_lets_a_retrying_client_through_a_429_directive(standin):
    messages = [{"role": "user", "content": "#fault:429:retry_after=0.1x2 Where is my order SU-41210?"}]
    seen = []  # this client's own responses: the shared stand-in may also log a request another test left
    http = openai.DefaultHttpxClient(event_hooks={"response": [lambda response: seen.append(response.status_code)]})
    r = client_for(standin, max_retries=2, http_client=http).chat.completions.create(
        model=MODEL, messages=messages, tools=TOOLS)
    assert r.choices[0].message.tool_calls
    assert seen == [429, 429, 200]
    # This directive's faults (an earlier test's late request, e.g. a stalled one served at last, is logged too).
    assert [e["status"] for e in standin.requests() if (e["fault"] or "").startswith("429")] == [429, 429]


def test_it_applies_a_directive_only_to_the_first_request_after_the_message(standin):
    t = run_ticket(client_for(standin), "Where is my order SU-41210? #fault:malformed_args")
    assert isinstance(t.calls[0][1], str)
    assert t.names == ["get_order", "get_order", "track_parcel", "record_outcome"]
    assert "fault" not in t.answer


def test_it_stalls_on_a_directive_and_serves_the_retry(standin):
    messages = [{"role": "user", "content": "#fault:stall:seconds=2 Where is my order SU-41210?"}]
    slow = client_for(standin, timeout=httpx2.Timeout(5.0, read=0.5))
    with pytest.raises((httpx2.ReadTimeout, openai.APITimeoutError)):
        list(slow.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS, stream=True))
    assert create(standin, messages).choices[0].message.tool_calls


# --- settings, log, reset -------------------------------------------------------------------------------


def test_it_adds_configured_latency_to_every_request(standin):
    assert control(standin, "config", {"latency_ms": 250}).json()["latency_ms"] == 250
    started = time.monotonic()
    create(standin)
    create(standin)
    assert time.monotonic() - started >= 0.5


def test_it_paces_streamed_chunks_with_a_token_delay(standin):
    standin.configure(token_delay_ms=20)
    started = time.monotonic()
    chunks = list(client_for(standin).chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "hello"}], stream=True))
    assert time.monotonic() - started >= 0.02 * (len(chunks) - 1)


def test_it_refuses_settings_it_does_not_know(standin):
    assert control(standin, "config", {"temperature": 2}).status_code == 400
    assert control(standin, "config", {"latency_ms": -1}).status_code == 400


def test_it_logs_every_request_it_saw(standin):
    standin.queue_faults(["503"])
    with pytest.raises(openai.InternalServerError):
        create(standin)
    list(create(standin, stream=True))
    log = control(standin, "requests").json()
    assert [(e["n"], e["status"], e["fault"], e["stream"], e["n_messages"]) for e in log] == [
        (1, 503, "503", False, 1), (2, 200, None, True, 1)]
    assert all(isinstance(e["at"], float) for e in log)


def test_it_forgets_faults_settings_and_log_on_reset(standin):
    standin.queue_faults(["500"])
    standin.configure(latency_ms=100)
    with pytest.raises(openai.InternalServerError):
        create(standin)
    assert control(standin, "reset").json() == {"ok": True}
    assert control(standin, "faults").json() == {"pending": []}
    assert control(standin, "config").json()["latency_ms"] == 0
    assert control(standin, "requests").json() == []


def test_it_serves_many_streams_at_once(standin):
    standin.configure(token_delay_ms=5)

    def one(_):
        chunks, first = 0, None
        for _chunk in client_for(standin).chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "hello"}], stream=True):
            chunks += 1
            first = first if first is not None else time.monotonic()
        return chunks, first, time.monotonic()

    with ThreadPoolExecutor(max_workers=40) as pool:
        streams = list(pool.map(one, range(40)))
    assert all(chunks > 5 for chunks, _, _ in streams)
    # Served at once, not one after another: at some moment many streams were between their first and last chunk
    # (one at a time, never more than one would be). A count, not a time: a slow machine only spreads them out.
    edges = sorted([(first, 1) for _, first, _ in streams] + [(last, -1) for _, _, last in streams])
    open_now = most = 0
    for _, step in edges:
        open_now += step
        most = max(most, open_now)
    assert most >= 10, most
    assert threading.active_count() < 100
