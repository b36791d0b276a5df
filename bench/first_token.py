"""First token: how long a customer waits, from sending a message on the websocket to the first token of
the agent's reply, through the real system, minus the model's own time to first token.

Real processes: daphne (Django + Channels), Redis (broker and channel layer), one Celery worker
(`--pool threads --concurrency 120`), PostgreSQL, the stand-in. The stand-in is set to
`outcome_style: "with_content"`, so with "#steps:1" its very first reply streams the answer text (with
a record_outcome call beside it). The stand-in's own time to first token is measured in the same run by
timing direct streaming requests with the same conversation (system prompt, the message, our tools), and
its median is subtracted: sequential requests for the 1-conversation case, 100 at once for the 100 case.

Each sample is a fresh conversation (created over the API beforehand, not timed) whose socket is open and
replayed before the message is sent; the client waits for the run to stop before it moves on.

`python bench/first_token.py [--quick]`
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.clients import (  # noqa: E402
    close_widgets,
    create_conversations,
    customer_tokens,
    open_widgets,
    standin_ttft,
)
from bench.common import django_setup, section_main, start_daphne, start_worker  # noqa: E402
from bench.measure import CpuMeter, cpu_table, md_table, med, mmm, pct  # noqa: E402

TEXT = "Hello, are you there? #steps:1"
TARGET_P99_MS = 50.0  # one live conversation
TARGET_STEADY_P99_MS = 100.0  # 100 live conversations, each writing again a while after each answer
TARGET_CPU_PER_TURN_MS = 40.0  # every process but the benchmark's clients and the model: a new customer turn
WORKER_THREADS = 120
THINK_SECONDS = (6.0, 24.0)  # steady load: a customer writes again this long after the answer (uniform)
STAGES = ("db_saved", "accepted", "queued", "running", "step", "db_model_start")


def run(stack, quick: bool = False) -> dict:
    sequential = 15 if quick else 60
    live, rounds = (30, 2) if quick else (100, 3)
    steady_seconds = 20.0 if quick else 60.0
    database_url = stack.database("bench_first_token")
    django_setup(stack, database_url)
    stack.flush_redis()
    stack.standin_reset(latency_ms=0, token_delay_ms=0, outcome_style="with_content")
    procs = []
    try:
        worker = start_worker(stack, database_url, "ft-worker", concurrency=WORKER_THREADS)
        procs.append(worker)
        daphne, base = start_daphne(stack, database_url, "ft-daphne")
        procs.append(daphne)
        roots = {"worker": worker.pid, "daphne": daphne.pid, **stack.service_pids(), "bench client": os.getpid()}
        body = _standin_body()  # before the event loop: reading the live profile is a database call
        result = asyncio.run(_measure(stack, base, body, sequential, live, rounds, roots, steady_seconds))
    finally:
        for p in reversed(procs):
            p.stop()
    return _report(stack, result, sequential, live, rounds)


def _standin_body() -> bytes:
    from support.agent.loop import OUTCOME_TOOL
    from support.desk import assistant

    tools = [t.spec() for t in [*assistant.tools(), OUTCOME_TOOL]]
    messages = [{"role": "system", "content": assistant.system_prompt()}, {"role": "user", "content": TEXT}]
    return json.dumps({"model": "sundry-standin-1", "stream": True, "stream_options": {"include_usage": True},
                       "tools": tools, "messages": messages}, separators=(",", ":")).encode()


async def _measure(stack, base: str, body: bytes, sequential: int, live: int, rounds: int, roots: dict,
                   steady_seconds: float) -> dict:
    tokens = customer_tokens()
    host, port = stack.standin_url.removeprefix("http://").split(":")
    port = int(port)
    errors: list[str] = []

    # The stand-in alone, sequential and 100 at once.
    for _ in range(5):
        await standin_ttft(host, port, body)
    standin_seq = [await standin_ttft(host, port, body) for _ in range(max(50, sequential))]
    standin_conc: list[float] = []
    for _ in range(rounds):
        standin_conc += await asyncio.gather(*(standin_ttft(host, port, body) for _ in range(live)))

    async def one_round(n: int) -> list[dict]:
        conversations, errs = await create_conversations(base, n, tokens)
        errors.extend(errs)
        widgets, errs = await open_widgets(base, conversations)
        errors.extend(errs)
        try:
            await asyncio.gather(*(w.send(TEXT) for w in widgets))
            await asyncio.gather(*(w.wait_first_token(30) for w in widgets))
            await asyncio.gather(*(w.wait_stopped(30) for w in widgets))
        finally:
            await close_widgets(widgets)
        out = []
        for w in widgets:
            sample = _sample(w, errors)
            if sample is not None:  # its database times are read after the CPU is measured (_with_server_times)
                out.append({**sample, "_conversation": w.conversation["id"], "_sent_wall": w.sent_wall})
        return out

    async def with_server_times(samples: list[dict]) -> list[dict]:
        """The database's wall-clock times of each sample's turn, read once the CPU meters have stopped: the
        benchmark's own reads are not the system's work."""
        server = await asyncio.to_thread(_server_times, [s["_conversation"] for s in samples])
        for sample in samples:
            sent = sample.pop("_sent_wall")
            sample.update({k: (v - sent if v is not None else None)
                           for k, v in server.get(sample.pop("_conversation"), {}).items()})
        return samples

    # Warm-up: the worker's first runs (imports, connection pools) and daphne's.
    for _ in range(3):
        await one_round(1)
    one_live = []
    cpu_one = CpuMeter(roots).start()
    for _ in range(sequential):
        one_live += await one_round(1)
    cpu_one.stop()
    many_live, per_round = [], []
    cpu_many = CpuMeter(roots).start()
    for _ in range(rounds):
        samples = await one_round(live)
        many_live += samples
        per_round.append(samples)
    cpu_many.stop()
    await with_server_times(one_live)
    await with_server_times(many_live)

    # Steady: `live` conversations stay open, each customer writing again a while after each answer.
    conversations, errs = await create_conversations(base, live, tokens)
    errors.extend(errs)
    widgets, errs = await open_widgets(base, conversations)
    errors.extend(errs)
    loop, rng = asyncio.get_running_loop(), random.Random(5)
    steady: list[dict] = []
    cpu_steady = CpuMeter(roots).start()
    t_start = loop.time()
    deadline = t_start + steady_seconds

    async def customer(w) -> None:
        await asyncio.sleep(rng.uniform(0, THINK_SECONDS[1]))  # arrivals spread out from the start
        while loop.time() < deadline:
            await w.next_turn(TEXT)
            await w.wait_first_token(30)
            await w.wait_stopped(30)
            sample = _sample(w, errors)
            if sample is None:
                return
            steady.append(sample)
            await asyncio.sleep(rng.uniform(*THINK_SECONDS))

    try:
        await asyncio.gather(*(customer(w) for w in widgets))
    finally:
        await close_widgets(widgets)
    cpu_steady.stop()
    return {"standin_seq": standin_seq, "standin_conc": standin_conc, "one": one_live, "many": many_live,
            "per_round": per_round, "errors": errors, "cpu": (cpu_one, cpu_many, cpu_steady),
            "steady": steady, "steady_seconds": loop.time() - t_start}


def _cpu_per_turn(meter, conversations: int, label: str) -> str:
    """The CPU of one new customer turn, every process but the benchmark's clients and the model stand-in."""
    spent = sum(v for k, v in meter.used.items() if k not in ("bench client", "stand-in")) / max(conversations, 1)
    return (f"{label}: {spent * 1000:.1f} ms of CPU per new customer turn (conversation created, socket opened "
            f"and replayed, one message, its run), every process but the benchmark's clients and the model "
            f"stand-in (target ≤ {TARGET_CPU_PER_TURN_MS:g} ms): "
            f"**{'met' if spent * 1000 <= TARGET_CPU_PER_TURN_MS else 'missed'}**")


