"""The Celery application: configured from Django settings (CELERY_*), tasks found in support.tasks.

This module only creates the app. What worker processes get besides the tasks (log format, per-task metrics,
a metrics endpoint, request ids across the hop) is connected by support/worker.py when Django starts.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")

app = Celery("agentsite")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
