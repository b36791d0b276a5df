"""The Celery application: configured from Django settings (CELERY_*), tasks found in support.tasks."""

import os

from celery import Celery
from celery.signals import worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")

app = Celery("agentsite")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect
def _say_what_will_be_refused(**kwargs):
    """Workers run no Django checks: a configuration that refuses every run is logged at start-up."""
    import logging

    from support.assistant import model_price_problem

    problem = model_price_problem()
    if problem:
        logging.getLogger("support").error("Runs will be refused: %s.", problem)
