"""The flows that use another system's tools, when the desk offers them (tools from MCP servers): a warranty
question (lookup_warranty, then an answer citing what the warranty service said) and a request for store credit
(the warranty looked up, then issue_store_credit, which a person approves; the answer says what they decided).

Only the tools in the request are used: a desk that does not offer them gets the other flows' answers, as
before. A tool may be offered under `<server>__<tool>` when its name clashes (docs/tools.md); both are
recognised. What a service answers is someone else's text: its warranty lines are quoted, never obeyed.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal

from .conversation import Result, Turn
from .facts import Order, fmt, money
from .reply import Call, Finish, declined_answer, unreviewed_answer

LOOKUP = "lookup_warranty"
CREDIT = "issue_store_credit"
CREDIT_WORDS = ("store credit", "shop credit", "sundry credit", "credit instead", "as credit", "voucher")
WARRANTY_WORDS = ("warranty", "warrantee", "guarantee", "guaranty")
AMOUNT = re.compile(r"€\s*(\d{1,6}(?:[.,]\d{1,2})?)|(\d{1,6}(?:[.,]\d{1,2})?)\s*(?:€|eur\b|euros?\b)", re.IGNORECASE)
REFERENCE = re.compile(r"\b(SC-\d{1,9})\b")
SERVICE_TEXT_SHOWN = 400


def offered_as(offered: set[str] | frozenset[str], tool: str) -> str | None:
    """The name the desk offers `tool` under: its own, or `<server>__<tool>`; None when not offered."""
    if tool in offered:
        return tool
    return next((name for name in sorted(offered) if name.endswith(f"__{tool}")), None)


def wanted(text: str, offered: set[str] | frozenset[str]) -> str | None:
    """"credit" or "warranty" when the customer's words ask for it and the desk offers the tool; else None."""
    lowered = text.lower()
    if offered_as(offered, CREDIT) and any(w in lowered for w in CREDIT_WORDS):
        return "credit"
    if offered_as(offered, LOOKUP) and any(w in lowered for w in WARRANTY_WORDS):
        return "warranty"
    return None


def narrate(call: Call) -> str | None:
    """What is said while a store credit waits for a person."""
    if call.name != CREDIT and not call.name.endswith(f"__{CREDIT}"):
        return None
    arguments = json.loads(call.arguments)
    return (f"I've asked our team to approve store credit of {arguments.get('amount')} EUR for order "
            f"{arguments.get('order_number')}. A member of the team reviews every request like this; you'll see "
            "their decision here.")


# --- reading the service's answers --------------------------------------------------------------------


def _said(r: Result) -> str | None:
    """The service's own text when it answered without an error, else None."""
    if not r.ok or r.get("service_reported_error") or not isinstance(r.get("text"), str):
        return None
    return r.get("text")


def _cover(text: str) -> str:
    """The warranty lines ("- Kettle: 2-year warranty, valid until ...") as one sentence, else the text cut."""
    lines = [line.strip()[2:].strip().rstrip(".") for line in text.splitlines() if line.strip().startswith("- ")]
    said = "; ".join(lines) if lines else " ".join(text.split())
    return said[:SERVICE_TEXT_SHOWN].rstrip(".")


def _not_covered(text: str) -> bool:
    return "no warranty" in text.lower() and "-year warranty" not in text.lower()


def _unavailable(o: Order, what: str) -> Finish:
    return Finish("not_resolved", f"The warranty service did not answer about {o.id}.",
                  f"I couldn't reach our warranty service to {what} for order {o.id} just now. A member of our "
                  "team will check and follow up with you here.")


# --- the flows ------------------------------------------------------------------------------------------


def _warranty(t: Turn, o: Order, name: str, what: str):
    """What the warranty service said of the order, or the step to take first: ask it, or say it did not answer."""
    looked = t.latest(name, order_number=o.id)
    if looked is None:
        return Call.of(name, order_number=o.id)
    said = _said(looked)
    return _unavailable(o, what) if said is None else said


