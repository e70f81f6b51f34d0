"""The program's own objects in a project file, and whatever else a file holds.

A project file holds the tables, indexes and triggers the program creates (:func:`expected`);
every format's upgrade ends in the same schema as a new file's (tests/store/test_migration_*).
Anything else (a table, view, index or trigger made with a database tool, or planted) is no
part of the study, and a trigger of it runs whenever the program writes the table it is on:

* an offline copy drops it before it removes anything, so that no foreign trigger runs during
  its clean-up and nothing of it reaches the clinician, and puts back any of the program's
  triggers missing or changed (:func:`keep_only_own`);
* ``verify`` reports it, and any of the program's objects missing, or a trigger of the
  program's changed (the audit log's protection among them), as problems
  (:func:`schema_problems`).

Tables, views and indexes are compared by name (their SQL is SQLAlchemy's text, which may
differ between its versions); triggers by name and text (the program's own, ``schema_sql``),
so that a trigger put in the place of one of the program's is found too. SQLite's own objects
(its counter and statistics tables, the indexes of UNIQUE constraints) are not compared.
"""

from __future__ import annotations

import functools
import re
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import create_engine

from portalreview.store.errors import StoreError
from portalreview.store.models import Base
from portalreview.store.schema_sql import trigger_statements

OBJECTS_SQL = "SELECT type, name, tbl_name, sql FROM sqlite_master"
# Tables SQLite makes itself: the AUTOINCREMENT counters, ANALYZE's statistics.
_SQLITE_TABLES = ("sqlite_sequence", "sqlite_stat1", "sqlite_stat2", "sqlite_stat3", "sqlite_stat4")
# The program's triggers that keep the audit log from being changed.
AUDIT_FREEZES = ("audit_no_update", "audit_no_delete")


@dataclass(frozen=True)
class SchemaObject:
    """One row of ``sqlite_master``: ``kind`` is its type (table, view, index, trigger),
    ``table`` the table it belongs to."""

    kind: str
    name: str
    table: str
    sql: str | None

    @property
    def key(self) -> tuple[str, str]:
        return (self.kind, self.name)

    @property
    def sqlites_own(self) -> bool:
        """Made by SQLite itself, not by a statement (never compared)."""
        if self.kind == "table":
            return self.name in _SQLITE_TABLES
        return self.kind == "index" and self.sql is None and self.name.startswith("sqlite_")


def _normal(sql: str | None) -> str:
    """SQL as the migration tests compare it: without whitespace or double quotes (a table
    renamed by an upgrade step is stored as ``"name"``)."""
    return re.sub(r'\s+|"', "", sql or "")


def objects(rows: Iterable[tuple]) -> list[SchemaObject]:
    """The objects of rows read with :data:`OBJECTS_SQL`, less SQLite's own."""
    found = [SchemaObject(*row) for row in rows]
    return [obj for obj in found if not obj.sqlites_own]


@functools.cache
def expected() -> dict[tuple[str, str], str]:
    """(type, name) -> normalised SQL of every object a new project file holds."""
    engine = create_engine("sqlite://")
    try:
        with engine.begin() as conn:
            Base.metadata.create_all(conn)
            for statement in trigger_statements():
                conn.exec_driver_sql(statement)
            rows = conn.exec_driver_sql(OBJECTS_SQL).all()
    finally:
        engine.dispose()
    return {obj.key: _normal(obj.sql) for obj in objects(rows)}


def _trigger_statements_by_name() -> dict[str, str]:
    return {statement.split()[2]: statement for statement in trigger_statements()}


def foreign(found: Iterable[SchemaObject]) -> list[SchemaObject]:
    """The objects that are not the program's: any other name, or a trigger of the
    program's name whose text is not the program's."""
    own = expected()
    return [
        obj
        for obj in found
        if obj.key not in own or (obj.kind == "trigger" and _normal(obj.sql) != own[obj.key])
    ]


def missing(found: Iterable[SchemaObject]) -> list[tuple[str, str]]:
    """(type, name) of the program's objects that ``found`` lacks, and of its triggers that
    ``found`` holds changed."""
    own = expected()
    intact = {
        obj.key
        for obj in found
        if obj.key in own and (obj.kind != "trigger" or own[obj.key] == _normal(obj.sql))
    }
    return sorted(key for key in own if key not in intact)


def schema_problems(rows: Iterable[tuple]) -> list[str]:
    """What a file whose ``sqlite_master`` rows (:data:`OBJECTS_SQL`) are ``rows`` holds that
    the program did not make, or lacks of the program's own, one line each."""
    found = objects(rows)
    own = expected()
    present = {obj.key for obj in found}
    problems = []
    for kind, name in missing(found):
        what = "changed" if (kind, name) in present else "missing"
        why = " (the audit log's protection against changes)" if name in AUDIT_FREEZES else ""
        problems.append(f"PortalReview's {kind} {name} is {what}{why}")
    for obj in foreign(found):
        if obj.key in own:
            continue  # a changed trigger of the program's, said above
        on = f" on {obj.table}" if obj.kind in ("trigger", "index") else ""
        article = "an" if obj.kind == "index" else "a"
        problems.append(f"{article} {obj.kind} that is not PortalReview's: {obj.name}{on}")
    return problems


def keep_only_own(conn: sqlite3.Connection) -> list[str]:
    """Drop every object of the file ``conn`` that is not the program's (SQLite's statistics
    too: figures of the whole file's rows), then create the program's triggers it lacks
    (dropped above when changed);
    call inside a transaction with the foreign keys off. Returns what was dropped, as
    "type name". StoreError if something cannot be dropped (a virtual table of a module this
    SQLite lacks)."""
    found = objects(conn.execute(OBJECTS_SQL))
    strays = foreign(found)
    strays += [
        SchemaObject("table", name, name, None)
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'sqlite^_stat%' "
            "ESCAPE '^'"
        )
    ]
    order = {"trigger": 0, "view": 1, "table": 2, "index": 3}  # nothing foreign runs first
    dropped = []
    for obj in sorted(strays, key=lambda o: (order.get(o.kind, 4), not _virtual(o))):
        quoted = '"' + obj.name.replace('"', '""') + '"'
        try:
            conn.execute(f"DROP {obj.kind.upper()} IF EXISTS {quoted}")
        except sqlite3.Error as exc:
            raise StoreError(
                f"the copy cannot remove the {obj.kind} {obj.name}, which is not PortalReview's "
                f"({exc}); remove it from the project with the tool that made it"
            ) from exc
        dropped.append(f"{obj.kind} {obj.name}")
    statements = _trigger_statements_by_name()
    for kind, name in missing(objects(conn.execute(OBJECTS_SQL))):
        if kind == "trigger":
            _create(conn, name, statements[name])
    return dropped


def _create(conn: sqlite3.Connection, name: str, statement: str) -> None:
    """Put back one of the program's triggers (StoreError in a file that lacks its table)."""
    try:
        conn.execute(statement)
    except sqlite3.Error as exc:
        raise StoreError(
            f"the copy cannot put back PortalReview's trigger {name} ({exc}): the project "
            "was changed with another tool"
        ) from exc


def _virtual(obj: SchemaObject) -> bool:
    """A virtual table (dropped before the tables that hold its content)."""
    return (obj.sql or "").upper().startswith("CREATE VIRTUAL")
