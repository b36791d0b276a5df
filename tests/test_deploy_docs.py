"""The deployment guide keeps up with the code: every environment variable agentsite/settings.py reads is
in docs/deploy.md's list with a default, the list names none that settings.py does not read, and the
compose file and Procfile use only variables the guide explains."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GUIDE = (ROOT / "docs" / "deploy.md").read_text()
SECTION = GUIDE[GUIDE.index("## Environment variables"):]
# Read by the process commands and ./dev, not by settings.py; the guide lists them apart.
COMMAND_VARIABLES = {"PORT", "WORKER_THREADS", "ASGI_THREADS", "REDIS_PORT", "MODEL_PORT"}


def settings_variables() -> set[str]:
    source = (ROOT / "agentsite" / "settings.py").read_text()
    found = set(re.findall(r'\benv_[a-z_]+\(\s*"([A-Z][A-Z0-9_]+)"', source))
    found |= set(re.findall(r'os\.environ(?:\.get\(|\[)\s*"([A-Z][A-Z0-9_]+)"', source))
    return found


def listed_rows() -> dict[str, str]:
    """{variable: its default cell} for each row of the section's tables."""
    rows = {}
    for line in SECTION.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) >= 3:
            for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", cells[0]):
                rows[name] = cells[1]
    return rows


def test_settings_reads_enough_variables_for_this_test_to_mean_something():
    assert {"DATABASE_URL", "REDIS_URL", "LOG_FORMAT", "METRICS_TOKEN", "RUN_SWEEP_SECONDS"} <= settings_variables()


def test_every_variable_settings_reads_is_listed_in_the_guide_with_a_default():
    rows = listed_rows()
    missing = sorted(settings_variables() - set(rows))
    assert not missing, f"docs/deploy.md, 'Environment variables', lacks: {missing}"
    assert not [name for name, default in rows.items() if not default], "every row gives a default"


def test_the_guide_lists_no_variable_settings_does_not_read():
    stale = sorted(set(listed_rows()) - settings_variables())
    assert not stale, f"docs/deploy.md lists variables settings.py no longer reads: {stale}"
    for name in COMMAND_VARIABLES:
        assert f"`{name}`" in SECTION


def test_compose_and_the_procfile_use_only_variables_the_guide_explains():
    known = settings_variables() | COMMAND_VARIABLES | {"DESK_BIND", "DESK_WEB1", "DESK_WEB2", "DESK_STATIC"}
    for path in ("compose.yaml", "Procfile"):
        text = (ROOT / path).read_text()
        used = set(re.findall(r"^\s+([A-Z][A-Z0-9_]+):", text, re.M)) | set(re.findall(r"\$\{([A-Z][A-Z0-9_]+)", text))
        used -= {"POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB"}  # the postgres image's own
        assert used <= known, f"{path} uses variables the guide does not explain: {sorted(used - known)}"
        for name in used - {"DESK_BIND", "DESK_WEB1", "DESK_WEB2", "DESK_STATIC"}:
            assert f"`{name}`" in GUIDE


def test_the_guide_covers_what_an_operator_starts_from():
    for heading in ("## The processes", "## The balancer", "## TLS at the balancer", "## Static files",
                    "## Migrations on deploy", "## Backups", "## Health probes", "## Metrics", "## Logs",
                    "## Sizing", "## Environment variables"):
        assert heading in GUIDE
    assert "**Only the database.**" in GUIDE
    assert "check_workers" in GUIDE and "docker compose up" in GUIDE


def test_nothing_is_kept_per_process_sessions_in_the_database_and_the_cache_in_redis(settings):
    assert settings.SESSION_ENGINE == "django.contrib.sessions.backends.db"
    assert settings.CACHES["default"]["BACKEND"] == "django.core.cache.backends.redis.RedisCache"
    assert settings.CACHES["default"]["LOCATION"] == settings.REDIS_URL
