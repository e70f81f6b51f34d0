"""One schema, two databases: the SQL of our rules for PostgreSQL, derived from SQLite's.

The CHECK constraints (``models.py``) and trigger conditions (``schema_sql.py``) are written
once, in the SQL both databases share. Three things SQLite accepts and PostgreSQL does not are
translated here, and only these (:func:`postgres_sql`):

* ``end`` (a column name of spans and sentences) is a reserved word in PostgreSQL: quoted.
* ``x IS NOT 0`` on a boolean: ``x IS DISTINCT FROM false``.
* ``a IS NOT b`` (SQLite's NULL-safe "differs"), other than ``IS NOT NULL``:
  ``a IS DISTINCT FROM b``.
* In a CHECK, ``flag = 0`` or ``flag = 1`` on a boolean column of that table (SQLite stores
  booleans as 0 and 1): ``flag = false`` or ``flag = true``.

``json_valid`` (SQLite's JSON1 function) is given to PostgreSQL as a function of the same name
(:data:`POSTGRES_FUNCTIONS`), so that a CHECK reads the same on both.

SQLite gives every table a ``rowid`` in the order rows were stored, which the frames read detail
rows in (the order a clinician's answer listed them) and the live report fingerprints tables by.
A PostgreSQL study gets the same column (:func:`postgres_rowid_statements`).

SQLite's text is kept as the source, and unchanged, because it is stored in every project file:
a new file and an upgraded one must keep the same schema text.
"""

from __future__ import annotations

import re

from sqlalchemy import Boolean, Integer, MetaData, Table
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.schema import CheckConstraint

_END = re.compile(r'(?<![\w"])end(?![\w"])')
_IS_NOT_FALSE = re.compile(r"\bIS NOT 0\b")
_IS_NOT_VALUE = re.compile(r"\bIS NOT (?!NULL\b)")

POSTGRES_FUNCTIONS = [
    # SQLite's json_valid(text): 1 for well-formed JSON. Immutable, so CHECK may use it.
    """
    CREATE OR REPLACE FUNCTION json_valid(value text) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE AS $$
    BEGIN
        PERFORM value::json;
        RETURN true;
    EXCEPTION WHEN others THEN
        RETURN false;
    END $$
    """,
]


def postgres_sql(sqlite_sql: str) -> str:
    """A condition written for SQLite, as PostgreSQL reads it (see the module docstring)."""
    sql = _END.sub('"end"', sqlite_sql)
    sql = _IS_NOT_FALSE.sub("IS DISTINCT FROM false", sql)
    return _IS_NOT_VALUE.sub("IS DISTINCT FROM ", sql)


@compiles(CheckConstraint, "postgresql")
def _check_for_postgres(constraint: CheckConstraint, compiler, **kw) -> str:
    text = postgres_sql(compiler.visit_check_constraint(constraint, **kw))
    flags = [c.name for c in constraint.table.columns if isinstance(c.type, Boolean)]
    for flag in flags:
        text = re.sub(rf"\b{flag} = 0\b", f"{flag} = false", text)
        text = re.sub(rf"\b{flag} = 1\b", f"{flag} = true", text)
    return text


def postgres_rowid_statements(metadata: MetaData) -> list[str]:
    """A ``rowid`` column for every table, as SQLite has: the integer primary key where there is
    one (SQLite's rowid is then that key), else a counter in the order rows were stored."""
    return [postgres_rowid_statement(table) for table in metadata.sorted_tables]


def postgres_rowid_statement(table: Table) -> str:
    """One table's ``rowid`` (see :func:`postgres_rowid_statements`)."""
    key = list(table.primary_key.columns)
    if len(key) == 1 and isinstance(key[0].type, Integer):
        column = f"bigint GENERATED ALWAYS AS ({key[0].name}) STORED"
    else:
        column = "bigserial"
    return f"ALTER TABLE {table.name} ADD COLUMN rowid {column}"
