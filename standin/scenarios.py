"""The stand-in's brain: from the conversation alone, decide the next tool call or the final answer.

One flow per kind of request (missing parcel, damaged, wrong item, refund, status). Each flow asks for
the facts it lacks, one call per reply, then finishes: `record_outcome` first, the customer's answer
after. Nothing but the conversation is consulted, so the same conversation always gets the same reply.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from decimal import Decimal

from . import customer, facts, german, services
from .conversation import ORDER_ID, Result, Turn, intent, read_turn, recognised, stated_intent
from .facts import Order, Scan, ago, fmt, when
from .reply import Call, Finish, Reply, declined_answer, sentence, unreviewed_answer


def decide(messages: list[dict], tools: list | None = None, tool_choice=None,
           outcome_style: str = "separate", turn: Turn | None = None) -> Reply:
    reply = _decide(messages, tools, tool_choice, outcome_style, turn)
    if reply.content and not customer.is_customer_request(messages):
        system = "\n".join(str(m.get("content") or "") for m in messages if m.get("role") in ("system", "developer"))
        if german.told(system):  # the desk says the customer writes German: answer in it
            return replace(reply, content=german.translate(reply.content))
    return reply


def _decide(messages: list[dict], tools: list | None, tool_choice, outcome_style: str, turn: Turn | None) -> Reply:
    offered = {t["function"]["name"] for t in tools or [] if isinstance(t, dict) and t.get("function")}
    if customer.is_customer_request(messages):
        return customer.reply(messages, offered)  # playing the customer's side for an evaluation
    if tool_choice == "none":
        offered = set()
    turn = turn or read_turn(messages)
    if turn.spin_warned:
        return Reply(content=SPIN)  # the loop says we are going round in circles: stop calling
    step = _plan_safely(turn, frozenset(offered))
    if turn.recorded or not offered:
        return Reply(content=step.text if isinstance(step, Finish) else _fallback(turn).text)
    if isinstance(step, Call):
        if step.name in offered and not turn.answered(step.name, step.arguments):
            return Reply(content=_narrate(step), calls=(step,))
        step = _fallback(turn)
    if "record_outcome" not in offered:
        return Reply(content=step.text)
    record = Call.of("record_outcome", outcome=step.outcome, summary=step.summary)
    if outcome_style == "with_content":
        return Reply(content=step.text, calls=(record,))
    return Reply(calls=(record,))


def _narrate(call: Call) -> str | None:
    """What a model says while it asks for a call a person must approve: the customer is not left waiting
    in silence."""
    if call.name == "issue_refund":
        amount = json.loads(call.arguments).get("amount")
        return (f"I've asked our team to approve a refund of {amount} EUR. A member of the team reviews every "
                "refund; you'll see their decision here.")
    said = services.narrate(call)
    if said is not None:
        return said
    # escalate_to_human: nothing. The desk tells the customer once that a member of the team will reply
    # (the tool's description says so); a goodbye of our own would be a second message saying the same.
    return None


SPIN = ("I'm sorry: I keep getting the same result when I check this, so rather than go round in "
        "circles I'll stop here. A member of our support team can pick this up from what I've found.")


def _fallback(turn: Turn) -> Finish:
    about = f" about order {turn.order_id}" if turn.order_id else ""
    return Finish("not_resolved", f"Could not complete the checks{about}.",
                  f"I'm sorry, I couldn't finish checking your request{about} just now. "
                  "A member of our support team will follow up with you here.")


def _plan_safely(turn: Turn, offered: frozenset[str] = frozenset()):
    try:
        return plan(turn, offered)
    except Exception:  # noqa: BLE001 - odd tool results must give an apology, not a 500
        return _fallback(turn)


def plan(t: Turn, offered: frozenset[str] = frozenset()):
    """The next step for the turn; `offered` is the tools the request offers (another system's tools are used
    only when offered: services.py)."""
    if t.steps is not None:
        return _bench(t)
    if t.photo_now and stated_intent(t.request) is None and t.said_before:
        t = replace(t, request=f"{t.said_before}\n{t.request}")  # the photo we asked for: back to that request
    kind = services.wanted(t.request, offered)
    if kind is None and not recognised(t.request):
        return _unrecognised(t)
    oid = t.order_id
    if (kind is None and stated_intent(t.request) is None and german.said("order number", t.previous_answer)
            and t.said_before):
        # "It's SU-41310." answers our question: the request is the one before
        kind = services.wanted(t.said_before, offered) or intent(t.said_before)
    kind = kind or intent(t.request)
    if kind == "thanks" and ORDER_ID.search(t.request):
        kind = "status"  # "ok, SU-41210": an order named is a question about it
    if kind == "thanks":
        return Finish("resolved", "The customer said thanks; nothing more to do.",
                      "You're welcome! If there's anything else about your order, just write here.")
    if not oid and len(t.known) > 1:
        named = " or ".join(f"{number} ({about})" for number, about in t.known[:3])
        return Finish("waiting_on_customer", "Asked the customer which of their recent orders it is about.",
                      f"I'd be glad to help. Is it about {named}? If it's another order, send me its order "
                      "number; it starts with \"SU-\".")
    if not oid:
        return Finish("waiting_on_customer", "Asked the customer for their order number.",
                      "I'd be glad to help. Could you send me your order number? It starts with \"SU-\" "
                      "and is in your order confirmation email.")
    got = t.latest("get_order", order_id=oid)
    if got is None:
        return Call.of("get_order", order_id=oid)
    if not got.ok:
        return Finish("waiting_on_customer", f"No order {oid} was found for this customer; asked them to check it.",
                      f"I couldn't find an order {oid} on your account. Could you check the number in your "
                      "confirmation email and send it again? If the order was placed from another account, "
                      "please write to us from that account.")
    if kind in services.FLOWS:
        return services.FLOWS[kind](t, Order(got.data), offered)
    return FLOWS[kind](t, Order(got.data))


# What a cautious agent says when it cannot tell what the customer wants; a second such turn in a row goes
# to a person. The first words mark the answer, so the next turn can tell it came just before.
NOT_UNDERSTOOD = "I'm sorry, I'm not sure I understood what you need."
CAN_DO = ("I can help with your {shop}orders: where a parcel is, a parcel marked delivered that never arrived, "
          "an item that arrived damaged or isn't what you ordered, and refunds.")


def _unrecognised(t: Turn):
    if german.said(NOT_UNDERSTOOD, t.previous_answer):
        asked = " ".join(t.request.split())[:300]
        escalated = t.latest("escalate_to_human")
        if escalated is None:
            return Call.of("escalate_to_human", reason="The customer's request is outside what I can help with",
                           summary=f"Twice I could not match the customer's message to an order question. Latest "
                                   f"message: \"{asked}\". A person needs to answer it.")
        if escalated.ok:
            return Finish("handed_to_person", "Request not understood twice; handed to a person.",
                          "I've passed your question to a member of our team, who will reply here.")
        return Finish("not_resolved", "Request not understood twice; the hand-over did not go through.",
                      "I'm sorry, I couldn't pass your question to a member of our team just now. Please write to "
                      "us again later, or tell me which order your question is about.")
    which = (f" Is your question about order {t.order_id}, or another one?" if t.order_id else
             " Which order is it about? Please send me the order number; it starts with \"SU-\" and is in your "
             "order confirmation email.")
    return Finish("waiting_on_customer", "Did not recognise the request; said what I can help with and asked "
                                         "which order.",
                  f"{NOT_UNDERSTOOD} {CAN_DO.format(shop=t.shop)}{which} If it's about something else, tell me and I'll pass it to a "
                  "member of our team.")


def _disputed(t: Turn, o: Order, declined: Result):
    """The customer asks again for a refund staff declined in an earlier turn: hand it to a person."""
    asked = (declined.args or {}).get("amount", "")
    escalated = t.latest("escalate_to_human")
    if escalated is None:
        return Call.of("escalate_to_human", reason=f"Customer disputes the declined refund on {o.id}",
                       summary=f"Staff declined a refund of {asked} EUR on {o.id} ({declined.rejection}); the "
                               "customer asks for it again. A person needs to review the decision with them.")
    lead = (f"Our team already reviewed a refund of {asked} EUR for order {o.id} and decided against it: "
            f"{declined.rejection.strip().rstrip('.')}.")
    return _after_escalation(escalated, o, lead)


def _bench(t: Turn):
    """"#steps:N": N model calls in all (N-2 distinct policy searches, the outcome, the answer)."""
    done = sum(1 for r in t.results if r.name == "search_policy")
    if done < max(t.steps - 2, 0):
        return Call.of("search_policy", query=f"parcel marked delivered but not received, check {done + 1}")
    return Finish("resolved", f"Benchmark run of {t.steps} model calls.",
                  f"I checked our policies {done} times. Everything is in order.")


# --- shared steps -------------------------------------------------------------------------------


def _track(t: Turn, o: Order, prefer_delivered: bool):
    """The tracking result of the parcel that matters, a call to fetch it, or None without parcels."""
    parcel = o.parcel(prefer_delivered)
    if parcel is None:
        return None
    return t.latest("track_parcel", tracking=parcel["tracking"]) or Call.of("track_parcel", tracking=parcel["tracking"])


def _policies(t: Turn, o: Order, query: str):
    """Every policy document seen this turn, or the search that finds those for `query`."""
    if t.latest("search_policy", query=query) is None:
        args = {"query": query, **({"seller_id": o.seller_id} if o.marketplace and o.seller_id else {})}
        return Call.of("search_policy", **args)
    docs: dict[str, dict] = {}
    for r in t.results:
        if r.name == "search_policy" and r.ok:
            for doc in r.get("results") or []:
                if isinstance(doc, dict):
                    docs.setdefault(str(doc.get("doc_id") or doc.get("title")), doc)
    return list(docs.values())


def _who(rule: facts.Rule, o: Order) -> str:
    if not rule.by_seller:
        return "Our policy"
    name = o.seller_name
    return f"{name}' policy" if name.endswith("s") else f"{name}'s policy"


def _refund(t: Turn, o: Order, amount: Decimal, reason: str, lead: str, docs: list[dict], credit_first: bool = False):
    """Refund `amount`, or hand over when it is above what an agent may refund; then say what happened.
    `credit_first`: the customer asked for their money back, so a shop's rule to offer store credit first applies
    (a refund the desk owes for a missing parcel or a delay is no such request)."""
    escalated = t.latest("escalate_to_human")
    if escalated is not None:
        return _after_escalation(escalated, o, lead)
    done = t.latest("issue_refund", order_id=o.id)
    if done is None:
        declined = next((r for r in reversed(t.earlier) if r.name == "issue_refund" and r.rejection
                         and (r.args or {}).get("order_id") == o.id), None)
        if declined is not None:  # staff already said no: asking again is not ours to do, a person decides
            return _disputed(t, o, declined)
        limit = facts.ceiling([t.system] + [str(d.get("excerpt") or "") for d in docs])
        if limit is not None and amount > limit:
            return _escalate(o, amount, limit, reason)
        below = facts.credit_first_below(t.system)
        if credit_first and below is not None and amount < below and not german.said(CREDIT_OFFER, t.previous_answer):
            return Finish("waiting_on_customer", f"Offered store credit before a refund of {fmt(amount)} on {o.id}, "
                                                 "as the shop's rules ask.",
                          f"{lead} {CREDIT_OFFER} of {fmt(amount)} EUR instead, to spend on anything in our shop. "
                          "Would you like the store credit, or do you still prefer a refund?")
        return Call.of("issue_refund", order_id=o.id, amount=fmt(amount), reason=reason)
    asked = done.args.get("amount", fmt(amount))
    if done.ok:
        ref = done.get("refund_id")
        refunded = done.get("amount") or asked
        to = " to your original payment method" + (f" (refund reference {ref})." if ref else ".")
        if refunded != asked or done.get("staff_decision"):  # staff changed what the agent asked for
            return Finish("resolved", f"Refunded {refunded} EUR on {o.id}, not the {asked} asked: staff approved "
                                      f"a different amount. {reason}.",
                          f"{lead} I asked our team to approve a refund of {asked} EUR; after reviewing it they "
                          f"approved {refunded} EUR, so I've refunded {refunded} EUR{to}{_their_words(done)} If "
                          "you think the amount isn't right, just reply here and a member of our team will look at "
                          "it again.")
        return Finish("resolved", f"Refunded {refunded} EUR on {o.id}: {reason}.",
                      f"{lead} I've refunded {refunded} EUR{to}")
    if done.rejection:
        return Finish("not_resolved", f"Refund of {asked} on {o.id} was declined by staff: {done.rejection}",
                      f"{lead} {declined_answer(f'a refund of {asked} EUR', done.rejection)}")
    if done.expired:
        return Finish("handed_to_person", f"Refund of {asked} on {o.id} was not reviewed in time; a person follows up.",
                      f"{lead} {unreviewed_answer(f'a refund of {asked} EUR', 'refunded')}")
    error = done.error or done.text
    if re.search(r"limit|ceiling|escalate", error, re.I):
        limit = re.search(r"(\d+\.\d{2}) limit", error)
        return _escalate(o, amount, Decimal(limit.group(1)) if limit else None, reason)
    left = re.search(r"has (\d+(?:\.\d+)?) left to refund", error)
    if left and Decimal(left.group(1)) > 0 and fmt(Decimal(left.group(1))) != asked:
        return Call.of("issue_refund", order_id=o.id, amount=fmt(Decimal(left.group(1))), reason=reason)
    return Finish("not_resolved", f"Refund on {o.id} failed: {error}",
                  f"{lead} I tried to issue the refund, but it didn't go through ({error}). "
                  "A member of our team will look into it and follow up here.")


# The answer offering store credit first says this; the offer is made once: the customer's next words about the
# refund go on to the refund.
CREDIT_OFFER = "Before a refund, we can offer you store credit"


def _their_words(done: Result) -> str:
    """Why staff approved another amount, passed on as they wrote it (" Our team's note: …"), "" unsaid."""
    reason = done.get("staff_reason")
    return f" Our team's note: {sentence(str(reason))}" if reason else ""


def _escalate(o: Order, amount: Decimal, limit: Decimal | None, reason: str) -> Call:
    over = f"above the {fmt(limit)} limit an agent may refund" if limit else "above what an agent may refund"
    return Call.of("escalate_to_human", reason=f"Refund of {fmt(amount)} EUR on {o.id} is {over}",
                   summary=f"Customer asks for a refund on order {o.id} ({o.seller_name}): total {fmt(o.total)}, "
                           f"already refunded {fmt(o.refunded)}, refundable {fmt(o.refundable)}. {reason}. "
                           f"The amount is {over}, so a person needs to decide.")


def _after_escalation(r: Result, o: Order, lead: str) -> Finish:
    if r.ok:
        return Finish("handed_to_person", f"Handed order {o.id} to a person.",
                      f"{lead} This is more than I'm allowed to approve myself, so I've passed your request with "
                      "all the details to a specialist on our team. They'll get back to you here.")
    if r.expired:
        return Finish("handed_to_person", f"Hand-over for {o.id} was not confirmed in time; a person follows up.",
                      f"{lead} I've asked for a specialist on our team to take this over; they'll follow up with "
                      "you here.")
    why = (r.rejection or r.error or "it could not be handed over").strip().rstrip(".")
    return Finish("not_resolved", f"Hand-over for {o.id} did not happen: {why}",
                  f"{lead} I tried to pass this to a specialist, but that didn't go through ({why}). "
                  "I'm sorry; please reply here and we'll pick it up.")


def _status_text(o: Order, scan: Scan) -> str:
    if scan.status == "delivered":
        return (f"{scan.carrier} shows order {o.id} as delivered: \"{scan.said}\" on {when(scan.at)}, "
                f"{ago(scan.hours)}.")
    where = f" at {scan.location}" if scan.location else ""
    return (f"Order {o.id} is on its way with {scan.carrier} (tracking {scan.tracking}). The latest scan is "
            f"\"{scan.said}\"{where} on {when(scan.at)}, {ago(scan.hours)}.")


def _unshipped(o: Order) -> Finish:
    state = {"placed": "has been placed and hasn't shipped yet", "cancelled": "was cancelled"}.get(
        o.status, f"is marked \"{o.status or 'unknown'}\" and has no tracking yet")
    return Finish("resolved", f"Order {o.id} {state}.", f"Your order {o.id} {state}. I'll be here if you need "
                  "anything else about it.")


def _no_tracking(o: Order, r: Result) -> Finish:
    return Finish("not_resolved", f"Tracking for {o.id} failed: {r.error or r.text[:80]}",
                  f"I couldn't get the carrier's tracking for order {o.id} just now. A member of our team will "
                  "check it and follow up here.")


def _scan(t: Turn, o: Order, prefer_delivered: bool):
    """The parcel's latest scan, or the step to take first: fetch the tracking, or say why there is none."""
    tracked = _track(t, o, prefer_delivered)
    if tracked is None:
        return _unshipped(o)
    if isinstance(tracked, Call):
        return tracked
    if not tracked.ok:
        return _no_tracking(o, tracked)
    return Scan.of(tracked.data)


