"""Reads for the conversation page's "Why this needs a person": one short summary, live. What the customer
wants, what the agent found (its facts, with each order's balance as the shop has it now), what people have
done since the hand-over, and what is left for the person reading it. Read again by the page whenever
something changes (a refund, a reply, the customer writing, a take-over, a close), so it never says
"refundable 480.00" after a 300.00 refund.

Only the matter at hand: an earlier question the agent resolved, or one a person dealt with before the agent
was back on the conversation, is not this hand-over's business. The facts and their words are the agent's
summary (support/agent/summary.py); the run keeps the text as it was when it stopped, for the API and trace.
"""

from __future__ import annotations

import logging

from django.db.models import Max, Min

from support.agent import summary
from support.agent import types as agent
from support.customers.identity import shop_customer_id
from support.customers.words import staff_name
from support.desk.runner import history_for_model
from support.desk.selectors import latest_run
from support.models import Conversation, Message, Run, StaffAction
from support.shop import port, shop

log = logging.getLogger(__name__)

NEXT_STEPS = "then close the conversation, or hand it back to the agent"


def handed_over(run: Run | None) -> bool:
    """The run ended by giving the conversation to a person (not a person taking it while the agent worked)."""
    return (run is not None and run.status == Run.STOPPED and run.stop_reason != agent.TAKEN_OVER
            and (run.stop_reason != agent.ANSWERED or run.outcome == agent.HANDED_TO_PERSON))


def _matter_start(conversation: Conversation, run: Run, first_seq: int) -> int:
    """The seq after which this hand-over's matter begins: after the last answer of a run that resolved the
    customer's question, and after anything a person said (a reply, a notice of a refund, a hand-back, a close)
    before the agent was back on the conversation."""
    resolved = (Run.objects.filter(conversation=conversation, stop_reason=agent.ANSWERED, outcome="resolved",
                                   created_at__lt=run.created_at).order_by("-created_at", "-pk").first())
    ends = [0]
    if resolved is not None:
        ends.append(Message.objects.filter(run=resolved).aggregate(n=Max("seq"))["n"] or 0)
    ends.append(conversation.messages.filter(author_user__isnull=False, seq__lt=first_seq)
                .aggregate(n=Max("seq"))["n"] or 0)
    return max(ends)


def _balances(conversation: Conversation, numbers) -> dict[str, dict]:
    """{order number: its total, refunded and refundable now}, for the orders the agent looked up."""
    if not numbers:
        return {}
    try:
        owner = shop_customer_id(conversation.customer_id)
        orders = shop().orders_of(owner) if owner is not None else []
    except port.ShopUnavailable as away:  # the agent's figures then, said as they were
        log.warning("hand-over of %s: the shop did not answer (%s)", conversation.public_id, away)
        return {}
    return {o.number: {"total": o.total, "refunded": o.refunded, "refundable": o.refundable}
            for o in orders if o.number in numbers}


def _done_since(conversation: Conversation, run: Run, after: list[Message]) -> list[str]:
    """What people did after the hand-over, in plain words, oldest first."""
    done = []
    actions = (StaffAction.objects.filter(conversation=conversation, status=StaffAction.DONE,
                                          created_at__gte=run.finished_at or run.created_at)
               .select_related("user").order_by("created_at", "pk"))
    for action in actions:
        who, args = staff_name(action.user) or "A person", action.arguments or {}
        if action.kind == StaffAction.REFUND:
            done.append(f"{who} refunded {args.get('amount')} EUR on {args.get('order_id')}")
        else:
            done.append(f"{who} messaged the seller of {args.get('order_id')}")
    replies: dict[str, int] = {}
    for m in after:
        if m.author == Message.STAFF:
            name = staff_name(m.author_user) or "A person"
            replies[name] = replies.get(name, 0) + 1
    for name, count in replies.items():
        done.append(f"{name} replied to the customer" + (f" ({count} messages)" if count > 1 else ""))
    return done


def _left(run: Run, facts: summary.Facts, done: list[str], after: list[Message]) -> str:
    answered_at = max([m.seq for m in after if m.author == Message.STAFF], default=0)
    waiting = [m for m in after if m.author == Message.CUSTOMER and m.seq > answered_at and (m.content or "").strip()]
    latest = f"“{summary.clip(waiting[-1].content, 160)}”" if waiting else ""
    if done:
        if latest:
            return f"Answer the customer's latest message, {latest}; {NEXT_STEPS}."
        return f"Nothing waits for an answer: tell the customer anything still open, {NEXT_STEPS}."
    if run.stop_reason == agent.ANSWERED:  # the agent answered and said a person must take it from here
        left = f"{summary.clip(run.outcome_summary or 'the agent could not help further', 300).rstrip(' .')}. " \
               "Reply to the customer here."
    else:
        left = summary.left_words(run.stop_reason, facts.escalation)
        left = left[:1].upper() + left[1:]
    return left + (f" The customer wrote since: {latest}." if latest else "")


def handover_summary(conversation: Conversation) -> dict | None:
    """The summary for the page, or None when nothing waits for a person (the agent has the conversation, it
    is closed, or no run handed it over)."""
    conversation.refresh_from_db(fields=["status", "closed_at", "last_seq"])
    run = latest_run(conversation)
    if conversation.status == Conversation.OPEN or not handed_over(run) or conversation.is_closed():
        return None
    seqs = Message.objects.filter(run=run).aggregate(first=Min("seq"), last=Max("seq"))
    last = seqs["last"] or conversation.last_seq
    start = _matter_start(conversation, run, seqs["first"] or last)
    messages = list(conversation.messages.filter(seq__gt=start).select_related("author_user").order_by("seq"))
    history, _ = history_for_model([m for m in messages if m.seq <= last])
    facts = summary.matter_facts(summary.current_matter(history))
    after = [m for m in messages if m.seq > last]
    done = _done_since(conversation, run, after)
    found = summary.found_words(facts, _balances(conversation, set(facts.orders)))
    if facts.refunds:
        found.append("Asked for " + "; ".join(facts.refunds[-3:]))
    return {
        "run": str(run.public_id),
        "reason": run.stop_reason,  # the code; the words are in `left`
        "wants": summary.customer_wants(summary.current_matter(history)),
        "found": found,
        "done": done,
        "left": _left(run, facts, done, after),
    }
