"""Live events lost on the way, or a reply that starts over: the widget and the console still end up showing
what the database has (docs/events.md: the gap and replay protocol; step.started of a model step).

Each page's socket is routed through Playwright, so a test can drop frames the server sent (an event Redis
lost) or hand the page frames of its own (what a resumed run would send), and read the frames the page sent.
"""

import json
import time

from playwright.sync_api import expect

from support.models import Conversation, Message, Run
from tests.browser.conftest import agent_messages, api_conversation, ask, open_widget, shot, widget_conversation
from tests.browser.test_reconnect import assert_console_matches_database, assert_widget_matches_database


class Tap:
    """One page's websockets: frames from the server pass unless `lose(frame)` says so; frames the page
    sent are kept in `sent`; `inject` hands the page a frame as if the server sent it."""

    def __init__(self, page, pattern: str, lose=lambda frame: False):
        self.lose, self.sent, self.lost, self.passed, self.routes = lose, [], [], [], []
        self.page = page
        page.route_web_socket(pattern, self._route)

    def _route(self, ws) -> None:
        server = ws.connect_to_server()
        self.routes.append(ws)

        def from_page(message):
            self.sent.append(json.loads(message))
            server.send(message)

        def from_server(message):
            frame = json.loads(message)
            if self.lose(frame):
                self.lost.append(frame)
            else:
                self.passed.append(frame)
                ws.send(message)

        ws.on_message(from_page)
        server.on_message(from_server)

    def inject(self, frame: dict) -> None:
        self.routes[-1].send(json.dumps(frame))

    def sent_of(self, kind: str) -> list[dict]:
        return [f for f in self.sent if f.get("type") == kind]

    def wait_until_passed(self, check, what: str, timeout: float = 60.0) -> None:
        """Until a frame the server sent for which check(frame) is true has been handed to the page (the frames
        arrive while Playwright waits, so this waits through the page)."""
        deadline = time.monotonic() + timeout
        while not any(check(f) for f in self.passed):
            assert time.monotonic() < deadline, f"the page was never sent {what} within {timeout} s"
            self.page.wait_for_timeout(50)


def run_stopped(page, conversation: str, timeout: float = 60.0) -> None:
    """Until the conversation's run has stopped in the database: how long a run takes depends on the machine;
    what a test measures after it (the widget's own checks) does not. Waits through the page, so that routed
    frames keep flowing meanwhile."""
    deadline = time.monotonic() + timeout
    while not Run.objects.filter(conversation__public_id=conversation, status=Run.STOPPED).exists():
        assert time.monotonic() < deadline, f"no run of {conversation} stopped within {timeout} s"
        page.wait_for_timeout(50)


def live_before_asking(page) -> str:
    """The conversation, started before the customer writes and its socket live (replayed) in the widget: the
    run's events then come live, as the tests of lost and injected live events need. (A conversation created by
    the first message connects its socket after the run has started; on a loaded machine after it has stopped,
    and then every message comes in the replay and no live event is left to lose.)"""
    conversation = api_conversation(page)["id"]
    open_widget(page)
    expect(page.get_by_test_id("widget-panel")).to_have_attribute("data-connection", "open")
    return conversation


def watched_in_the_console(customer_page, staff_page, lose=lambda frame: False):
    """A customer's conversation, started before they write, open in the widget and watched on its console page
    through a tapped staff socket: (customer, conversation id, staff page, [the tap])."""
    customer = customer_page()
    conversation = api_conversation(customer)["id"]  # the console watches it before the customer writes
    open_widget(customer)
    taps = []
    staff = staff_page(f"/console/conversations/{conversation}/",
                       before=lambda p: taps.append(Tap(p, "**/ws/staff/", lose)))
    return customer, conversation, staff, taps


def lose_first(predicate):
    """A `lose` that drops the first frame matching predicate, and nothing else."""
    state = {"done": False}

    def lose(frame):
        if not state["done"] and predicate(frame):
            state["done"] = True
            return True
        return False

    return lose


