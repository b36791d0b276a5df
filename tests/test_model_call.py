"""The model call over real HTTP against the stand-in: streaming, usage, retries, timeouts, refusals."""

import json
import socket
import ssl
import time

import httpx2
import openai
import pytest

from support.agent.llm import OpenAIModel
from support.agent.types import ModelError, Observer, Transcript
from tests.standin_fixture import standin  # noqa: F401  (the fixture)


class Sink(Observer):
    def __init__(self):
        self.tokens, self.resets, self.beats = [], 0, 0

    def token(self, d):
        self.tokens.append(d)

    def tokens_reset(self):
        self.resets += 1
        self.tokens.clear()

    def heartbeat(self):
        self.beats += 1


class Sleeps(list):
    def __call__(self, seconds):
        self.append(seconds)


def make(server, **kw):
    sleeps = Sleeps()
    options = dict(base_url=server.base_url, api_key="x", model="sundry-standin-1",
                   prices={"sundry-standin-1": (0.15, 0.60)}, read_timeout=5.0, sleep=sleeps)
    options.update(kw)
    return OpenAIModel(**options), sleeps


def ticket(text="Where is my order SU-41210?"):
    return Transcript([{"role": "system", "content": "You are Sundry's agent."}, {"role": "user", "content": text}])


def faults(server, *names, match=None):
    body = {"faults": list(names)}
    if match:
        body["match"] = match
    r = httpx2.post(server.base_url.removesuffix("/v1") + "/_standin/faults", json=body)
    assert r.status_code == 200, r.text


def requests_seen(server):
    return httpx2.get(server.base_url.removesuffix("/v1") + "/_standin/requests").json()


