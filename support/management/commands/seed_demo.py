"""manage.py seed_demo: create or reset the Sundry demo shop (safe to run again)."""

from django.core.management.base import BaseCommand

from support.desk.demo import ORDERS, seed_demo


class Command(BaseCommand):
    help = "Create or update the Sundry demo customers, sellers, policies and orders (times relative to now)."

    def handle(self, *args, **options):
        counts = seed_demo()
        self.stdout.write(self.style.SUCCESS(f"Seeded the Sundry demo: {len(ORDERS)} orders reset to their situation."))
        self.stdout.write(", ".join(f"{n} {name}" for name, n in counts.items()))