def is_agent_answer(frame) -> bool:
    return frame.get("type") == "message.saved" and frame["message"].get("author") == "agent" \
        and bool(frame["message"].get("content"))


def streaming_text(page) -> str:
    return page.evaluate("""() => {
        const bubble = document.querySelector('[data-testid="widget-host"]').shadowRoot
            .querySelector('[data-testid="widget-streaming"] .sw-bubble');
        return bubble ? bubble.textContent : null;
    }""")


def test_the_widget_finds_a_lost_last_answer_and_shows_it(site, customer_page):
    taps = []
    page = customer_page(before=lambda p: taps.append(Tap(p, "**/ws/conversations/**", lose_first(is_agent_answer))))
    conversation = live_before_asking(page)
    tap = taps[0]

    ask(page, "Tracking says delivered on Thursday but nothing arrived. Order SU-41207")
    run_stopped(page, conversation)
    # The answer's event never reaches the page; it was the run's last message, so no later seq shows a hole:
    # the widget's check when the socket goes quiet (ping -> pong with the last seq, 4 s after the last event)
    # finds it.
    answer = agent_messages(page)
    expect(answer).to_have_count(1, timeout=15000)
    expect(answer).to_contain_text("48 hours")
    assert len(tap.lost) == 1 and tap.lost[0]["seq"] == int(answer.get_attribute("data-seq"))
    assert any(f.get("type") == "resume" and f["last_seq"] < tap.lost[0]["seq"] for f in tap.sent[1:]), tap.sent
    expect(page.get_by_test_id("widget-typing")).to_be_hidden()
    assert_widget_matches_database(page, conversation)
    shot(page, "live-gaps-widget-lost-answer-found")


def test_the_widget_asks_again_when_a_seq_is_skipped(site, customer_page):
    # The agent's tool call reaches the customer as its seq alone (message.hidden); lose that one, and the
    # next seq shows the hole at once.
    taps = []
    lose = lose_first(lambda f: f.get("type") == "message.hidden")
    page = customer_page(before=lambda p: taps.append(Tap(p, "**/ws/conversations/**", lose)))
    conversation = live_before_asking(page)
    tap = taps[0]

    ask(page, "Tracking says delivered on Thursday but nothing arrived. Order SU-41207")
    expect(agent_messages(page)).to_have_count(1, timeout=20000)
    assert len(tap.lost) == 1
    hole = tap.lost[0]["seq"]
    page.wait_for_timeout(2500)  # the grace before asking again (a late event may still come)
    resumes = [f for f in tap.sent_of("resume")[1:]]
    assert resumes and resumes[0]["last_seq"] == hole - 1, tap.sent
    assert_widget_matches_database(page, conversation)


def test_the_widget_drops_a_partial_reply_when_the_model_step_starts_again(site, customer_page):
    # What a run resumed after its worker died sends: the first worker streamed part of the reply, the
    # second starts the model step again and streams the reply from the beginning.
    taps = []
    page = customer_page(before=lambda p: taps.append(Tap(p, "**/ws/conversations/**")))
    conversation = api_conversation(page)["id"]  # a socket to inject into before the customer writes
    open_widget(page)
    tap = taps[0]
    base = {"conversation": conversation, "seq": 0, "run": "r1"}
    tap.inject({**base, "type": "token.delta", "text": "w01 w02 w03 w04 w05 w06"})
    expect(page.get_by_test_id("widget-streaming")).to_contain_text("w06")
    tap.inject({**base, "type": "step.started", "kind": "model", "label": "Thinking"})
    tap.inject({**base, "type": "token.delta", "text": "w01 w02"})
    expect(page.get_by_test_id("widget-streaming").locator(".sw-bubble")).to_have_text("w01 w02")
    assert streaming_text(page) == "w01 w02"
    shot(page, "live-gaps-widget-restarted-reply")
    page.set_viewport_size({"width": 390, "height": 844})
    shot(page, "live-gaps-widget-restarted-reply-390")


