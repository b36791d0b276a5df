"""The console's evaluation page with trials: pass^k per scenario, the flaky ones named, and a comparison
with an earlier run chosen from the kept reports; accessible, and readable on a phone."""

import pytest
from playwright.sync_api import expect

from support.evaluation import report
from tests.browser.conftest import shot
from tests.browser.test_a11y import assert_accessible


def _report(started: str, outcomes: dict[str, list[bool]], model: str) -> dict:
    run = {"skipped": "", "checks": [], "model_calls": 5, "prompt_tokens": 900, "completion_tokens": 100,
           "cost_usd": 0.00123, "seconds": 1, "decisions": [], "trace": [], "transcript": [], "turns": 2}
    scenarios = []
    for name, oks in outcomes.items():
        n, c = len(oks), sum(oks)
        scenarios.append({
            "name": name, "title": "A parcel marked delivered that never arrived, sold by a marketplace seller",
            "skipped": "", "attempts": n, "passes": c, "flaky": 0 < c < n,
            "pass_hat_k": {str(k): report.passk.pass_hat(n, c, k) for k in range(1, n + 1)},
            "runs": [{**run, "attempt": i, "passed": ok, "failed": [] if ok else ["end state: an unexpected refund"]}
                     for i, ok in enumerate(oks, 1)]})
    counts = [(s["attempts"], s["passes"]) for s in scenarios]
    return {"format": 2, "started_at": started, "seconds": 30, "model": {"name": model, "endpoint": "e"},
            "prompt": {"version": "14", "fingerprint": "abc123"}, "desk": {"version": "c44749b"},
            "trials": 4, "repeat": 4, "min_pass_rate": 1.0, "pass_rate": 0.5, "ok": False,
            "pass_hat_k": report.passk.overall(counts, 4), "attempts": 4 * len(scenarios),
            "passed": sum(c for _, c in counts), "skipped": [],
            "flaky": [s["name"] for s in scenarios if s["flaky"]],
            "totals": {"model_calls": 30, "tokens": 100, "cost_usd": 0.01}, "scenarios": scenarios}


@pytest.fixture
def reports():
    path = report.latest_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    saved = {p: p.read_bytes() for p in (path, path.with_suffix(".html")) if p.exists()}
    names = ["lost-parcel-marketplace-seller", "refund-over-the-ceiling", "order-number-given-later"]
    before = _report("2026-12-01T10:00:00+00:00", dict(zip(names, [[True] * 4, [True] * 4, [True, False] * 2])),
                     "small-model-a")
    after = _report("2026-12-02T10:00:00+00:00", dict(zip(names, [[True] * 4, [True, True, True, False],
                                                                    [True] * 4])), "small-model-b")
    kept = report.keep(before)
    report.write(after, path, path.with_suffix(".html"))
    yield kept
    kept.unlink(missing_ok=True)
    for p in (path, path.with_suffix(".html")):
        if p in saved:
            p.write_bytes(saved[p])
        else:
            p.unlink(missing_ok=True)


def test_the_evaluation_page_shows_pass_hat_k_and_compares_with_an_earlier_run(site, staff_page, reports):
    page = staff_page("/console/evaluation/")
    expect(page.get_by_test_id("evaluation-row")).to_have_count(3)
    expect(page.get_by_test_id("evaluation-summary")).to_contain_text("pass^4")
    expect(page.get_by_test_id("evaluation-flaky")).to_contain_text("refund-over-the-ceiling")
    expect(page.get_by_test_id("evaluation-pass-hat").nth(1)).to_have_text("0%")  # 3 of 4: never 4 in a row
    page.get_by_test_id("evaluation-compare-with").select_option(label="2026-12-01 10:00 UTC · small-model-a")
    page.get_by_role("button", name="Compare").click()
    rows = page.get_by_test_id("evaluation-compare-row")
    expect(rows).to_have_count(3)
    expect(page.locator('[data-testid="evaluation-compare-row"][data-change="worse"]')).to_contain_text(
        "refund-over-the-ceiling")
    expect(page.locator('[data-testid="evaluation-compare-row"][data-change="better"]')).to_contain_text(
        "order-number-given-later")
    expect(page.get_by_test_id("evaluation-compare-summary")).to_contain_text("1 worse, 1 better")
    assert_accessible(page, "evaluation-compare")
    page.get_by_test_id("evaluation-compare").scroll_into_view_if_needed()
    shot(page, "evaluation-compare")
    page.set_viewport_size({"width": 390, "height": 844})
    page.get_by_test_id("evaluation-compare").scroll_into_view_if_needed()
    shot(page, "evaluation-compare-390")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
