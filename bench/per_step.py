"""Per step: what our full path costs per model call, against a hand-written floor, on the same scenario.

The stand-in runs as its own process with no added latency; a customer message with `#steps:N` makes it
answer in exactly N model calls (N-2 distinct search_policy calls, record_outcome, the answer).

(a) the floor (bench/floor.py): http.client keep-alive, SSE parsed by hand, a canned tool result of the
    same size as a real search_policy result (so the stand-in reads the same bytes in both);
(b) our full path, in this process: services.conversation_post_message (the Celery hand-off patched to
    record the run id, so no queue hop), then runner.run_execute(run_id): the real loop, real tools, every
    message and step saved to the database, events published through the Redis channel layer (the
    publisher's queue is flushed inside the timed region, so its work is counted);
(c) our loop in memory (run_loop, our model client, canned tool results: nothing saved, nothing published);
(d) the peer (bench/langgraph_peer.py): the same scenario as a LangGraph user writes it, a StateGraph with
    ChatOpenAI streaming and the prebuilt ToolNode answering with the floor's canned results, checkpointed by
    PostgresSaver in the same PostgreSQL database with durability "sync" (each step's checkpoint committed
    before the next step), a new thread per run. Its packages are the benchmark's alone (bench/requirements.txt);
    without them, or on SQLite, the section runs without the peer and says so.

Wall time is time.perf_counter; CPU time is time.process_time of this process (all its threads, the event
publisher's included, and the peer's checkpoint threads; the stand-in, PostgreSQL and Redis are other
processes). The paths are interleaved, one run of each per repeat, and compared pairwise.

`python bench/per_step.py [--quick]`
"""

from __future__ import annotations

import cProfile
import io
import json
import pstats
import sys
import time
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import django_setup, section_main  # noqa: E402
from bench import langgraph_peer  # noqa: E402
from bench.floor import ROWS_PER_MODEL_CALL, Floor, database_floor  # noqa: E402
from bench.measure import md_table, med, mmm  # noqa: E402

TEXT = "Tracking says my parcel was delivered but nothing arrived. #steps:{n}"
TARGET_WALL_MS = 5.0  # the durable path per model call: saved, traced, published
TARGET_CPU_MS = 4.0
TARGET_GROWTH = 0.15
TARGET_PEER_RATIO = 0.2  # our durable path ÷ LangGraph + PostgresSaver (sync), per model call, at N = 20 and 50
TARGET_DB_FLOOR_RATIO = 2.0  # the durable part (full − in memory) ÷ the database floor, at N = 20 and 50

# Functions whose cumulative time the profile reports, per model call: (label, file suffix, function name).
KEY_FUNCTIONS = [
    ("run_execute (everything after the hand-off)", "support/desk/runner.py", "run_execute"),
    ("  model call: OpenAIModel.complete", "support/agent/llm.py", "complete"),
    ("    openai client post + stream (httpx2)", "openai/_base_client.py", "post"),
    ("    token events: DbObserver.token", "support/desk/runner.py", "token"),
    ("  save a message: DbObserver.message", "support/desk/runner.py", "message"),
    ("  trace row: DbObserver.step", "support/desk/runner.py", "step"),
    ("  step start: DbObserver.step_started", "support/desk/runner.py", "step_started"),
    ("  new customer messages? DbObserver.incoming", "support/desk/runner.py", "incoming"),
    ("  tool: search_policy", "support/tools/policies.py", "search_policy"),
    ("  run end: runner._finish", "support/desk/runner.py", "_finish"),
    ("  load history: history_for_model", "support/desk/runner.py", "history_for_model"),
    ("publish_* (building events)", "support/desk/serializers.py", "publish_step"),
    ("", "support/desk/serializers.py", "publish_message"),
    ("", "support/desk/serializers.py", "publish_token"),
    ("", "support/desk/serializers.py", "publish_run"),
    ("services.message_append", "support/desk/services.py", "message_append"),
    ("Django: Model.save (ORM inserts/updates)", "django/db/models/base.py", "save"),
    ("Django: QuerySet.update", "django/db/models/query.py", "update"),
    ("Django: SQLCompiler.execute_sql", "django/db/models/sql/compiler.py", "execute_sql"),
    ("psycopg: Cursor.execute (incl. round trip)", "psycopg/cursor.py", "execute"),
    ("transaction.atomic exit (COMMIT/RELEASE)", "django/db/transaction.py", "__exit__"),
]


