from django.apps import AppConfig


class SupportConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "support"
    verbose_name = "Support desk"

    def ready(self):
        from support.desk import checks, permissions  # noqa: F401  (register the checks and the logout handlers)
