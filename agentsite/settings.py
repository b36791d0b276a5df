"""Settings for agentsite: one file, driven by environment variables.

Every value has an embedded default so the site runs with no configuration (SQLite, the embedded Redis
server, the built-in model stand-in). A malformed value stops start-up with a message naming the variable.
"""

import hashlib
import hmac
import json
import os
from decimal import Decimal, InvalidOperation
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from agentsite.mcp_settings import env_mcp_servers  # stdlib and Django only: safe before setup
from support.web.origins import normalise_origin  # stdlib only at import: safe before setup

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_int(name: str, default: int, minimum: int = 0) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number, got {raw!r}") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}")
    return value


def env_float(name: str, default: float, minimum: float = 0.0) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}")
    return value


def env_decimal(name: str, default: str) -> Decimal:
    raw = os.environ.get(name) or default
    try:
        value = Decimal(raw)
    except InvalidOperation:
        raise ImproperlyConfigured(f"{name} must be a decimal amount, got {raw!r}") from None
    if not value.is_finite() or value < 0:
        raise ImproperlyConfigured(f"{name} must be a positive amount, got {raw!r}")
    return value


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in ("1", "true", "yes", "on"):
        return True
    if raw.lower() in ("0", "false", "no", "off"):
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, got {raw!r}")


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    raw = os.environ.get(name) or default
    if raw not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)}, got {raw!r}")
    return raw


def env_origins(name: str, default: str = "") -> list[str]:
    """Comma-separated origins, scheme://host[:port] each, returned as browsers send them (lower case,
    default port left out), so that every comparison with an Origin header is exact."""
    origins = []
    for raw in (o.strip() for o in env_str(name, default).split(",")):
        if raw and normalise_origin(raw) is None:
            raise ImproperlyConfigured(f"{name}: {raw!r} is not an origin like https://shop.example or "
                                       "http://localhost:8000 (http or https, no path)")
        if raw:
            origins.append(normalise_origin(raw))
    return origins


