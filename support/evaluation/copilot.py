"""A scenario's copilot part ([copilot], evaluation/README.md): after the turns the demo's staff member takes the
conversation over, asks the copilot for a draft and a suggestion, checks the draft cites the policy at its current
version, and makes the suggestion from the console's own action (with every rule it has) to compare the shop and
the desk with the expected end state."""

from __future__ import annotations

from unittest import mock

from support import copilot
from support.desk import queue, staff_actions, takeover
from support.models import Conversation, CopilotRun, PolicyDocument

from . import endstate
from .criteria import Check, check_end_state
from .scenario import CopilotExpect


def play(expect: CopilotExpect, conversation: Conversation, staff, shop_before, remote) -> list[Check]:
    takeover.conversation_take_over(conversation=conversation, user=staff)
    conversation.refresh_from_db()
    draft, suggestion = _asked(conversation, staff, "draft"), _asked(conversation, staff, "suggest")
    checks = [Check(f"copilot: the {run.kind} is done", run.status == CopilotRun.DONE, run.error)
              for run in (draft, suggestion)]
    if expect.draft_cites:
        checks.append(_cites(draft, expect.draft_cites))
    if expect.suggests:
        made = (suggestion.suggestion or {}).get("action")
        checks.append(Check(f"copilot: suggests a {expect.suggests}", made == expect.suggests,
                            f"suggested {suggestion.suggestion}"))
    if expect.end_state is not None:
        checks.append(_made(conversation, staff, suggestion.suggestion))
        checks += [Check(f"copilot: {c.name}", c.ok, c.detail, c.tag) for c in check_end_state(
            expect.end_state, endstate.observe(conversation, shop_before, remote))]
    return checks


def _asked(conversation: Conversation, staff, kind: str) -> CopilotRun:
    with mock.patch.object(queue, "run_copilot", autospec=True):  # worked here, not by a worker
        run = copilot.copilot_start(conversation=conversation, user=staff, kind=kind)
    copilot.copilot_execute(run.pk)
    run.refresh_from_db()
    return run


def _cites(draft: CopilotRun, doc_id: str) -> Check:
    """The draft read the policy at its current version and names it as "<title> (version N)"."""
    policy = PolicyDocument.objects.filter(doc_id=doc_id).first()
    if policy is None:
        return Check(f"copilot: the draft cites {doc_id}", False, "no such policy")
    read = any(s.get("kind") == "policy" and s.get("id") == doc_id and s.get("version") == policy.version
               for s in draft.sources)
    named = f"{policy.title} (version {policy.version})"
    return Check(f"copilot: the draft cites {doc_id} version {policy.version}", read and named in draft.text,
                 f"sources {draft.sources}; draft {draft.text[:300]!r}")


def _made(conversation: Conversation, staff, suggestion: dict | None) -> Check:
    """The person makes the suggestion from the console's action: the action's own checks decide what happens."""
    if not suggestion:
        return Check("copilot: the suggestion is made from the console", False, "nothing was suggested")
    try:
        if suggestion["action"] == "refund":
            action = staff_actions.refund_issue(conversation=conversation, user=staff, order_id=suggestion["order_id"],
                                                amount=suggestion["amount"], reason=suggestion.get("reason") or
                                                "as suggested")
        else:
            action = staff_actions.seller_message_send(conversation=conversation, user=staff,
                                                       order_id=suggestion["order_id"], message=suggestion["message"])
    except staff_actions.ActionRefused as refused:
        return Check("copilot: the suggestion is made from the console", False, f"refused: {refused}")
    return Check("copilot: the suggestion is made from the console", True, f"{action.kind}: {action.status}")
