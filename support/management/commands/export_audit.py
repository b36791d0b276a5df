"""`manage.py export_audit`: every decision on an approval and every staff action, as CSV or JSON, written as it
is read (support/desk/audit.py). The console's Audit page gives the same files."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from support.desk import audit


class Command(BaseCommand):
    help = ("Write the audit of decisions and staff actions (what was asked, what a person changed, what ran, who, "
            "when, why) as CSV or JSON.")

    def add_arguments(self, parser):
        parser.add_argument("--since", help="from this day (2026-11-30, UTC) or time (2026-11-30T14:00:00Z)")
        parser.add_argument("--until", help="up to this day, included, or up to this time")
        parser.add_argument("--person", help="only what this staff account (its username) did")
        parser.add_argument("--format", choices=("csv", "json"), default="csv")
        parser.add_argument("--output", help="write to this file instead of standard output")

    def handle(self, *args, since=None, until=None, person=None, format="csv", output=None, **options):
        wanted = self._filter(since, until, person)
        rows = audit.audit_rows(wanted)
        chunks = audit.csv_lines(rows) if format == "csv" else audit.json_chunks(rows, wanted)
        # newline="": the CSV writer ends its lines itself (\r\n, as the format says).
        out = open(output, "w", encoding="utf-8", newline="") if output else None
        write = out.write if out is not None else (lambda text: self.stdout.write(text, ending=""))
        try:
            for chunk in chunks:
                write(chunk)
        finally:
            if out is not None:
                out.close()

    def _filter(self, since, until, person) -> audit.AuditFilter:
        try:
            lower = audit.parse_bound(since) if since else None
            upper = audit.parse_bound(until, end=True) if until else None
        except ValueError as error:
            raise CommandError(str(error)) from None
        if lower and upper and lower >= upper:
            raise CommandError("--since must come before --until.")
        user = None
        if person:
            user = get_user_model().objects.filter(username=person, is_staff=True).first()
            if user is None:
                raise CommandError(f"There is no staff account “{person}”.")
        return audit.AuditFilter(since=lower, until=upper, person=user)
