"""Where a new customer turn's CPU goes: first_token.py's one-live loop (a conversation created over the API, its
socket opened and replayed, one message, its run of two model calls and a record_outcome), with py-spy sampling
daphne and the Celery worker while it runs.

It prints, for each process, the CPU per turn (measured, not sampled) and how the samples divide (py-spy's
`--gil`: only a thread holding the interpreter lock, waits left out): by the code
a sample was in (the innermost frame's package: Django, Channels, daphne and Twisted, psycopg, ...), and by the
desk's own entry points that were on the stack (inclusive). That is the profile behind bench/RESULTS.md's "CPU per
new customer turn" and what a missed target's floor is read from.

`python bench/profile_turn.py [--turns 60] [--rate 500]` (py-spy from bench/requirements.txt; root or ptrace
allowed). Prints markdown; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.clients import close_widgets, create_conversations, customer_tokens, open_widgets  # noqa: E402
from bench.common import PY, Proc, Stack, django_setup, start_daphne, start_worker  # noqa: E402
from bench.first_token import TEXT, WORKER_THREADS  # noqa: E402
from bench.measure import CpuMeter, md_table  # noqa: E402

# The innermost frame's file decides where a sample's CPU went; the first match wins.
PACKAGES = [
    ("psycopg (PostgreSQL driver)", ("/psycopg/", "/psycopg_pool/")),
    ("redis client", ("/redis/",)),
    ("Channels", ("/channels/", "/channels_redis/")),
    ("daphne, Twisted, autobahn (HTTP and websocket server)", ("/daphne/", "/twisted/", "/autobahn/", "/txaio/")),
    ("asgiref (sync/async bridges)", ("/asgiref/",)),
    ("Django ORM", ("/django/db/",)),
    ("Django templates", ("/django/template/",)),
    ("Django, other (requests, middleware, signals)", ("/django/",)),
    ("Celery, kombu, billiard", ("/celery/", "/kombu/", "/billiard/", "/vine/")),
    ("openai, httpx, httpcore, pydantic (model client)", ("/openai/", "/httpx/", "/httpcore/", "/pydantic",
                                                          "/h11/", "/anyio/")),
    ("msgpack, json (encoding)", ("/msgpack/", "/json/")),
    ("asyncio, threading, selectors, socket, ssl (standard library)", ("/asyncio/", "/threading.py",
                                                                       "/selectors.py", "/socket.py",
                                                                       "/concurrent/")),
    ("the desk's own code (support/, agentsite/)", ("/support/", "/agentsite/")),
]
# The desk's entry points: a sample counts for each one on its stack.
ENTRY_POINTS = {
    "daphne": [("POST /api/conversations (the conversation created)", ("conversations", "support/web/views/customer.py")),
               ("websocket connect and replay", ("connect", "support/web/consumers.py")),
               ("websocket: the customer's message (post)", ("post", "support/web/consumers.py")),
               ("websocket: events sent to the socket", ("desk_event", "support/web/consumers.py")),
               ("channel layer (Redis pub/sub)", (None, "support/live/channel_layer.py")),
               ("Django's request handling (any request)", (None, "django/core/handlers/"))],
    "worker": [("the run (runner._work)", ("_work", "support/desk/runner.py")),
               ("the model call, streamed (agent/llm.py)", (None, "support/agent/llm.py")),
               ("events published", (None, "support/live/events.py")),
               ("journal writes (messages, steps)", (None, "support/desk/journal.py")),
               ("the run's context (run_context)", ("run_context", "support/desk/assistant.py")),
               ("Celery's own task handling", (None, "celery/app/trace.py"))],
}


def _split(frame: str) -> tuple[str, str]:
    """py-spy's `Class.function (path/file.py:123)` as ("Class.function", "/path/file.py"): the path with a
    leading slash, so a mark like "/django/" matches a module path from its first folder."""
    function, _, where = frame.rpartition(" (")
    return function, "/" + where.rsplit(":", 1)[0].lstrip("/")


def _package(frame: str) -> str:
    _, path = _split(frame)
    for name, marks in PACKAGES:
        if any(mark in path for mark in marks):
            return name
    return "other (interpreter, other libraries)"


def _on_stack(frames: list[str], function: str | None, where: str) -> bool:
    for frame in frames:
        name, path = _split(frame)
        if where in path and (function is None or name == function or name.endswith("." + function)):
            return True
    return False


# Where a thread waits (with the GIL just taken or about to be let go): not CPU spent on the turn.
WAITS = ("EpollSelector.select", "_worker (concurrent/futures/thread.py", "Condition.wait", "Event.wait")


def _read_raw(path: Path) -> list[tuple[list[str], int]]:
    """py-spy's raw format: one line per stack, `frame;frame;...;frame count`, outermost first; samples of a
    thread waiting left out."""
    stacks = []
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        if stack and count.isdigit() and not frames[-1].startswith(WAITS):
            stacks.append((frames, int(count)))
    return stacks


def _tables(name: str, stacks, cpu_ms_per_turn: float) -> str:
    total = sum(n for _, n in stacks) or 1
    by_package = collections.Counter()
    for frames, n in stacks:
        by_package[_package(frames[-1])] += n
    rows = [[pkg, f"{n / total:.0%}", f"{cpu_ms_per_turn * n / total:.1f}"] for pkg, n in by_package.most_common()]
    out = [f"### {name}: {cpu_ms_per_turn:.1f} ms of CPU per new turn ({total} samples)\n",
           md_table(["where the sample was (innermost frame)", "share", "ms per turn"], rows)]
    entries = []
    for label, mark in ENTRY_POINTS.get(name, []):
        n = sum(count for frames, count in stacks if _on_stack(frames, *mark))
        entries.append([label, f"{n / total:.0%}", f"{cpu_ms_per_turn * n / total:.1f}"])
    if entries:
        out += ["", md_table(["with this on the stack (inclusive)", "share", "ms per turn"], entries)]
    return "\n".join(out)


async def _turns(base: str, tokens: list[str], n: int, received: collections.Counter | None = None, *,
                 widget: bool = False) -> list[str]:
    """`received`: counts the events the customers' sockets received after their message, by type. `widget`: the
    first message goes with the conversation's POST and the socket opens after it, as the widget does."""
    errors: list[str] = []
    for _ in range(n):
        conversations, errs = await create_conversations(base, 1, tokens, message=TEXT if widget else None)
        errors += errs
        widgets, errs = await open_widgets(base, conversations)
        errors += errs
        try:
            if not widget:
                await asyncio.gather(*(w.send(TEXT) for w in widgets))
            await asyncio.gather(*(w.wait_stopped(30) for w in widgets))
            if received is not None:
                received.update(event.get("type") for w in widgets for _, event in w.events)
        finally:
            await close_widgets(widgets)
    return errors