def test_the_console_drops_a_partial_reply_when_the_model_step_starts_again(site, customer_page, staff_page):
    customer, conversation, staff, taps = watched_in_the_console(customer_page, staff_page)
    expect(staff.get_by_test_id("transcript").get_by_test_id("message")).to_have_count(1)
    base = {"conversation": conversation, "seq": 1, "run": "r1"}
    step = {"run": "r1", "kind": "model", "turn": 1, "label": "Thinking", "tool": ""}
    reply = staff.locator('[data-testid="streaming-reply"] [data-stream-text]')
    taps[0].inject({**base, "type": "token.delta", "text": "w01 w02 w03 w04 w05 w06"})
    expect(reply).to_have_text("w01 w02 w03 w04 w05 w06")
    taps[0].inject({**base, "type": "step.started", "step": step})
    taps[0].inject({**base, "type": "token.delta", "text": "w01 w02"})
    expect(reply).to_have_text("w01 w02")


def test_the_console_finds_a_lost_message_of_the_conversation_it_watches(site, customer_page, staff_page):
    customer, conversation, staff, taps = watched_in_the_console(customer_page, staff_page, lose_first(is_agent_answer))
    expect(staff.get_by_test_id("transcript").get_by_test_id("message")).to_have_count(1)  # the system prompt

    ask(customer, "Tracking says delivered on Thursday but nothing arrived. Order SU-41207")
    expect(agent_messages(customer)).to_have_count(1, timeout=20000)
    answer = Message.objects.filter(conversation__public_id=conversation, author="agent").exclude(content="") \
        .exclude(content__isnull=True).latest("seq")
    expect(staff.locator(f'[data-testid="message"][data-seq="{answer.seq}"]')).to_have_count(1, timeout=15000)
    assert [f["seq"] for f in taps[0].lost] == [answer.seq]
    expect(staff.get_by_test_id("streaming-reply")).to_be_hidden()
    assert Conversation.objects.get(public_id=conversation).last_seq == answer.seq
    assert_console_matches_database(staff, conversation)
    shot(staff, "live-gaps-console-lost-answer-found")


def late_queued(conversation: str) -> dict:
    """What the web process's "queued" looks like when it reaches a page after the worker's "stopped" (two
    processes publish a run's statuses, so their events can cross)."""
    run = Run.objects.filter(conversation__public_id=conversation).latest("created_at")
    assert run.status == Run.STOPPED
    last = Conversation.objects.get(public_id=conversation).last_seq
    return {"type": "run.status", "conversation": conversation, "seq": last, "run": str(run.public_id),
            "status": "queued", "stop_reason": None, "outcome": None,
            "detail": {"id": str(run.public_id), "status": "queued", "stop_reason": "", "outcome": ""}}


def test_a_late_queued_does_not_start_a_stopped_run_again_in_the_console(site, customer_page, staff_page):
    customer, conversation, staff, taps = watched_in_the_console(customer_page, staff_page)
    ask(customer, "Where is my order SU-41620?")
    expect(agent_messages(customer)).to_have_count(1, timeout=20000)
    status = staff.get_by_test_id("run-status")
    expect(status).to_have_attribute("data-status", "stopped", timeout=15000)
    taps[0].inject(late_queued(conversation))
    staff.wait_for_timeout(1000)  # the injected frame is handled by then
    assert status.get_attribute("data-status") == "stopped"
    assert "About to start" not in status.inner_text()


def test_a_late_queued_does_not_show_the_widget_typing_again(site, customer_page):
    taps = []
    page = customer_page(before=lambda p: taps.append(Tap(p, "**/ws/conversations/**")))
    conversation = live_before_asking(page)
    ask(page, "Where is my order SU-41620?")
    expect(agent_messages(page)).to_have_count(1, timeout=20000)
    typing = page.get_by_test_id("widget-typing")
    # The late "queued" is one that comes after the worker's "stopped": that must have reached the page first.
    taps[-1].wait_until_passed(lambda f: f.get("type") == "run.status" and f.get("status") == "stopped",
                               "the run's stopped")
    expect(page.get_by_test_id("widget-panel")).to_have_attribute("data-run", "stopped")
    expect(typing).to_be_hidden()
    taps[-1].inject(late_queued(conversation))
    page.wait_for_timeout(1000)  # the injected frame is handled by then
    assert not typing.is_visible()


