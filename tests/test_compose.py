"""compose.yaml, the example deployment on one Docker host: read as Compose reads it (YAML with merge keys)
and held to the guide and the Procfile. No container runtime runs in the test suite; the same processes,
started as local processes behind the same haproxy.cfg, are what tests/system/test_scale_out.py runs."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = yaml.safe_load((ROOT / "compose.yaml").read_text())
SERVICES = COMPOSE["services"]
DESK = ("web1", "web2", "worker", "beat")  # the desk's own long-running processes


def procfile() -> dict[str, list[str]]:
    """Each Procfile process's argv, with ${VAR:-default} taken at its default."""
    out = {}
    for line in (ROOT / "Procfile").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, command = line.split(":", 1)
            out[name] = shlex.split(re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", command))
    return out


def dockerfile_cmd() -> list[str]:
    line = next(l for l in (ROOT / "deploy/Dockerfile").read_text().splitlines() if l.startswith("CMD "))
    return yaml.safe_load(line.removeprefix("CMD "))  # a JSON array is YAML too


def test_it_has_every_process_the_guide_names_and_nothing_starts_before_the_database_is_migrated():
    assert {"db", "redis", "migrate", "web1", "web2", "worker", "beat", "balancer"} <= set(SERVICES)
    assert SERVICES["migrate"]["depends_on"] == {"db": {"condition": "service_healthy"}}
    for name in DESK:
        depends = SERVICES[name]["depends_on"]
        assert depends["migrate"] == {"condition": "service_completed_successfully"}, name
        assert depends["db"] == {"condition": "service_healthy"} and depends["redis"] == {"condition": "service_healthy"}
    assert "healthcheck" in SERVICES["db"] and "healthcheck" in SERVICES["redis"]


def test_its_processes_run_what_the_procfile_runs():
    procs = procfile()
    assert SERVICES["migrate"]["command"] == procs["release"]
    assert SERVICES["worker"]["command"] == procs["worker"]
    beat = SERVICES["beat"]["command"]
    assert beat[:-1] == procs["beat"][:-1] and beat[-1].endswith("/celerybeat-schedule")
    web = procs["web"]
    for name in ("web1", "web2"):  # no command of their own: the image's, daphne on port 8000
        assert "command" not in SERVICES[name]
        assert dockerfile_cmd() == web  # the Procfile's default port is 8000 too


def test_workers_scale_out_and_the_beat_stays_one():
    assert SERVICES["worker"]["deploy"]["replicas"] >= 2
    assert SERVICES["beat"].get("deploy", {}).get("replicas", 1) == 1


def test_the_balancer_sends_to_both_daphnes_that_report_ready():
    balancer = SERVICES["balancer"]
    assert any(v.startswith("./deploy/haproxy.cfg:") for v in balancer["volumes"])
    config = (ROOT / "deploy/haproxy.cfg").read_text()
    for i, name in ((1, "web1"), (2, "web2")):
        assert balancer["environment"][f"DESK_WEB{i}"] == f"{name}:8000"
        assert f'"${{DESK_WEB{i}}}" check' in config
        assert "/readyz" in " ".join(SERVICES[name]["healthcheck"]["test"])
    assert set(balancer["depends_on"]) >= {"web1", "web2"}


def test_every_desk_process_gets_the_same_database_redis_and_secrets():
    environments = [SERVICES[name]["environment"] for name in DESK]
    for key in ("DATABASE_URL", "REDIS_URL", "DJANGO_SECRET_KEY", "SHOP_SIGNING_KEY", "MODEL_BASE_URL"):
        assert len({env[key] for env in environments}) == 1, key
    assert environments[0]["DATABASE_URL"].startswith("postgres://") and "@db:" in environments[0]["DATABASE_URL"]
    assert environments[0]["REDIS_URL"].startswith("redis://redis:")
