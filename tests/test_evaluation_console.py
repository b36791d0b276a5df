"""The latest evaluation report in the staff console: staff read it (a summary page and the full HTML
report), nobody else does; it is read-only, escaped, and its one inline style is allowed by hash alone.
"""

import json

import pytest

from support.evaluation import report
from tests.desk_factories import make_user

pytestmark = pytest.mark.django_db

SUMMARY, FULL = "/console/evaluation/", "/console/evaluation/report.html"


@pytest.fixture
def latest(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    path = report.latest_path()
    path.parent.mkdir(parents=True)
    data = {"started_at": "2026-12-01T10:00:00+00:00", "seconds": 3, "model": {"name": "qwen<script>", "endpoint": "e"},
            "prompt": {"version": "13", "fingerprint": "abc123"}, "repeat": 1, "min_pass_rate": 1.0,
            "pass_rate": 0.5, "ok": False, "attempts": 2, "passed": 1, "skipped": [],
            "totals": {"model_calls": 9, "tokens": 100, "cost_usd": 0.01},
            "scenarios": [
                {"name": "good", "title": "passes", "skipped": "", "attempts": 1, "passes": 1, "runs": [
                    {"attempt": 1, "passed": True, "skipped": "", "failed": [], "checks": [], "model_calls": 4,
                     "prompt_tokens": 1, "completion_tokens": 1, "cost_usd": 0.001, "seconds": 1,
                     "decisions": [], "trace": [], "transcript": []}]},
                {"name": "bad", "title": "<b>fails</b>", "skipped": "", "attempts": 1, "passes": 0, "runs": [
                    {"attempt": 1, "passed": False, "skipped": "", "failed": ["turn 1: says '48 hours'"],
                     "checks": [{"name": "turn 1: says '48 hours'", "ok": False, "detail": "not in: hi"}],
                     "model_calls": 5, "prompt_tokens": 1, "completion_tokens": 1, "cost_usd": 0.001,
                     "seconds": 1, "decisions": [], "trace": [], "transcript": []}]}]}
    path.write_text(json.dumps(data))
    path.with_suffix(".html").write_text(report.as_html(data))
    return data


def signed_in(client, staff: bool):
    client.force_login(make_user("sam" if staff else "pat", staff=staff))
    return client


def test_staff_see_the_latest_report_with_its_model_prompt_and_failed_criteria(client, latest):
    page = signed_in(client, staff=True).get(SUMMARY).content.decode()
    assert "1/2 passed" in page and "prompt v13 (abc123)" in page
    assert "turn 1: says &#x27;48 hours&#x27;" in page and "✗ 0/1" in page and "✓ 1/1" in page
    assert "qwen&lt;script&gt;" in page and "&lt;b&gt;fails&lt;/b&gt;" in page and "<b>fails" not in page
    assert f'href="{FULL}"' in page and 'data-testid="nav-evaluation"' in page


def test_the_full_report_is_served_with_its_style_allowed_by_hash_and_no_script(client, latest):
    response = signed_in(client, staff=True).get(FULL)
    body = b"".join(response.streaming_content).decode()
    assert response.status_code == 200 and response["Content-Type"].startswith("text/html")
    policy = response["Content-Security-Policy"]
    assert f"'{report.STYLE_HASH}'" in policy and "unsafe-inline" not in policy
    assert "script-src 'self'" in policy and "<script" not in body and "qwen&lt;script&gt;" in body


def test_without_a_report_the_page_says_how_to_make_one(client, settings, tmp_path):
    settings.VAR_DIR = tmp_path
    c = signed_in(client, staff=True)
    assert "manage.py evaluate" in c.get(SUMMARY).content.decode()
    assert c.get(FULL).status_code == 404


@pytest.mark.parametrize("path", [SUMMARY, FULL])
def test_customers_and_visitors_may_not_see_it(client, latest, path):
    # Not staff: sent to the login page, as for every console page; nothing of the report is shown.
    anonymous = client.get(path)
    assert anonymous.status_code == 302 and "/login" in anonymous["Location"]
    not_staff = signed_in(client, staff=False).get(path)
    assert not_staff.status_code == 302 and b"abc123" not in not_staff.content


@pytest.mark.parametrize("method", ["post", "put", "delete"])
def test_it_is_read_only(client, latest, method):
    assert getattr(signed_in(client, staff=True), method)(SUMMARY).status_code in (403, 405)
