from django.apps import AppConfig


class SupportConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "support"
    verbose_name = "Support desk"

    def ready(self):
        # Deferred to here, the one place it must be: these modules import models, which the app registry
        # loads only after this app is created. Importing them registers the start-up checks, the staff
        # logout handlers and the Celery signal handlers (support/worker.py) in every process.
        from support import worker  # noqa: F401
        from support.desk import checks, permissions  # noqa: F401
        from support.ops import tracing

        tracing.setup()  # nothing unless an OTLP endpoint is configured
