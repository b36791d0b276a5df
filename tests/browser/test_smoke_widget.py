"""A first look: the shop page embeds the widget, which answers a question about SU-41207 while the customer
watches it work (a step label) and write (the reply streams in before it is saved)."""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import agent_messages, ask, open_widget, shot, wait_for_streaming

# Also run on PostgreSQL in CI: what two people, two sockets or the database's own SQL decide here
# (docs/testing.md#on-postgresql-and-the-scale-out-test).
pytestmark = pytest.mark.every_database

STEP_LABELS = {"Thinking…", "Looking up your order…", "Checking the carrier's tracking…", "Reading our policies…",
               "Contacting the seller…", "Wrapping up…"}

# Everything the status line and the streaming bubble show, recorded as it changes: both come and go faster
# than a test can poll, and what they showed is the point.
RECORD = """() => {
    const root = document.querySelector('[data-testid="widget-host"]').shadowRoot;
    const status = root.querySelector('[data-testid="widget-status"]');
    const list = root.querySelector('[data-testid="widget-transcript"]');
    window.__labels = [];
    window.__streamed = [];
    new MutationObserver(() => {
        const text = status.textContent;
        if (!status.hidden && text && window.__labels[window.__labels.length - 1] !== text) window.__labels.push(text);
    }).observe(status, {childList: true, characterData: true, subtree: true, attributes: true});
    new MutationObserver(() => {
        const bubble = list.querySelector('[data-testid="widget-streaming"] .sw-bubble');
        const text = bubble && bubble.textContent;
        if (text && window.__streamed[window.__streamed.length - 1] !== text) window.__streamed.push(text);
    }).observe(list, {childList: true, characterData: true, subtree: true});
}"""


def squash(text: str) -> str:
    return " ".join(text.split())


def test_a_customer_asks_about_su_41207_and_sees_the_streamed_answer(site, customer_page, model_settings):
    model_settings("/config", {"token_delay_ms": 30})  # reset after the test by model_settings
    page = customer_page()
    open_widget(page)
    page.evaluate(RECORD)

    question = "Tracking says delivered on Thursday but nothing arrived. Order SU-41207"
    ask(page, question)
    mine = page.locator('[data-testid="widget-message"][data-author="customer"]')
    expect(mine).to_have_count(1)
    expect(mine).to_contain_text(question)
    expect(mine).to_have_attribute("data-seq", re.compile(r"^\d+$"))  # saved: no longer "sending"

    status = page.get_by_test_id("widget-status")
    expect(status).to_be_visible()
    expect(status).to_have_text(re.compile(r"\S.*…$"))
    shot(page, "widget-su-41207-working")

    wait_for_streaming(page)
    shot(page, "widget-su-41207-streaming")

    answer = agent_messages(page)
    expect(answer).to_have_count(1, timeout=20000)
    expect(answer).to_contain_text("48 hours")
    expect(answer).to_have_attribute("data-seq", re.compile(r"^\d+$"))
    expect(page.get_by_test_id("widget-streaming")).to_have_count(0)  # the saved answer replaced it
    expect(page.get_by_test_id("widget-typing")).to_be_hidden()
    shot(page, "widget-su-41207-answered")

    labels = page.evaluate("window.__labels")
    assert "Looking up your order…" in labels, labels
    assert set(labels) <= STEP_LABELS, labels
    # The reply grew on screen piece by piece, each time a beginning of the answer that was then saved.
    final = squash(answer.locator(".sw-bubble").text_content())
    streamed = [squash(t) for t in page.evaluate("window.__streamed")]
    assert len(streamed) >= 5, streamed
    assert all(final.startswith(t) for t in streamed), (streamed, final)
    assert len(streamed[0]) < len(final) / 2, streamed
