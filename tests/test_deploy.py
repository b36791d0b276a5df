"""Deployment settings: the documented production environment passes `check --deploy`; with DEBUG off
every security default is the secure one; the shop's signing key is never the site's secret.

Settings are evaluated fresh for each environment (runpy), or in a subprocess for the real check.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import runpy
import secrets
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from django.core import signing
from django.core.exceptions import ImproperlyConfigured

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = ROOT / "agentsite" / "settings.py"
DOC = ROOT / "docs" / "deploy-security.md"
SECRET = "test-secret-" + "s" * 30 + "0123456789"


def documented_production_env() -> dict[str, str]:
    """The environment block of docs/deploy-security.md, each `<...>` placeholder a fresh random value."""
    block = re.search(r"<!-- production-environment -->\s*```sh\n(.*?)```", DOC.read_text(), re.S).group(1)
    env = {}
    for line in block.splitlines():
        name, _, value = line.partition("=")
        env[name] = shlex.split(re.sub(r"<[^>]*>", lambda _: secrets.token_urlsafe(48), value))[0]
    return env


def clean_environ(extra: dict[str, str]) -> dict[str, str]:
    """This process's environment without any setting a developer may have exported, plus `extra`."""
    prefixes = ("DJANGO_", "SHOP_", "WIDGET_", "DATABASE_URL", "REDIS_URL", "METRICS_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    return {**env, "DJANGO_SETTINGS_MODULE": "agentsite.settings", **extra}


def settings_with(monkeypatch, tmp_path, **env) -> dict:
    """agentsite/settings.py evaluated under exactly `env` (and a VAR_DIR of the test's own)."""
    for name in list(os.environ):
        if name.startswith(("DJANGO_", "SHOP_", "WIDGET_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("VAR_DIR", str(tmp_path))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return runpy.run_path(str(SETTINGS))


def check_deploy(env: dict[str, str], tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                          cwd=ROOT, env=clean_environ({**env, "VAR_DIR": str(tmp_path)}),
                          capture_output=True, text=True, timeout=60)


def production(**overrides) -> dict[str, str]:
    return {"DJANGO_DEBUG": "false", "DJANGO_SECRET_KEY": SECRET, "SHOP_SIGNING_KEY": "shop-" + "k" * 40,
            "METRICS_TOKEN": "metrics-" + "m" * 20, **overrides}


# -- check --deploy ---------------------------------------------------------------------------------------

def test_the_documented_production_environment_passes_check_deploy_at_warning_level(tmp_path):
    result = check_deploy(documented_production_env(), tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_check_deploy_fails_when_production_turns_a_protection_off(tmp_path):
    env = {**documented_production_env(), "DJANGO_SESSION_COOKIE_SECURE": "false"}
    result = check_deploy(env, tmp_path)
    assert result.returncode != 0
    assert "security.W012" in result.stderr


# -- defaults -------------------------------------------------------------------------------------------

def test_with_debug_off_every_https_protection_is_on_by_default(monkeypatch, tmp_path):
    s = settings_with(monkeypatch, tmp_path, **production())
    assert s["SECURE_SSL_REDIRECT"] is True
    assert s["SECURE_HSTS_SECONDS"] == 365 * 24 * 3600
    assert s["SESSION_COOKIE_SECURE"] is True and s["CSRF_COOKIE_SECURE"] is True
    # Domain-wide decisions and trusting a proxy's header are never assumed.
    assert s["SECURE_HSTS_INCLUDE_SUBDOMAINS"] is False and s["SECURE_HSTS_PRELOAD"] is False
    assert s["SECURE_PROXY_SSL_HEADER"] is None


def test_with_debug_on_the_site_still_serves_plain_http_on_loopback(monkeypatch, tmp_path):
    s = settings_with(monkeypatch, tmp_path)
    assert s["DEBUG"] is True
    assert s["SECURE_SSL_REDIRECT"] is False and s["SECURE_HSTS_SECONDS"] == 0
    assert s["SESSION_COOKIE_SECURE"] is False and s["CSRF_COOKIE_SECURE"] is False


def test_each_https_setting_comes_from_the_environment(monkeypatch, tmp_path):
    s = settings_with(monkeypatch, tmp_path, **production(
        DJANGO_SECURE_SSL_REDIRECT="false", DJANGO_SECURE_HSTS_SECONDS="3600",
        DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS="true", DJANGO_SECURE_HSTS_PRELOAD="true",
        DJANGO_SECURE_PROXY_SSL_HEADER="X-Forwarded-Proto: https", DJANGO_SESSION_COOKIE_SECURE="false",
        DJANGO_CSRF_COOKIE_SECURE="false",
        DJANGO_CSRF_TRUSTED_ORIGINS="https://desk.example:443, https://Desk.example:8443"))
    assert (s["SECURE_SSL_REDIRECT"], s["SECURE_HSTS_SECONDS"]) == (False, 3600)
    assert s["SECURE_HSTS_INCLUDE_SUBDOMAINS"] is True and s["SECURE_HSTS_PRELOAD"] is True
    assert s["SECURE_PROXY_SSL_HEADER"] == ("HTTP_X_FORWARDED_PROTO", "https")
    assert s["SESSION_COOKIE_SECURE"] is False and s["CSRF_COOKIE_SECURE"] is False
    assert s["CSRF_TRUSTED_ORIGINS"] == ["https://desk.example", "https://desk.example:8443"]


@pytest.mark.parametrize("name, value", [
    ("DJANGO_SECURE_PROXY_SSL_HEADER", "X-Forwarded-Proto"),
    ("DJANGO_SECURE_PROXY_SSL_HEADER", "X Forwarded Proto: https"),
    ("DJANGO_SECURE_HSTS_SECONDS", "a year"),
    ("DJANGO_CSRF_COOKIE_SECURE", "maybe"),
    ("DJANGO_CSRF_TRUSTED_ORIGINS", "desk.example"),
    ("WIDGET_ALLOWED_ORIGINS", "https://shop.example/help"),
    ("WIDGET_ALLOWED_ORIGINS", "ftp://shop.example"),
])
def test_a_malformed_security_setting_stops_start_up_naming_the_variable(monkeypatch, tmp_path, name, value):
    with pytest.raises(ImproperlyConfigured, match=name):
        settings_with(monkeypatch, tmp_path, **production(**{name: value}))


def test_widget_origins_are_kept_as_browsers_send_them(monkeypatch, tmp_path):
    s = settings_with(monkeypatch, tmp_path, WIDGET_ALLOWED_ORIGINS="HTTPS://Shop.Example:443/,http://localhost:8080")
    assert s["WIDGET_ALLOWED_ORIGINS"] == ["https://shop.example", "http://localhost:8080"]
    assert s["CORS_ALLOWED_ORIGINS"] == s["WIDGET_ALLOWED_ORIGINS"]


# -- the shop's signing key -------------------------------------------------------------------------------

@pytest.mark.parametrize("token", [None, "", "short"])
def test_with_debug_off_it_refuses_to_start_without_a_metrics_token(monkeypatch, tmp_path, token):
    env = production()
    env.pop("METRICS_TOKEN")
    if token is not None:
        env["METRICS_TOKEN"] = token
    with pytest.raises(ImproperlyConfigured, match="METRICS_TOKEN must be set"):
        settings_with(monkeypatch, tmp_path, **env)


def test_with_debug_off_it_refuses_to_start_without_a_shop_signing_key_of_its_own(monkeypatch, tmp_path):
    with pytest.raises(ImproperlyConfigured, match="SHOP_SIGNING_KEY must be set"):
        settings_with(monkeypatch, tmp_path, DJANGO_DEBUG="false", DJANGO_SECRET_KEY=SECRET)


@pytest.mark.parametrize("debug", ["true", "false"])
@pytest.mark.parametrize("shop_key", [SECRET, SECRET + ":shop", "shop:" + SECRET])
def test_it_refuses_a_shop_signing_key_that_contains_the_secret_key(monkeypatch, tmp_path, debug, shop_key):
    with pytest.raises(ImproperlyConfigured, match="must not contain DJANGO_SECRET_KEY"):
        settings_with(monkeypatch, tmp_path, DJANGO_DEBUG=debug, DJANGO_SECRET_KEY=SECRET, SHOP_SIGNING_KEY=shop_key)


def test_with_debug_off_it_refuses_a_short_shop_signing_key(monkeypatch, tmp_path):
    with pytest.raises(ImproperlyConfigured, match="at least 32"):
        settings_with(monkeypatch, tmp_path, **production(SHOP_SIGNING_KEY="short"))


def test_the_development_shop_key_is_an_hmac_of_the_secret_key_and_reveals_nothing_of_it(monkeypatch, tmp_path):
    s = settings_with(monkeypatch, tmp_path, DJANGO_SECRET_KEY=SECRET)
    expected = hmac.new(SECRET.encode(), b"agentsite.shop-signing-key", hashlib.sha256).hexdigest()
    assert s["SHOP_SIGNING_KEY"] == expected
    assert SECRET not in s["SHOP_SIGNING_KEY"]


def test_a_shop_holding_the_development_key_cannot_forge_a_conversation_token(monkeypatch, tmp_path):
    # What a shop could do with the old key (SECRET_KEY + ":shop"): strip the suffix and sign as the site.
    s = settings_with(monkeypatch, tmp_path, DJANGO_SECRET_KEY=SECRET)
    guessed_secret = s["SHOP_SIGNING_KEY"].removesuffix(":shop")
    forged = signing.dumps("any-conversation-id", key=guessed_secret, salt="support.conversation")
    with pytest.raises(signing.BadSignature):
        signing.loads(forged, key=s["SECRET_KEY"], salt="support.conversation")
