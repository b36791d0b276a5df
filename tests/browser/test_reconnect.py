"""A websocket that drops in the middle of a run: when it is back, the widget and the console show every
message exactly once, in order, as the database has them (docs/events.md: resume / watch with the last seq)."""

import re
from collections import Counter

import pytest
from playwright.sync_api import expect

from support.models import Conversation, Message, Run, Step
from tests.browser.conftest import (
    SocketCutter,
    agent_messages,
    api_conversation,
    ask,
    open_widget,
    shot,
    wait_for_streaming,
)

# Also run on PostgreSQL in CI: what two people, two sockets or the database's own SQL decide here
# (docs/testing.md#on-postgresql-and-the-scale-out-test).
pytestmark = pytest.mark.every_database

WIDGET_MESSAGES = """(nodes) => nodes.map((n) => ({
    seq: n.dataset.seq === undefined ? null : Number(n.dataset.seq),
    author: n.dataset.author, state: n.dataset.state || null,
    text: (n.querySelector('.sw-bubble') || n).textContent,
}))"""

# What the widget shows for a saved message: an agent's reply rendered by its own markdown renderer.
RENDERED = """(messages) => messages.map((m) => m.role === 'assistant'
    ? window.SundryWidget._renderMarkdown(m.content).textContent : m.content)"""


def customer_visible(conversation_id: str) -> list[Message]:
    return list(Message.objects.filter(conversation__public_id=conversation_id, role__in=("user", "assistant"))
                .exclude(content__isnull=True).exclude(content="").order_by("seq"))


def run_stopped(conversation_id: str) -> bool:
    runs = Run.objects.filter(conversation__public_id=conversation_id)
    return runs.exists() and not runs.exclude(status=Run.STOPPED).exists()


