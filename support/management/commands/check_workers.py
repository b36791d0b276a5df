"""manage.py check_workers: the Celery side's health, for an operator or a monitor's probe.

Exits 0 when a worker answers a ping, the beat's sweeper ran within three periods and no queued run has
waited longer than --max-queued-age; 1 otherwise, naming what failed. --json prints the report as JSON.
"""

import json

from django.core.management.base import BaseCommand

from support.ops.health import workers_report


class Command(BaseCommand):
    help = ("Check the Celery side: a worker answers, the beat has run recently, the oldest queued run's age. "
            "Exit status 0 when all hold, 1 when one does not.")

    def add_arguments(self, parser):
        parser.add_argument("--timeout", type=float, default=2.0, help="seconds to wait for workers' answers")
        parser.add_argument("--max-queued-age", type=float, default=60.0,
                            help="seconds a queued run may wait for a worker (default 60)")
        parser.add_argument("--json", action="store_true", help="print the report as one JSON object")

    def handle(self, *args, **options):
        report = workers_report(ping_timeout=options["timeout"], max_queued_age=options["max_queued_age"])
        if options["json"]:
            self.stdout.write(json.dumps(report))
        else:
            checks = report["checks"]
            workers = checks["workers"]
            self.stdout.write(f"{'ok ' if workers['ok'] else 'BAD'} workers: "
                              f"{', '.join(workers['answered']) or 'none answered'}")
            beat = checks["beat"]
            ago = "never (or not in the last day)" if beat["last_sweep_seconds_ago"] is None \
                else f"{beat['last_sweep_seconds_ago']} s ago"
            self.stdout.write(f"{'ok ' if beat['ok'] else 'BAD'} beat: the sweeper last ran {ago} "
                              f"(allowed {beat['allowed_seconds']:.0f} s)")
            queue = checks["queue"]
            age = queue.get("oldest_queued_run_seconds", queue.get("error"))
            self.stdout.write(f"{'ok ' if queue['ok'] else 'BAD'} queue: the oldest queued run has waited {age} s "
                              f"(allowed {queue.get('allowed_seconds', '?')} s)")
        if not report["ok"]:
            raise SystemExit(1)