def test_a_late_queued_of_a_run_that_stopped_before_the_page_opened_does_not_show_typing(site, customer_page):
    # The page is opened again after the run stopped: its socket never carried the "stopped", which the widget
    # read over HTTP; a "queued" of that run arriving afterwards is still old news.
    taps = []
    page = customer_page(before=lambda p: taps.append(Tap(p, "**/ws/conversations/**")))
    open_widget(page)
    ask(page, "Where is my order SU-41620?")
    conversation = widget_conversation(page)["id"]
    run_stopped(page, conversation)
    page.reload()
    open_widget(page)
    expect(agent_messages(page)).to_have_count(1)
    expect(page.get_by_test_id("widget-panel")).to_have_attribute("data-run", "stopped", timeout=15000)
    taps[-1].inject(late_queued(conversation))
    page.wait_for_timeout(1000)  # the injected frame is handled by then
    assert not page.get_by_test_id("widget-typing").is_visible()


def test_a_conversation_event_older_than_the_close_does_not_show_it_open_again(site, customer_page, staff_page):
    # A reply's "updated", sent before the close that followed it, can reach the console after the close's answer
    # (two requests, two paths): the page keeps what is newer, by the seq each event carries.
    customer, conversation, staff, taps = watched_in_the_console(customer_page, staff_page)
    staff.get_by_test_id("take-over-button").click()
    status = staff.get_by_test_id("conversation-status")
    expect(status).to_have_attribute("data-status", "taken_over")
    staff.get_by_test_id("close-conversation-button").click()
    expect(status).to_have_attribute("data-status", "closed")
    row = Conversation.objects.get(public_id=conversation)
    assert row.closed_at is not None
    taps[-1].inject({"type": "conversation.updated", "conversation": conversation, "seq": row.last_seq - 1,
                     "status": "taken_over", "detail": {"id": conversation, "status": "taken_over", "closed": False,
                                                        "closed_at": None, "closed_by": None}})
    staff.wait_for_timeout(1000)  # the injected frame is handled by then
    assert status.get_attribute("data-status") == "closed"
    expect(staff.get_by_test_id("reopen-conversation-button")).to_be_visible()


def test_a_conversation_event_older_than_the_close_does_not_show_it_open_again_in_the_widget(site, customer_page,
                                                                                          staff_page):
    # An "updated" published just before the widget's socket joined can reach it after its state was read: the
    # widget keeps the newer state too, by the seq each event carries; a newer one (the conversation opened
    # again) still applies.
    taps = []
    customer = customer_page(before=lambda p: taps.append(Tap(p, "**/ws/conversations/**")))
    conversation = live_before_asking(customer)
    staff = staff_page(f"/console/conversations/{conversation}/")
    staff.get_by_test_id("take-over-button").click()
    expect(staff.get_by_test_id("conversation-status")).to_have_attribute("data-status", "taken_over")
    staff.get_by_test_id("close-conversation-button").click()
    panel = customer.get_by_test_id("widget-panel")
    expect(panel).to_have_attribute("data-closed", "true")
    row = Conversation.objects.get(public_id=conversation)

    def updated(seq, status, closed):
        return {"type": "conversation.updated", "conversation": conversation, "seq": seq, "status": status,
                "detail": {"id": conversation, "status": status, "closed": closed}}

    taps[-1].inject(updated(row.last_seq - 1, "taken_over", False))
    customer.wait_for_timeout(1000)  # the injected frame is handled by then
    assert panel.get_attribute("data-closed") == "true"
    taps[-1].inject(updated(row.last_seq + 1, "open", False))
    expect(panel).to_have_attribute("data-closed", "false")
