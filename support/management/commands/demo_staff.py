"""`manage.py demo_staff`: create (or reset) the demo staff logins and print them: Sam, and Alex, a second lead
(four eyes and routing need two people)."""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from support.desk import demo

USERNAME, PASSWORD = demo.DEMO_STAFF_USERNAME, "sundry-demo"
SECOND_USERNAME, SECOND_PASSWORD = demo.DEMO_SECOND_USERNAME, "sundry-demo-2"


class Command(BaseCommand):
    help = "Create the demo staff users (only with DJANGO_DEBUG on) and print their logins."

    def handle(self, *args, **options):
        if not settings.DEBUG:
            raise CommandError("The demo staff login is for the demo site only (DJANGO_DEBUG is off).")
        demo.demo_staff_user(password=PASSWORD)
        demo.demo_staff_user(password=SECOND_PASSWORD, username=SECOND_USERNAME, first_name=demo.DEMO_SECOND_NAME)
        self.stdout.write(f"Demo staff login: {USERNAME} / {PASSWORD}")
        self.stdout.write(f"Second demo staff login: {SECOND_USERNAME} / {SECOND_PASSWORD}")
