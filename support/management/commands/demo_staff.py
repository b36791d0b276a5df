"""`manage.py demo_staff`: create (or reset) the demo staff login and print it."""

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

USERNAME, PASSWORD = "staff", "sundry-demo"


class Command(BaseCommand):
    help = "Create the demo staff user (only with DJANGO_DEBUG on) and print its login."

    def handle(self, *args, **options):
        if not settings.DEBUG:
            raise CommandError("The demo staff login is for the demo site only (DJANGO_DEBUG is off).")
        user, _ = get_user_model().objects.get_or_create(username=USERNAME, defaults={"first_name": "Sam"})
        user.is_staff = True
        user.set_password(PASSWORD)
        user.save()
        self.stdout.write(f"Demo staff login: {USERNAME} / {PASSWORD}")
