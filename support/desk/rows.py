"""A row as the ORM would insert it, for the few writes the desk makes as one hand-written statement (an INSERT
that ends ON CONFLICT, or several INSERTs chained in one statement): its table, columns and prepared values
from Django's own field API (`pre_save` + `get_db_prep_save`, what the ORM's INSERT uses), so a new column with
a default needs no change where those statements are written."""

from __future__ import annotations

from django.db import connection


def q(name: str) -> str:
    return connection.ops.quote_name(name)


def insert_parts(obj, *, skip: tuple[str, ...] = ()) -> tuple[str, list[str], list]:
    """(quoted table, quoted columns, prepared values) of an unsaved row, its primary key and `skip` (attnames)
    left out."""
    meta = obj._meta
    fields = [f for f in meta.concrete_fields if not f.primary_key and f.attname not in skip]
    return (q(meta.db_table), [q(f.column) for f in fields],
            [f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields])


def saved(obj, pk) -> None:
    """Mark `obj` as the row the hand-written INSERT made."""
    obj.pk = pk
    obj._state.adding, obj._state.db = False, connection.alias