# --- the flows ----------------------------------------------------------------------------------


def missing(t: Turn, o: Order):
    scan = _scan(t, o, prefer_delivered=True)
    if not isinstance(scan, Scan):
        return scan
    if scan.status != "delivered":
        return Finish("resolved", f"{o.id} is not marked delivered yet; gave the latest scan.",
                      _status_text(o, scan) + " The carrier hasn't marked it as delivered yet, so it is still "
                      "on its way to you.")
    docs = _policies(t, o, "parcel marked delivered but not received")
    if isinstance(docs, Call):
        return docs
    wait = facts.rule(docs, "hours?", ("claim", "wait", "before"), o.seller_id)
    window = facts.rule(docs, "days?", ("claim",), o.seller_id)
    seen = (f"{scan.carrier} recorded your parcel for order {o.id} as delivered: \"{scan.said}\" on "
            f"{when(scan.at)}, {ago(scan.hours)}.")
    if window and scan.hours > window.n * 24:
        return Finish("not_resolved", f"Delivered scan {scan.hours} h old, outside the {window.n}-day claim window.",
                      f"{seen} {_who(window, o)} is that a missing-parcel claim must be opened within {window.n} "
                      f"days of the delivery scan. That scan was {scan.hours // 24} days ago, so I'm sorry, but I "
                      "can't open a claim or refund this order any more.")
    if wait and scan.hours < wait.n:
        return _too_early(t, o, scan, wait, seen)
    if o.refundable <= 0:
        return Finish("not_resolved", f"{o.id} has nothing left to refund.",
                      f"{seen} This order has already been refunded in full, so there is nothing more to refund.")
    if wait:
        lead = (f"{seen} {_who(wait, o)} is that a missing-parcel claim can be opened {wait.n} hours after the "
                f"delivered scan, and {scan.hours} hours have passed"
                + (f", within the {window.n}-day claim window." if window else "."))
    else:
        lead = f"{seen} That is within the {window.n}-day claim window." if window else seen
    within = f", inside the {window.n}-day claim window" if window else ""
    return _refund(t, o, o.refundable, f"Parcel marked delivered but not received: {scan.hours} h since the "
                   f"delivered scan{within}", lead, docs)


