"""Schema versions of the project file and the steps between them.

``PRAGMA user_version`` holds the version a file is in. A new file is created directly in the
current version (from the models); an older file is upgraded on open, one step at a time, in a
single transaction, after :func:`portalreview.store.project.make_backup` copied it aside.

Why not Alembic: a project file is a document a clinician carries around, not a server database.
The steps must ship inside the frozen app, run without a configuration file, and be applied to
files of any age on open. A numbered list of small functions over one SQLite connection does
that with no moving parts; SQLite's transactional DDL makes each upgrade all-or-nothing.

To change the schema: bump ``SCHEMA_VERSION``, change the models, and add
``STEPS[old_version] = function`` that turns an old file into the new shape (use
``ALTER TABLE``, or create-copy-drop-rename for what SQLite cannot alter, and recreate the
triggers from ``schema_sql`` if a table they touch changed).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

SCHEMA_VERSION = 1

# STEPS[v] upgrades a file from version v to v + 1.
STEPS: dict[int, Callable[[sqlite3.Connection], None]] = {}


class MigrationError(Exception):
    pass


def upgrade(path: Path, from_version: int, backup: Path) -> None:
    """Upgrade the file at ``path`` to SCHEMA_VERSION, all steps in one transaction."""
    missing = [v for v in range(from_version, SCHEMA_VERSION) if v not in STEPS]
    if missing:
        raise MigrationError(
            f"{path.name} is in project format {from_version} and this version has no upgrade "
            f"step from format {missing[0]}. The file is unchanged."
        )
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA foreign_keys = OFF")  # steps may rebuild tables
        conn.execute("BEGIN IMMEDIATE")
        try:
            for version in range(from_version, SCHEMA_VERSION):
                STEPS[version](conn)
                conn.execute(f"PRAGMA user_version = {version + 1}")
            problems = conn.execute("PRAGMA foreign_key_check").fetchall()
            if problems:
                raise MigrationError(f"the upgraded file breaks foreign keys: {problems[:3]}")
            conn.execute("COMMIT")
        except BaseException as exc:
            conn.execute("ROLLBACK")
            raise MigrationError(
                f"Upgrading {path.name} failed ({exc}); the file is unchanged and a copy was "
                f"saved as {backup.name}."
            ) from exc
    finally:
        conn.close()