def run(stack, quick: bool = False) -> dict:
    ns = (3, 20) if quick else (3, 20, 50)
    repeats = 2 if quick else 7
    database_url = stack.database("bench_per_step")
    django_setup(stack, database_url)
    stack.standin_reset(latency_ms=0, token_delay_ms=0, outcome_style="separate")

    from django.db import connection
    from django.db.models import Sum

    from support.agent.loop import OUTCOME_TOOL
    from support.agent.tools import ToolContext
    from support.desk import assistant, queue, runner, services
    from support.live import events
    from support.models import Customer, Run, Step
    from support.tools.policies import search_policy

    maya = Customer.objects.get(email="maya@example.com")
    tools_json = json.dumps([t.spec() for t in [*assistant.tools(), OUTCOME_TOOL]], separators=(",", ":")).encode()
    ctx = ToolContext(customer_id=maya.pk, conversation_id="bench", run_id="bench")
    canned = json.dumps(search_policy(ctx, query="parcel marked delivered but not received, check 1"),
                        ensure_ascii=False, default=str)
    host, port = stack.standin_url.removeprefix("http://").split(":")
    floor = Floor(host, int(port))

    def floor_once(n: int) -> dict:
        messages = [{"role": "system", "content": assistant.system_prompt()},
                    {"role": "user", "content": TEXT.format(n=n)}]
        w0, c0 = time.perf_counter(), time.process_time()
        out = floor.run(messages, tools_json, {"*": canned, "record_outcome": '{"recorded":"resolved"}'})
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        if out["calls"] != n:
            raise RuntimeError(f"floor: expected {n} model calls, the stand-in made {out['calls']}")
        return {"wall_ms": wall * 1000, "cpu_ms": cpu * 1000, "calls": out["calls"]}

    from dataclasses import replace

    from support.agent import types as agent_types
    from support.agent.loop import run_loop

    memory_tools = [replace(t, fn=lambda ctx, **args: canned) for t in assistant.tools()]

    def memory_once(n: int) -> dict:
        """Our loop and model client with nothing durable: no database, no events, canned tool results."""
        transcript = agent_types.Transcript([{"role": "system", "content": assistant.system_prompt()},
                                             {"role": "user", "content": TEXT.format(n=n)}])
        w0, c0 = time.perf_counter(), time.process_time()
        result = run_loop(transcript, model=assistant.shared_model(), tools=memory_tools, ctx=ctx,
                          limits=assistant.limits())
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        if (result.stop_reason, result.spent.turns) != ("answered", n):
            raise RuntimeError(f"in memory: expected an answer after {n} model calls, got {result.stop_reason!r} "
                               f"after {result.spent.turns}")
        return {"wall_ms": wall * 1000, "cpu_ms": cpu * 1000, "calls": n}

    def full_once(n: int, profiler: cProfile.Profile | None = None) -> dict:
        conversation = services.conversation_start(customer=maya)
        queued: list[int] = []
        with mock.patch.object(queue, "run_agent", side_effect=lambda run_id, **ids: queued.append(run_id)):
            if profiler:
                profiler.enable()
            w0, c0 = time.perf_counter(), time.process_time()
            _, run_, _ = services.conversation_post_message(conversation=conversation, text=TEXT.format(n=n))
            result = runner.run_execute(queued[-1])
            events.publisher.flush(10)
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
            if profiler:
                profiler.disable()
        done = Run.objects.get(pk=run_.pk)
        if (result, done.stop_reason, done.turns) != ("answered", "answered", n):
            raise RuntimeError(f"full path: expected an answer after {n} model calls, got {result!r}, "
                               f"{done.stop_reason!r} after {done.turns}")
        tools_ms = Step.objects.filter(run=done, kind="tool").aggregate(s=Sum("duration_ms"))["s"] or 0.0
        model_ms = Step.objects.filter(run=done, kind="model").aggregate(s=Sum("duration_ms"))["s"] or 0.0
        return {"wall_ms": wall * 1000, "cpu_ms": cpu * 1000, "calls": done.turns, "tools_ms": tools_ms,
                "model_ms": model_ms}

    tool_results = {"*": canned, "record_outcome": '{"recorded":"resolved"}'}  # the floor's, to the byte
    peer_missing = langgraph_peer.available()
    if peer_missing is None and not database_url.startswith("postgres"):
        peer_missing = "PostgresSaver needs PostgreSQL and this run is on SQLite"
    peer = None
    if peer_missing is None:
        from django.conf import settings

        peer = langgraph_peer.LangGraphPeer(base_url=stack.model_base_url, model=settings.MODEL_NAME,
                                            database_url=database_url, tool_specs=json.loads(tools_json),
                                            tool_results=tool_results)

    def peer_once(n: int) -> dict:
        messages = [{"role": "system", "content": assistant.system_prompt()},
                    {"role": "user", "content": TEXT.format(n=n)}]
        w0, c0 = time.perf_counter(), time.process_time()
        out = peer.stream(messages)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        calls = peer.model_calls(out["thread_id"])  # read back from its last checkpoint, outside the timing
        if calls != n or not out["tokens"]:
            raise RuntimeError(f"LangGraph peer: expected {n} model calls with streamed tokens, its checkpoint "
                               f"holds {calls} AIMessages ({out['tokens']} content chunks streamed)")
        return {"wall_ms": wall * 1000, "cpu_ms": cpu * 1000, "calls": calls, "chunks": out["chunks"],
                "checkpoints": peer.checkpoints(out["thread_id"])}

    # Warm up every path (imports, connections, the stand-in's first requests).
    for _ in range(2):
        floor_once(3)
        memory_once(3)
        full_once(3)
        if peer:
            peer_once(3)

    data: dict[int, dict] = {}
    for n in ns:
        runs = []
        for _ in range(repeats):
            runs.append((floor_once(n), memory_once(n), full_once(n), peer_once(n) if peer else None))
        data[n] = {"floor": [t[0] for t in runs], "memory": [t[1] for t in runs],
                   "full": [t[2] for t in runs], "peer": [t[3] for t in runs] if peer else []}
    if peer:
        peer.close()

    # Diagnostics on the largest N, outside the timed repeats: queries and their time (execute_wrapper),
    # then a cProfile of one run (main thread only: the event publisher's thread is not in it).
    db_floor = database_floor(database_url) if database_url.startswith("postgres") else None
    n_diag = ns[-1]
    queries = {"count": 0, "ms": 0.0}

    def counting(execute, sql, params, many, context):
        t0 = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            queries["count"] += 1
            queries["ms"] += (time.perf_counter() - t0) * 1000

    import threading

    import psutil

    def thread_cpu() -> dict[int, float]:
        return {t.id: t.user_time + t.system_time for t in psutil.Process().threads()}

    publisher = next((t.native_id for t in threading.enumerate() if t.name == "event-publisher"), None)
    main_id = threading.main_thread().native_id
    before = thread_cpu()
    with connection.execute_wrapper(counting):
        diag = full_once(n_diag)
    after = thread_cpu()
    cpu_main = (after.get(main_id, 0) - before.get(main_id, 0)) * 1000 / diag["calls"]
    cpu_pub = (after.get(publisher, 0) - before.get(publisher, 0)) * 1000 / diag["calls"] if publisher else 0.0
    profiler = cProfile.Profile()
    profiled = full_once(n_diag, profiler)
    floor.close()

    rows, summary = [], {}
    for n in ns:
        fl, fu, me = data[n]["floor"], data[n]["full"], data[n]["memory"]
        per = lambda runs, key: [r[key] / r["calls"] for r in runs]  # noqa: E731
        fw, uw, fc, uc = per(fl, "wall_ms"), per(fu, "wall_ms"), per(fl, "cpu_ms"), per(fu, "cpu_ms")
        mw, mc = per(me, "wall_ms"), per(me, "cpu_ms")
        durable_w = [b - a for a, b in zip(mw, uw)]
        durable_c = [b - a for a, b in zip(mc, uc)]
        ratio_w = [b / a for a, b in zip(fw, uw)]
        added_w = [b - a for a, b in zip(fw, uw)]
        ratio_c = [b / a for a, b in zip(fc, uc)]
        added_c = [b - a for a, b in zip(fc, uc)]
        tools = per(fu, "tools_ms")
        model = per(fu, "model_ms")
        summary[n] = {"floor_wall": med(fw), "full_wall": med(uw), "added_wall": med(added_w),
                      "floor_cpu": med(fc), "full_cpu": med(uc), "added_cpu": med(added_c),
                      "tools": med(tools), "model_step": med(model), "memory_wall": med(mw), "memory_cpu": med(mc),
                      "durable_wall": med(durable_w), "durable_cpu": med(durable_c)}
        pe = data[n]["peer"]
        pw, pc = per(pe, "wall_ms"), per(pe, "cpu_ms")
        vs_peer_w = [b / a for a, b in zip(pw, uw)]
        vs_peer_c = [b / a for a, b in zip(pc, uc)]
        if pe:
            summary[n].update(peer_wall=med(pw), peer_cpu=med(pc), ours_vs_peer_wall=med(vs_peer_w),
                              ours_vs_peer_cpu=med(vs_peer_c),
                              peer_checkpoints_per_run=med([r["checkpoints"] for r in pe]))
        rows.append([n, len(fu), mmm(fw), mmm(mw), mmm(uw), mmm(pw), mmm(ratio_w, "{:.1f}×"),
                     mmm(vs_peer_w, "{:.2f}×"), mmm(durable_w), mmm(fc), mmm(mc), mmm(uc), mmm(pc),
                     mmm(ratio_c, "{:.1f}×"), mmm(vs_peer_c, "{:.2f}×"), mmm(durable_c), mmm(tools), mmm(model)])
    table = md_table(
        ["N (model calls)", "repeats", "floor wall ms/call", "in memory wall", "full wall ms/call",
         "LangGraph peer wall ms/call", "full/floor wall", "ours ÷ peer wall", "durable part wall (full − in memory)",
         "floor CPU ms/call", "in memory CPU", "full CPU ms/call", "LangGraph peer CPU ms/call", "full/floor CPU",
         "ours ÷ peer CPU", "durable part CPU", "in tools ms/call", "in model step ms/call"],
        rows)

    verdicts = []
    for n in ns:
        if n >= 20:
            w, c = summary[n]["full_wall"], summary[n]["full_cpu"]
            verdicts.append(f"N = {n}: the durable path takes {w:.2f} ms wall (target ≤ {TARGET_WALL_MS:g}: "
                            f"**{'met' if w <= TARGET_WALL_MS else 'missed'}**) and {c:.2f} ms CPU (target ≤ "
                            f"{TARGET_CPU_MS:g}: **{'met' if c <= TARGET_CPU_MS else 'missed'}**) per model call")
    for n in ns:
        if n >= 20 and peer is not None:
            w, c = summary[n]["ours_vs_peer_wall"], summary[n]["ours_vs_peer_cpu"]
            ok = w <= TARGET_PEER_RATIO and c <= TARGET_PEER_RATIO
            verdicts.append(f"N = {n}: our durable path ÷ LangGraph + PostgresSaver: {w:.2f}× wall, {c:.2f}× CPU per "
                            f"model call (target ≤ {TARGET_PEER_RATIO:g}×: **{'met' if ok else 'missed'}**; the "
                            f"peer {summary[n]['peer_wall']:.2f} ms wall, {summary[n]['peer_cpu']:.2f} ms CPU per "
                            f"call, {summary[n]['peer_checkpoints_per_run']:.0f} checkpoints per run)")
    if peer is None:
        verdicts.append(f"LangGraph + PostgresSaver peer: **not measured** ({peer_missing}). Install its packages "
                        f"with `{langgraph_peer.INSTALL}` and run the section again.")
    lo, hi = ns[0], ns[-1]
    growth_full = summary[hi]["full_wall"] / summary[lo]["full_wall"] - 1
    growth_added = summary[hi]["added_wall"] / summary[lo]["added_wall"] - 1
    growth_cpu = summary[hi]["full_cpu"] / summary[lo]["full_cpu"] - 1
    verdicts.append(
        f"Growth from N = {lo} to N = {hi} (target within {TARGET_GROWTH:.0%}): full path wall per call "
        f"{growth_full:+.0%}, added wall per call {growth_added:+.0%}, full path CPU per call {growth_cpu:+.0%}: "
        f"**{'met' if abs(growth_full) <= TARGET_GROWTH else 'missed'}**")
    if db_floor is not None:
        per_call = db_floor["per_model_call_ms"]
        judged = [n for n in ns if n >= 20]
        target = (f" (target ≤ {TARGET_DB_FLOOR_RATIO:g}× at N = {' and '.join(map(str, judged))}: **"
                  + ("met" if all(summary[n]["durable_wall"] / per_call <= TARGET_DB_FLOOR_RATIO for n in judged)
                     else "missed") + "**)") if judged else ""
        verdicts.append(
            f"The database floor (bare psycopg, one {ROWS_PER_MODEL_CALL}-row model call's appends, one row per "
            f"commit): {db_floor['alone_ms_per_row']:.3f} ms per row waited for, "
            f"{db_floor['pipelined_ms_per_row']:.3f} ms pipelined, so {per_call:.2f} ms per model call. The "
            f"durable part (full − in memory) ÷ that: " + ", ".join(
                f"N = {n} {summary[n]['durable_wall'] / per_call:.1f}× ({summary[n]['durable_wall']:.2f} ms)"
                for n in ns) + target + ".")

    calls = diag["calls"]
    diag_lines = [
        f"Diagnostics on one N = {n_diag} run (not part of the table): {queries['count'] / calls:.1f} SQL queries "
        f"per model call taking {queries['ms'] / calls:.2f} ms per call inside the driver (execute_wrapper), of "
        f"{diag['wall_ms'] / calls:.2f} ms wall per call in that run ({queries['count']} queries in all, "
        f"{calls} model calls, {calls - 2} search_policy calls, one record_outcome).",
        f"CPU by thread in that run: main thread {cpu_main:.2f} ms per call, the event publisher's thread "
        f"(serialised events → channels_redis group_send) {cpu_pub:.2f} ms per call (psutil, Linux thread times, "
        f"10 ms tick resolution summed over the run).",
    ]
    profile_md, profile_data = _profile_report(profiler, profiled["calls"], profiled["wall_ms"])

    md = "\n\n".join([
        "## 1. Per step: our full path against the floor and a LangGraph + PostgresSaver peer, per model call",
        f"Same `#steps:N` scenario through every path, stand-in as a separate process with no added latency, "
        f"{'PostgreSQL' if stack.db_kind == 'postgres' else 'SQLite (PostgreSQL binaries missing)'} and Redis on "
        f"loopback. "
        f"The floor (bench/floor.py: plain HTTP, canned results), our loop in memory (run_loop with "
        f"our openai-based model client and the shop's tools answering with the same canned result: no "
        f"database, no events) and the full durable path (every message and trace row saved, events "
        f"published). The durable part is full − in memory. "
        f"The fourth path is the peer (bench/langgraph_peer.py): the same scenario as a LangGraph user writes it, "
        f"a StateGraph over MessagesState with a model node (ChatOpenAI on the stand-in, streaming, bound to "
        f"the same tool schemas) and the prebuilt ToolNode answering with the floor's canned results, "
        f"checkpointed by PostgresSaver in the same PostgreSQL database, run with "
        f"`graph.stream(..., stream_mode=\"messages\", durability=\"sync\")` (each step's checkpoint "
        f"committed before the next step) on a new thread each time, its tokens consumed; its model calls are "
        f"counted from the checkpoint it leaves (AIMessages) and must be N. "
        f"Medians (min–max) over {repeats} interleaved repeats after 2 warm-up runs of each; ratios and "
        f"differences are per repeat (the paths run back to back). CPU = this process only (the stand-in "
        f"and PostgreSQL are other processes).",
        table,
        "\n".join(f"- {v}" for v in verdicts),
        "\n".join(f"- {d}" for d in diag_lines),
        profile_md,
    ])
    return {"name": "per_step", "markdown": md,
            "data": {"raw": {str(k): v for k, v in data.items()}, "summary": {str(k): v for k, v in summary.items()},
                     "queries": {"n": n_diag, **queries},
                     "thread_cpu_ms_per_call": {"main": cpu_main, "publisher": cpu_pub}, "profile": profile_data,
                     "database_floor": db_floor, "peer": {"missing": peer_missing,
                                                          "versions": dict(langgraph_peer.versions())},
                     "growth": {"full_wall": growth_full, "added_wall": growth_added, "full_cpu": growth_cpu},
                     "canned_tool_result_chars": len(canned)}}