def _too_early(t: Turn, o: Order, scan: Scan, wait: facts.Rule, seen: str):
    left = wait.n - scan.hours
    rule_text = (f"{_who(wait, o)} is that a missing-parcel claim can be opened once {wait.n} hours have passed "
                 f"since the delivered scan, and it has been {scan.hours} hours so far.")
    sent = ""
    if o.marketplace:
        asked = t.latest("message_seller", order_id=o.id)
        if asked is None:
            return Call.of("message_seller", order_id=o.id, message=(
                f"Order {o.id}: the customer reports that parcel {scan.tracking}, marked delivered "
                f"(\"{scan.said}\") on {when(scan.at)}, has not arrived. Please open a missing-parcel claim with "
                f"{scan.carrier} once {wait.n} hours have passed since the delivered scan (in about {left} hours) "
                "and let us know the outcome."))
        sent = (f" I've messaged {o.seller_name} and asked them to open a claim with the carrier as soon as the "
                f"{wait.n} hours have passed, in about {left} hours." if asked.ok else
                f" I couldn't reach {o.seller_name} just now; our team will ask them to open the claim.")
    return Finish("resolved", f"Delivered scan {scan.hours} h old, under the {wait.n}-hour rule; "
                  f"{'seller asked to open a claim after it' if o.marketplace else 'customer told to wait'}.",
                  f"{seen} {rule_text}{sent} If the parcel still hasn't turned up by then, the claim can go ahead "
                  f"and you can be refunded up to {fmt(o.refundable)} EUR.")