def wait_until(page, check, what: str, timeout_ms: int = 20000) -> None:
    """Poll a database condition from the test (the page keeps running meanwhile)."""
    for _ in range(timeout_ms // 100):
        if check():
            return
        page.wait_for_timeout(100)
    raise AssertionError(f"timed out waiting for {what}")


def assert_widget_matches_database(page, conversation_id: str) -> None:
    shown = page.get_by_test_id("widget-message").evaluate_all(WIDGET_MESSAGES)
    saved = customer_visible(conversation_id)
    seqs = [m["seq"] for m in shown]
    assert all(m["state"] is None for m in shown), shown  # nothing left "sending" or "queued"
    assert [s for s, n in Counter(seqs).items() if n > 1] == [], shown
    assert seqs == [m.seq for m in saved], (shown, [(m.seq, m.role) for m in saved])
    assert [m["author"] for m in shown] == [m.author for m in saved]
    expected = page.evaluate(RENDERED, [{"role": m.role, "content": m.content} for m in saved])
    assert [" ".join(m["text"].split()) for m in shown] == [" ".join(t.split()) for t in expected]


def assert_console_matches_database(page, conversation_id: str) -> None:
    saved = list(Message.objects.filter(conversation__public_id=conversation_id).order_by("seq"))
    messages = page.get_by_test_id("transcript").get_by_test_id("message")
    expect(messages).to_have_count(len(saved))
    shown = messages.evaluate_all("""(nodes) => nodes.map((n) => ({
        seq: Number(n.dataset.seq), role: n.dataset.role,
        text: (n.querySelector('[data-testid="message-text"]') || {}).textContent || null}))""")
    assert [(m["seq"], m["role"]) for m in shown] == [(m.seq, m.role) for m in saved], shown
    for m, s in zip(shown, saved):
        if s.role in ("user", "assistant") and s.content:
            assert m["text"] == s.content, (m, s.content)
    # The trace, read again after the reconnect, has every step once.
    steps = Step.objects.filter(run__conversation__public_id=conversation_id).count()
    expect(page.get_by_test_id("trace-row")).to_have_count(steps)
    expect(page.get_by_test_id("streaming-reply")).to_be_hidden()
    expect(page.get_by_test_id("run-status")).to_have_attribute("data-status", "stopped")
    expect(page.get_by_test_id("agent-activity")).to_be_hidden()


def test_a_dropped_socket_loses_and_doubles_nothing(site, customer_page, staff_page, model_settings):
    widget_sockets: list[SocketCutter] = []
    console_sockets: list[SocketCutter] = []
    customer = customer_page(before=lambda p: widget_sockets.append(SocketCutter(p, "**/ws/conversations/**")))
    conversation = api_conversation(customer)["id"]  # the console watches it before the customer writes
    open_widget(customer)
    staff = staff_page(f"/console/conversations/{conversation}/",
                       before=lambda p: console_sockets.append(SocketCutter(p, "**/ws/staff/")))
    widget, console = widget_sockets[0], console_sockets[0]
    panel, connection = customer.get_by_test_id("widget-panel"), staff.get_by_test_id("connection-status")
    expect(staff.get_by_test_id("transcript").get_by_test_id("message")).to_have_count(1)  # the system prompt

    # A slow model: the run takes seconds, and the sockets drop while it works.
    model_settings("/config", {"token_delay_ms": 40})
    ask(customer, "I ordered the grey throw but got a blue one. Order SU-41419")
    expect(customer.get_by_test_id("widget-status")).to_have_text(re.compile(r"…$"), timeout=10000)
    expect(staff.get_by_test_id("agent-activity")).to_be_visible()
    widget.drop(refuse=True)
    console.drop(refuse=True)
    seq_at_drop = Conversation.objects.get(public_id=conversation).last_seq
    expect(panel).to_have_attribute("data-connection", "reconnecting")
    expect(customer.get_by_test_id("widget-reconnecting")).to_be_visible()
    expect(connection).to_have_attribute("data-state", "offline")
    shot(customer, "reconnect-widget-offline")
    shot(staff, "reconnect-console-offline")

    # The run goes on without them: everything after the drop is saved while both pages are disconnected.
    wait_until(customer, lambda: run_stopped(conversation), "the run to finish")
    assert [m.author for m in customer_visible(conversation) if m.seq > seq_at_drop] == ["agent"]  # the answer
    assert widget.refused >= 1 and console.refused >= 1  # they did try to come back meanwhile
    expect(agent_messages(customer)).to_have_count(0)  # still disconnected: nothing of it on screen yet
    expect(staff.locator('[data-testid="message"][data-author="agent"] [data-testid="message-text"]')).to_have_count(0)

    # The network is back: both reconnect on their own (backoff) and catch up from their last seq.
    widget.refuse = console.refuse = False
    expect(panel).to_have_attribute("data-connection", "open", timeout=20000)
    expect(connection).to_have_attribute("data-state", "live", timeout=20000)
    expect(customer.get_by_test_id("widget-reconnecting")).to_be_hidden()
    answer = agent_messages(customer)
    expect(answer).to_have_count(1)
    expect(answer).to_contain_text("SU-41419")
    expect(customer.get_by_test_id("widget-streaming")).to_have_count(0)
    expect(customer.get_by_test_id("widget-typing")).to_be_hidden()
    assert_widget_matches_database(customer, conversation)
    assert_console_matches_database(staff, conversation)
    shot(customer, "reconnect-widget-caught-up")
    shot(staff, "reconnect-console-caught-up")

    # Once more, dropped in the middle of a streamed reply and back at once: the reply is shown once, whether
    # it comes live or in the replay.
    ask(customer, "Thanks, where is my order SU-41419 now?")
    wait_for_streaming(customer)
    widget.drop()
    console.drop()
    expect(agent_messages(customer)).to_have_count(2, timeout=20000)
    expect(panel).to_have_attribute("data-connection", "open", timeout=20000)
    expect(connection).to_have_attribute("data-state", "live", timeout=20000)
    wait_until(customer, lambda: run_stopped(conversation), "the second run to finish")
    expect(customer.get_by_test_id("widget-streaming")).to_have_count(0)
    assert_widget_matches_database(customer, conversation)
    assert_console_matches_database(staff, conversation)
    shot(customer, "reconnect-widget-after-second-drop")