def _profile_report(profiler: cProfile.Profile, calls: int, wall_ms: float) -> tuple[str, dict]:
    stats = pstats.Stats(profiler, stream=io.StringIO())
    raw = stats.stats  # (file, line, name) -> (primitive calls, calls, tottime, cumtime, callers)
    total = sum(v[2] for v in raw.values())

    def cum(suffix: str, name: str) -> tuple[float, int]:
        t, n = 0.0, 0
        for (file, _, fn), (cc, nc, tt, ct, _) in raw.items():
            if fn == name and file.replace("\\", "/").endswith(suffix):
                t, n = t + ct, n + nc
        return t, n

    rows, data = [], {}
    for label, suffix, name in KEY_FUNCTIONS:
        t, n = cum(suffix, name)
        if not n:
            continue
        shown = label or f"  {name}"
        rows.append([shown, f"`{suffix}:{name}`", n, f"{t * 1000 / calls:.3f}", f"{t / total:.0%}"])
        data[f"{suffix}:{name}"] = {"calls": n, "ms_per_model_call": t * 1000 / calls}
    groups: dict[str, float] = {}
    for (file, _, fn), v in raw.items():
        groups[_category(file, fn)] = groups.get(_category(file, fn), 0.0) + v[2]
    cat_rows = [[g, f"{t * 1000 / calls:.3f}", f"{t / total:.0%}"]
                for g, t in sorted(groups.items(), key=lambda kv: kv[1], reverse=True)]
    data["categories_ms_per_call"] = {g: t * 1000 / calls for g, t in groups.items()}
    own = sorted(raw.items(), key=lambda kv: kv[1][2], reverse=True)[:15]
    top = [[f"`{Path(f).name}:{ln}({fn})`" if f != "~" else f"`{fn}`", v[1], f"{v[2] * 1000 / calls:.3f}",
            f"{v[2] / total:.0%}"] for (f, ln, fn), v in own]
    md = "\n\n".join([
        f"### Where the time goes (cProfile of one N = {calls} run, main thread, {wall_ms / calls:.2f} ms wall per "
        f"call under the profiler; profiling inflates Python-heavy parts, read shares rather than absolutes)",
        md_table(["function (cumulative)", "where", "calls", "ms per model call", "share of run"], rows),
        "Own time grouped by where the code lives (built-ins counted by what they are):",
        md_table(["code", "ms per model call", "share"], cat_rows),
        "Top 15 by own time (excluding callees):",
        md_table(["function", "calls", "ms per model call", "share"], top),
    ])
    return md, {"key": data, "top_own": [r[0] for r in top]}


