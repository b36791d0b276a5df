"""Approvals announced beyond the console: when one is asked, the staff who opted in are e-mailed and the Slack
channel gets a message; when it is decided (anywhere) or expires, that message is brought up to date.

Called after the commit by serializers.publish_approval, with every other live event of an approval; the work
goes to a worker by task name. Nothing is queued while neither is set up, so a desk without them (and a test)
sends no task for it.
"""

from __future__ import annotations

import logging

from django.conf import settings

from support.desk import queue
from support.models import Approval, ApprovalEmailOptIn, SlackApprovalMessage

log = logging.getLogger(__name__)


def approval_changed(approval: Approval) -> None:
    """Never raises: the console has its event already, and a broker that is down loses only these."""
    if approval.tool_call_id is None:  # a colleague's own refund waiting for a second person: the console's
        return
    try:
        if approval.pending and settings.APPROVAL_EMAILS and ApprovalEmailOptIn.objects.exists():
            queue.email_approval(approval.pk)
        if slack_on() and (approval.pending or SlackApprovalMessage.objects.filter(approval=approval).exists()):
            queue.slack_approval(approval.pk)
    except Exception:
        log.warning("approval %s: e-mail or Slack not told", approval.public_id, exc_info=True)


def slack_on() -> bool:
    """Slack is set up: a bot token, the signing secret its requests are checked with, a channel."""
    return bool(settings.SLACK_BOT_TOKEN and settings.SLACK_SIGNING_SECRET and settings.SLACK_APPROVALS_CHANNEL)
