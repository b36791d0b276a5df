"""Celery tasks: thin interfaces that take ids and call the runner or a service."""

from celery import shared_task
from slack_sdk.errors import SlackApiError

from support.copilot import copilot_execute, copilot_sweep
from support.customers import attachments, notify, signin
from support.desk import approval_links, gate, mailbox, nudges, runner, services, slack, waiting
from support.ops import sweeper
from support.reports import daily, digest
from support.trials import draft_test_execute, draft_tests_sweep


@shared_task(acks_late=True, ignore_result=True)
def run_agent(run_id: int) -> str:
    # Claims the run itself: a duplicate or late delivery finds nothing to claim and returns.
    return runner.run_execute(run_id)


@shared_task(acks_late=True, ignore_result=True)
def run_copilot(copilot_run_id: int) -> str:
    # Claims the copilot run itself: a duplicate or late delivery finds nothing to claim and returns.
    return copilot_execute(copilot_run_id)


@shared_task(ignore_result=True)
def sweep() -> dict:
    """Periodic (the beat, every RUN_SWEEP_SECONDS): resume runs whose worker died, expire old approvals, fail
    draft tests past DRAFT_TEST_MAX_SECONDS and copilot runs whose worker died. Its last run is recorded, so
    `manage.py check_workers` and /metrics can tell whether the beat runs."""
    done = {"requeued": services.runs_recover(), "expired": gate.approvals_expire(),
            "draft_tests_failed": draft_tests_sweep(), "copilot_runs_failed": copilot_sweep()}
    sweeper.sweeper_ran()
    return done


@shared_task(ignore_result=True)
def nudge_approvals() -> dict:
    """Periodic (the beat, every APPROVAL_NUDGE_SWEEP_SECONDS): remind people of approvals still waiting, and tell
    the leads of those whose time runs out (support/desk/nudges.py). Safe to run twice at once: each is claimed first."""
    return nudges.approvals_nudge()


@shared_task(ignore_result=True)
def end_waits() -> list:
    """Periodic (the beat, every WAITING_SWEEP_SECONDS): cases whose wait is over go back to the agent or a
    person (support/desk/waiting.py). Safe to run twice at once: each is claimed first."""
    return waiting.waits_end()


@shared_task(ignore_result=True)
def sweep_attachment_orphans() -> int:
    """Periodic (the beat, hourly): files a dead process stored for a message it never saved."""
    return attachments.sweep_orphans()


@shared_task(ignore_result=True)
def delete_empty_conversations() -> int:
    """Periodic (the beat, hourly): conversations nobody wrote in, a day old (services.conversations_empty_delete)."""
    return services.conversations_empty_delete()


@shared_task(ignore_result=True)
def roll_up_reports() -> int:
    """Periodic (the beat, hourly): each closed day not yet rolled up (support/reports/daily.py), so the
    first run after a day closes writes it. Safe to run twice at once: a day's rows are written once."""
    return len(daily.report_days_roll_up())


@shared_task(ignore_result=True)
def refresh_provisional_reports() -> int:
    """Periodic (the beat, every 5 minutes): count again the days that ended but are not closed yet (yesterday)
    into their provisional rows (support/reports/daily.py). Safe to run twice at once: each row is replaced."""
    return len(daily.provisional_days_refresh())


@shared_task(ignore_result=True)
def send_report_digests() -> int:
    """Periodic (the beat, every 5 minutes): the morning digest to each lead who asked for it, from
    REPORTS_DIGEST_HOUR on (support/reports/digest.py). Safe to run twice at once: each is claimed first."""
    return len(digest.digests_send())


@shared_task(ignore_result=True)
def send_reply_emails() -> int:
    """Periodic (the beat, every REPLY_EMAIL_SWEEP_SECONDS): one e-mail per conversation whose customer left
    before replies arrived (support/customers/notify.py). Safe to run twice at once: each reply is claimed before it is sent."""
    return len(notify.send_reply_emails())


@shared_task(ignore_result=True)
def send_reply_email(conversation_id: int) -> int:
    """Queued when an answer is saved in a conversation whose customer wrote by e-mail: the reply goes out now
    (support/customers/notify.py). A duplicate finds the replies claimed and sends nothing."""
    return len(notify.send_reply_email_now(conversation_id))


@shared_task(ignore_result=True)
def poll_mailbox() -> int:
    """Periodic (the beat, every INBOUND_IMAP_POLL_SECONDS, when INBOUND_IMAP_HOST is set): customers' mail from
    the shop's mailbox (support/desk/mailbox.py). Safe to run twice at once: each mail is stored once."""
    return mailbox.poll()


@shared_task(ignore_result=True)
def send_signin_code(email: str, request_id: str) -> None:
    """A sign-in code asked for (support/customers/signin.py): the customer is looked up and the code e-mailed
    here, never in the request, so asking answers the same, as fast, for every address. At most
    SIGNIN_CODE_SENDS_PER_EMAIL codes an hour per e-mail, counted here; a redelivered request sends no more.
    Returns nothing: whether the address was a customer's stays out of the worker's log."""
    signin.send_code(email, request_id)


@shared_task(ignore_result=True)
def email_approval_request(approval_id: int) -> int:
    """An approval was asked: e-mail it, with links to decide, to the staff who opted in
    (support/desk/approval_links.py). Run twice, it e-mails no one twice: each person's links are claimed first."""
    return len(approval_links.approval_request_emails_send(approval_id))


@shared_task(ignore_result=True, autoretry_for=(SlackApiError, OSError), retry_backoff=2, max_retries=4)
def sync_approval_to_slack(approval_id: int) -> str:
    """An approval was asked, decided or expired: post its Slack message, or bring it up to date
    (support/desk/slack.py). Retried when Slack is unreachable or refuses for a while; posting claims the
    message first, so a retry never posts a second one."""
    return slack.approval_sync(approval_id)


@shared_task(ignore_result=True)
def test_draft(test_id: int) -> str:
    """A draft test was asked for (support/trials/): the evaluation on the draft and on the live version, each in a
    child process on a throwaway database. Claims the test first, so a duplicate delivery plays nothing twice."""
    return draft_test_execute(test_id)