def _cpu_floor(meter, conversations: int, live: int) -> str:
    """What a burst costs in CPU, beside what first tokens within the target would leave for it."""
    cores = os.cpu_count() or 1
    spent = sum(v for k, v in meter.used.items() if k != "bench client") / max(conversations, 1)
    return (f"What the burst costs: the system (every process but the benchmark's clients) spent "
            f"{spent * 1000:.1f} ms of CPU per conversation (created, connected, one turn): "
            f"{spent * live:.2f} core-seconds for the {live}, {spent * live / cores * 1000:.0f} ms of this "
            f"machine's {cores} cores. First tokens come before all of it is spent (a run streams its answer "
            f"before it ends), but all {live} within {TARGET_P99_MS:g} ms would leave "
            f"{TARGET_P99_MS * cores / 1000:.2f} core-seconds for the work before them, "
            f"{TARGET_P99_MS * cores / live:.1f} ms per conversation.")


def _sample(w, errors: list[str]) -> dict | None:
    """One turn's times from send, as the customer's socket saw them; None (and the error noted) on failure."""
    if w.error or w.first_token_at is None:
        errors.append(w.error or "no first token")
        return None
    if not w.stop_event or w.stop_event.get("stop_reason") != "answered":
        errors.append(f"run ended {w.stop_event}")
    return {"ttft": w.first_token_at - w.sent_at,
            "accepted": w.first_after_send("message.accepted"),
            "queued": w.first_after_send("run.status", status="queued"),
            "running": w.first_after_send("run.status", status="running"),
            "step": w.first_after_send("step.started", kind="model")}