def env_proxy_ssl_header(name: str) -> tuple[str, str] | None:
    """"X-Forwarded-Proto: https" -> Django's ("HTTP_X_FORWARDED_PROTO", "https"); unset -> None."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    header, colon, value = raw.partition(":")
    header, value = header.strip(), value.strip()
    if not colon or not value or not header or not all(c.isalnum() or c == "-" for c in header):
        raise ImproperlyConfigured(f"{name} must look like 'X-Forwarded-Proto: https', got {raw!r}")
    return "HTTP_" + header.upper().replace("-", "_"), value


PRICE_SHAPE = "[input_usd_per_1m, output_usd_per_1m] or [input, output, cached_input_usd_per_1m]"


def read_price(value) -> tuple[float, ...]:
    """A model's price: input and output per 1M tokens, and optionally cached input (priced as input when
    absent); ValueError for anything else."""
    if not isinstance(value, list) or len(value) not in (2, 3):
        raise ValueError("two or three prices")
    price = tuple(float(p) for p in value)
    if min(price) < 0:
        raise ValueError("a negative price")
    return price


def env_price(name: str) -> tuple[float, ...] | None:
    """MODEL_DEFAULT_PRICE: PRICE_SHAPE, or unset."""
    raw = os.environ.get(name)
    if not raw:
        return None
    try:
        return read_price(json.loads(raw))
    except (ValueError, TypeError):
        raise ImproperlyConfigured(f"{name} must be JSON like {PRICE_SHAPE}, each at least 0, got {raw!r}") from None


def env_token_counts(name: str) -> dict[str, int]:
    """MODEL_CONTEXT_WINDOWS: {"model": tokens, ...}."""
    raw = os.environ.get(name)
    if not raw:
        return {}
    try:
        table = {str(m): int(n) for m, n in json.loads(raw).items()}
    except (ValueError, TypeError, AttributeError):
        raise ImproperlyConfigured(f'{name} must be JSON like {{"model": 128000}}, got {raw!r}') from None
    if any(n < 0 for n in table.values()):
        raise ImproperlyConfigured(f"{name}: a context window is a number of tokens, at least 0")
    return table


def env_prices(name: str) -> dict[str, tuple[float, ...]]:
    """MODEL_PRICES: {"model": PRICE_SHAPE, ...}."""
    raw = os.environ.get(name)
    if not raw:
        return {}
    try:
        return {str(m): read_price(p) for m, p in json.loads(raw).items()}
    except (ValueError, TypeError, AttributeError):
        raise ImproperlyConfigured(f'{name} must be JSON like {{"model": {PRICE_SHAPE}}}, got {raw!r}') from None


DEBUG = env_bool("DJANGO_DEBUG", True)
SECRET_KEY = env_str("DJANGO_SECRET_KEY", "dev-only-insecure-key-change-me-in-production")
if not DEBUG and SECRET_KEY.startswith("dev-only"):
    raise ImproperlyConfigured("DJANGO_SECRET_KEY must be set when DJANGO_DEBUG is off")
ALLOWED_HOSTS = [h for h in env_str("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]").split(",") if h]

# HTTPS. With DEBUG off every default is the secure one; with DEBUG on (./dev serve, plain http on
# loopback) none applies. Behind a proxy that terminates TLS, DJANGO_SECURE_PROXY_SSL_HEADER names the
# header it sets ("X-Forwarded-Proto: https"): only when the proxy overwrites whatever a client sent,
# or a client could claim https. Without it, such a proxy gets a redirect loop from SSL_REDIRECT.
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", not DEBUG)
SECURE_PROXY_SSL_HEADER = env_proxy_ssl_header("DJANGO_SECURE_PROXY_SSL_HEADER")
# HSTS: browsers that once saw it refuse plain http for this long. Including subdomains and asking to be
# preloaded are decisions about the whole domain, so they are never defaults: the deployment says so.
SECURE_HSTS_SECONDS = env_int("DJANGO_SECURE_HSTS_SECONDS", 0 if DEBUG else 365 * 24 * 3600)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_SECURE_HSTS_PRELOAD", False)
SESSION_COOKIE_SECURE = env_bool("DJANGO_SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = env_bool("DJANGO_CSRF_COOKIE_SECURE", not DEBUG)
# Other origins of this site whose forms and console may post here (e.g. the public https address when
# the proxy passes another Host); the staff websocket accepts them too (support/web/origins.py).
CSRF_TRUSTED_ORIGINS = env_origins("DJANGO_CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "corsheaders",
    "csp",
    "support",
]

MIDDLEWARE = [
    "support.web.middleware.ApiErrorsMiddleware",  # first: it rewrites any non-JSON error under /api/
    "support.web.middleware.ProfileOnceMiddleware",  # the live profile's pointer read once per request
    "django.middleware.security.SecurityMiddleware",
    "corsheaders.middleware.CorsMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
]

ROOT_URLCONF = "agentsite.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "support.web.context.desk",
            ],
        },
    },
]

WSGI_APPLICATION = "agentsite.wsgi.application"
ASGI_APPLICATION = "agentsite.asgi.application"

# Database: DATABASE_URL, e.g. postgres://app:app@127.0.0.1:5432/app; SQLite file by default.
# Connections are reused rather than opened per request, per websocket call and per task: opening one costs
# PostgreSQL a process, several round trips and a cold catalog cache. On PostgreSQL each process keeps a pool
# (DB_POOL, below); without it, a connection is kept CONN_MAX_AGE seconds by the thread that opened it, which
# daphne's per-request threads and Celery's per-task close never reuse.
DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'db.sqlite3'}"),
        conn_max_age=env_int("CONN_MAX_AGE", 60, minimum=0), conn_health_checks=True,
    )
}
# PostgreSQL: a statement that waits for a lock longer than DB_LOCK_TIMEOUT_MS, or runs longer than
# DB_STATEMENT_TIMEOUT_MS, is cancelled (0: no limit), so a request fails fast with a retryable 503
# instead of waiting as long as anyone holds a lock. Set as startup options of every connection, site and
# worker alike: a worker's statements are as short as a request's (it waits on the model outside any
# statement), and one stuck on a lock is better ended (the sweeper resumes its run) than left holding its
# own. Each process reads its own environment, so a worker or a long migration can be given other values.
DB_LOCK_TIMEOUT_MS = env_int("DB_LOCK_TIMEOUT_MS", 5000, minimum=0)
DB_STATEMENT_TIMEOUT_MS = env_int("DB_STATEMENT_TIMEOUT_MS", 30000, minimum=0)
DB_CONNECT_TIMEOUT = env_int("DB_CONNECT_TIMEOUT", 5, minimum=0)  # s; libpq counts less than 2 as 2; 0: wait
if DATABASES["default"]["ENGINE"].endswith(("postgresql", "postgis")):
    _pg_options = DATABASES["default"].setdefault("OPTIONS", {})
    _pg_options["options"] = " ".join(filter(None, [  # after any the URL carried, so these win
        _pg_options.get("options", ""),
        f"-c lock_timeout={DB_LOCK_TIMEOUT_MS}", f"-c statement_timeout={DB_STATEMENT_TIMEOUT_MS}"]))
    if DB_CONNECT_TIMEOUT:
        _pg_options.setdefault("connect_timeout", DB_CONNECT_TIMEOUT)
# PostgreSQL connection pool, one per process (psycopg's pool through Django): a request, a socket's
# database call or a run's step borrows a connection and gives it back when done, so any thread reuses any
# connection. A run gives its connection back before each model call: it holds one only while it reads or
# writes, and a process with hundreds of runs waiting on the model needs a few. Checked before each loan.
# A loan waits up to DB_POOL_TIMEOUT seconds when all DB_POOL_MAX_SIZE are out, or while the database cannot
# be reached, then fails as the database being unavailable (the API's 503, a run's retry). No thread may wait
# for another while it holds a connection. DB_POOL=false: per-thread connections (CONN_MAX_AGE).
DB_POOL = env_bool("DB_POOL", True)
DB_POOL_MIN_SIZE = env_int("DB_POOL_MIN_SIZE", 2, minimum=0)
DB_POOL_MAX_SIZE = max(env_int("DB_POOL_MAX_SIZE", 20, minimum=1), DB_POOL_MIN_SIZE)
DB_POOL_TIMEOUT = env_float("DB_POOL_TIMEOUT", 5.0, minimum=0.1)
DB_POOLED = DB_POOL and DATABASES["default"]["ENGINE"].endswith(("postgresql", "postgis"))
if DB_POOLED:
    DATABASES["default"]["OPTIONS"]["pool"] = {
        "min_size": DB_POOL_MIN_SIZE, "max_size": DB_POOL_MAX_SIZE, "timeout": DB_POOL_TIMEOUT,
        "max_idle": 300, "name": "default"}
    DATABASES["default"]["CONN_MAX_AGE"] = 0  # the pool keeps them; Django refuses both
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Runs and the web process write concurrently: wait for the lock rather than fail at once. Still
    # locked after `timeout` seconds ("database is locked"), the API answers a retryable 503. Longer than
    # PostgreSQL's DB_LOCK_TIMEOUT_MS: SQLite has one writer at a time, so every write queues for this lock.
    DATABASES["default"].setdefault("OPTIONS", {})
    DATABASES["default"]["OPTIONS"].update({"timeout": 20, "transaction_mode": "IMMEDIATE"})
    DATABASES["default"]["OPTIONS"]["init_command"] = "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test-db.sqlite3")}

# A read replica (docs/deploy.md): with DATABASE_REPLICA_URL, the reports' reads go to it through the router;
# writes and every other read stay on default. Its connection takes default's options (timeouts, pool size).
# In tests the alias mirrors default, so report reads see the test's rows.
DATABASE_REPLICA_URL = env_str("DATABASE_REPLICA_URL", "")
if DATABASE_REPLICA_URL:
    DATABASES["replica"] = dj_database_url.parse(DATABASE_REPLICA_URL, conn_max_age=DATABASES["default"]["CONN_MAX_AGE"],
                                                 conn_health_checks=True)
    if DATABASES["replica"]["ENGINE"] == DATABASES["default"]["ENGINE"]:
        _replica_options = {**DATABASES["default"].get("OPTIONS", {}), **DATABASES["replica"].get("OPTIONS", {})}
        if "pool" in _replica_options:
            _replica_options["pool"] = {**_replica_options["pool"], "name": "replica"}
        DATABASES["replica"]["OPTIONS"] = _replica_options
    DATABASES["replica"]["TEST"] = {"MIRROR": "default"}
DATABASE_ROUTERS = ["support.ops.replica.ReplicaRouter"]

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# Staff log in at /accounts/login/ and land on the console. (API calls never redirect: they answer 403.)
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/console/"

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"

# Redis: Celery's broker and the Channels layer. Default: the embedded server started by `./dev serve`.
REDIS_URL = env_str("REDIS_URL", "redis://127.0.0.1:6390/0")

# The model. With MODEL_BASE_URL unset the built-in stand-in serves it (see standin/).
MODEL_BASE_URL = env_str("MODEL_BASE_URL", "")
MODEL_API_KEY = env_str("MODEL_API_KEY", "standin-no-key-needed")
MODEL_NAME = env_str("MODEL_NAME", "sundry-standin-1")
MODEL_PRICES = {"sundry-standin-1": (0.15, 0.60, 0.075), **env_prices("MODEL_PRICES")}
# The price of a model missing from MODEL_PRICES. Unset, a run on an unpriced model is refused while a
# cost cap is set (AGENT_MAX_COST_USD=0 means no cost cap): a cap that counts $0 would never fire.
MODEL_DEFAULT_PRICE = env_price("MODEL_DEFAULT_PRICE")
# What the endpoint takes beyond the common messages (support/agent/llm.py DIALECTS): "openai" sends
# prompt_cache_key and the per-run note as a system message; "compatible" sends no extra field and the note as a
# user message (chat templates that refuse a late system message). OpenAI's API and the stand-in: openai.
MODEL_DIALECT = env_str("MODEL_DIALECT", "compatible" if MODEL_BASE_URL and "api.openai.com" not in MODEL_BASE_URL
                        else "openai")
if MODEL_DIALECT not in ("openai", "compatible"):
    raise ImproperlyConfigured(f"MODEL_DIALECT must be openai or compatible, got {MODEL_DIALECT!r}")
MODEL_CONNECT_TIMEOUT = env_float("MODEL_CONNECT_TIMEOUT", 5.0, minimum=0.1)
MODEL_READ_TIMEOUT = env_float("MODEL_READ_TIMEOUT", 30.0, minimum=0.1)
MODEL_MAX_RETRIES = env_int("MODEL_MAX_RETRIES", 3)
MODEL_MAX_RETRY_WAIT = env_float("MODEL_MAX_RETRY_WAIT", 20.0)
# `manage.py evaluate`: a model on the same endpoint asked to label a failed trial when the fixed rules can say
# no more than partial_goal (support/evaluation/triage.py). Empty: no judge, the rules alone.
EVALUATION_TRIAGE_MODEL = env_str("EVALUATION_TRIAGE_MODEL", "")
# The scenarios a draft test plays on each side (support/trials/): names or globs, comma-separated; all by default.
DRAFT_TEST_SCENARIOS = [g.strip() for g in env_str("DRAFT_TEST_SCENARIOS", "*").split(",") if g.strip()] or ["*"]
# A draft test still running this long after it started (or still queued this long after it was asked) is failed
# by the beat's sweeper, so a test whose worker died does not hold the draft for ever.
DRAFT_TEST_MAX_SECONDS = env_int("DRAFT_TEST_MAX_SECONDS", 3600, minimum=60)

# The copilot (support/copilot/, docs/copilot.md): drafts, summaries, suggestions and answers for staff. Off: every
# request for one is refused. Runs one person may ask for in an hour (counted in Redis); a run's model calls and cost.
COPILOT_ENABLED = env_bool("COPILOT_ENABLED", True)
COPILOT_PER_PERSON_PER_HOUR = env_int("COPILOT_PER_PERSON_PER_HOUR", 60, minimum=1)
COPILOT_MAX_STEPS = env_int("COPILOT_MAX_STEPS", 6, minimum=1)
COPILOT_MAX_COST_USD = env_float("COPILOT_MAX_COST_USD", 0.10)  # 0: no cost cap

# Limits of one run of the agent loop.
AGENT_MAX_STEPS = env_int("AGENT_MAX_STEPS", 12, minimum=1)
AGENT_MAX_TOKENS = env_int("AGENT_MAX_TOKENS", 200_000, minimum=1)
AGENT_MAX_COST_USD = env_float("AGENT_MAX_COST_USD", 0.50)  # 0: no cost cap
AGENT_MAX_SECONDS = env_float("AGENT_MAX_SECONDS", 300.0, minimum=1.0)
AGENT_SPIN_MAX_REPEATS = env_int("AGENT_SPIN_MAX_REPEATS", 2, minimum=1)
TOOL_OUTPUT_MAX_CHARS = env_int("TOOL_OUTPUT_MAX_CHARS", 4000, minimum=100)
# Context windows (tokens) per model, and for a model not listed; what the model reads of a long
# conversation is compacted past COMPACT_AT_SHARE of its window (0: never compact).
MODEL_CONTEXT_WINDOWS = {"sundry-standin-1": 32000, **env_token_counts("MODEL_CONTEXT_WINDOWS")}
MODEL_CONTEXT_WINDOW = env_int("MODEL_CONTEXT_WINDOW", 128000, minimum=0)
COMPACT_AT_SHARE = env_float("COMPACT_AT_SHARE", 0.6)
# Asking again for an action staff rejected (a refund on the same order, another hand-over): refused this
# many times with the reason, then the run stops as rejected_again.
AGENT_ASKS_AFTER_REJECTION = env_int("AGENT_ASKS_AFTER_REJECTION", 1)
# One conversation's budget over the last 24 hours, all its runs together (0: none): writing again
# does not buy more model spend.
CONVERSATION_MAX_STEPS_PER_DAY = env_int("CONVERSATION_MAX_STEPS_PER_DAY", 60)
CONVERSATION_MAX_TOKENS_PER_DAY = env_int("CONVERSATION_MAX_TOKENS_PER_DAY", 1_000_000)
CONVERSATION_MAX_COST_USD_PER_DAY = env_float("CONVERSATION_MAX_COST_USD_PER_DAY", 2.00)
# Messages the agent may send to sellers from one conversation in 24 hours; the same text about the same
# order is sent once.
SELLER_MESSAGES_PER_CONVERSATION_PER_DAY = env_int("SELLER_MESSAGES_PER_CONVERSATION_PER_DAY", 3, minimum=1)
# A seller asked by message_seller has this long to answer: the case waits for the seller until then
# (the run's outcome "waiting", support/desk/waiting.py).
SELLER_ANSWER_HOURS = env_float("SELLER_ANSWER_HOURS", 48.0, minimum=1.0)
# When a case's wait ends with nothing new from the customer, the beat gives it back to the agent (a run that
# checks and tells the customer) or to a person (needs a person, routed). docs/deploy.md.
WAITING_RETURNS_TO = env_choice("WAITING_RETURNS_TO", "agent", ("agent", "person"))
WAITING_SWEEP_SECONDS = env_float("WAITING_SWEEP_SECONDS", 60.0, minimum=1.0)
# Requests for a person's approval that may wait at once in one conversation; past it the model is refused and
# the conversation is flagged for a person.
APPROVALS_WAITING_PER_CONVERSATION = env_int("APPROVALS_WAITING_PER_CONVERSATION", 3, minimum=1)

# The shop's rules, enforced in code.
REFUND_CEILING = env_decimal("REFUND_CEILING", "150.00")
# Approving a refund above this (as it would run) needs the "approve large refunds" permission (Support leads).
LARGE_REFUND_THRESHOLD = env_decimal("LARGE_REFUND_THRESHOLD", "100.00")
# A staff member's own refund above this is confirmed in a dialog in the console first (the amount and the
# order said in words); the server's rules are the same either way (0: no dialog).
STAFF_REFUND_CONFIRM_ABOVE = env_decimal("STAFF_REFUND_CONFIRM_ABOVE", "100.00")
# A staff socket re-checks its session and account at least this often (and on every frame it receives).
STAFF_SOCKET_RECHECK_SECONDS = env_float("STAFF_SOCKET_RECHECK_SECONDS", 30.0, minimum=1.0)
# Routing (support/desk/routing.py, docs/console.md#routing): a staff member counts as online while a console
# socket of theirs is open; each socket renews its mark in Redis every third of this, and a mark not renewed
# (a process that died) lapses after it.
STAFF_PRESENCE_SECONDS = env_float("STAFF_PRESENCE_SECONDS", 60.0, minimum=3.0)

# Traces (support/ops/tracing.py, docs/observability.md): on when an OTLP endpoint is named with the standard
# OpenTelemetry variables (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT; OTEL_SERVICE_NAME
# names the service), off otherwise: then nothing beyond the OpenTelemetry API is loaded. TRACE_CONTENT=true
# puts message text, tool arguments and results in spans (truncated to TRACE_CONTENT_MAX_CHARS, e-mail
# addresses masked); TRACE_URL ("https://tempo.example/trace/{trace_id}") links a run's trace from the console.
TRACING = bool(os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) \
    and not env_bool("OTEL_SDK_DISABLED", False)
OTEL_SERVICE_NAME = env_str("OTEL_SERVICE_NAME", "sundry-support-desk")
TRACE_CONTENT = env_bool("TRACE_CONTENT", False)
TRACE_CONTENT_MAX_CHARS = env_int("TRACE_CONTENT_MAX_CHARS", 1000, minimum=1)
TRACE_URL = env_str("TRACE_URL", "")
if TRACE_URL and "{trace_id}" not in TRACE_URL:
    raise ImproperlyConfigured("TRACE_URL must contain {trace_id}, e.g. http://127.0.0.1:16686/trace/{trace_id}")

# Logs (support/ops/log_context.py): LOG_FORMAT=json writes one JSON object per line for a log collector, plain
# is text for a terminal; both carry the request id, conversation, run and task a line was written for.
# Celery's own lines are given the same format by agentsite/celery.py.
LOG_LEVEL = env_str("LOG_LEVEL", "INFO").upper()
LOG_FORMAT = env_str("LOG_FORMAT", "plain")
if LOG_FORMAT not in ("plain", "json"):
    raise ImproperlyConfigured(f"LOG_FORMAT must be plain or json, got {LOG_FORMAT!r}")
if LOG_LEVEL not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
    raise ImproperlyConfigured(f"LOG_LEVEL must be DEBUG, INFO, WARNING, ERROR or CRITICAL, got {LOG_LEVEL!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"context": {"()": "support.ops.log_context.ContextFilter"}},
    "formatters": {"plain": {"()": "support.ops.log_context.PlainFormatter"},
                   "json": {"()": "support.ops.log_context.JsonFormatter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT, "filters": ["context"]}},
    "loggers": {
        # propagate off: a worker's root logger has Celery's handler, which would print each line twice
        "support": {"handlers": ["console"], "level": LOG_LEVEL, "propagate": False},
        # a 500's traceback, with DEBUG off too (Django's own handler prints it only with DEBUG on)
        "django.request": {"handlers": ["console"], "level": "ERROR", "propagate": False},
        "daphne": {"handlers": ["console"], "level": "WARNING", "propagate": False},
    },
}

# Customer messages.
MAX_MESSAGE_BYTES = env_int("MAX_MESSAGE_BYTES", 4000, minimum=1)
MESSAGES_PER_MINUTE = env_int("MESSAGES_PER_MINUTE", 10, minimum=1)

# Runs in the background.
RUN_STALE_SECONDS = env_float("RUN_STALE_SECONDS", 90.0, minimum=1.0)  # no heartbeat for this long: resume
RUN_MAX_ATTEMPTS = env_int("RUN_MAX_ATTEMPTS", 3, minimum=1)  # claims before a run stops as "stalled"
RUN_HEARTBEAT_SECONDS = env_float("RUN_HEARTBEAT_SECONDS", 5.0, minimum=0.0)
RUN_SWEEP_SECONDS = env_float("RUN_SWEEP_SECONDS", 10.0, minimum=0.5)
if RUN_STALE_SECONDS <= RUN_HEARTBEAT_SECONDS:
    raise ImproperlyConfigured("RUN_STALE_SECONDS must be longer than RUN_HEARTBEAT_SECONDS")
# Fault injection for recovery tests, "tool_name:seconds" (empty: off): a pause before that tool runs, or
# after its effect inside the transaction that commits it with its result.
FAULT_PAUSE_BEFORE_TOOL = env_str("FAULT_PAUSE_BEFORE_TOOL", "")
FAULT_PAUSE_AFTER_TOOL = env_str("FAULT_PAUSE_AFTER_TOOL", "")

# Approvals.
APPROVAL_TIMEOUT_SECONDS = env_float("APPROVAL_TIMEOUT_SECONDS", 24 * 3600.0, minimum=1.0)
AUTO_APPROVE_REFUNDS_UP_TO = env_decimal("AUTO_APPROVE_REFUNDS_UP_TO", "0")  # 0: every refund waits for a person
# Four eyes: a refund above this (the agent's, a gated MCP tool's amount, a staff member's own) needs two
# different people: the first approval leaves it waiting for a second (0 or empty: off).
SECOND_APPROVAL_ABOVE = env_decimal("SECOND_APPROVAL_ABOVE", "0")
# The agent profile (support/profiles/): publishing a draft needs a second person with the permission to confirm
# it, after the first asked (four eyes on what shapes the agent).
PROFILE_PUBLISH_NEEDS_TWO = env_bool("PROFILE_PUBLISH_NEEDS_TWO", False)
# Deadlines (support/desk/deadlines.py): a pending approval's time runs from its request to its expiry. Past
# this fraction of it the conversation's assignee (else the staff who may decide) is reminded, once; past the
# second, the support leads are told, once. NUDGE_SWEEP_SECONDS: how often the beat looks.
APPROVAL_REMIND_AT = env_float("APPROVAL_REMIND_AT", 0.5)
APPROVAL_ESCALATE_AT = env_float("APPROVAL_ESCALATE_AT", 0.8)
if not 0 < APPROVAL_REMIND_AT <= APPROVAL_ESCALATE_AT < 1:
    raise ImproperlyConfigured("APPROVAL_REMIND_AT and APPROVAL_ESCALATE_AT must be fractions of the time to expiry, "
                               "0 < APPROVAL_REMIND_AT <= APPROVAL_ESCALATE_AT < 1")
APPROVAL_NUDGE_SWEEP_SECONDS = env_float("APPROVAL_NUDGE_SWEEP_SECONDS", 60.0, minimum=1.0)
# The agent's hand-over (escalate_to_human) goes straight to a person's queue; true: a person confirms it first.
ESCALATION_NEEDS_APPROVAL = env_bool("ESCALATION_NEEDS_APPROVAL", False)

# Which shop the desk reads orders from and writes refunds and seller messages to (support/shop/): "demo" is
# the demo shop in this database, "http" any shop that serves the shop contract (docs/shop-contract.md),
# "shopify" a Shopify store through its Admin GraphQL API. docs/connect-a-shop.md explains each.
SHOP_BACKEND = env_choice("SHOP_BACKEND", "demo", ("demo", "http", "shopify"))  # support/shop/__init__.py
# A shop over HTTP: its base URL and the key the desk signs each request with (the shop may accept two, for
# rotation: give it the new key, then the desk, then retire the old one at the shop).
SHOP_URL = env_str("SHOP_URL", "")
SHOP_API_KEY = env_str("SHOP_API_KEY", "")
# The shop contract's version the desk signs with: 2 signs the Idempotency-Key and a nonce used once
# (docs/shop-contract.md); 1 only for a shop not moved yet, and `manage.py check` warns while it is set.
SHOP_CONTRACT_VERSION = int(env_choice("SHOP_CONTRACT_VERSION", "2", ("1", "2")))
# With DEBUG off the desk sends keys and customers' data (SHOP_URL, SHOPIFY_SHOP_DOMAIN, MCP_SERVERS' urls)
# over https only; these hosts, comma-separated, on a private network of the operator's, over plain http too
# (support/ops/outbound.py). Empty: none.
PLAIN_HTTP_PRIVATE_HOSTS = [h.strip().lower() for h in env_str("PLAIN_HTTP_PRIVATE_HOSTS", "").split(",") if h.strip()]
# Tool servers (Model Context Protocol) the agent may use besides the shop: agentsite/mcp_settings.py.
MCP_SERVERS = env_mcp_servers("MCP_SERVERS")
# Shopify: the store's domain ("sundry.myshopify.com"), the custom app's Admin API access token, and the API
# version every request names (pinned: a new version is a change to test, not something to drift into).
SHOPIFY_SHOP_DOMAIN = env_str("SHOPIFY_SHOP_DOMAIN", "")
SHOPIFY_ACCESS_TOKEN = env_str("SHOPIFY_ACCESS_TOKEN", "")
SHOPIFY_API_VERSION = env_str("SHOPIFY_API_VERSION", "2026-01")
# A Shopify store is a single-brand store: no sellers, so the agent is not offered message_seller and is told
# of no marketplace. On a store whose vendors are marketplace sellers, true: each order's seller is its
# vendor, and seller messages are kept as order metafields (docs/shopify.md).
SHOPIFY_VENDORS_ARE_SELLERS = env_bool("SHOPIFY_VENDORS_ARE_SELLERS", False)
# Any remote shop: how long to wait to connect and for an answer; how often a read is tried again (a write is
# never repeated blindly); the longest wait a Retry-After may ask for; after how many failures in a row the
# desk stops calling the shop, and for how long before it tries one call again.
SHOP_CONNECT_TIMEOUT_SECONDS = env_float("SHOP_CONNECT_TIMEOUT_SECONDS", 3.0, minimum=0.05)
SHOP_READ_TIMEOUT_SECONDS = env_float("SHOP_READ_TIMEOUT_SECONDS", 10.0, minimum=0.05)
# And every answer bounded whatever the shop does: at most this many bytes (after any decoding), read whole
# within this many seconds from the request (a shop dribbling bytes is cut off); Shopify is asked for at most
# this many pages of a customer's orders (3 orders a page; the newest come first).
SHOP_MAX_ANSWER_BYTES = env_int("SHOP_MAX_ANSWER_BYTES", 4_000_000, minimum=1000)
SHOP_ANSWER_DEADLINE_SECONDS = env_float("SHOP_ANSWER_DEADLINE_SECONDS", 20.0, minimum=0.1)
SHOPIFY_MAX_ORDER_PAGES = env_int("SHOPIFY_MAX_ORDER_PAGES", 10, minimum=1)

# manage.py import_policies: the largest page or file it reads, and how long it waits on a web page.
POLICY_IMPORT_MAX_BYTES = env_int("POLICY_IMPORT_MAX_BYTES", 1_000_000, minimum=1000)
POLICY_IMPORT_TIMEOUT_SECONDS = env_float("POLICY_IMPORT_TIMEOUT_SECONDS", 10.0, minimum=0.05)
# Off: a URL whose host is (or resolves to) a loopback, private or link-local address is refused. On only for an
# operator whose policy pages are served on their own private network.
POLICY_IMPORT_PRIVATE_NETWORK = env_bool("POLICY_IMPORT_PRIVATE_NETWORK", False)
SHOP_READ_RETRIES = env_int("SHOP_READ_RETRIES", 2)
SHOP_RETRY_MAX_WAIT_SECONDS = env_float("SHOP_RETRY_MAX_WAIT_SECONDS", 5.0)
SHOP_CIRCUIT_FAILURES = env_int("SHOP_CIRCUIT_FAILURES", 5, minimum=1)
SHOP_CIRCUIT_RESET_SECONDS = env_float("SHOP_CIRCUIT_RESET_SECONDS", 30.0, minimum=0.1)

# Who the customer is: the shop signs the customer's e-mail with this key (see support/customers/identity.py).
# The shop holds it, so it must tell nothing of SECRET_KEY, which signs sessions and conversation tokens:
# with DEBUG off it is set on its own; with DEBUG on an HMAC of SECRET_KEY stands in, which is one-way.
SHOP_SIGNING_KEY = env_str("SHOP_SIGNING_KEY", "")
if not SHOP_SIGNING_KEY and not DEBUG:
    raise ImproperlyConfigured("SHOP_SIGNING_KEY must be set when DJANGO_DEBUG is off: a random key of its own "
                               "(e.g. python -c 'import secrets; print(secrets.token_urlsafe(48))'), given to the shop")
if not SHOP_SIGNING_KEY:
    SHOP_SIGNING_KEY = hmac.new(SECRET_KEY.encode(), b"agentsite.shop-signing-key", hashlib.sha256).hexdigest()
if SECRET_KEY and SECRET_KEY in SHOP_SIGNING_KEY:
    raise ImproperlyConfigured("SHOP_SIGNING_KEY must not contain DJANGO_SECRET_KEY: whoever holds the shop's key "
                               "would hold the site's")
if not DEBUG and len(SHOP_SIGNING_KEY) < 32:
    raise ImproperlyConfigured("SHOP_SIGNING_KEY must be at least 32 characters: one signed token must not let "
                               "anyone guess it")
CONVERSATION_TOKEN_MAX_AGE = env_int("CONVERSATION_TOKEN_MAX_AGE", 30 * 24 * 3600, minimum=60)

# -- Rate limits, lock-outs and sign-in codes (support/ops/limits.py, support/customers/signin.py) ------------------
# Sliding windows counted in Redis, so every site process shares them and a restart keeps them.
LIMITS_REDIS_URL = env_str("LIMITS_REDIS_URL", REDIS_URL)
# Not a knob: the evaluation sets it per trial so that each trial counts from zero, apart from the site's counters.
LIMITS_SCOPE = ""
# Whose address a limit counts: the socket peer; behind N proxies of ours that each append the address
# they saw to CLIENT_ADDRESS_HEADER, set TRUSTED_PROXIES=N (anything left of those N is the client's word).
TRUSTED_PROXIES = env_int("TRUSTED_PROXIES", 0)
CLIENT_ADDRESS_HEADER = env_str("CLIENT_ADDRESS_HEADER", "X-Forwarded-For")
# Messages per minute (per conversation: MESSAGES_PER_MINUTE above), per customer and per address.
CUSTOMER_MESSAGES_PER_MINUTE = env_int("CUSTOMER_MESSAGES_PER_MINUTE", 20, minimum=1)
ADDRESS_MESSAGES_PER_MINUTE = env_int("ADDRESS_MESSAGES_PER_MINUTE", 60, minimum=1)
CUSTOMER_CONVERSATIONS_PER_HOUR = env_int("CUSTOMER_CONVERSATIONS_PER_HOUR", 30, minimum=1)
ADDRESS_CONVERSATIONS_PER_HOUR = env_int("ADDRESS_CONVERSATIONS_PER_HOUR", 60, minimum=1)
ADDRESS_SOCKETS_PER_MINUTE = env_int("ADDRESS_SOCKETS_PER_MINUTE", 60, minimum=1)
# Wrong order numbers: per address and e-mail and per address in 15 minutes, per e-mail in an hour. Past any of
# them an order number alone no longer signs in, and nothing is looked up: the customer asks for a code
# (support/customers/signin.py). Wrong codes: the same per address and e-mail and per address, never per e-mail
# (a stranger's wrong codes must not lock the owner out); codes e-mailed are capped per e-mail instead.
SIGNIN_FAILURES_PER_ADDRESS_AND_EMAIL = env_int("SIGNIN_FAILURES_PER_ADDRESS_AND_EMAIL", 5, minimum=1)
SIGNIN_FAILURES_PER_ADDRESS = env_int("SIGNIN_FAILURES_PER_ADDRESS", 20, minimum=1)
SIGNIN_FAILURES_PER_EMAIL = env_int("SIGNIN_FAILURES_PER_EMAIL", 10, minimum=1)
SIGNIN_CODE_SENDS_PER_EMAIL = env_int("SIGNIN_CODE_SENDS_PER_EMAIL", 5, minimum=1)  # per hour
SIGNIN_CODE_REQUESTS_PER_ADDRESS = env_int("SIGNIN_CODE_REQUESTS_PER_ADDRESS", 10, minimum=1)  # per hour, any e-mail
SIGNIN_CODE_TTL = env_int("SIGNIN_CODE_TTL", 15 * 60, minimum=60)  # seconds a code stays valid
# Failed sign-ins (refused ones included) for one e-mail or from one address in an hour that raise the alert on
# persistent guessing: logged at ERROR on support.security and counted in desk_signin_guessing_alerts_total.
SIGNIN_GUESSING_ALERT_PER_HOUR = env_int("SIGNIN_GUESSING_ALERT_PER_HOUR", 50, minimum=1)
# E-mail (sign-in codes): printed on the console unless EMAIL_HOST names an SMTP server.
EMAIL_HOST = env_str("EMAIL_HOST", "")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10, minimum=1)
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend" if EMAIL_HOST
                        else "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "Sundry support <support@sundry.example>")

# -- Reaching a customer who left the page (support/customers/notify.py, support/web/views/links.py) --------------------
# The desk's public address, for the links in e-mails (the beat sends them: there is no request to read it from).
DESK_PUBLIC_URL = env_str("DESK_PUBLIC_URL", "http://127.0.0.1:8000").rstrip("/")
# A reply (the agent's or a person's) the customer has not seen is e-mailed once it is this old and the
# customer's widget has not been connected for as long; every reply waiting then goes in the same e-mail.
REPLY_EMAILS = env_bool("REPLY_EMAILS", True)
REPLY_EMAIL_AFTER_MINUTES = env_float("REPLY_EMAIL_AFTER_MINUTES", 10.0)
REPLY_EMAIL_SWEEP_SECONDS = env_float("REPLY_EMAIL_SWEEP_SECONDS", 60.0, minimum=1.0)  # how often the beat looks
REPLY_EMAIL_WITHIN_HOURS = env_float("REPLY_EMAIL_WITHIN_HOURS", 24.0, minimum=1.0)  # older replies: never e-mailed
# How long an e-mailed link opens its conversation (revocable sooner: support.customers.notify.links_revoke).
CONVERSATION_LINK_MAX_AGE = env_int("CONVERSATION_LINK_MAX_AGE", 90 * 24 * 3600, minimum=60)
# An open customer socket tells the database it is there at most this often (its resume and close, always).
CUSTOMER_PRESENCE_SECONDS = env_float("CUSTOMER_PRESENCE_SECONDS", 30.0, minimum=1.0)

# -- Customers who write by e-mail (support/desk/inbound_mail.py, docs/email.md) -----------------------------------------
# The address customers write to; the desk's mails carry a signed reply address made from it
# ("support@shop.example" -> "support+<signed>@shop.example"). Empty: the desk reads no mail.
INBOUND_EMAIL_ADDRESS = env_str("INBOUND_EMAIL_ADDRESS", "")
INBOUND_EMAIL_MAX_BYTES = env_int("INBOUND_EMAIL_MAX_BYTES", 15 * 1024 * 1024, minimum=1024)  # larger: refused
INBOUND_EMAILS_PER_SENDER_PER_HOUR = env_int("INBOUND_EMAILS_PER_SENDER_PER_HOUR", 20, minimum=1)
# Conversations started by e-mail in an hour, all senders together: a flood of forged senders is a flood of runs.
INBOUND_EMAIL_CONVERSATIONS_PER_HOUR = env_int("INBOUND_EMAIL_CONVERSATIONS_PER_HOUR", 200, minimum=1)
# A reply address works this long after the mail that carried it (and until the conversation's links are revoked).
INBOUND_REPLY_ADDRESS_MAX_AGE = env_int("INBOUND_REPLY_ADDRESS_MAX_AGE", 180 * 24 * 3600, minimum=60)
# Way in 1: a provider's inbound webhook (/email/inbound/<provider>/), on only when its basic-auth secret is set.
INBOUND_WEBHOOK_SECRET = env_str("INBOUND_WEBHOOK_SECRET", "")  # "user:password", as the provider is told
INBOUND_MAILGUN_SIGNING_KEY = env_str("INBOUND_MAILGUN_SIGNING_KEY", "")  # Mailgun also signs each post
ANYMAIL = {"WEBHOOK_SECRET": INBOUND_WEBHOOK_SECRET, "MAILGUN_WEBHOOK_SIGNING_KEY": INBOUND_MAILGUN_SIGNING_KEY}
# Way in 2: a mailbox the beat reads over IMAP every INBOUND_IMAP_POLL_SECONDS (on when INBOUND_IMAP_HOST is set).
INBOUND_IMAP_HOST = env_str("INBOUND_IMAP_HOST", "")
INBOUND_IMAP_PORT = env_int("INBOUND_IMAP_PORT", 993, minimum=1)
INBOUND_IMAP_SSL = env_bool("INBOUND_IMAP_SSL", True)
INBOUND_IMAP_USER = env_str("INBOUND_IMAP_USER", "")
INBOUND_IMAP_PASSWORD = env_str("INBOUND_IMAP_PASSWORD", "")
INBOUND_IMAP_FOLDER = env_str("INBOUND_IMAP_FOLDER", "INBOX")
INBOUND_IMAP_POLL_SECONDS = env_float("INBOUND_IMAP_POLL_SECONDS", 60.0, minimum=5.0)

# -- Deciding away from the console: e-mailed links and Slack (docs/console.md#deciding-from-an-e-mail-or-from-slack) --
# Each approval request is e-mailed to the staff opted in at /admin/ ("approval e-mails") who may decide it,
# with a link per verdict for that person only: it opens a page to confirm on, works once, for this long.
APPROVAL_EMAILS = env_bool("APPROVAL_EMAILS", True)
APPROVAL_LINK_MAX_AGE = env_int("APPROVAL_LINK_MAX_AGE", 24 * 3600, minimum=60)
# Staff invitations (support/team/invitations.py): how long an e-mailed link to set a password works (once), and
# how many invitations (resends included) one person may send an hour.
STAFF_INVITATION_MAX_AGE = env_int("STAFF_INVITATION_MAX_AGE", 3 * 24 * 3600, minimum=60)
STAFF_INVITATIONS_PER_HOUR = env_int("STAFF_INVITATIONS_PER_HOUR", 20, minimum=1)
# Slack: each approval request is posted to this channel with Approve and Reject buttons; off unless all three
# are set. Slack calls /slack/interactive/, signed with the signing secret (support/web/views/slack.py).
SLACK_BOT_TOKEN = env_str("SLACK_BOT_TOKEN", "")
SLACK_SIGNING_SECRET = env_str("SLACK_SIGNING_SECRET", "")
SLACK_APPROVALS_CHANNEL = env_str("SLACK_APPROVALS_CHANNEL", "")
# Slack's Web API, empty for the real one; tests point it at a local stand-in of Slack's endpoints.
SLACK_API_URL = env_str("SLACK_API_URL", "")
SLACK_TIMEOUT_SECONDS = env_float("SLACK_TIMEOUT_SECONDS", 5.0, minimum=0.1)

# Celery: Redis broker; a run is acknowledged only when its task ends, so a lost worker's run is redelivered.
CELERY_BROKER_URL = REDIS_URL
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 3600, minimum=10)}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A conversation nobody wrote in (only its system prompt) is deleted once this old, by the hourly beat task
# below. The widget makes none (its first message creates the conversation); an API client may.
EMPTY_CONVERSATION_HOURS = env_float("EMPTY_CONVERSATION_HOURS", 24.0, minimum=1.0)
# Reports (docs/reports.md): a conversation with no message for this long counts as done (resolved or abandoned).
REPORTS_IDLE_HOURS = env_float("REPORTS_IDLE_HOURS", 24.0, minimum=1.0)
# The morning digest (docs/reports.md) is sent from this hour on (0-23, the desk's TIME_ZONE).
REPORTS_DIGEST_HOUR = min(env_int("REPORTS_DIGEST_HOUR", 7, minimum=0), 23)
CELERY_BEAT_SCHEDULE = {
    "sweep-runs": {"task": "support.tasks.sweep", "schedule": RUN_SWEEP_SECONDS},
    "reply-emails": {"task": "support.tasks.send_reply_emails", "schedule": REPLY_EMAIL_SWEEP_SECONDS},
    "attachment-orphans": {"task": "support.tasks.sweep_attachment_orphans", "schedule": 3600},
    # Conversations nobody wrote in (an API client opened one and left), once EMPTY_CONVERSATION_HOURS old.
    "empty-conversations": {"task": "support.tasks.delete_empty_conversations", "schedule": 3600},
    "approval-nudges": {"task": "support.tasks.nudge_approvals", "schedule": APPROVAL_NUDGE_SWEEP_SECONDS},
    "waits-ended": {"task": "support.tasks.end_waits", "schedule": WAITING_SWEEP_SECONDS},
    # The reports' daily roll-up (docs/reports.md): hourly, so the first run after a day closes writes it.
    "reports-roll-up": {"task": "support.tasks.roll_up_reports", "schedule": 3600},
    # Yesterday's provisional figures (docs/reports.md): counted again every 5 minutes, the page shows as of when.
    "reports-provisional": {"task": "support.tasks.refresh_provisional_reports", "schedule": 300},
    # The morning digest to the leads who asked for it, once each a day from REPORTS_DIGEST_HOUR on.
    "reports-digest": {"task": "support.tasks.send_report_digests", "schedule": 300},
}
if INBOUND_IMAP_HOST:
    CELERY_BEAT_SCHEDULE["inbound-mailbox"] = {"task": "support.tasks.poll_mailbox", "schedule": INBOUND_IMAP_POLL_SECONDS}

# Channels: events go through Redis to every daphne process.
# Redis pub/sub (support/live/channel_layer.py): an event to a group is one PUBLISH, and each site process holds one subscription
# connection for all its sockets. Nothing is stored on the way: an event nobody listens for is gone, which
# is what the live UIs need (what they miss while disconnected, they replay from the database).
# Measured against channels_redis' list-based layer: 0.17 against 0.92 ms of CPU per event sent and received.
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "support.live.channel_layer.PubSubChannelLayer",
        # socket_timeout None: the subscription connection stays open however long the site is idle
        # (redis-py 8 would otherwise time an idle socket out after 5 s).
        "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": None}]},
    }
}

# Origins of shop pages that embed the widget (its websocket checks them), e.g. "https://shop.example".
# Compared whole with the page's Origin (scheme, host and port), as CORS compares them too.
WIDGET_ALLOWED_ORIGINS = env_origins("WIDGET_ALLOWED_ORIGINS")
# The customer API answers those shops' pages too: bearer tokens, never cookies, so no credentials.
CORS_ALLOWED_ORIGINS = WIDGET_ALLOWED_ORIGINS
CORS_URLS_REGEX = r"^/api/(conversations|widget$)"
CORS_ALLOW_HEADERS = ["authorization", "content-type"]
CORS_ALLOW_CREDENTIALS = False

# Content Security Policy on every page: no inline script or style, nothing loaded from elsewhere, so
# untrusted text that slipped into markup still could not run.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'", "ws:", "wss:"] if DEBUG else ["'self'", "wss:"],
        "font-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    },
}
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_SAMESITE = "Lax"

# -- Operations: probes, metrics, request ids (support/ops/health.py, support/ops/metrics.py, docs/deploy.md) ----
# The probes and /metrics are answered first (support/ops/health.py says why), then every request gets its id.
MIDDLEWARE = ["support.ops.log_context.RequestContextMiddleware", "support.ops.health.ProbeMiddleware", *MIDDLEWARE]
# /metrics asks for this bearer token (Prometheus: authorization: credentials: ...). Required with DEBUG off:
# the counters name conversations' states and the desk's load, and a balancer's path rule alone can be
# walked around (an encoded path reaches the same view). Open without a token only in development.
METRICS_TOKEN = env_str("METRICS_TOKEN", "")
if not DEBUG and len(METRICS_TOKEN) < 16:
    raise ImproperlyConfigured("METRICS_TOKEN must be set when DJANGO_DEBUG is off: 16 or more random characters, "
                               "the bearer token Prometheus sends to /metrics")
# A Celery worker serves its own /metrics on this port (0: none); several workers on one machine need one
# port each. On WORKER_METRICS_HOST: loopback by default, the address Prometheus reaches in a deployment.
WORKER_METRICS_PORT = env_int("WORKER_METRICS_PORT", 0)
WORKER_METRICS_HOST = env_str("WORKER_METRICS_HOST", "127.0.0.1")
# Nothing of the desk is kept in one process: sessions are in the database, limits and events in Redis.
# Django's cache (nothing uses it today) is Redis too, so whatever is cached later is shared by every
# process, as sessions and limits are, rather than a per-process memory that a balancer would split.
CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL,
                      "KEY_PREFIX": "desk-cache", "TIMEOUT": 300}}

# -- The customer's language, ratings, "is typing" (support/customers/languages.py, support/web/views/feedback.py) -----
# The languages the desk writes its fixed texts to customers in (hand-over notices, a person joining: the
# catalogues are support/locale/) and the widget speaks (its own catalogue). The first is the default.
# Each conversation stores its customer's language, from the widget (data-lang, else the browser's).
LANGUAGES = [("en", "English"), ("de", "Deutsch")]

# -- Customer attachments: photos and PDFs from the widget (support/customers/attachments.py) ----------------------
# Checked by content on the server (Pillow opens and re-encodes photos, stripping EXIF and any metadata;
# PDFs: the %PDF header), stored through the "attachments" storage below, served only through signed URLs
# that expire after ATTACHMENT_URL_MAX_AGE seconds (to the conversation's customer, and to staff with a
# staff session). Never under a public media URL.
ATTACHMENT_MAX_BYTES = env_int("ATTACHMENT_MAX_BYTES", 10 * 1024 * 1024, minimum=1)  # per file
ATTACHMENTS_PER_MESSAGE = env_int("ATTACHMENTS_PER_MESSAGE", 4, minimum=1)
ATTACHMENTS_PER_CONVERSATION = env_int("ATTACHMENTS_PER_CONVERSATION", 20, minimum=1)
ATTACHMENT_BYTES_PER_CONVERSATION = env_int("ATTACHMENT_BYTES_PER_CONVERSATION", 50 * 1024 * 1024, minimum=1)
# What a photo may cost to decode in the web process (support/customers/photos.py): its width x height, and
# (past a 4K screen's 8.3 MP) its pixels per byte of file, so that a small file cannot declare a large
# canvas. A phone's photo is 12 MP (24 on some) in 2-5 MB, 2 to 6 pixels per byte; a nearly blank 4K
# screenshot about 200 (it is under 8.3 MP); a flat canvas made to be decoded hundreds to thousands.
ATTACHMENT_MAX_PIXELS = env_int("ATTACHMENT_MAX_PIXELS", 25_000_000, minimum=1)
ATTACHMENT_MAX_PIXELS_PER_BYTE = env_int("ATTACHMENT_MAX_PIXELS_PER_BYTE", 100, minimum=1)
# Photos decoded at once per web process (each holds up to ~100 MB while it is), and how long an upload
# waits for one before it is refused (503 "busy", to be sent again).
ATTACHMENT_IMAGE_SLOTS = env_int("ATTACHMENT_IMAGE_SLOTS", 2, minimum=1)
ATTACHMENT_IMAGE_WAIT = env_float("ATTACHMENT_IMAGE_WAIT", 5.0, minimum=0.0)
ATTACHMENT_UPLOADS_PER_HOUR = env_int("ATTACHMENT_UPLOADS_PER_HOUR", 30, minimum=1)  # per client address
ATTACHMENT_URL_MAX_AGE = env_int("ATTACHMENT_URL_MAX_AGE", 1800, minimum=30)
# Whether the configured model reads images: true sends the newest MODEL_IMAGES_PER_REQUEST photos of the
# conversation as image parts; false (or older photos) as a text note ("customer attached photo IMG-3F2A ...").
MODEL_ACCEPTS_IMAGES = env_bool("MODEL_ACCEPTS_IMAGES", False)
MODEL_IMAGES_PER_REQUEST = env_int("MODEL_IMAGES_PER_REQUEST", 4, minimum=0)


def env_storage(name: str, default: dict) -> dict:
    """A storage backend as JSON, {"BACKEND": "dotted.path", "OPTIONS": {...}}, or the default."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = json.loads(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be JSON like {{\"BACKEND\": \"...\", \"OPTIONS\": {{}}}}") from None
    if not isinstance(value, dict) or not isinstance(value.get("BACKEND"), str):
        raise ImproperlyConfigured(f"{name} must be a JSON object with a BACKEND, got {raw!r}")
    return value


STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage",
                "OPTIONS": {"location": str(VAR_DIR / "media")}},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    # Local files under VAR_DIR/media/attachments by default; any Django storage backend by configuration.
    "attachments": env_storage("ATTACHMENTS_STORAGE", {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(VAR_DIR / "media" / "attachments")}}),
}
