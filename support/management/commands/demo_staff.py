"""`manage.py demo_staff`: create (or reset) the demo staff login and print it."""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from support.desk import demo

USERNAME, PASSWORD = demo.DEMO_STAFF_USERNAME, "sundry-demo"


class Command(BaseCommand):
    help = "Create the demo staff user (only with DJANGO_DEBUG on) and print its login."

    def handle(self, *args, **options):
        if not settings.DEBUG:
            raise CommandError("The demo staff login is for the demo site only (DJANGO_DEBUG is off).")
        demo.demo_staff_user(password=PASSWORD)
        self.stdout.write(f"Demo staff login: {USERNAME} / {PASSWORD}")
