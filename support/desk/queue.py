"""Work handed to the Celery workers, by task name: the tasks (support/tasks.py) call into the desk, so the
desk names them instead of importing them (one direction of dependency; tests check the names are real)."""

from agentsite.celery import app

RUN_AGENT = "support.tasks.run_agent"


def run_agent(run_id: int) -> None:
    """Queue a run for a worker. The task claims the run itself, so a duplicate delivery is harmless."""
    app.send_task(RUN_AGENT, args=[run_id])