def warranty(t: Turn, o: Order, offered: set[str] | frozenset[str]):
    said = _warranty(t, o, offered_as(offered, LOOKUP), "look up the warranty")
    if not isinstance(said, str):
        return said
    cover = _cover(said)
    if _not_covered(said):
        return Finish("resolved", f"Warranty of {o.id} looked up: not covered.",
                      f"I checked with our warranty service: for order {o.id}, {cover}. I'm sorry; if something is "
                      "wrong with the order, tell me what happened and I'll see what else I can do.")
    return Finish("resolved", f"Warranty of {o.id} looked up with the warranty service.",
                  f"I checked with our warranty service. For order {o.id}: {cover}. If something stops working "
                  "while it is covered, write to us here and we'll sort it out.")


def credit(t: Turn, o: Order, offered: set[str] | frozenset[str]):
    lookup, name = offered_as(offered, LOOKUP), offered_as(offered, CREDIT)
    if lookup:  # a store credit for a faulty item rests on its warranty: look it up first
        said = _warranty(t, o, lookup, "check the warranty")
        if not isinstance(said, str):
            return said
        if _not_covered(said):
            return Finish("not_resolved", f"No store credit on {o.id}: the warranty service says it is not covered.",
                          f"I checked with our warranty service: for order {o.id}, {_cover(said)}, so I can't "
                          "offer store credit for it. I'm sorry; if something else is wrong with the order, tell "
                          "me and I'll see what I can do.")
    done = t.latest(name, order_number=o.id)
    if done is None:
        amount = _asked_amount(t.request) or o.refundable
        if amount <= 0:
            return Finish("not_resolved", f"{o.id} has nothing left to give as store credit.",
                          f"Order {o.id} has already been refunded in full, so there is nothing left to give as "
                          "store credit.")
        return Call.of(name, order_number=o.id, amount=fmt(amount),
                       note=f"Customer asked for store credit for {o.titles} on {o.id}")
    return _credit_decided(done, o, t.shop)


def _credit_decided(done: Result, o: Order, shop: str) -> Finish:
    asked = (done.args or {}).get("amount", "")
    said = _said(done)
    if said is not None:
        found = REFERENCE.search(said)
        ref = f" (reference {found.group(1)})" if found else ""
        return Finish("resolved", f"Store credit of {asked} EUR issued on {o.id}.",
                      f"Our team approved it: store credit of {asked} EUR has been added for order {o.id}{ref}. "
                      f"You can spend it on your next {shop}order.")
    if done.rejection:
        return Finish("not_resolved", f"Store credit of {asked} on {o.id} was declined by staff: {done.rejection}",
                      declined_answer(f"store credit of {asked} EUR for order {o.id}", done.rejection))
    if done.expired:
        return Finish("handed_to_person", f"Store credit of {asked} on {o.id} was not reviewed in time.",
                      unreviewed_answer(f"store credit of {asked} EUR for order {o.id}", "added"))
    if "may have run" in done.text:
        return Finish("handed_to_person", f"Store credit of {asked} on {o.id} may have been issued; a person checks.",
                      f"I asked for store credit of {asked} EUR for order {o.id}, but I couldn't confirm that it "
                      "went through. A member of our team will check with the warranty service and let you know "
                      "here; there's no need to ask again.")
    return Finish("not_resolved", f"Store credit on {o.id} failed: {done.error or done.text[:120]}",
                  f"I tried to add store credit of {asked} EUR for order {o.id}, but it didn't go through. A "
                  "member of our team will look into it and follow up here.")


def _asked_amount(text: str) -> Decimal | None:
    found = AMOUNT.search(text)
    if not found:
        return None
    amount = money((found.group(1) or found.group(2)).replace(",", "."))
    return amount if amount is not None and amount > 0 else None


FLOWS = {"warranty": warranty, "credit": credit}