def damaged(t: Turn, o: Order):
    # The policy first: it says whether the delivery date matters (a reporting window), then the scan.
    docs = _policies(t, o, "item arrived damaged")
    if isinstance(docs, Call):
        return docs
    window = facts.rule(docs, "days?", ("report", "within"), o.seller_id)
    tracked = _track(t, o, prefer_delivered=True) if window else None
    if isinstance(tracked, Call):
        return tracked
    scan = Scan.of(tracked.data) if tracked is not None and tracked.ok else None
    lead = f"I'm sorry that your {o.titles} from order {o.id} arrived damaged."
    if t.photos:
        lead += " Thank you for the photo."
    if window and scan:
        days = scan.hours // 24
        lead += (f" {_who(window, o)} asks for damage to be reported within {window.n} days of delivery, and "
                 f"it was delivered {ago(scan.hours)}")
        if scan.hours > window.n * 24:
            return Finish("not_resolved",
                          f"Damage reported {days} days after delivery, past the {window.n}-day window.",
                          f"{lead}, so this is outside the reporting window and I can't refund it. I'm sorry.")
        lead += ", so you're within it."
    if o.refundable <= 0:
        return Finish("not_resolved", f"{o.id} has nothing left to refund.",
                      f"{lead} This order has already been refunded in full.")
    if _photo_needed(t, docs):
        return Finish("waiting_on_customer", f"Asked for a photo of the damage on {o.id}: the damage policy asks "
                                             "for one before a refund.",
                      f"{lead} Our damage policy asks for a photo before a refund: please attach one of the damaged "
                      "item (and of the packaging, if you still have it) with the paperclip button next to the "
                      "message box, and I'll take it from there.")
    return _refund(t, o, o.refundable, "Item arrived damaged"
                   + (f", reported within the {window.n}-day window" if window else ""), lead, docs)


