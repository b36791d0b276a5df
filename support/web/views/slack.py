"""Slack's requests to the desk (the app's Interactivity Request URL, /slack/interactive/): the Approve and
Reject buttons of an approval's message and the modal that asks a rejection's reason.

A request without a well-formed signature header and a timestamp within five minutes is refused (401) here,
from its headers, before its body is read. Then slack_bolt's Django adapter checks each request's signature (HMAC-SHA256 of "v0:<timestamp>:<body>" with
SLACK_SIGNING_SECRET) and refuses a bad one, or one whose timestamp is more than five minutes off, with 401.
The Slack user who pressed is the staff account linked to them (SlackAccount, set in /admin/); an unlinked one
is told so and decides nothing. Deciding goes through the desk's one decision service, with the console's
permissions (support/desk/elsewhere.py); the person is answered in Slack: the message changes for everyone
once decided, a refusal is shown to that person only (an ephemeral message).
"""

from __future__ import annotations

import functools
import logging
import re
import time

from django.conf import settings
from django.http import HttpResponse, HttpResponseNotFound
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from slack_bolt import App
from slack_bolt.adapter.django import SlackRequestHandler

from support.desk import elsewhere, permissions, slack
from support.models import Approval

log = logging.getLogger(__name__)
security_log = logging.getLogger("support.security")

SIGNATURE = re.compile(r"v0=[0-9a-f]{64}")
MAX_CLOCK_SKEW_SECONDS = 5 * 60  # as slack_bolt's own check


@csrf_exempt  # Slack signs its requests (checked below); it sends no cookie nor CSRF token
@require_POST
def interactive(request):
    if not slack.enabled():
        return HttpResponseNotFound()
    if not _signed_and_fresh(request):
        security_log.warning("Slack request refused: no well-formed signature or a stale timestamp")
        return HttpResponse("", status=401)
    return _handler(settings.SLACK_BOT_TOKEN, settings.SLACK_SIGNING_SECRET, settings.SLACK_API_URL).handle(request)


def _signed_and_fresh(request) -> bool:
    """What can be checked from the headers alone: a signature in Slack's form and a fresh timestamp. The
    signature itself (over the body) is bolt's to check, once the body is worth reading."""
    timestamp = request.headers.get("X-Slack-Request-Timestamp", "")
    if not SIGNATURE.fullmatch(request.headers.get("X-Slack-Signature", "")) or not timestamp.isdigit():
        return False
    return abs(time.time() - int(timestamp)) <= MAX_CLOCK_SKEW_SECONDS


@functools.lru_cache(maxsize=4)
def _handler(token: str, signing_secret: str, api_url: str) -> SlackRequestHandler:
    """One Bolt app per configuration. process_before_response: the listener runs in the request, so Slack's
    answer (a modal's errors) can depend on the decision, and nothing runs on after the response."""
    app = App(client=slack.client(), signing_secret=signing_secret, process_before_response=True,
              token_verification_enabled=False, logger=log)
    app.action(slack.APPROVE)(_approve)
    app.action(slack.APPROVE_SEEN)(_approve_having_read)
    app.action(slack.REJECT)(_reject)
    app.action(slack.OPEN)(_opened)
    app.view(slack.REASON_MODAL)(_reason_given)
    return SlackRequestHandler(app)


def _opened(ack):
    ack()  # "Open in the console" is a link; Slack tells the app it was pressed all the same


def _approve(ack, body, client):
    ack()
    _approve_for(body, client, confirm_seen=False)


def _approve_having_read(ack, body, client):
    ack()  # pressed under the customer's newer messages: the console's "I have read them" tick
    _approve_for(body, client, confirm_seen=True)


def _approve_for(body, client, *, confirm_seen: bool) -> None:
    approval, user, refusal = _who_and_what(body, (body.get("actions") or [{}])[0].get("value"))
    if refusal:
        _tell(client, body, refusal)
        return
    outcome = elsewhere.approval_decide_from(approval=approval, user=user, approve=True, channel=Approval.SLACK,
                                             confirm_seen=confirm_seen, address="Slack")
    if outcome.code == elsewhere.SECOND_LOOK:
        _tell(client, body, outcome.text, blocks=slack.second_look(approval, outcome.text))
        return
    if outcome.code == elsewhere.OVER_REJECTION:
        _tell(client, body, outcome.text, blocks=slack.over_rejection(approval, outcome.text))
        return
    _answer(client, body, approval, outcome)


def _reject(ack, body, client):
    ack()
    approval, user, refusal = _who_and_what(body, (body.get("actions") or [{}])[0].get("value"))
    if not refusal:  # asked before the modal opens, so no one types a reason in vain
        refusal = permissions.decision_refusal(user, tool=approval.tool_call.name, approve=False, arguments=None)
    if refusal:
        _tell(client, body, refusal)
        return
    if not approval.pending:
        _update(approval)
        _tell(client, body, elsewhere.decided_words(approval))
        return
    client.views_open(trigger_id=body["trigger_id"], view=slack.reason_modal(approval))


def _reason_given(ack, body, view):
    approval, user, refusal = _who_and_what(body, view.get("private_metadata"))
    if refusal:
        ack(response_action="errors", errors={slack.REASON_BLOCK: refusal})
        return
    state = (view.get("state") or {}).get("values") or {}
    reason = ((state.get(slack.REASON_BLOCK) or {}).get(slack.REASON_INPUT) or {}).get("value") or ""
    outcome = elsewhere.approval_decide_from(approval=approval, user=user, approve=False, reason=reason,
                                             channel=Approval.SLACK, address="Slack")
    if outcome.decided:
        ack()  # closes the modal
    else:  # the modal stays open, saying why
        ack(response_action="errors", errors={slack.REASON_BLOCK: outcome.text})
    if outcome.decided or outcome.code in (elsewhere.ALREADY_DECIDED, elsewhere.EXPIRED):
        _update(approval)


def _who_and_what(body, approval_id) -> tuple[Approval | None, object | None, str]:
    """(the approval, the staff account, "") or (…, why nothing is decided, in plain words)."""
    slack_user = (body.get("user") or {}).get("id")
    user, refusal = slack.staff_for(slack_user)
    if refusal:
        security_log.warning("Slack user %s refused: %s", slack_user, "not linked to active staff")
        return None, None, refusal
    approval = slack.approval_for(approval_id)
    if approval is None:
        return None, user, slack.NO_SUCH_APPROVAL
    return approval, user, ""


def _answer(client, body, approval: Approval, outcome: elsewhere.Outcome) -> None:
    """The message shows the decision (this one, or the one made first); a refusal goes to the person alone."""
    if outcome.decided or outcome.code in (elsewhere.ALREADY_DECIDED, elsewhere.EXPIRED):
        _update(approval)
    if not outcome.decided:
        _tell(client, body, outcome.text)


def _update(approval: Approval) -> None:
    approval.refresh_from_db()
    try:
        slack.message_update(approval)
    except Exception:  # the decision stands; the message catches up when it changes next
        log.warning("approval %s: its Slack message was not updated", approval.public_id, exc_info=True)


def _tell(client, body, text: str, blocks=None) -> None:
    """A message only the person who pressed sees, where they pressed."""
    channel = (body.get("channel") or {}).get("id") or settings.SLACK_APPROVALS_CHANNEL
    client.chat_postEphemeral(channel=channel, user=body["user"]["id"], text=slack.escaped(text), blocks=blocks)
