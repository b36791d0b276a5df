"""A simple simulated customer: the stand-in playing the customer's side of a support chat.

An evaluation can have a second model write the customer's next message from a persona and a goal. A
request whose system message opens with CUSTOMER_PROMPT_START is such a request: the agent's messages
arrive as "user" ones, the customer's own earlier messages as "assistant" ones. This customer is
deliberately plain: it gives the order number from its goal when asked for one, and is done otherwise
(it calls end_conversation when offered, else answers "[done]").
"""

from __future__ import annotations

import re

from .conversation import ORDER_ID, text_of
from .reply import Call, Reply

CUSTOMER_PROMPT_START = "You are role-playing a customer"
DONE = "[done]"
GOAL = re.compile(r"^Your goal:\s*(.+)$", re.MULTILINE | re.IGNORECASE)


def is_customer_request(messages: list[dict]) -> bool:
    first = messages[0] if messages else {}
    return first.get("role") in ("system", "developer") and \
        text_of(first.get("content")).lstrip().startswith(CUSTOMER_PROMPT_START)


def reply(messages: list[dict], offered: set[str]) -> Reply:
    goal = GOAL.search(text_of(messages[0].get("content")))
    order = ORDER_ID.search(goal.group(1)) if goal else None
    said = " ".join(text_of(m.get("content")) for m in messages if m.get("role") == "assistant")
    desk = next((text_of(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
    if order and "order number" in desk.lower() and order.group(0).upper() not in said.upper():
        return Reply(content=f"It's order {order.group(0).upper()}.")
    if "end_conversation" in offered:
        return Reply(calls=(Call.of("end_conversation"),))
    return Reply(content=DONE)
