"""The floor: the least a tool loop can do per model call, written by hand.

Plain http.client on one keep-alive connection, the streamed reply (SSE) parsed line by line, json.loads per
chunk, each message encoded once when appended, and canned tool results: no database, no events, no
validation, no retries. Whatever our full path costs above this per model call is what we add.
"""

from __future__ import annotations

import http.client
import json


class Floor:
    def __init__(self, host: str, port: int, *, model: str = "sundry-standin-1", timeout: float = 30.0):
        self.conn = http.client.HTTPConnection(host, port, timeout=timeout)
        self.model = model

    def close(self) -> None:
        self.conn.close()

    def run(self, messages: list[dict], tools_json: bytes, tool_results: dict[str, str], max_calls: int = 200) -> dict:
        """Call the model until it answers without tool calls; each call answered with the canned result
        for its tool name (`tool_results[name]`, else `tool_results["*"]`)."""
        encoded = [json.dumps(m, ensure_ascii=False, separators=(",", ":")).encode() for m in messages]
        head = json.dumps({"model": self.model, "stream": True, "stream_options": {"include_usage": True}})
        head = head[:-1].encode() + b',"tools":' + tools_json + b',"messages":['
        calls = 0
        while calls < max_calls:
            calls += 1
            message, finish = self._call(head + b",".join(encoded) + b"]}")
            encoded.append(json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode())
            if not message.get("tool_calls"):
                return {"calls": calls, "finish_reason": finish, "answer": message.get("content") or ""}
            for call in message["tool_calls"]:
                result = tool_results.get(call["function"]["name"]) or tool_results["*"]
                encoded.append(json.dumps({"role": "tool", "tool_call_id": call["id"], "content": result},
                                          ensure_ascii=False, separators=(",", ":")).encode())
        raise RuntimeError(f"no answer after {max_calls} calls")

    def _call(self, body: bytes) -> tuple[dict, str | None]:
        self.conn.request("POST", "/v1/chat/completions", body=body,
                          headers={"Content-Type": "application/json", "Authorization": "Bearer floor"})
        resp = self.conn.getresponse()
        if resp.status != 200:
            raise RuntimeError(f"model answered {resp.status}: {resp.read()[:300]!r}")
        content: list[str] = []
        calls: dict[int, dict] = {}
        finish = None
        while True:
            line = resp.readline()
            if not line:
                break
            if not line.startswith(b"data: "):
                continue
            data = line[6:].strip()
            if data == b"[DONE]":
                continue  # read on to the end of the body so the connection can be reused
            chunk = json.loads(data)
            for choice in chunk.get("choices") or ():
                delta = choice.get("delta") or {}
                if delta.get("content"):
                    content.append(delta["content"])
                for tc in delta.get("tool_calls") or ():
                    slot = calls.setdefault(tc.get("index", 0), {"id": "", "type": "function",
                                                                 "function": {"name": "", "arguments": ""}})
                    slot["id"] = tc.get("id") or slot["id"]
                    fn = tc.get("function") or {}
                    slot["function"]["name"] += fn.get("name") or ""
                    slot["function"]["arguments"] += fn.get("arguments") or ""
                finish = choice.get("finish_reason") or finish
        message: dict = {"role": "assistant", "content": "".join(content) or None}
        if calls:
            message["tool_calls"] = [calls[i] for i in sorted(calls)]
        return message, finish


# -- the database floor --------------------------------------------------------------------------------------

ROWS_PER_MODEL_CALL = 5  # a model call with one tool call appends two messages, two trace rows, the call's record


def database_floor(database_url: str, *, rows: int = 400, body_chars: int = 600) -> dict:
    """The least a durable append can cost on this PostgreSQL, written by hand with psycopg: one row (a
    conversation, a seq, a body) per commit, on one connection, (a) each statement waited for, (b) pipelined
    (every statement still its own transaction, sent without waiting for the previous answer). No ORM, no
    lease, no events. Returns ms per row both ways."""
    import time

    import psycopg

    body = "x" * body_chars
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("CREATE TEMPORARY TABLE floor_append (id bigserial PRIMARY KEY, conversation int NOT NULL, "
                     "seq int NOT NULL, body text NOT NULL, created_at timestamptz NOT NULL DEFAULT now(), "
                     "UNIQUE (conversation, seq))")
        sql = "INSERT INTO floor_append (conversation, seq, body) VALUES (%s, %s, %s)"
        for i in range(50):  # warm up: the plan, the connection's buffers
            conn.execute(sql, (0, i, body))
        t0 = time.perf_counter()
        for i in range(rows):
            conn.execute(sql, (1, i, body))
        alone = (time.perf_counter() - t0) * 1000 / rows
        t0 = time.perf_counter()
        with conn.pipeline():
            for i in range(rows):
                conn.execute(sql, (2, i, body))
        pipelined = (time.perf_counter() - t0) * 1000 / rows
    return {"alone_ms_per_row": alone, "pipelined_ms_per_row": pipelined, "rows": rows,
            "per_model_call_ms": alone * ROWS_PER_MODEL_CALL}
