"""The Reports page's queries at scale: every figure of report() and the charts' series, a week and a month.

`DATABASE_URL=postgres://... python bench/reports.py [--repeats N] [--roll-up] [--provisional] [--explain N]` on a database seeded by
bench/seed_reports.py (200,000 conversations, 2 million messages). For each range: the wall time of the page's
reads (report(): every figure; charts(): the four charts' series; every query and the Python that reads their rows) and
the time spent inside the database's statements (summed over the queries of one page), median (min-max) over the repeats after one warm
run, and the number of queries. With --roll-up the closed days are rolled up first (as the beat does), so closed
days are read from the roll-up; without, everything is counted live; with --provisional yesterday is counted
into its provisional rows first (as the beat does every few minutes). Target: at most 300 ms in all.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


class Timer:
    """Sums the time of every statement run while installed (connection.execute_wrapper), and keeps each
    statement with its time."""

    def __init__(self):
        self.seconds, self.queries, self.statements = 0.0, 0, []

    def __call__(self, execute, sql, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            took = time.perf_counter() - started
            self.seconds += took
            self.queries += 1
            self.statements.append((took, sql, params))


def explain(read, filters, slowest: int) -> None:
    """Every statement of one read, slowest first, and EXPLAIN (ANALYZE, BUFFERS) of the slowest few."""
    from django.db import connection, connections

    timer = Timer()
    with connections["default"].execute_wrapper(timer):
        read(filters)
    ranked = sorted(timer.statements, key=lambda s: -s[0])
    print(f"{len(ranked)} statements, {timer.seconds * 1000:.1f} ms in SQL")
    for took, sql, _ in ranked:
        print(f"  {took * 1000:7.1f} ms  {' '.join(sql.split())[:160]}")
    for took, sql, params in ranked[:slowest]:
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
            print(f"\n-- {took * 1000:.1f} ms: {' '.join(sql.split())[:300]}")
            print("\n".join(row[0] for row in cursor.fetchall()))


def page_reads():
    """{what is timed: a function of the filters}: report() alone, and everything the page reads."""
    from support.reports.figures import charts, report
    from support.web.views.reports import CHARTED

    def page(filters):  # what the page reads: every figure, and the charts' series by day
        report(filters)
        charts(filters, CHARTED)

    return {"report()": report, "the page (report() and the 4 charts)": page}


def measure(read, filters, repeats: int) -> dict:
    from django.db import connections

    def page():
        read(filters)

    page()  # warm: plans and the buffer cache, as a page read twice a day finds them
    walls, sqls, queries = [], [], 0
    for _ in range(repeats):
        timer = Timer()
        with connections["default"].execute_wrapper(timer):
            started = time.perf_counter()
            page()
            walls.append(time.perf_counter() - started)
        sqls.append(timer.seconds)
        queries = timer.queries
    return {"wall": walls, "sql": sqls, "queries": queries}


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.0f} ({min(values) * 1000:.0f}–{max(values) * 1000:.0f})"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--roll-up", action="store_true", help="roll up the closed days first, as the beat does")
    parser.add_argument("--provisional", action="store_true",
                        help="count the days that ended but are not closed (yesterday) into provisional rows first")
    parser.add_argument("--explain", type=int, metavar="N", default=0,
                        help="list the week's page statements and EXPLAIN ANALYZE the N slowest (no timing)")
    parser.add_argument("--at", metavar="ISO", help="read as if the clock said this (e.g. yesterday 23:59, so today "
                                                    "is a whole day of conversations): timezone.now() is patched")
    args = parser.parse_args(argv)
    if args.at:
        from datetime import datetime
        from unittest import mock

        mock.patch("django.utils.timezone.now", return_value=datetime.fromisoformat(args.at)).start()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
    os.environ.setdefault("DB_STATEMENT_TIMEOUT_MS", "0")  # rolling up 89 days runs long statements
    import django

    django.setup()
    from django.db import connection
    from django.utils import timezone

    from support.models import Conversation, Message
    from support.reports import daily
    from support.reports.figures import Filters

    print(f"{connection.vendor}: {Conversation.objects.count():,} conversations, {Message.objects.count():,} messages")
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SHOW jit")
            print(f"jit = {cursor.fetchone()[0]} (off: planning these reads is not worth compiling them)")
    if args.roll_up:
        started = time.perf_counter()
        days = daily.report_days_roll_up()
        print(f"rolled up {len(days)} days in {time.perf_counter() - started:.1f} s")
    if args.provisional:
        started = time.perf_counter()
        days = daily.provisional_days_refresh()
        print(f"counted {len(days)} provisional days in {time.perf_counter() - started:.1f} s")
    today = timezone.localdate()
    if args.explain:
        return explain(page_reads()["the page (report() and the 4 charts)"],
                       Filters(start=today - timedelta(days=6), end=today), args.explain)
    print("| range | what | queries | wall ms | in SQL ms |\n| --- | --- | --- | --- | --- |")
    for label, days in (("week (7 days to today)", 6), ("month (30 days to today)", 29)):
        for what, read in page_reads().items():
            result = measure(read, Filters(start=today - timedelta(days=days), end=today), args.repeats)
            print(f"| {label} | {what} | {result['queries']} | {ms(result['wall'])} | {ms(result['sql'])} |")


if __name__ == "__main__":
    main()
