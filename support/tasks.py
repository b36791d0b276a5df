"""Celery tasks: thin interfaces that take ids and call the runner or a service."""

from celery import shared_task

from support import runner, services


@shared_task(acks_late=True, ignore_result=True)
def run_agent(run_id: int) -> str:
    # Claims the run itself: a duplicate or late delivery finds nothing to claim and returns.
    return runner.run_execute(run_id)


@shared_task(ignore_result=True)
def sweep() -> dict:
    """Periodic: resume runs whose worker died, expire old approvals."""
    return {"requeued": services.runs_recover(), "expired": services.approvals_expire()}
