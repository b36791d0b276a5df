"""A quicker flush for the tests that commit (`transactional_db`, `django_db(transaction=True)`).

After each such test Django empties every table: on PostgreSQL with one `TRUNCATE` of all of them, which gives each
table new files, about 0.3 s for this schema, paid by some 900 tests (a quarter of the suite's time there). The
tables are nearly empty, so `DELETE FROM` each is far cheaper, and with the foreign keys deferred (Django makes them
DEFERRABLE INITIALLY DEFERRED) the order does not matter: they are checked at the flush's commit, when every table
is empty. Where sequences must restart, Django's TRUNCATE stays. On both databases the content types and the
permissions stay: no test changes them, and flushed they are made again by the post_migrate signal that follows
every flush, some 300 rows each time.

`DatabaseOperations.sql_flush(style, tables, *, reset_sequences, allow_cascade)` is the backends' hook for
`manage.py flush`; tests/test_flush.py fails when its signature changes or a committed test's rows outlive it."""

from __future__ import annotations

from django.db.backends.postgresql.base import DatabaseOperations as PostgreSQL  # the modules' own import order
from django.db.backends.sqlite3.base import DatabaseOperations as SQLite

KEPT = frozenset({"django_content_type", "auth_permission"})
DJANGOS = {PostgreSQL: PostgreSQL.sql_flush, SQLite: SQLite.sql_flush}


def _postgresql(self, style, tables, *, reset_sequences=False, allow_cascade=False):
    tables = [table for table in tables if table not in KEPT]
    if reset_sequences or not tables:
        return DJANGOS[PostgreSQL](self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
    return ["SET CONSTRAINTS ALL DEFERRED", *(f"DELETE FROM {self.quote_name(table)}" for table in tables)]


def _sqlite(self, style, tables, *, reset_sequences=False, allow_cascade=False):
    return DJANGOS[SQLite](self, style, [table for table in tables if table not in KEPT],
                           reset_sequences=reset_sequences, allow_cascade=allow_cascade)


def install() -> None:
    PostgreSQL.sql_flush = _postgresql
    SQLite.sql_flush = _sqlite