PHOTO_WORDS = re.compile(r"\b(photos?|pictures?|pics?|images?|snaps?)\b", re.IGNORECASE)


def _photo_needed(t: Turn, docs: list[dict]) -> bool:
    """The damage policy asks for photos. Until one is in the conversation, ask for it when the customer
    offers one ("here is a photo") or the desk's prompt says customers can attach photos; otherwise the
    flow goes on without (a desk that cannot take files)."""
    if t.photos:
        return False
    wanted = any(PHOTO_WORDS.search(str(d.get("excerpt") or d.get("text") or "")) or d.get("doc_id") == "POL-DAMAGE"
                 for d in docs)
    system = t.system.lower()
    return wanted and bool(PHOTO_WORDS.search(t.request) or ("attach" in system and "photo" in system))


def wrong(t: Turn, o: Order):
    docs = _policies(t, o, "wrong item received")
    if isinstance(docs, Call):
        return docs
    lead = (f"I'm sorry you received the wrong item for order {o.id}. Under our wrong-item policy the seller "
            "sends you a return label, then a replacement or a refund.")
    if not o.marketplace:
        escalated = t.latest("escalate_to_human")
        if escalated is None:
            return Call.of("escalate_to_human", reason=f"Wrong item received on {t.shop.strip() or 'shop'}-fulfilled order {o.id}",
                           summary=f"Customer received the wrong item for {o.id} (ordered: {o.titles}). "
                                   "Needs a return label and a replacement or refund from the warehouse.")
        return _after_escalation(escalated, o, lead)
    asked = t.latest("message_seller", order_id=o.id)
    if asked is None:
        return Call.of("message_seller", order_id=o.id, message=(
            f"Order {o.id}: the customer received the wrong item (ordered: {o.titles}). Please send them a "
            "return label and arrange a replacement or a refund once the item is on its way back."))
    if not asked.ok:
        return Finish("not_resolved", f"Could not message {o.seller_name} about {o.id}: {asked.error}",
                      f"{lead} I couldn't reach {o.seller_name} just now; our team will follow up with them.")
    return Finish("resolved", f"Wrong item on {o.id}; asked {o.seller_name} for a return label.",
                  f"{lead} I've asked {o.seller_name} to send you a return label for the item you received; "
                  "once it's on its way back they'll send the right one or refund you.")


