"""Draft tests: started by a person (refused while one of the same draft runs), played by a worker through
`manage.py evaluate` in a child process per side, progress written as it goes, the two reports kept as files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from agentsite.celery import app
from support.models import DraftTest, ProfileVersion
from support.profiles import CHANGE_AGENT_PROFILE, selectors

TEST_DRAFT = "support.tasks.test_draft"
STAND_IN = "sundry-standin-1"
SIDES = ("draft", "live")


class DraftTestRefused(Exception):
    """A test not started, in plain words; `status` as an HTTP answer would give it, `code` for programs."""

    def __init__(self, message: str, *, status: int = 409, code: str = "conflict"):
        super().__init__(message)
        self.status, self.code = status, code


@dataclass(frozen=True)
class Estimate:
    """What a test on the configured model may cost: `usd` None when no estimate is possible, `why` says why."""

    model: str
    usd: Decimal | None
    why: str


def folder(test: DraftTest) -> Path:
    return Path(settings.VAR_DIR) / "evaluation" / "draft-tests" / str(test.public_id)


def report_paths(test: DraftTest) -> dict[str, Path]:
    """The JSON report of each side (the HTML one beside it, with .html)."""
    return {side: folder(test) / f"{side}.json" for side in SIDES}


def draft_test_estimate() -> Estimate:
    """Both sides on the configured model: the latest evaluation report's tokens per trial of each scenario, twice,
    at MODEL_NAME's price (MODEL_PRICES, else MODEL_DEFAULT_PRICE)."""
    model = settings.MODEL_NAME
    price = settings.MODEL_PRICES.get(model) or settings.MODEL_DEFAULT_PRICE
    if not settings.MODEL_BASE_URL:
        return Estimate(model, None, "No model is configured (MODEL_BASE_URL is unset): the stand-in is the model, "
                                     "and it costs nothing.")
    if price is None:
        return Estimate(model, None, f"No estimate is possible: {model} has no price (MODEL_PRICES or "
                                     "MODEL_DEFAULT_PRICE).")
    try:
        report = json.loads((Path(settings.VAR_DIR) / "evaluation" / "report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return Estimate(model, None, "No estimate is possible: no evaluation has run on this desk yet, so there are "
                                     "no token counts to go by.")
    prompt = completion = 0.0
    for scenario in report.get("scenarios") or []:
        runs = [r for r in scenario.get("runs") or [] if not r.get("skipped")]
        if runs:
            prompt += sum(r.get("prompt_tokens") or 0 for r in runs) / len(runs)
            completion += sum(r.get("completion_tokens") or 0 for r in runs) / len(runs)
    usd = len(SIDES) * (prompt * price[0] + completion * price[1]) / 1_000_000
    return Estimate(model, Decimal(str(round(usd, 4))),
                    f"About {usd:.4f} USD: {len(SIDES)} × {prompt + completion:,.0f} tokens (the latest evaluation's, "
                    f"per trial of each scenario) at {model}'s price. A real model may use more or fewer.")


def draft_test_start(*, by, use_model: bool = False, confirmed: bool = False) -> DraftTest:
    """Queue a test of the current draft against the live version. On the configured model only once its
    estimate was shown and confirmed (`confirmed`). A second test of the same draft while one runs is refused."""
    if by is None or not by.has_perm(CHANGE_AGENT_PROFILE):
        raise DraftTestRefused("Testing a draft needs the permission “change the agent profile” "
                               f"({CHANGE_AGENT_PROFILE}).", status=403, code="forbidden")
    draft = selectors.draft()
    if draft is None:
        raise DraftTestRefused("There is no draft to test.", status=404, code="not_found")
    use_model = use_model and bool(settings.MODEL_BASE_URL)
    estimate = draft_test_estimate() if use_model else None
    if use_model and not confirmed:
        raise DraftTestRefused(f"Confirm the estimated cost first. {estimate.why}", code="confirm_estimate")
    try:
        with transaction.atomic():
            test = DraftTest.objects.create(
                asked_by=by, draft=draft, draft_revision=draft.revision, draft_data=draft.data,
                live_version_id=selectors.live_version_id(), model=settings.MODEL_NAME if use_model else STAND_IN,
                uses_stand_in=not use_model, estimate_usd=estimate.usd if estimate else None)
    except IntegrityError:
        raise DraftTestRefused("This draft is being tested already; wait for that test to finish.",
                               code="already_testing") from None
    transaction.on_commit(lambda: app.send_task(TEST_DRAFT, args=[test.pk]))
    return test


def draft_test_execute(test_id: int) -> str:
    """Play the test claimed from the queue (a duplicate delivery finds nothing to claim): each side in a child
    process, progress counted from its lines; the test ends finished, or failed with the reason."""
    if not DraftTest.objects.filter(pk=test_id, state=DraftTest.QUEUED).update(state=DraftTest.RUNNING,
                                                                            started_at=timezone.now()):
        return "not queued"
    test = DraftTest.objects.get(pk=test_id)
    try:
        rates = {side: _side(test, side, offset) for offset, side in enumerate(SIDES)}
    except Exception as e:  # noqa: BLE001 - any failure is the test's outcome, recorded for the person who asked
        DraftTest.objects.filter(pk=test_id, state=DraftTest.RUNNING).update(
            state=DraftTest.FAILED, finished_at=timezone.now(), error=str(e)[:2000] or type(e).__name__)
        return DraftTest.FAILED
    if not DraftTest.objects.filter(pk=test_id, state=DraftTest.RUNNING).update(
            state=DraftTest.FINISHED, finished_at=timezone.now(), draft_pass_rate=rates["draft"],
            live_pass_rate=rates["live"]):
        return "swept"  # the sweeper failed it meanwhile: that stays the test's outcome
    return DraftTest.FINISHED


def draft_tests_sweep() -> int:
    """The beat's sweep: a test still running DRAFT_TEST_MAX_SECONDS after it started (its worker died, or its
    child processes hang), or still queued that long after it was asked (its task was lost), is failed with the
    reason in plain words, so the draft can be tested again. One conditional UPDATE each: of two beats at once,
    one fails it. How many were failed."""
    limit = settings.DRAFT_TEST_MAX_SECONDS
    now = timezone.now()
    since = now - timedelta(seconds=limit)
    stopped = DraftTest.objects.filter(state=DraftTest.RUNNING, started_at__lt=since).update(
        state=DraftTest.FAILED, finished_at=now,
        error=f"The test stopped answering: it was still running {_duration(limit)} after it started "
              "(DRAFT_TEST_MAX_SECONDS), so its worker most likely stopped. Test the draft again.")
    lost = DraftTest.objects.filter(state=DraftTest.QUEUED, asked_at__lt=since).update(
        state=DraftTest.FAILED, finished_at=now,
        error=f"No worker took the test up within {_duration(limit)} (DRAFT_TEST_MAX_SECONDS). Test the draft "
              "again, and check that the workers run (manage.py check_workers).")
    return stopped + lost


def _duration(seconds: float) -> str:
    for unit, size in (("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if n != 1 else ''}"
    return f"{seconds:g} seconds"


def _side(test: DraftTest, side: str, offset: int) -> float:
    """One side's evaluation in a child process: its own throwaway database, demo shop and rate-limit scope."""
    where = folder(test)
    where.mkdir(parents=True, exist_ok=True)
    data, label = _profile(test, side)
    profile_file = where / f"{side}-profile.json"
    profile_file.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    report = report_paths(test)[side]
    command = [sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), "evaluate", "--profile", str(profile_file),
               "--profile-label", label, "--report", str(report), "--min-pass-rate", "0", "--progress", "lines"]
    command += [arg for glob in settings.DRAFT_TEST_SCENARIOS for arg in ("--scenario", glob)]
    env = {**os.environ, "VAR_DIR": str(settings.VAR_DIR)}
    if test.uses_stand_in:
        env.update(MODEL_BASE_URL="", MODEL_NAME=STAND_IN)
        env.pop("MODEL_API_KEY", None)  # the stand-in's own
    with subprocess.Popen(command, cwd=settings.BASE_DIR, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as child:
        for line in child.stdout:
            _progress(test, line, offset)
        errors = child.stderr.read()
    if child.returncode not in (0, 1) or not report.exists():
        tail = " ".join(errors.strip().splitlines()[-3:])
        raise RuntimeError(f"The {side} evaluation stopped (status {child.returncode}): {tail or 'no report'}")
    return float(json.loads(report.read_text(encoding="utf-8"))["pass_rate"])


def _profile(test: DraftTest, side: str) -> tuple[dict, str]:
    """The profile JSON a side plays and how its report names it."""
    if side == "draft":
        return test.draft_data, f"draft of {test.draft.updated_at:%Y-%m-%d %H:%M} UTC (revision {test.draft_revision})"
    if test.live_version_id is None:
        data = selectors.built_in().as_data()  # Sundry's on the demo, the neutral one on a remote shop
        data.pop("version", None)
        return data, "the built-in defaults (none published)"
    live = ProfileVersion.objects.get(pk=test.live_version_id)
    return live.data, f"version {live.number}"


def _progress(test: DraftTest, line: str, offset: int) -> None:
    """"progress 3/42 name passed": trials done of this side; both sides count towards done/total."""
    parts = line.split()
    if len(parts) < 2 or parts[0] != "progress" or "/" not in parts[1]:
        return
    done, total = (int(n) for n in parts[1].split("/", 1))
    DraftTest.objects.filter(pk=test.pk).update(done=offset * total + done, total=len(SIDES) * total)
