"""Health probes for balancers and orchestrators: /healthz (the process answers) and /readyz (it can serve).

ProbeMiddleware answers /healthz, /readyz and /metrics before the rest of the middleware, so a probe is
answered whatever Host it sends and over plain http: a balancer checks a process by its own address
(which is not in DJANGO_ALLOWED_HOSTS), and the HTTPS redirect would turn every probe into a 301 that
a balancer counts as healthy. These answers build no URL from the Host, which is what the host check
protects.
"""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.models import Min
from django.http import JsonResponse
from django.utils import timezone

from agentsite.celery import app
from support.models import Run
from support.ops.scrape import metrics_view
from support.ops.sweeper import redis_client, sweeper_last_run

log = logging.getLogger(__name__)

_schema_ready = False  # once every migration is applied it stays so: checked until then, not after


def healthz(request) -> JsonResponse:
    """Liveness: the process is up and its request handling works. Checks nothing else, on purpose: a
    database outage must not get every site process restarted."""
    return JsonResponse({"status": "ok"})


def readyz(request) -> JsonResponse:
    """Readiness: the database answers with every migration applied, and Redis answers. 503 names what
    failed, so the balancer sends no new requests here until it is back."""
    checks, ready = {}, True
    for name, check in (("database", _database), ("schema", _schema), ("redis", _redis)):
        if name == "schema" and not checks["database"]["ok"]:
            checks[name] = {"ok": False, "error": "the database did not answer"}
            continue
        started = time.perf_counter()
        try:
            problem = check()
        except Exception as e:  # the class only: a public answer must not carry addresses or credentials
            log.warning("readiness: %s check failed: %s: %s", name, type(e).__name__, str(e).strip()[:300])
            problem = f"{type(e).__name__}"
        checks[name] = {"ok": problem is None, "ms": round((time.perf_counter() - started) * 1000, 1)}
        if problem is not None:
            checks[name]["error"] = problem
            ready = False
    response = JsonResponse({"status": "ready" if ready else "unavailable", "checks": checks},
                            status=200 if ready else 503)
    # Logged above as a warning: a balancer polling a process that is not ready is not a server error.
    response._has_been_logged = True
    return response


def _database() -> str | None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return None


def _schema() -> str | None:
    """A process of a new release started before `manage.py migrate` ran would fail its requests."""
    global _schema_ready
    if _schema_ready:
        return None
    executor = MigrationExecutor(connection)
    unapplied = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if unapplied:
        return f"{len(unapplied)} migration(s) not applied"
    _schema_ready = True
    return None


def _redis() -> str | None:
    """Every Redis the site uses: the broker and channel layer, and the limits' store when it is another."""
    for url in {settings.REDIS_URL, getattr(settings, "LIMITS_REDIS_URL", settings.REDIS_URL)}:
        redis_client(url).ping()
    return None


# -- the Celery side: workers, the beat, the queue (manage.py check_workers) ------------------------------

def workers_report(*, ping_timeout: float = 2.0, max_queued_age: float = 60.0) -> dict:
    """What `manage.py check_workers` checks: a worker answers a ping, the beat's sweeper ran within three
    periods (RUN_SWEEP_SECONDS), and the oldest queued run waited at most `max_queued_age` seconds.
    Returns {"ok": bool, "checks": {name: {"ok", ...}}}: names of workers, ages, never data."""
    checks = {}
    try:
        answers = app.control.ping(timeout=ping_timeout) or []
        names = sorted(name for answer in answers for name in answer)
        checks["workers"] = {"ok": bool(names), "answered": names}
    except Exception as e:
        checks["workers"] = {"ok": False, "answered": [], "error": type(e).__name__}
    last = sweeper_last_run()
    allowed = max(3 * settings.RUN_SWEEP_SECONDS, 30.0)
    age = None if last is None else round(max(time.time() - last, 0.0), 1)
    checks["beat"] = {"ok": age is not None and age <= allowed, "last_sweep_seconds_ago": age,
                      "allowed_seconds": allowed}
    try:
        oldest = Run.objects.filter(status=Run.QUEUED).aggregate(t=Min("heartbeat_at"))["t"]
        queued_age = 0.0 if oldest is None else round((timezone.now() - oldest).total_seconds(), 1)
        checks["queue"] = {"ok": queued_age <= max_queued_age, "oldest_queued_run_seconds": queued_age,
                           "allowed_seconds": max_queued_age}
    except Exception as e:
        checks["queue"] = {"ok": False, "error": type(e).__name__}
    return {"ok": all(c["ok"] for c in checks.values()), "checks": checks}


PROBES = {"/healthz": healthz, "/readyz": readyz}


class ProbeMiddleware:
    """Answers the probe paths and /metrics itself (see the module's docstring); everything else goes on."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        path = request.path_info
        if path in PROBES or path == "/metrics":
            if request.method not in ("GET", "HEAD"):
                return JsonResponse({"error": "GET only."}, status=405, headers={"Allow": "GET, HEAD"})
            if path == "/metrics":
                return metrics_view(request)
            return PROBES[path](request)
        return self.get_response(request)