def _server_times(conversation_ids: list[str]) -> dict[str, dict]:
    """Wall-clock times from the database: the customer's message saved (daphne), the run's first model
    call started (worker: the step row's created_at minus its duration)."""
    from support.models import Message, Step

    out: dict[str, dict] = {cid: {"db_saved": None, "db_model_start": None} for cid in conversation_ids}
    for cid, at in Message.objects.filter(conversation__public_id__in=conversation_ids, role="user").values_list(
            "conversation__public_id", "created_at"):
        out[str(cid)]["db_saved"] = at.timestamp()
    for cid, at, ms in Step.objects.filter(run__conversation__public_id__in=conversation_ids, kind="model",
                                           turn=1).values_list("run__conversation__public_id", "created_at",
                                                               "duration_ms"):
        out[str(cid)]["db_model_start"] = at.timestamp() - ms / 1000
    return out


def _report(stack, r: dict, sequential: int, live: int, rounds: int) -> dict:
    ms = lambda xs: [x * 1000 for x in xs if x is not None]  # noqa: E731
    s_seq, s_conc = med(ms(r["standin_seq"])), med(ms(r["standin_conc"]))
    rows, stage_rows, verdicts, data = [], [], [], {}
    steady_label = f"{live} live conversations, steady"
    for label, samples, base_ms, sub in (
            ("1 live conversation", r["one"], s_seq, f"{len(r['standin_seq'])} sequential"),
            (f"{live} live conversations, all at once", r["many"], s_conc, f"{live} at once × {rounds}"),
            (steady_label, r["steady"], s_seq, f"{len(r['standin_seq'])} sequential")):
        raw = ms(s["ttft"] for s in samples)
        net = [x - base_ms for x in raw]
        stages = {k: ms(s.get(k) for s in samples) for k in STAGES}
        rows.append([label, len(raw), f"{pct(raw, 50):.1f}", f"{pct(raw, 95):.1f}", f"{pct(raw, 99):.1f}",
                     f"{base_ms:.2f} ({sub})", f"**{pct(net, 50):.1f}**", f"**{pct(net, 95):.1f}**",
                     f"**{pct(net, 99):.1f}**"])
        stage_rows.append([label] + [f"{pct(stages[k], 50):.1f} / {pct(stages[k], 99):.1f}" for k in STAGES]
                          + [f"{pct(raw, 50):.1f} / {pct(raw, 99):.1f}"])
        p99 = pct(net, 99)
        target = {"1 live conversation": TARGET_P99_MS, steady_label: TARGET_STEADY_P99_MS}.get(label)
        verdicts.append(f"{label}: p99 {p99:.1f} ms net of the stand-in " + (
            f"(target ≤ {target:g} ms): **{'met' if p99 <= target else 'missed'}**" if target is not None
            else "(no target: a burst of new conversations at once is bounded by the CPU it needs, above)"))
        data[label] = {"raw_ms": raw, "net_p50": pct(net, 50), "net_p95": pct(net, 95), "net_p99": p99,
                       "standin_median_ms": base_ms, "stages_ms": stages}
    rounds_p99 = [pct([s["ttft"] * 1000 - s_conc for s in rs], 99) for rs in r["per_round"] if rs]
    rounds_p50 = [pct([s["ttft"] * 1000 - s_conc for s in rs], 50) for rs in r["per_round"] if rs]
    table = md_table(["live conversations", "samples", "raw p50 ms", "raw p95 ms", "raw p99 ms",
                      "stand-in TTFT median ms", "net p50 ms", "net p95 ms", "net p99 ms"], rows)
    stage_table = md_table(["live conversations", "DB: message saved", "`message.accepted`",
                            "`run.status: queued`", "`run.status: running`", "`step.started` (model)",
                            "DB: model call starts", "first `token.delta`"], stage_rows)
    md = "\n\n".join([
        "## 2. First token: customer's send → first `token.delta`, through the real system",
        f"daphne + Redis + one Celery worker (`--pool threads --concurrency {WORKER_THREADS}`) + "
        f"{'PostgreSQL' if stack.db_kind == 'postgres' else 'SQLite'} + the stand-in (`outcome_style: with_content`, "
        f"no latency; message `{TEXT}`). Net = raw minus the stand-in's own median time to first token measured "
        f"in the same run (direct streaming requests with the same conversation and tools). Percentiles pooled over "
        f"all samples (linear interpolation). In the first two rows each sample is a new conversation whose "
        f"socket is open before the message is sent: one at a time, then {live} created, connected and sending "
        f"in the same instant ({rounds} rounds), a burst of {live} runs started at once. In the steady row "
        f"{live} conversations stay connected for {r['steady_seconds']:.0f} s and each customer writes again "
        f"{THINK_SECONDS[0]:g}–{THINK_SECONDS[1]:g} s (uniform) after the previous answer, first messages "
        f"spread over the first {THINK_SECONDS[1]:g} s: {len(r['steady'])} turns, "
        f"{len(r['steady']) / max(r['steady_seconds'], 1e-9):.1f} turns/s.",
        table,
        "Where the time goes: ms from send to each point, p50 / p99 (raw). Columns in backticks are events as "
        "the customer's socket received them (so they include daphne's delivery); the DB columns are wall-clock "
        "times written by the servers: the customer's message row inserted (daphne) and the first model call "
        "started (worker; its step row's created_at minus duration). `message.accepted`: daphne saved the "
        "message, created the run and queued the task; `queued`: that run's event came back through Redis; "
        "`running`: a worker claimed the run; `step.started`: the loop is about to call the model.",
        stage_table,
        "CPU by process while each block ran, per conversation (each one: created over the API, its socket "
        "opened and replayed, one message, a run of 2 model calls and a record_outcome): what the system "
        "spends to serve a customer's turn, and how many of the machine's cores that kept busy.",
        cpu_table([("1 live conversation", r["cpu"][0], len(r["one"])),
                   (f"{live} live conversations, all at once", r["cpu"][1], len(r["many"])),
                   (f"{steady_label} (per turn: one message and its run)", r["cpu"][2], len(r["steady"]))],
                  "conversation"),
        _cpu_floor(r["cpu"][1], len(r["many"]), live),
        f"Per round with {live} live conversations ({len(rounds_p99)} rounds): net p50 "
        f"{mmm(rounds_p50, '{:.1f}')} ms, net p99 {mmm(rounds_p99, '{:.1f}')} ms (median (min–max) over rounds).",
        "\n".join(f"- {v}" for v in verdicts + [
            _cpu_per_turn(r["cpu"][0], len(r["one"]), "1 live conversation"),
            _cpu_per_turn(r["cpu"][1], len(r["many"]), f"{live} live conversations, all at once")]),
        f"- Errors: {len(r['errors'])}" + (f" (first: {r['errors'][:3]})" if r["errors"] else ""),
    ])
    return {"name": "first_token", "markdown": md,
            "data": {**data, "cpu_ms": {"one": r["cpu"][0].used, "many": r["cpu"][1].used,
                                        "steady": r["cpu"][2].used},
                     "standin_seq_ms": ms(r["standin_seq"]), "standin_conc_ms": ms(r["standin_conc"]),
                     "errors": r["errors"], "rounds_net_p99": rounds_p99}}


if __name__ == "__main__":
    section_main(run)
