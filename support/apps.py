from django.apps import AppConfig


class SupportConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "support"
    verbose_name = "Support desk"

    def ready(self):
        from support import checks  # noqa: F401  (registers them)
