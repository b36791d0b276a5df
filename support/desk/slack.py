"""Approvals in Slack: the message posted to SLACK_APPROVALS_CHANNEL when one is asked (what a person needs to
decide, Approve and Reject buttons, the way to the console), brought up to date once it is decided anywhere
or expires; the modal that asks a rejection's reason; who a Slack user is at the desk.

Every call to Slack's Web API is made here, through slack_sdk's WebClient at SLACK_API_URL (tests point it at
a local stand-in of Slack's endpoints). The buttons' requests come in at support/web/views/slack.py.
Text that customers, the agent or the shop wrote goes into Slack as plain_text, which Slack shows as written:
no formatting, links or mentions. A message's top-level `text` (the notification, and what Slack shows where it
cannot show blocks) is mrkdwn, so what goes there is escaped as Slack asks (&, < and >): a summary the model
wrote cannot mention <!channel> or make a link.
"""

from __future__ import annotations

import logging

from django.conf import settings
from slack_sdk import WebClient

from support.desk import announce, elsewhere, selectors
from support.models import Approval, SlackAccount, SlackApprovalMessage

log = logging.getLogger(__name__)

# action_id of each button, callback_id of the reason modal and its input (Slack sends them back).
APPROVE, APPROVE_SEEN, REJECT, OPEN = "approval_approve", "approval_approve_seen", "approval_reject", "approval_open"
REASON_MODAL, REASON_BLOCK, REASON_INPUT = "approval_reject_reason", "reason", "reason_input"
NOT_LINKED = ("Your Slack account is not linked to a staff account of the support desk, so nothing was decided. "
              "An administrator links it in the desk's admin (Slack accounts), or decide in the console.")
NOT_STAFF = ("Your Slack account is linked to a desk account that is not active staff, so nothing was decided.")
NO_SUCH_APPROVAL = "This approval is no longer in the desk, so nothing was decided."
HEADER_CHARS, TEXT_CHARS = 150, 2900  # Slack's limits: 150 for a header, 3000 for a section's text


def enabled() -> bool:
    return announce.slack_on()


def client() -> WebClient:
    return WebClient(token=settings.SLACK_BOT_TOKEN, base_url=settings.SLACK_API_URL or WebClient.BASE_URL,
                     timeout=settings.SLACK_TIMEOUT_SECONDS)


def direct_message(slack_user_id: str, text: str) -> None:
    """A message to one person (a bot posting to a member ID writes in its direct messages with them)."""
    client().chat_postMessage(channel=slack_user_id, text=text, unfurl_links=False, unfurl_icons=False)


def staff_for(slack_user_id) -> tuple[object | None, str]:
    """(the staff account a Slack user decides as, "") or (None, why not, in plain words)."""
    account = SlackAccount.objects.select_related("user").filter(slack_user_id=str(slack_user_id or "")).first()
    if account is None:
        return None, NOT_LINKED
    if not (account.user.is_active and account.user.is_staff):
        return None, NOT_STAFF
    return account.user, ""


def approval_for(value) -> Approval | None:
    """The approval a button names (its public id, as posted)."""
    return selectors.approval_by_public_id(value)


# -- the message ---------------------------------------------------------------------------------------------

def _plain(text: str, limit: int = TEXT_CHARS) -> dict:
    text = text if len(text) <= limit else text[:limit - 1] + "…"
    return {"type": "plain_text", "text": text or " ", "emoji": False}