def main(argv=None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--rate", type=int, default=500, help="py-spy samples a second")
    parser.add_argument("--widget", action="store_true", help="the first message with the conversation's POST, the "
                                                                 "socket opened after it (the widget's way)")
    parser.add_argument("--raw", type=Path, help="a folder to keep py-spy's raw stacks in (profile-daphne.txt, "
                                                 "profile-worker.txt)")
    args = parser.parse_args(argv)
    spy = shutil.which("py-spy") or str(Path(PY).parent / "py-spy")
    if not Path(spy).exists():
        raise SystemExit("py-spy is needed: pip install -r bench/requirements.txt")
    with Stack() as stack:
        database_url = stack.database("bench_profile_turn")
        django_setup(stack, database_url)
        stack.flush_redis()
        stack.standin_reset(latency_ms=0, token_delay_ms=0, outcome_style="with_content")
        procs: list[Proc] = []
        try:
            worker = start_worker(stack, database_url, "pt-worker", concurrency=WORKER_THREADS)
            procs.append(worker)
            daphne, base = start_daphne(stack, database_url, "pt-daphne")
            procs.append(daphne)
            tokens = customer_tokens()
            asyncio.run(_turns(base, tokens, 3, widget=args.widget))  # warm-up: imports, pools
            spies = {}
            for name, pid in (("daphne", daphne.pid), ("worker", worker.pid)):
                out = stack.work / f"profile-{name}.txt"
                spies[name] = (subprocess.Popen([spy, "record", "--pid", str(pid), "--rate", str(args.rate),
                                                 "--format", "raw", "--output", str(out), "--nonblocking", "--gil"],
                                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), out)
            time.sleep(1.0)  # py-spy attached
            meter = CpuMeter({"daphne": daphne.pid, "worker": worker.pid, **stack.service_pids()}).start()
            received = collections.Counter()
            errors = asyncio.run(_turns(base, tokens, args.turns, received, widget=args.widget))
            meter.stop()
            for proc, _ in spies.values():
                proc.send_signal(signal.SIGINT)
            for proc, _ in spies.values():
                proc.wait(30)
        finally:
            for p in reversed(procs):
                p.stop()
        per_turn = {k: v * 1000 / args.turns for k, v in meter.used.items()}
        print(f"## Where a new customer turn's CPU goes ({args.turns} turns, one at a time; py-spy at "
              f"{args.rate} Hz; {'the first message with the POST' if args.widget else 'the message on the socket'})\n")
        print(md_table(["process", "CPU ms per new turn"], [[k, f"{v:.1f}"] for k, v in per_turn.items()]))
        for name, (_, out) in spies.items():
            print()
            print(_tables(name, _read_raw(out), per_turn[name]) if out.exists() else f"{name}: no profile written")
        print("\nEvents a customer's socket received per turn, after its message: " + ", ".join(
            f"{kind} {n / args.turns:g}" for kind, n in received.most_common()))
        if args.raw:
            args.raw.mkdir(parents=True, exist_ok=True)
            for _, out in spies.values():
                if out.exists():
                    shutil.copy(out, args.raw / out.name)
        if errors:
            print(f"\nErrors: {len(errors)}: {errors[:3]}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
