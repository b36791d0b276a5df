"""A simple simulated customer: the stand-in playing the customer's side of a support chat.

An evaluation can have a second model write the customer's next message from a user scenario
(support/evaluation/customer.py). A request whose system message opens with CUSTOMER_PROMPT_START is such a
request: the agent's messages arrive as "user" ones, the customer's own earlier messages as "assistant" ones.
This customer is deliberately plain, one line at a time:
- told a person will take over: ###TRANSFER###;
- asked for an order number: the first one in "What you know" it has not given yet, else ###OUT-OF-SCOPE###;
- otherwise the next line of "Reason for your call" it has not said (the first counts as said once the customer
  has written anything: a scripted opening said it);
- nothing left to say: ###STOP###.
"""

from __future__ import annotations

import re

from .conversation import ORDER_ID, text_of
from .reply import Reply

CUSTOMER_PROMPT_START = "You are role-playing a customer"
STOP, TRANSFER, OUT_OF_SCOPE = "###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###"
SECTION = re.compile(r"^(Reason for your call|What you know|What you do not know|How to behave|Persona|Rules):\s*$",
                     re.MULTILINE)
HANDED_OVER = ("member of our team", "a colleague will", "passed this to", "handed this to", "a person will")
NOT_GIVEN = "(nothing more)"


def is_customer_request(messages: list[dict]) -> bool:
    first = messages[0] if messages else {}
    return first.get("role") in ("system", "developer") and \
        text_of(first.get("content")).lstrip().startswith(CUSTOMER_PROMPT_START)


def sections(prompt: str) -> dict[str, str]:
    """The prompt's parts by heading ("Reason for your call", "What you know", ...)."""
    marks = list(SECTION.finditer(prompt))
    out = {}
    for m, following in zip(marks, marks[1:] + [None]):
        body = prompt[m.end():following.start() if following else len(prompt)].strip()
        out[m.group(1)] = "" if body == NOT_GIVEN else body
    return out


def reply(messages: list[dict], offered: set[str]) -> Reply:
    parts = sections(text_of(messages[0].get("content")))
    said = [text_of(m.get("content")) for m in messages if m.get("role") == "assistant"]
    desk = next((text_of(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
    if any(words in desk.lower() for words in HANDED_OVER):
        return Reply(content=TRANSFER)
    if "order number" in desk.lower():
        given = " ".join(said).upper()
        known = [o.upper() for o in ORDER_ID.findall(parts.get("What you know", ""))]
        number = next((o for o in known if o not in given), None)
        return Reply(content=f"It's order {number}." if number else OUT_OF_SCOPE)
    requests = [line.strip() for line in parts.get("Reason for your call", "").splitlines() if line.strip()]
    pending = [r for i, r in enumerate(requests) if r not in said and not (i == 0 and said)]
    return Reply(content=pending[0] if pending else STOP)
