"""Concurrency: N conversations at once, each running the 4-step scenario against a model that takes 0.5 s per
call, through the real system (daphne, Redis, PostgreSQL, one Celery worker process).

1. Threads pool, concurrency N + 20, for N = 10, 100, 500: every conversation's socket is open and replayed,
   then all send their message at once (`#steps:4`). Per run: created → finished_at from the database (the
   run's own time), and send → `run.status: stopped` on the customer's socket (client-observed). Ideal is
   4 × 0.5 s = 2.0 s. Worker RSS is sampled (process and children) every 0.2 s.
2. The same on Celery's default prefork pool (concurrency = cores) for N = 10 and 100, with a capped wait:
   what finished within the cap is reported.
3. Runs paused on approvals hold no worker slot: with the worker at --concurrency 10, 100 conversations
   ("My parcel SU-41310 never came." pauses on a refund) are brought to awaiting_approval (stand-in at no
   latency for this set-up), `celery inspect active` is asked for the active tasks, then 10 new `#steps:4`
   conversations (stand-in back at 0.5 s per call) must finish in about the ideal time.

`python bench/concurrency.py [--quick]`
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.clients import close_widgets, create_conversations, customer_tokens, open_widgets  # noqa: E402
from bench.common import (  # noqa: E402
    COMMANDS,
    PY,
    ROOT,
    django_setup,
    record_command,
    section_main,
    start_daphne,
    start_worker,
)
from bench.measure import CpuMeter, RssSampler, cpu_table, md_table, mmm, pct  # noqa: E402

TEXT = "Hi, where is my parcel? #steps:4"
APPROVAL_TEXT = "My parcel SU-41310 never came."
LATENCY_MS = 500
IDEAL_S = 4 * LATENCY_MS / 1000
TARGET_P99_S = 4.0
TARGET_CPU_PER_RUN_MS = 30.0  # worker + daphne + Redis + PostgreSQL, per 4-call run
GRACE_S = 10.0  # how long clients may lag behind the database before their missing events are counted


def run(stack, quick: bool = False) -> dict:
    thread_ns = (10, 50) if quick else (10, 100, 500)
    rounds_for = lambda n: 1 if quick or n >= 500 else 2  # noqa: E731  (500 takes minutes; one round)
    prefork_ns = (10,) if quick else (10, 100)
    prefork_cap = 20.0 if quick else 45.0
    paused_n = 20 if quick else 100
    cores = os.cpu_count() or 2

    database_url = stack.database("bench_concurrency")
    django_setup(stack, database_url)
    stack.flush_redis()
    tokens = customer_tokens()
    procs = []
    threads_rows, prefork_rows, approval = [], [], {}
    try:
        daphne, base = start_daphne(stack, database_url, "cc-daphne")
        procs.append(daphne)
        stack.daphne_pid = daphne.pid

        # 1. threads pool
        for n in thread_ns:
            stack.standin_reset(latency_ms=LATENCY_MS)
            worker = start_worker(stack, database_url, f"cc-threads-{n}", concurrency=n + 20)
            try:
                results = []
                for _ in range(rounds_for(n)):
                    results.append(_load(stack, base, tokens, worker, n, cap=60.0 + n * 0.2))
                threads_rows.append((n, n + 20, results))
            finally:
                worker.stop()
            stack.flush_redis()

        # 2. prefork pool, bounded
        for n in prefork_ns:
            stack.standin_reset(latency_ms=LATENCY_MS)
            worker = start_worker(stack, database_url, f"cc-prefork-{n}", pool="prefork", concurrency=cores)
            try:
                prefork_rows.append((n, cores, [_load(stack, base, tokens, worker, n, cap=prefork_cap)]))
            finally:
                worker.stop(grace=3)
            stack.flush_redis()  # what the capped wait left queued must not reach the next worker

        # 3. paused on approvals
        approval = _approvals(stack, database_url, base, tokens, paused_n)
    finally:
        for p in reversed(procs):
            p.stop()
    return _report(stack, threads_rows, prefork_rows, approval, prefork_cap, cores)


def _load(stack, base: str, tokens: list[str], worker, n: int, cap: float, text: str = TEXT,
          customers: list[str] | None = None) -> dict:
    """n conversations send at once; wait (at most `cap` s) for their runs; read the runs back."""
    from support.models import Message, Run

    sampler = RssSampler(worker.pid)
    rss_before = sampler.peak
    meter = CpuMeter({"worker": worker.pid, "daphne": stack.daphne_pid, **stack.service_pids(),
                      "bench client": os.getpid()})
    try:
        outcome = asyncio.run(_drive(base, customers or tokens, n, cap, text, meter))
    finally:
        peak = sampler.stop()
    ids = outcome["ids"]
    runs = list(Run.objects.filter(conversation__public_id__in=ids).values(
        "conversation__public_id", "status", "stop_reason", "created_at", "finished_at"))
    saved = dict(Message.objects.filter(conversation__public_id__in=ids, role="user").values_list(
        "conversation__public_id", "created_at"))
    finished = [r for r in runs if r["finished_at"] is not None]
    answered = [r for r in finished if r["stop_reason"] == "answered"]
    db_times = [(r["finished_at"] - r["created_at"]).total_seconds() for r in finished]
    db_wall = ((max(r["finished_at"] for r in finished) - min(r["created_at"] for r in runs)).total_seconds()
               if finished else float("nan"))
    save_times = [saved[uuid.UUID(cid)].timestamp() - sent for cid, sent in outcome["sent_wall"].items()
                  if uuid.UUID(cid) in saved]
    # sockets whose run the database has as stopped but which never received that run's stop event
    stopped_ids = {str(r["conversation__public_id"]) for r in runs if r["status"] in ("stopped", "awaiting_approval")}
    missing = len(stopped_ids - set(outcome["saw_stop"]) - set(outcome["errored"]))
    return {"n": n, "sent": outcome["sent"], "runs": len(runs), "finished": len(finished), "answered": len(answered),
            "not_answered": len(finished) - len(answered), "unfinished": len(runs) - len(finished),
            "paused": sum(1 for r in runs if r["status"] == "awaiting_approval"),
            "db_times": db_times, "client_times": outcome["client_times"], "client_wall": outcome["client_wall"],
            "db_wall": db_wall, "errors": outcome["errors"], "missing_events": missing,
            "rss_peak": peak, "rss_before": rss_before, "submit_s": outcome["submit_s"],
            "setup_s": outcome["setup_s"], "save_times": save_times, "ids": ids, "cpu": meter.used,
            "cpu_wall": meter.wall}


def _settled(ids: list[str]) -> int:
    """Runs of these conversations that have stopped or paused (the database's view)."""
    from django.db import connection

    from support.models import Run

    try:
        return Run.objects.filter(conversation__public_id__in=ids, status__in=("stopped", "awaiting_approval")).count()
    finally:
        connection.close()  # a worker thread of asyncio.to_thread: leave no connection behind


async def _drive(base: str, tokens: list[str], n: int, cap: float, text: str, meter: CpuMeter) -> dict:
    """Open n customers' sockets, send at once, then wait until every client saw its run stop, or the
    database says every run stopped and GRACE s passed, or `cap` s passed."""
    t_setup = time.perf_counter()
    conversations, errors = await create_conversations(base, n, tokens)
    widgets, errs = await open_widgets(base, conversations)
    errors += errs
    setup_s = time.perf_counter() - t_setup
    ids = [w.conversation["id"] for w in widgets]
    try:
        meter.start()
        t0 = time.perf_counter()
        await asyncio.gather(*(w.send(text) for w in widgets))
        submit = time.perf_counter() - t0
        settled_at = None
        while time.perf_counter() - t0 < cap:
            if all(w.stopped_at is not None or w.error for w in widgets):
                break
            if settled_at is None:
                if await asyncio.to_thread(_settled, ids) >= len(ids):
                    settled_at = time.perf_counter()
            elif time.perf_counter() - settled_at > GRACE_S:
                break
            await asyncio.sleep(0.5)
        client_wall = max((w.stopped_at for w in widgets if w.stopped_at), default=t0) - t0
        meter.stop()
    finally:
        await close_widgets(widgets)
    client_times = [w.stopped_at - w.sent_at for w in widgets if w.stopped_at]
    errors += [w.error for w in widgets if w.error]
    return {"ids": ids, "sent": len(widgets), "client_times": client_times, "client_wall": client_wall,
            "errors": errors, "submit_s": submit, "setup_s": setup_s,
            "saw_stop": [w.conversation["id"] for w in widgets if w.stopped_at is not None],
            "errored": [w.conversation["id"] for w in widgets if w.error],
            "sent_wall": {w.conversation["id"]: w.sent_wall for w in widgets}}


def _approvals(stack, database_url: str, base: str, tokens: list[str], paused_n: int) -> dict:
    from support.models import Run

    stack.standin_reset(latency_ms=0)
    worker = start_worker(stack, database_url, "cc-approvals", concurrency=10)
    try:
        # Conversations of Maya's (SU-41310 is her order) that pause on a refund.
        t0 = time.perf_counter()
        pause = _load(stack, base, tokens, worker, paused_n, cap=120.0, text=APPROVAL_TEXT, customers=tokens[:1])
        ids = pause["ids"]
        setup_s = time.perf_counter() - t0
        paused = Run.objects.filter(conversation__public_id__in=ids, status=Run.AWAITING_APPROVAL).count()
        active = _celery_active(stack, database_url)
        # 10 new conversations at the model's real pace: they need all 10 slots.
        stack.standin_reset(latency_ms=LATENCY_MS)
        load = _load(stack, base, tokens, worker, 10, cap=30.0)
        active_after = _celery_active(stack, database_url)
        still_paused = Run.objects.filter(conversation__public_id__in=ids, status=Run.AWAITING_APPROVAL).count()
    finally:
        worker.stop()
    return {"paused": paused, "asked": paused_n, "setup_s": setup_s, "active": active, "load": load,
            "errors": pause["errors"], "still_paused": still_paused, "active_after": active_after}


def _celery_active(stack, database_url: str) -> dict:
    """`celery inspect active`: the tasks each worker is running right now."""
    args = [PY, "-m", "celery", "-A", "agentsite", "inspect", "active", "--json", "--timeout", "5"]
    if not any("inspect active" in c for c in COMMANDS):
        record_command(args, "how many tasks the worker is running")
    out = subprocess.run(args, cwd=ROOT, env=stack.django_env(database_url), capture_output=True, text=True, timeout=60)
    try:
        replies = json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": (out.stdout + out.stderr)[-500:], "count": None}
    return {"count": sum(len(tasks) for tasks in replies.values()), "workers": len(replies),
            "command": "celery -A agentsite inspect active --json --timeout 5"}


def _row(pool: str, n: int, conc: int, results: list[dict], cap: float | None = None) -> list:
    pooled = lambda key: [t for r in results for t in r[key]]  # noqa: E731
    db, cl, save = pooled("db_times"), pooled("client_times"), pooled("save_times")
    walls = [r["db_wall"] for r in results]
    thr = [r["finished"] / r["db_wall"] for r in results if r["finished"] and r["db_wall"] > 0]
    # a capped (prefork) load reports its unfinished runs apart; an uncapped one counts them as errors
    errors = sum(len(r["errors"]) + r["not_answered"] + (0 if cap else r["unfinished"]) for r in results)
    finished = sum(r["finished"] for r in results)
    sent = sum(r["n"] for r in results)
    p = lambda xs, q: f"{pct(xs, q):.2f}" if xs else "-"  # noqa: E731
    return [pool, n, conc, len(results), f"{finished}/{sent}" + (f" (cap {cap:g} s)" if cap else ""),
            f"{p(db, 50)} / {p(db, 95)} / **{p(db, 99)}**", f"{pct(db, 99) / IDEAL_S:.2f}×" if db else "-",
            mmm(walls), mmm(thr, "{:.1f}"), f"{p(save, 50)} / {p(save, 99)}", f"{p(cl, 50)} / {p(cl, 99)}",
            sum(r["missing_events"] for r in results), errors,
            f"{max(r['rss_peak'] for r in results) / 2**20:.0f}", mmm([r["setup_s"] for r in results], "{:.1f}")]


def _merged(results: list[dict]) -> CpuMeter:
    """The CPU of several loads as one meter (summed), for cpu_table."""
    out = CpuMeter({})
    out.used, out.wall = {}, sum(r["cpu_wall"] for r in results)
    for r in results:
        for k, v in r["cpu"].items():
            out.used[k] = out.used.get(k, 0.0) + v
    return out


HEADERS = ["pool", "N", "worker concurrency", "rounds", "runs finished", "run p50 / p95 / p99 s",
           "run p99 / ideal", "wall for all s", "throughput runs/s", "send → message saved p50 / p99 s",
           "client: send → stopped p50 / p99 s", "stop events not delivered", "errors", "worker peak RSS MiB",
           "setup s (create + open sockets)"]


def _report(stack, threads_rows, prefork_rows, approval, prefork_cap, cores) -> dict:
    rows = [_row("threads", n, c, rs) for n, c, rs in threads_rows]
    rows += [_row("prefork", n, c, rs, prefork_cap) for n, c, rs in prefork_rows]
    verdicts, data = [], {"threads": {}, "prefork": {}}
    for n, c, rs in threads_rows:
        data["threads"][n] = rs
    if threads_rows:
        n, c, rs = max(threads_rows, key=lambda x: x[0])
        db = [t for r in rs for t in r["db_times"]]
        cl = [t for r in rs for t in r["client_times"]]
        errors = sum(len(r["errors"]) + r["not_answered"] + r["unfinished"] for r in rs)
        missing = sum(r["missing_events"] for r in rs)
        complete = all(r["answered"] == r["n"] for r in rs)
        verdicts.append(
            f"N = {n}: all runs complete: {'yes' if complete else 'no'}; run p99 {pct(db, 99):.2f} s (target ≤ "
            f"{TARGET_P99_S:g} s); errors {errors}: "
            f"**{'met' if complete and pct(db, 99) <= TARGET_P99_S and not errors else 'missed'}** "
            f"as the database sees the runs. As the customers see them: send → `run.status: stopped` p99 "
            f"{pct(cl, 99) if cl else float('nan'):.2f} s, and {missing} of {sum(r['n'] for r in rs)} sockets never "
            f"received their run's stop event (within {GRACE_S:g} s after the database had every run stopped): "
            f"**{'met' if cl and pct(cl, 99) <= TARGET_P99_S and not missing else 'missed'}**.")
    for n, c, rs in prefork_rows:
        data["prefork"][n] = rs
    md = [
        "## 3. Concurrency: N conversations at once, 4 model calls each at 0.5 s per call (ideal run 2.0 s)",
        f"Real system: daphne, Redis, {'PostgreSQL' if stack.db_kind == 'postgres' else 'SQLite'}, one Celery worker "
        f"process; the stand-in at `latency_ms: {LATENCY_MS}`. Every customer's socket is open (and replayed) before "
        f"all send `{TEXT}` at once. Run = the run row's created_at → finished_at in the database (the run is "
        f"created when daphne saves the message); wall for all = first run created → last run finished; "
        f"throughput = runs finished / that wall. \"send → message saved\" = the customer's message row's "
        f"created_at minus the moment the client sent it (daphne's queue). Client = send → `run.status: stopped` on "
        f"the customer's socket, over the sockets that received it; \"not delivered\" counts sockets that never "
        f"received it (waited until {GRACE_S:g} s after the database had every run stopped). Errors = socket/HTTP "
        f"errors + runs not answered + (threads) runs unfinished. Percentiles pooled over rounds; wall and "
        f"throughput are median (min–max) over rounds.",
        md_table(HEADERS, rows),
        "\n".join(f"- {v}" for v in verdicts),
        "CPU by process from the moment all sent until the wait ended, per finished run (summed over rounds; "
        "a capped prefork load also spent some on runs it did not finish), and the machine's cores that kept "
        "busy on average:",
        cpu_table([(f"{pool} N = {n}", _merged(rs), sum(r["finished"] for r in rs))
                   for pool, rows_ in (("threads", threads_rows), ("prefork", prefork_rows))
                   for n, c, rs in rows_], "run"),
    ]
    if threads_rows:
        n, c, rs = max(threads_rows, key=lambda x: x[0])
        merged, finished = _merged(rs), sum(r["finished"] for r in rs)
        spent = sum(v for k, v in merged.used.items() if k not in ("bench client", "stand-in")) / max(finished, 1)
        md.append(f"- What the CPU allows: at N = {n} the system (every process but the benchmark's clients and "
                  f"the model stand-in) spent "
                  f"{spent * 1000:.1f} ms of CPU per run, so {n} runs at once need {spent * n:.1f} core-seconds: "
                  f"at least {spent * n / cores:.1f} s on {cores} cores even if nothing else waited. Finishing all "
                  f"{n} within {TARGET_P99_S:g} s would need at most {TARGET_P99_S * cores / n * 1000:.0f} ms per "
                  f"run on this machine. Target ≤ {TARGET_CPU_PER_RUN_MS:g} ms of CPU per 4-call run, all processes: "
                  f"**{'met' if spent * 1000 <= TARGET_CPU_PER_RUN_MS else 'missed'}**.")
    for n, c, rs in prefork_rows:
        r = rs[0]
        md.append(f"- prefork N = {n} (concurrency {c} = cores): {r['finished']} of {r['n']} runs finished within "
                  f"the {prefork_cap:g} s cap, {r['unfinished']} still queued or running when it was stopped.")
    if approval:
        load = approval["load"]
        act = approval["active"]
        mx = lambda xs: f"{max(xs):.2f}" if xs else "-"  # noqa: E731
        md += [
            "### Paused runs hold no worker slot",
            md_table(["measure", "value"], [
                ["runs brought to awaiting_approval (worker --concurrency 10; stand-in at no latency for this)",
                 f"{approval['paused']}/{approval['asked']} in {approval['setup_s']:.1f} s"],
                ["`celery inspect active` while they wait: active tasks",
                 f"{act.get('count')} (workers answering: {act.get('workers')})"],
                ["10 new `#steps:4` conversations (0.5 s per call): finished, answered",
                 f"{load['finished']}/10, {load['answered']}"],
                ["their run p50 / max s (ideal 2.0)", f"{pct(load['db_times'], 50):.2f} / {mx(load['db_times'])}"],
                ["their client send → stopped p50 / max s",
                 f"{pct(load['client_times'], 50):.2f} / {mx(load['client_times'])}"],
                ["active tasks after they finished", f"{approval['active_after'].get('count')}"],
                ["runs still awaiting approval at the end", f"{approval['still_paused']}"],
                ["errors", f"{len(approval['errors']) + len(load['errors'])}"],
            ]),
        ]
    return {"name": "concurrency", "markdown": "\n\n".join(md),
            "data": {"threads": {str(k): v for k, v in data["threads"].items()},
                     "prefork": {str(k): v for k, v in data["prefork"].items()}, "approvals": approval}}


if __name__ == "__main__":
    section_main(run)
