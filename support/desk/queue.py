"""Work handed to the Celery workers, by task name: the tasks (support/tasks.py) call into the desk, so the
desk names them instead of importing them (one direction of dependency; tests check the names are real)."""

from agentsite.celery import app

RUN_AGENT = "support.tasks.run_agent"
EMAIL_APPROVAL = "support.tasks.email_approval_request"
SLACK_APPROVAL = "support.tasks.sync_approval_to_slack"
REPLY_EMAIL = "support.tasks.send_reply_email"
RUN_COPILOT = "support.tasks.run_copilot"


def run_agent(run_id: int, *, run: str = "", conversation: str = "") -> None:
    """Queue a run for a worker. The task claims the run itself, so a duplicate delivery is harmless.
    `run`, `conversation`: their public ids, for the task's log lines (support/worker.py reads them when
    they are missing)."""
    headers = {"run": run, "conversation": conversation} if run and conversation else None
    app.send_task(RUN_AGENT, args=[run_id], headers=headers)


def email_approval(approval_id: int) -> None:
    """E-mail an approval request to the staff who opted in (support/desk/approval_links.py)."""
    app.send_task(EMAIL_APPROVAL, args=[approval_id])


def slack_approval(approval_id: int) -> None:
    """Post the approval to Slack, or bring its message up to date (support/desk/slack.py)."""
    app.send_task(SLACK_APPROVAL, args=[approval_id])


def reply_email(conversation_id: int) -> None:
    """E-mail the replies of a conversation whose customer wrote by e-mail, now (support/customers/notify.py)."""
    app.send_task(REPLY_EMAIL, args=[conversation_id])


def run_copilot(copilot_run_id: int) -> None:
    """Queue a copilot run (support/copilot/): the task claims it, so a duplicate delivery does nothing."""
    app.send_task(RUN_COPILOT, args=[copilot_run_id])