TOOLS = [{"type": "function", "function": {"name": "get_order", "description": "Look up an order.",
          "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}}]


def test_it_streams_a_reply_and_reports_usage_and_cost(standin):
    model, _ = make(standin)
    sink = Sink()
    reply = model.complete(ticket(), TOOLS, sink)
    assert reply.finish_reason == "tool_calls"
    call = reply.tool_calls[0]
    assert call.name == "get_order" and json.loads(call.arguments) == {"order_id": "SU-41210"}
    assert call.id and reply.message["role"] == "assistant"
    assert reply.prompt_tokens > 0 and reply.completion_tokens > 0
    assert model.cost(reply) == pytest.approx((reply.prompt_tokens * 0.15 + reply.completion_tokens * 0.60) / 1e6)


def test_text_replies_arrive_as_token_deltas(standin):
    model, _ = make(standin)
    sink = Sink()
    reply = model.complete(ticket("Hello, can you help me?"), TOOLS, sink)
    assert reply.finish_reason in ("stop", "tool_calls")
    text = reply.content
    assert text and len(sink.tokens) > 1 and "".join(sink.tokens) == text


def test_the_request_body_is_the_transcript_as_json():
    model = OpenAIModel(base_url="http://127.0.0.1:9/v1", api_key="x", model="m")
    t = ticket("é and “quotes”")
    body = json.loads(model.body(t, TOOLS))
    assert body == {"model": "m", "stream": True, "stream_options": {"include_usage": True},
                    "tools": TOOLS, "messages": t.messages}


def test_two_429s_then_success_completes_with_three_requests(standin):
    faults(standin, "429:retry_after=1", "429:retry_after=1")
    model, sleeps = make(standin)
    reply = model.complete(ticket(), TOOLS, Sink())
    assert reply.finish_reason == "tool_calls" and reply.attempts == 3
    assert [r["status"] for r in requests_seen(standin)] == [429, 429, 200]
    assert sleeps == [1.0, 1.0]  # Retry-After honoured


def test_5xx_is_retried_with_backoff(standin):
    faults(standin, "500", "503")
    model, sleeps = make(standin, backoff_base=0.5)
    reply = model.complete(ticket(), TOOLS, Sink())
    assert reply.attempts == 3 and len(sleeps) == 2
    assert 0.5 <= sleeps[0] <= 0.75 and 1.0 <= sleeps[1] <= 1.5


def test_retries_end_in_a_model_error_when_they_run_out(standin):
    faults(standin, "503", "503", "503")
    model, sleeps = make(standin, max_retries=2)
    with pytest.raises(ModelError) as e:
        model.complete(ticket(), TOOLS, Sink())
    assert e.value.attempts == 3 and e.value.status == 503 and len(sleeps) == 2
    assert len(requests_seen(standin)) == 3


def test_a_400_is_never_retried(standin):
    model, sleeps = make(standin)
    broken = ticket()
    broken.append({"role": "tool", "tool_call_id": "call_x", "content": "{}"})  # a result with no call
    with pytest.raises(ModelError) as e:
        model.complete(broken, TOOLS, Sink())
    assert e.value.status == 400 and "must be a response to a preceeding message with 'tool_calls'" in str(e.value)
    assert sleeps == [] and len(requests_seen(standin)) == 1


def test_a_stalled_stream_times_out_and_is_retried(standin):
    faults(standin, "stall:after_chunks=2,seconds=5")
    model, sleeps = make(standin, read_timeout=0.5)
    sink = Sink()
    t0 = time.monotonic()
    reply = model.complete(ticket("Hello, can you help me?"), TOOLS, sink)
    assert time.monotonic() - t0 < 4  # the read timeout cut the stall short
    assert reply.attempts == 2 and sink.resets == 1 and len(sleeps) == 1
    assert "".join(sink.tokens) == (reply.content or "")  # no half-reply left over from the stalled try


def test_a_stream_that_keeps_stalling_ends_in_a_model_error(standin):
    faults(standin, "stall:after_chunks=1,seconds=5", "stall:after_chunks=1,seconds=5")
    model, _ = make(standin, read_timeout=0.4, max_retries=1)
    with pytest.raises(ModelError) as e:
        model.complete(ticket(), TOOLS, Sink())
    assert e.value.attempts == 2


def test_connection_errors_are_retried_then_reported():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sleeps = Sleeps()
    model = OpenAIModel(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", model="m", max_retries=2,
                        connect_timeout=0.5, sleep=sleeps)
    with pytest.raises(ModelError) as e:
        model.complete(ticket(), TOOLS, Sink())
    assert e.value.attempts == 3 and len(sleeps) == 2 and "Connection" in str(e.value)


def test_calls_reuse_one_connection(standin):
    # The stream is read to the end of its body, past [DONE], so the connection goes back to the pool.
    model, _ = make(standin)
    for text in ("Hello, can you help me?", "Where is my order SU-41210?", "Hello again"):
        model.complete(ticket(text), TOOLS, Sink())
    peers = [r["peer"] for r in requests_seen(standin)]
    assert len(peers) == 3 and len(set(peers)) == 1, peers


def test_an_error_event_mid_stream_is_retried(standin):
    faults(standin, "stream_error:after_chunks=2")
    model, sleeps = make(standin)
    sink = Sink()
    reply = model.complete(ticket("Hello, can you help me?"), TOOLS, sink)
    assert reply.attempts == 2 and sink.resets == 1 and len(sleeps) == 1
    assert "".join(sink.tokens) == (reply.content or "")
    assert [r["fault"] for r in requests_seen(standin)] == ["stream_error:after_chunks=2", None]


def _sse_server(bodies: list[bytes], *, short_by: int = 0):
    """A one-shot HTTP server on loopback answering each request with the next raw SSE body; with
    `short_by`, the body announced is that many bytes longer than the one sent, and the connection closes."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            body = bodies.pop(0)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(body) + short_by))
            self.end_headers()
            self.wfile.write(body)
            if short_by:
                self.close_connection = True

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    return server


def test_events_are_read_by_the_sse_rules_and_garbage_is_retried():
    def chunk(delta, finish=None):
        return {"model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    good = (": a comment\n\n"
            "event: message\n"
            f"data: {json.dumps(chunk({'content': 'Hel'}))}\n\n"
            # one event may span several data lines (joined with a newline: still one JSON document)
            + "data: " + json.dumps(chunk({'content': 'lo'})).replace(', "choices"', '\ndata: , "choices"') + "\n\n"
            + f"data: {json.dumps(chunk({}, 'stop'))}\n\n"
            "data: [DONE]\n\n").encode()
    server = _sse_server([b"data: {not json\n\n", good])
    try:
        sleeps = Sleeps()
        model = OpenAIModel(base_url=f"http://127.0.0.1:{server.server_port}/v1", api_key="x", model="m",
                            sleep=sleeps, read_timeout=5.0)
        sink = Sink()
        reply = model.complete(ticket(), TOOLS, sink)
    finally:
        server.shutdown()
    assert reply.attempts == 2 and len(sleeps) == 1  # the unreadable chunk was retried, not raised
    assert reply.content == "Hello" and reply.finish_reason == "stop" and sink.tokens == ["Hel", "lo"]


def test_a_reply_is_complete_at_done_whatever_follows_it():
    # A server that breaks the connection after [DONE] costs that connection, not the finished reply.
    chunk = {"model": "m", "choices": [{"index": 0, "delta": {"content": "Done."}, "finish_reason": "stop"}]}
    body = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()
    server = _sse_server([body], short_by=100)
    try:
        sleeps = Sleeps()
        model = OpenAIModel(base_url=f"http://127.0.0.1:{server.server_port}/v1", api_key="x", model="m",
                            sleep=sleeps, read_timeout=5.0)
        reply = model.complete(ticket(), TOOLS, Sink())
    finally:
        server.shutdown()
    assert (reply.content, reply.finish_reason, reply.attempts, sleeps) == ("Done.", "stop", 1, [])


class _FailsAfterOneChunk(httpx2.SyncByteStream):
    def __init__(self, error):
        self.error = error

    def __iter__(self):
        yield b'data: {"choices":[{"index":0,"delta":{"content":"Hel"}}]}\n\n'
        raise self.error

    def close(self):
        pass


@pytest.mark.parametrize("error", [ssl.SSLError("bad record mac"), httpx2.DecodingError("bad gzip"),
                                   httpx2.ReadTimeout("slow"), httpx2.RemoteProtocolError("peer closed")],
                         ids=lambda e: type(e).__name__)
def test_a_transport_failure_mid_stream_is_retried_then_reported(error):
    requests = []

    def handler(request):
        requests.append(request)
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=_FailsAfterOneChunk(error))

    sleeps = Sleeps()
    model = OpenAIModel(base_url="http://model.invalid/v1", api_key="x", model="m", max_retries=1, sleep=sleeps)
    model.client = openai.OpenAI(base_url="http://model.invalid/v1", api_key="x", max_retries=0,
                                 http_client=httpx2.Client(transport=httpx2.MockTransport(handler)))
    sink = Sink()
    with pytest.raises(ModelError) as e:
        model.complete(ticket(), TOOLS, sink)
    assert e.value.attempts == 2 and len(requests) == 2 and len(sleeps) == 1
    assert sink.resets == 2 and sink.tokens == []  # the half reply was taken back each time
