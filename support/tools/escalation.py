"""escalate_to_human: hand the conversation to a person (it ends the run). By default it runs at once and the
conversation goes straight to a person's queue with the agent's summary; ESCALATION_NEEDS_APPROVAL makes a
person confirm each hand-over first (the tool is then gated like a refund)."""

from __future__ import annotations

from django.conf import settings

from support.agent.tools import Tool, ToolContext, ToolError
from support.models import Approval


def escalate_to_human(ctx: ToolContext, reason: str, summary: str) -> dict:
    # Nothing to write in the shop: the runner flags the conversation for a person and tells the customer,
    # once, when the run stops on this call (runner._finish).
    return {"status": "escalated", "queue": "support"}


def check_escalation(ctx: ToolContext, reason: str, summary: str) -> None:
    """One open hand-over per conversation: a second would only page the same people again."""
    if ctx.conversation_id and Approval.objects.filter(
            run__conversation__public_id=ctx.conversation_id, tool_call__name="escalate_to_human",
            decided_at__isnull=True).exists():
        raise ToolError("A hand-over to a person is already waiting for this conversation; tell the customer "
                        "a person will follow up.")


def needs_person(arguments: dict) -> str:
    """The shop's choice: a hand-over waits for a person's confirmation only with ESCALATION_NEEDS_APPROVAL.
    Read on every call (not at import), so a setting changed at run time or in a test takes effect."""
    return "the shop has a person confirm every hand-over" if settings.ESCALATION_NEEDS_APPROVAL else ""


ESCALATE_TO_HUMAN = Tool(
    name="escalate_to_human",
    label="Handing over to a specialist",
    terminal=True,
    description=(
        "Hand this conversation over to a human support specialist. Use it when the customer needs "
        "something you may not do (a refund above your limit, an exception to a policy, a legal or safety "
        "matter), when the customer asks for a person, or when you cannot resolve the case. It ends your "
        "turn, and the desk itself tells the customer that a member of the team will reply here: do not "
        "write a goodbye of your own with it. summary is what the specialist reads first: the order, what "
        "happened, what you checked and what is still needed."
    ),
    parameters={
        "type": "object",
        "properties": {
            "reason": {"type": "string", "minLength": 1, "maxLength": 300, "description": "why a person is needed"},
            "summary": {"type": "string", "minLength": 1, "maxLength": 2000, "description": "the case so far"},
        },
        "required": ["reason", "summary"],
        "additionalProperties": False,
    },
    fn=escalate_to_human,
    check=check_escalation,
    needs_person=needs_person,
    fingerprint=lambda arguments: "",  # a hand-over, whatever the words
)
