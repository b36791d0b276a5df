"""A values() query the ORM builds once per process and database, run again with new values.

Django compiles a QuerySet's SQL each time it is evaluated. For a read with several correlated subqueries that
costs more than the database's own work: the replay's state (selectors.conversation_state) took about 3 ms of
daphne's Python per socket opened, most of it building and compiling the same statement. `Prepared` builds the
QuerySet once, with a placeholder for each value that changes, compiles it on first use for each database
alias, and keeps the SQL, its parameters, the names of the row's columns and their converters. A call puts its
values in the placeholders' places and runs the statement on a cursor of the thread's connection, so Django's
error translation, execute_wrapper hooks and query logging apply as to any query.

What it takes from Django's compiler is what ValuesIterable and SQLCompiler.results_iter use (as_sql, select,
col_count, get_converters, and the query's selected / values_select / annotation_select); tests/test_prepared.py
fails if an upgrade changes what they give.
"""

from __future__ import annotations

import functools
import threading
import uuid
from collections.abc import Callable

from django.db import connections

# An integer no query of ours has as a constant, inside every integer column's range (Django leaves out a
# lookup whose value a column cannot hold, and the placeholder would not reach the parameters).
PLACEHOLDER_BASE = 2_147_000_000


class Prepared:
    """`build(**placeholders)` returns the QuerySet (a .values() one) with the named arguments in place; each
    placeholder must reach the SQL's parameters once, unchanged: an integer for a name in `names` (a lookup on
    an integer column), a string for one in `text` (an exact lookup on a text column)."""

    def __init__(self, model, build: Callable, *names: str, text: tuple[str, ...] = (), uuids: tuple[str, ...] = ()):
        """`model`: the model the QuerySet reads (the database router picks the alias by it, as for the ORM).
        `uuids`: names whose values are UUIDs (an exact lookup on a UUID column: the database's own form of
        one, text on SQLite, is found and made from each value as Django makes it)."""
        self.model, self.build, self.names, self.text, self.uuids = model, build, names, text, uuids
        self._compiled: dict[str, tuple] = {}
        self._lock = threading.Lock()

    def rows(self, **values) -> list[dict]:
        alias = self.model._default_manager.db
        compiled = self._compiled.get(alias)
        if compiled is None:
            with self._lock:
                compiled = self._compiled.get(alias) or self._compile(alias)
        sql, params, slots, columns, converters = compiled
        params = list(params)
        for name, index, form in slots:
            params[index] = form(values[name])
        connection = connections[alias]
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            fetched = cursor.fetchall()
        out = []
        for row in fetched:
            row = list(row)
            for index, (convs, expression) in converters:
                value = row[index]
                for convert in convs:
                    value = convert(value, expression, connection)
                row[index] = value
            out.append(dict(zip(columns, row)))
        return out

    def instances(self, **values) -> list:
        """The rows as instances of the model, as the ORM makes them (Model.from_db): the QuerySet's values()
        must be columns(model)."""
        return [instance(self.model, row) for row in self.rows(**values)]

    def _compile(self, alias: str) -> tuple:
        placeholders = {name: PLACEHOLDER_BASE + i for i, name in enumerate(self.names)}
        placeholders.update({name: f"\x1fprepared {name}\x1f" for name in self.text})
        placeholders.update({name: uuid.UUID(int=PLACEHOLDER_BASE + i) for i, name in enumerate(self.uuids)})
        query = self.build(**placeholders).query
        compiler = query.get_compiler(using=alias)
        sql, params = compiler.as_sql()
        slots = []
        for name, placeholder in placeholders.items():
            forms = [(placeholder, _same)]
            if isinstance(placeholder, uuid.UUID):  # as the backend binds a UUID: itself, or its hex (SQLite)
                forms += [(placeholder.hex, _uuid_hex), (str(placeholder), _uuid_str)]
            found = [(i, form) for i, p in enumerate(params) for value, form in forms if p == value]
            if len(found) != 1:
                raise ValueError(f"{name!r} reaches the SQL's parameters {len(found)} times, not once")
            slots.append((name, *found[0]))
        columns = list(query.selected) if query.selected else [*query.extra_select, *query.values_select,
                                                                 *query.annotation_select]
        expressions = [s[0] for s in compiler.select[0:compiler.col_count]]
        if len(expressions) != len(columns):
            raise ValueError(f"{len(columns)} column names for {len(expressions)} columns")
        converters = sorted(compiler.get_converters(expressions).items())
        compiled = (sql, tuple(params), slots, columns, converters)
        self._compiled[alias] = compiled
        return compiled


def _same(value):
    return value


def _uuid_hex(value) -> str:
    return uuid.UUID(str(value)).hex


def _uuid_str(value) -> str:
    return str(uuid.UUID(str(value)))


@functools.cache
def _attnames(model) -> tuple[str, ...]:
    return tuple(field.attname for field in model._meta.concrete_fields)


def columns(model, prefix: str = "") -> list[str]:
    """The names a values() call gives for every column of the model (reached through `prefix`, as
    "conversation__"), in the order of its fields."""
    return [prefix + name for name in _attnames(model)]


def instance(model, row: dict, prefix: str = ""):
    """The model's instance from its columns in a row of values() (None when its primary key is None: a row of
    a nullable relation that is not there), as the ORM makes one from a database row (Model.from_db)."""
    if row[prefix + model._meta.pk.attname] is None:
        return None
    names = _attnames(model)
    return model.from_db(model._default_manager.db, names, [row[prefix + name] for name in names])
