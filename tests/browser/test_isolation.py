"""One customer's conversation is closed to another: the page, the API and the websocket all refuse it."""

import re

from playwright.sync_api import expect

from tests.browser.conftest import agent_messages, api_conversation, ask, open_widget, shot, widget_conversation

MAYA_SAYS = "Where is my order SU-41210? Please leave it with the neighbour at no. 12, door code 4711."

FETCH = """async ({id, token}) => {
    const headers = {Authorization: `Bearer ${token}`, "Content-Type": "application/json"};
    const out = {};
    for (const [name, path, init] of [
        ["conversation", `/api/conversations/${id}`, {headers}],
        ["messages", `/api/conversations/${id}/messages?after=0`, {headers}],
        ["post", `/api/conversations/${id}/messages`,
         {method: "POST", headers, body: JSON.stringify({text: "hello from someone else"})}],
    ]) {
        const r = await fetch(path, init);
        out[name] = {status: r.status, body: await r.text()};
    }
    return out;
}"""

# A raw socket to the customer endpoint: the frames it got and how it was closed.
SOCKET = """({id, token}) => new Promise((resolve) => {
    const ws = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws/conversations/${id}/`);
    const frames = [];
    const timer = setTimeout(() => { ws.close(); resolve({code: null, frames}); }, 8000);
    ws.onopen = () => ws.send(JSON.stringify({type: "resume", token, last_seq: 0}));
    ws.onmessage = (e) => {
        frames.push(JSON.parse(e.data));
        if (frames[frames.length - 1].type === "replay.done") { clearTimeout(timer); ws.close(1000); }
    };
    ws.onclose = (e) => { clearTimeout(timer); resolve({code: e.code, frames}); };
})"""


def test_a_second_customer_cannot_open_the_first_ones_conversation(site, customer_page):
    maya = customer_page()
    open_widget(maya)
    ask(maya, MAYA_SAYS)
    expect(agent_messages(maya)).to_have_count(1, timeout=20000)
    expect(agent_messages(maya)).to_contain_text("SU-41210")
    maya_conversation = widget_conversation(maya)
    # The right token does open Maya's conversation over the same socket (so a refusal below is the token's).
    own = maya.evaluate(SOCKET, maya_conversation)
    assert own["frames"] and own["frames"][-1]["type"] == "replay.done", own
    assert MAYA_SAYS in [f["message"]["content"] for f in own["frames"] if f["type"] == "message.saved"]

    tom = customer_page("tom@example.com")
    expect(tom.get_by_test_id("shop-customer")).to_have_text("Tom Becker")
    orders = tom.get_by_test_id("shop-order")
    expect(orders.first).to_be_visible()
    assert "SU-41444" in orders.evaluate_all("(rows) => rows.map((r) => r.dataset.order)")
    expect(tom.locator('[data-testid="shop-order"][data-order="SU-41210"]')).to_have_count(0)
    tom_conversation = api_conversation(tom)  # his own conversation, opened before he writes (as an API client may)
    open_widget(tom)
    assert tom_conversation["id"] != maya_conversation["id"]
    expect(tom.get_by_test_id("widget-message")).to_have_count(0)  # his own conversation, empty

    # Maya's conversation id with Tom's conversation token.
    stolen = {"id": maya_conversation["id"], "token": tom_conversation["token"]}
    answers = tom.evaluate(FETCH, stolen)
    assert {name: a["status"] for name, a in answers.items()} == {"conversation": 404, "messages": 404, "post": 404}
    assert all("4711" not in a["body"] and "SU-41210" not in a["body"] for a in answers.values()), answers
    closed = tom.evaluate(SOCKET, stolen)
    assert closed == {"code": 4401, "frames": []}, closed

    # Tom's page shows nothing of Maya's, and his own chat still works.
    expect(tom.get_by_test_id("widget-panel")).to_have_attribute("data-connection", "open")
    for text in ("4711", "SU-41210", "neighbour at no. 12"):
        expect(tom.get_by_text(text)).to_have_count(0)
        expect(tom.get_by_test_id("widget-transcript")).not_to_contain_text(text)
    expect(tom.get_by_test_id("widget-message")).to_have_count(0)
    shot(tom, "isolation-tom")
    # Maya's conversation got nothing from Tom's attempts.
    expect(maya.get_by_test_id("widget-message")).to_have_count(2)
    expect(maya.get_by_test_id("widget-transcript")).not_to_contain_text("hello from someone else")
    shot(maya, "isolation-maya")
    assert re.fullmatch(r"[0-9a-f-]{36}", maya_conversation["id"])