def refund(t: Turn, o: Order):
    if o.status not in ("delivered", "cancelled"):
        # Nothing has gone wrong with a parcel still on its way: its status is the answer, whatever
        # anyone (a seller's description included) says about refunds.
        step = status(t, o)
        if isinstance(step, Finish) and t.latest("issue_refund", order_id=o.id) is None:
            step = replace(step, summary=f"{step.summary} No refund: not delivered yet.",
                           text=f"{step.text} As it's still on its way, there's nothing to refund at this point; "
                                "if it doesn't arrive, write to us here and we'll sort it out.")
        return step
    docs = _policies(t, o, "refund request")
    if isinstance(docs, Call):
        return docs
    lead = f"Order {o.id} came to {fmt(o.total)} EUR"
    lead += (f" and {fmt(o.refunded)} EUR has already been refunded, so {fmt(o.refundable)} EUR is left to refund."
             if o.refunded > 0 else ".")
    if o.refundable <= 0:
        return Finish("not_resolved", f"{o.id} is already refunded in full.",
                      f"{lead} It has already been refunded in full, so there is nothing more I can refund.")
    return _refund(t, o, o.refundable, "Customer asked for a refund"
                   + (" of the remaining balance" if o.refunded > 0 else ""), lead, docs, credit_first=True)


def status(t: Turn, o: Order):
    scan = _scan(t, o, prefer_delivered=False)
    if not isinstance(scan, Scan):
        return scan
    text = _status_text(o, scan)
    if not scan.weather or scan.status == "delivered":
        return Finish("resolved", f"Gave the status of {o.id}: {scan.status}, {scan.hours} h since the last scan.",
                      text)
    docs = _policies(t, o, "weather and carrier delays")
    if isinstance(docs, Call):
        return docs
    limit = facts.rule(docs, "days?", ("delay", "weather"), o.seller_id)
    text += " The parcel is held up by severe weather."
    fee = o.shipping_fee()
    if limit and scan.hours > limit.n * 24 and fee:
        text += (f" {_who(limit, o)} is that when weather delays a parcel by more than {limit.n} days, the "
                 "shipping fee is refunded.")
        return _refund(t, o, fee, f"Weather delay over {limit.n} days: shipping fee refunded", text, docs)
    return Finish("resolved", f"{o.id} delayed by weather; gave the latest scan.",
                  text + " It should move again as soon as the carrier can get through.")


FLOWS = {"missing": missing, "damaged": damaged, "wrong": wrong, "refund": refund, "status": status}
