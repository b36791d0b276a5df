"""settings.DB_POOL: on PostgreSQL each process borrows connections from a pool; elsewhere, or switched off,
connections are kept per thread for CONN_MAX_AGE."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHOW = ("from django.conf import settings; d = settings.DATABASES['default']; "
        "print(json.dumps({'pool': d.get('OPTIONS', {}).get('pool'), 'age': d['CONN_MAX_AGE'], "
        "'pooled': settings.DB_POOLED}))")


def settings_with(**env) -> dict:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("DB_POOL", "CONN_MAX_AGE", "DATABASE_URL"))}
    environ.update(DJANGO_SETTINGS_MODULE="agentsite.settings", **env)
    out = subprocess.run([sys.executable, "-c", f"import json, django; django.setup(); {SHOW}"], cwd=ROOT,
                         env=environ, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_postgresql_gets_a_pool_and_no_per_thread_connections():
    got = settings_with(DATABASE_URL="postgres://app:app@127.0.0.1:5432/app", DB_POOL_MAX_SIZE="7",
                        DB_POOL_TIMEOUT="2.5")
    assert got["pooled"] is True and got["age"] == 0
    assert got["pool"] == {"min_size": 2, "max_size": 7, "timeout": 2.5, "max_idle": 300, "name": "default"}


def test_the_pool_is_never_smaller_than_its_minimum():
    got = settings_with(DATABASE_URL="postgres://app:app@127.0.0.1:5432/app", DB_POOL_MIN_SIZE="5",
                        DB_POOL_MAX_SIZE="3")
    assert (got["pool"]["min_size"], got["pool"]["max_size"]) == (5, 5)


def test_switched_off_connections_are_kept_per_thread():
    got = settings_with(DATABASE_URL="postgres://app:app@127.0.0.1:5432/app", DB_POOL="false", CONN_MAX_AGE="30")
    assert (got["pooled"], got["pool"], got["age"]) == (False, None, 30)


def test_sqlite_has_no_pool(tmp_path):
    got = settings_with(DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}")
    assert (got["pooled"], got["pool"], got["age"]) == (False, None, 60)
