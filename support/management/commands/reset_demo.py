"""manage.py reset_demo: put the demo back as it was first seeded (`./dev reset`).

A walk-through changes the demo: conversations, runs and approvals pile up, and refunds are real rows
(`manage.py ask` and the site share one database). This deletes every conversation of the demo customers
(their runs, messages, trace, approvals and staff notes go with them), forgets the rate-limit counters,
and seeds the demo again (orders back to their situation, their refunds and seller messages gone).
Only with DJANGO_DEBUG on: it is for the demo site, never a shop's data.
"""

import redis
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from support.desk import demo
from support.ops import limits


class Command(BaseCommand):
    help = "Reset the demo: delete the demo customers' conversations, clear the rate limits, seed the demo again."

    def handle(self, *args, **options):
        if not settings.DEBUG:
            raise CommandError("reset_demo is for the demo site only (DJANGO_DEBUG is off): it deletes conversations.")
        with transaction.atomic():
            deleted = demo.demo_conversations_delete()
            demo.seed_demo()
        cleared = _clear_limits()
        self.stdout.write(self.style.SUCCESS(
            f"Demo reset: {deleted} rows of conversations deleted, {len(demo.ORDERS)} orders back to their "
            f"situation, {cleared} rate-limit counters cleared."))


def _clear_limits() -> int:
    """Forget every limit's counter (best effort: with Redis away there is nothing to forget now)."""
    try:
        client = limits.store()
        keys = list(client.scan_iter(match=limits.KEY_PREFIX + "*", count=1000))
        if keys:
            client.delete(*keys)
        return len(keys)
    except redis.RedisError:
        return 0