def escaped(text: str) -> str:
    """Text for a mrkdwn field, shown as written: Slack's three control characters escaped, & first."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _button(text: str, action_id: str, value: str = "", style: str = "", url: str = "") -> dict:
    button = {"type": "button", "text": _plain(text, 75), "action_id": action_id}
    if value:
        button["value"] = value
    if style:
        button["style"] = style
    if url:
        button["url"] = url
    return button


def message(approval: Approval) -> tuple[str, list[dict]]:
    """(the notification's text, the blocks) of the approval's message, as it stands now."""
    e = elsewhere.approval_essentials(approval)
    blocks = [{"type": "header", "text": _plain(e.summary, HEADER_CHARS)}, *_warning(e),
              {"type": "section", "text": _plain("\n".join(f"{label}: {value}" for label, value in e.fields))}]
    if e.first:
        blocks.append({"type": "section", "block_id": "first", "text": _plain(
            f"{e.first}. Approving it is the second approval, and it runs.")})
    if e.earlier:  # plain_text: the reasons are as the staff wrote them
        blocks.append({"type": "section", "block_id": "earlier", "text": _plain(
            "Earlier decisions on this order:\n" + "\n".join(e.earlier))})
    if e.said:
        quoted = "\n".join(f"“{s.text}” ({s.at:%d %b, %H:%M} UTC{', after the agent asked' if s.after_request else ''})"
                           for s in e.said)
        blocks += [{"type": "context", "elements": [_plain("What the customer wrote:")]},
                   {"type": "section", "text": _plain(quoted)}]
    console = _button("Open in the console", OPEN, url=e.console_url)
    if approval.pending:
        note = f"Waiting for a decision until {elsewhere.moment(e.expires_at)}."
        if e.large_refund:
            note += " Only a support lead may approve it."
        blocks += [{"type": "context", "elements": [_plain(note)]},
                   {"type": "actions", "block_id": "decide", "elements": [
                       _button(f"Approve {e.amount} EUR" if e.amount else "Approve", APPROVE, str(approval.public_id),
                               "primary"),
                       _button("Reject…", REJECT, str(approval.public_id), "danger"), console]}]
        return escaped(f"Approval needed: {e.summary}"), blocks
    outcome = elsewhere.decided_words(approval)
    blocks += [{"type": "section", "block_id": "outcome", "text": _plain(outcome)},
               {"type": "actions", "elements": [console]}]
    return escaped(f"{e.summary}: {outcome}"), blocks


def _warning(e: elsewhere.Essentials) -> list[dict]:
    """The card's warning when text a third party wrote gives the agent instructions: the sentence, each text
    quoted (plain_text: shown as written), and what to check."""
    if not e.warning:
        return []
    quoted = "\n".join(f"{what}:\n“{text}”" for what, text in e.flagged)
    return [{"type": "section", "block_id": "warning", "text": _plain(f"⚠ Warning: {e.warning}")},
            {"type": "section", "text": _plain(quoted)},
            {"type": "context", "elements": [_plain(e.check)]}]


def second_look(approval: Approval, why: str) -> list[dict]:
    """An ephemeral note to the person who pressed Approve: what the customer wrote since, and a button to
    approve having read it (confirm_seen, as the console's tick box)."""
    e = elsewhere.approval_essentials(approval)
    since = "\n".join(f"“{s.text}” ({s.at:%d %b, %H:%M} UTC)" for s in e.said if s.after_request)
    return [{"type": "section", "text": _plain(why)},
            {"type": "section", "text": _plain(since or "(see the console)")},
            {"type": "actions", "elements": [
                _button("I have read it: approve", APPROVE_SEEN, str(approval.public_id), "primary"),
                _button("Open in the console", OPEN, url=e.console_url)]}]


def over_rejection(approval: Approval, why: str) -> list[dict]:
    """An ephemeral note to the person who pressed Approve over an earlier rejection on the order: Slack does
    not approve over one; the console's card (or an e-mailed link's page) asks for the confirmation."""
    return [{"type": "section", "text": _plain(f"{why} Slack does not approve over an earlier rejection: "
                                               "open the card in the console to confirm it there.")},
            {"type": "actions", "elements": [
                _button("Open in the console", OPEN, url=elsewhere.approval_essentials(approval).console_url)]}]


def reason_modal(approval: Approval) -> dict:
    """The modal a Reject button opens: the reason is required (the agent relays it to the customer)."""
    e = elsewhere.approval_essentials(approval)
    return {
        "type": "modal", "callback_id": REASON_MODAL, "private_metadata": str(approval.public_id),
        "title": _plain("Reject the request", 24), "submit": _plain("Reject", 24), "close": _plain("Cancel", 24),
        "blocks": [
            {"type": "section", "text": _plain(e.summary)},
            {"type": "input", "block_id": REASON_BLOCK, "label": _plain("Why? The agent tells the customer.", 2000),
             "element": {"type": "plain_text_input", "action_id": REASON_INPUT, "multiline": True,
                         "max_length": 2000}},
        ],
    }


# -- posting and keeping it up to date -------------------------------------------------------------------------

def approval_sync(approval_id: int) -> str:
    """Post the approval's message if it is pending and has none; else bring the one posted up to date. Safe to
    run twice at once: the message is claimed (a row with no ts yet) before it is posted."""
    approval = Approval.objects.filter(pk=approval_id).first()
    if approval is None or not enabled():
        return "nothing to do"
    row = SlackApprovalMessage.objects.filter(approval=approval).first()
    if row is None:
        if not approval.pending:
            return "decided before it was posted"
        row, claimed = SlackApprovalMessage.objects.get_or_create(
            approval=approval, defaults={"channel": settings.SLACK_APPROVALS_CHANNEL})
        if not claimed:
            return "posted by another task"
        text, blocks = message(approval)
        try:
            posted = client().chat_postMessage(channel=row.channel, text=text, blocks=blocks, unfurl_links=False)
        except Exception:
            row.delete()  # not posted: the next attempt may claim it again
            raise
        SlackApprovalMessage.objects.filter(pk=row.pk).update(channel=posted["channel"], ts=posted["ts"])
        approval.refresh_from_db()
        if approval.pending:  # else decided while it was being posted: its own sync found no ts, so update now
            return "posted"
    return "updated" if message_update(approval) else "being posted"


def message_update(approval: Approval) -> bool:
    """chat.update of the approval's message with how it stands; False when it has none (yet)."""
    row = SlackApprovalMessage.objects.filter(approval=approval).exclude(ts="").first()
    if row is None:
        return False
    text, blocks = message(approval)
    client().chat_update(channel=row.channel, ts=row.ts, text=text, blocks=blocks)
    return True