CATEGORIES = [  # (label, substrings of the file path); first match wins
    ("psycopg driver (incl. waiting for PostgreSQL)", ("/psycopg/", "/psycopg_binary/", "psycopg_binary")),
    ("Django ORM and db backend", ("/django/db/",)),
    ("Django other (signals, timezone, utils)", ("/django/",)),
    ("openai + httpx2 + httpcore2 (model client)", ("/openai/", "/httpx2/", "/httpcore2/", "/h11/", "/anyio/")),
    ("jsonschema (tool argument validation)", ("/jsonschema/", "/referencing/", "/jsonschema_specifications/",
                                               "/rpds/", "/attrs/", "/attr/")),
    ("support/shop/search.py (BM25 per search)", ("support/shop/search.py",)),
    ("support/ (our code, search.py apart)", ("/support/",)),
]


def _category(file: str, fn: str) -> str:
    f = file.replace("\\", "/")
    if f == "~":  # a built-in: name it by what it is
        if "socket" in fn or "select" in fn or "poll" in fn:
            return "socket I/O built-ins (model HTTP, waits)"
        if "psycopg" in fn:
            return "psycopg driver (incl. waiting for PostgreSQL)"
        if "json" in fn or "_json" in fn:
            return "json (built-in)"
        return "other built-ins"
    for label, parts in CATEGORIES:
        if any(p in f for p in parts):
            return label
    if "/json/" in f:
        return "json (built-in)"
    return "stdlib and other"


if __name__ == "__main__":
    section_main(run)
