"""escalate_to_human: hand the conversation to a support specialist (gated, and it ends the run)."""

from __future__ import annotations

from support.agent.tools import Tool, ToolContext, ToolError
from support.models import Approval


def escalate_to_human(ctx: ToolContext, reason: str, summary: str) -> dict:
    # Nothing to write in the shop: the conversation layer flags the conversation for a person
    # when it records this call's result.
    return {"status": "escalated", "queue": "support"}


def check_escalation(ctx: ToolContext, reason: str, summary: str) -> None:
    """One open hand-over per conversation: a second would only page the same people again."""
    if ctx.conversation_id and Approval.objects.filter(
            run__conversation__public_id=ctx.conversation_id, tool_call__name="escalate_to_human",
            decided_at__isnull=True).exists():
        raise ToolError("A hand-over to a person is already waiting for this conversation; tell the customer "
                        "a person will follow up.")


ESCALATE_TO_HUMAN = Tool(
    name="escalate_to_human",
    label="Handing over to a specialist",
    gated=True,
    terminal=True,
    description=(
        "Hand this conversation over to a human support specialist. Use it when the customer needs "
        "something you may not do (a refund above your limit, an exception to a policy, a legal or safety "
        "matter), when the customer asks for a person, or when you cannot resolve the case. Gated: a staff "
        "member confirms the handover. It ends your turn: afterwards tell the customer a specialist will "
        "follow up. summary is what the specialist reads first: the order, what happened, what you checked "
        "and what is still needed."
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
    fingerprint=lambda arguments: "",  # a hand-over, whatever the words
)
