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

import re
import sqlite3
from collections.abc import Callable
from pathlib import Path

from portalreview.store.schema_sql import V3_GUARDS, guard_statements

SCHEMA_VERSION = 10


def _v1_to_v2(conn: sqlite3.Connection) -> None:
    """Version 2 adds ``prompt_templates`` (the local-model prompts a study uses, editable by
    the PI) and edit-a-draft respond units. Written out, not generated from the model, so this
    step stays what it was when later versions change the model."""
    conn.execute(
        """
        CREATE TABLE prompt_templates (
            id INTEGER NOT NULL,
            kind VARCHAR NOT NULL,
            name VARCHAR NOT NULL,
            text TEXT NOT NULL,
            version INTEGER NOT NULL,
            updated_at VARCHAR NOT NULL,
            updated_by INTEGER,
            PRIMARY KEY (id),
            CONSTRAINT template_kind_not_blank CHECK (length(trim(kind)) > 0),
            CONSTRAINT template_name_not_blank CHECK (length(trim(name)) > 0),
            CONSTRAINT template_text_not_blank CHECK (length(trim(text)) > 0),
            CONSTRAINT template_version_positive CHECK (version >= 1),
            UNIQUE (name),
            FOREIGN KEY(updated_by) REFERENCES annotators (id)
        )
        """
    )
    _respond_units_may_name_a_draft(conn)


# The units CHECK of version 1, and of version 2 where a respond unit may name the draft to edit.
_RESPOND_V1 = (
    "(kind = 'respond' AND case_b_id IS NULL AND response_id IS NULL AND response_b_id IS NULL "
    "AND sentence_id IS NULL)"
)
_RESPOND_V2 = (
    "(kind = 'respond' AND case_b_id IS NULL AND response_b_id IS NULL AND sentence_id IS NULL)"
)


def _respond_units_may_name_a_draft(conn: sqlite3.Connection) -> None:
    """Version 2 lets a respond unit name a response (an edit-a-draft unit). SQLite cannot
    alter a CHECK constraint, so ``units`` is rebuilt (SQLite's documented procedure: create the
    new table, copy, drop, rename, then recreate its indexes and triggers); foreign keys are off
    during steps and checked by :func:`upgrade` afterwards.

    Files of the first desktop-app builds (1285cd4..073926e, all "0.1.0") are version 1 but
    already have the version-2 rule: their units table is kept as it is."""
    (create,) = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'units'"
    ).fetchone()
    if _RESPOND_V2 in create:
        return
    if _RESPOND_V1 not in create:
        raise MigrationError("the units table is not in the expected version-1 shape")
    extras = [
        sql
        for (sql,) in conn.execute(
            "SELECT sql FROM sqlite_master WHERE tbl_name = 'units' "
            "AND type IN ('index', 'trigger') AND sql IS NOT NULL"
        )
    ]
    conn.execute(
        create.replace(_RESPOND_V1, _RESPOND_V2).replace(
            "CREATE TABLE units", "CREATE TABLE units_v2", 1
        )
    )
    conn.execute("INSERT INTO units_v2 SELECT * FROM units")
    conn.execute("DROP TABLE units")
    # Legacy mode: the rename must not re-check triggers of other tables that name "units"
    # while it does not exist; they are valid again once the rename is done.
    conn.execute("PRAGMA legacy_alter_table = ON")
    conn.execute("ALTER TABLE units_v2 RENAME TO units")
    conn.execute("PRAGMA legacy_alter_table = OFF")
    for sql in extras:
        conn.execute(sql)


def _v2_to_v3(conn: sqlite3.Connection) -> None:
    """Version 3 adds ``fact_checks``: a fact check may say "no medical facts on either side"
    (seed 004's both-sets-empty case), with triggers keeping that apart from listed facts. Older
    facts answers have no row, which reads as "not said"."""
    conn.execute(
        """
        CREATE TABLE fact_checks (
            answer_id INTEGER NOT NULL,
            kind VARCHAR NOT NULL,
            no_facts BOOLEAN NOT NULL,
            PRIMARY KEY (answer_id),
            CONSTRAINT fk_answer_kind FOREIGN KEY(answer_id, kind)
                REFERENCES answers (id, kind) ON DELETE CASCADE,
            CONSTRAINT answer_of_this_kind CHECK (kind = 'facts')
        )
        """
    )
    for statement in guard_statements(V3_GUARDS):
        conn.execute(statement)

_SUGGESTION_LAST_V2 = "created_at VARCHAR NOT NULL, "


def _v3_to_v4(conn: sqlite3.Connection) -> None:
    """Version 4 adds ``suggestions.refused_reason``: why the quality gates refused a model
    suggestion (NULL for one that may be offered). ``ALTER TABLE ADD COLUMN`` would append the
    column after the table's constraints in the stored SQL, so a new file and an upgraded one
    would differ; the table is rebuilt with the column where a new file has it (SQLite's
    create, copy, drop, rename procedure), and its index recreated."""
    (create,) = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'suggestions'"
    ).fetchone()
    if create.count(_SUGGESTION_LAST_V2) != 1 or "refused_reason" in create:
        raise MigrationError(
            "the suggestions table is not in the expected shape (without refused_reason)"
        )
    extras = [
        sql
        for (sql,) in conn.execute(
            "SELECT sql FROM sqlite_master WHERE tbl_name = 'suggestions' "
            "AND type IN ('index', 'trigger') AND sql IS NOT NULL"
        )
    ]
    columns = [row[1] for row in conn.execute("PRAGMA table_info(suggestions)")]
    conn.execute(
        create.replace(
            _SUGGESTION_LAST_V2, _SUGGESTION_LAST_V2 + "\n\trefused_reason TEXT, "
        ).replace("CREATE TABLE suggestions", "CREATE TABLE suggestions_v4", 1)
    )
    names = ", ".join(columns)
    conn.execute(f"INSERT INTO suggestions_v4 ({names}) SELECT {names} FROM suggestions")
    conn.execute("DROP TABLE suggestions")
    conn.execute("PRAGMA legacy_alter_table = ON")
    conn.execute("ALTER TABLE suggestions_v4 RENAME TO suggestions")
    conn.execute("PRAGMA legacy_alter_table = OFF")
    for sql in extras:
        conn.execute(sql)


_SUGGESTION_LAST_V4 = "refused_reason TEXT, "
_SUGGESTION_FK_V4 = "FOREIGN KEY(unit_id) REFERENCES units (id)"


def _v4_to_v5(conn: sqlite3.Connection) -> None:
    """Version 5 adds ``suggestions.for_annotator_id``: a suggestion made for one clinician
    (from their own earlier replies), shown to them alone. Rebuilt as in :func:`_v3_to_v4`,
    so that the column and its foreign key stand where a new file has them."""
    (create,) = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'suggestions'"
    ).fetchone()
    if (
        create.count(_SUGGESTION_LAST_V4) != 1
        or create.count(_SUGGESTION_FK_V4) != 1
        or "for_annotator_id" in create
    ):
        raise MigrationError(
            "the suggestions table is not in the expected shape (without for_annotator_id)"
        )
    _rebuild(
        conn,
        "suggestions",
        create.replace(_SUGGESTION_LAST_V4, _SUGGESTION_LAST_V4 + "\n\tfor_annotator_id INTEGER, ")
        .replace(
            _SUGGESTION_FK_V4,
            _SUGGESTION_FK_V4 + ", \n\tFOREIGN KEY(for_annotator_id) REFERENCES annotators (id)",
        ),
    )


def _rebuild(
    conn: sqlite3.Connection, table: str, create: str, fill: dict[str, str] | None = None
) -> None:
    """Replace ``table`` by one made with ``create`` (its new CREATE TABLE), keeping its rows,
    indexes and triggers (SQLite's create, copy, drop, rename procedure). ``fill``: a new
    column -> the SQL expression that gives it its value in each copied row."""
    extras = [
        sql
        for (sql,) in conn.execute(
            "SELECT sql FROM sqlite_master WHERE tbl_name = ? "
            "AND type IN ('index', 'trigger') AND sql IS NOT NULL",
            (table,),
        )
    ]
    columns = ", ".join(row[1] for row in conn.execute(f"PRAGMA table_info({table})"))
    # (a table renamed by an earlier step is stored as CREATE TABLE "name")
    header = re.compile(rf'^CREATE TABLE "?{table}"?')
    if not header.match(create):
        raise MigrationError(f"the {table} table's definition does not start as expected")
    conn.execute(header.sub(f"CREATE TABLE {table}_new", create, count=1))
    fill = fill or {}
    into = ", ".join([columns, *fill])
    values = ", ".join([columns, *fill.values()])
    conn.execute(f"INSERT INTO {table}_new ({into}) SELECT {values} FROM {table}")
    conn.execute(f"DROP TABLE {table}")
    conn.execute("PRAGMA legacy_alter_table = ON")
    conn.execute(f"ALTER TABLE {table}_new RENAME TO {table}")
    conn.execute("PRAGMA legacy_alter_table = OFF")
    for sql in extras:
        conn.execute(sql)


def _v5_to_v6(conn: sqlite3.Connection) -> None:
    """Version 6 adds ``report_cache``: the agreement report's per-analysis results, kept so
    that a restart does not compute again what no answer changed (``reports/report_cache``)."""
    conn.execute(
        """
        CREATE TABLE report_cache (
            settings_key VARCHAR NOT NULL,
            part VARCHAR NOT NULL,
            settings_json TEXT NOT NULL,
            audit_id INTEGER NOT NULL,
            audit_hash VARCHAR,
            state_json TEXT NOT NULL,
            result_json TEXT NOT NULL,
            computed_at VARCHAR NOT NULL,
            PRIMARY KEY (settings_key, part)
        )
        """
    )


_ASSIGNMENT_LAST_V6 = "assigned_at VARCHAR NOT NULL, "
# An assignment that holds a gold answer of its person and no answer of their own: the best
# the format-6 data allows (a unit given to the PI and adjudicated before they answered it
# cannot be told from a holder).
HOLDER_SQL = (
    "EXISTS (SELECT 1 FROM answers g WHERE g.unit_id = assignments.unit_id "
    "AND g.annotator_id = assignments.annotator_id AND g.is_gold) "
    "AND NOT EXISTS (SELECT 1 FROM answers o WHERE o.unit_id = assignments.unit_id "
    "AND o.annotator_id = assignments.annotator_id AND NOT o.is_gold)"
)


def _v6_to_v7(conn: sqlite3.Connection) -> None:
    """Version 7 adds ``assignments.is_gold_holder``: the row exists only to hold the PI's
    gold answer, and is no work of theirs (before, that was read from the gold answer, which a
    unit the PI was given and adjudicated has too). Existing rows are marked by
    :data:`HOLDER_SQL`. Rebuilt as in :func:`_v3_to_v4`."""
    (create,) = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'assignments'"
    ).fetchone()
    if create.count(_ASSIGNMENT_LAST_V6) != 1 or "is_gold_holder" in create:
        raise MigrationError(
            "the assignments table is not in the expected shape (without is_gold_holder)"
        )
    new = create.replace(
        _ASSIGNMENT_LAST_V6, _ASSIGNMENT_LAST_V6 + "\n\tis_gold_holder BOOLEAN NOT NULL, "
    )
    _rebuild(conn, "assignments", new, fill={"is_gold_holder": f"({HOLDER_SQL})"})


def _v7_to_v8(conn: sqlite3.Connection) -> None:
    """Version 8 changes nothing in a file: the number follows the team server's format 8
    (the blinded views as security barriers and the audit log's guard, which a file, opened by
    one person, does not need; ``server_migrations/scripts/versions/v8_audit_guard.py``), so
    that a file and a server study of the same format have the same tables."""


def _v8_to_v9(conn: sqlite3.Connection) -> None:
    """Version 9 changes nothing in a file either: the team server's format 9 pins its
    functions' search path so that a member's temporary table cannot stand in for the study's
    own (``server_migrations/scripts/versions/v9_search_path.py``); a file has no such
    functions."""


def _v9_to_v10(conn: sqlite3.Connection) -> None:
    """Version 10 changes nothing in a file: the team server's format 10 narrows what a
    clinician's login reads to what an offline copy for her holds
    (``server_migrations/scripts/versions/v10_member_reads.py``)."""


# STEPS[v] upgrades a file from version v to v + 1.
STEPS: dict[int, Callable[[sqlite3.Connection], None]] = {
    1: _v1_to_v2,
    2: _v2_to_v3,
    3: _v3_to_v4,
    4: _v4_to_v5,
    5: _v5_to_v6,
    6: _v6_to_v7,
    7: _v7_to_v8,
    8: _v8_to_v9,
    9: _v9_to_v10,
}


class MigrationError(Exception):
    """An upgrade refused or undone; ``reason`` is what went wrong, without the words about
    the file and its backup, for a caller that upgrades a temporary copy and says its own."""

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason or message


def _begin(path: Path, backup: Path) -> sqlite3.Connection:
    """A connection to ``path`` in its upgrade's transaction; MigrationError (the file
    unchanged) if it cannot start, e.g. on a full disk."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA foreign_keys = OFF")  # steps may rebuild tables
        # In WAL mode (as the program writes projects) an upgrade cut short leaves its work in
        # a WAL that nobody sees, not half in the file with a -journal beside it that only a
        # writer can undo. Older files and offline copies are in rollback-journal mode.
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.Error as exc:
        conn.close()
        raise MigrationError(
            f"Upgrading {path.name} could not start ({exc}); the file is unchanged and a copy "
            f"was saved as {backup.name}.",
            reason=f"it could not start: {exc}",
        ) from exc
    return conn


def upgrade(path: Path, from_version: int, backup: Path) -> None:
    """Upgrade the file at ``path`` to SCHEMA_VERSION, all steps in one transaction."""
    missing = [v for v in range(from_version, SCHEMA_VERSION) if v not in STEPS]
    if missing:
        raise MigrationError(
            f"{path.name} is in project format {from_version} and this version has no upgrade "
            f"step from format {missing[0]}. The file is unchanged."
        )
    conn = _begin(path, backup)
    try:
        for version in range(from_version, SCHEMA_VERSION):
            STEPS[version](conn)
            conn.execute(f"PRAGMA user_version = {version + 1}")
        problems = conn.execute("PRAGMA foreign_key_check").fetchall()
        if problems:
            raise MigrationError(f"the upgraded file breaks foreign keys: {problems[:3]}")
        conn.execute("COMMIT")
    except BaseException as exc:
        # A full disk or a failed write (a COMMIT's among them) has SQLite roll back already.
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise _upgrade_failed(path, backup, exc) from exc
    finally:
        conn.close()


def _upgrade_failed(path: Path, backup: Path, exc: BaseException) -> MigrationError:
    """The refusal of an upgrade undone by ``exc``, in words: a full disk said as such."""
    kept = (
        f"the file is unchanged, and the copy made before the upgrade is kept as "
        f"{backup.parent.name}/{backup.name}"
    )
    if (getattr(exc, "sqlite_errorname", "") or "").startswith("SQLITE_FULL"):
        return MigrationError(
            f"Upgrading {path.name} failed: the disk is full ({exc}). Nothing was upgraded: "
            f"{kept}. Make room on the disk ({path.parent}), then try again.",
            reason=f"the disk is full: {exc}",
        )
    return MigrationError(f"Upgrading {path.name} failed ({exc}); {kept}.", reason=str(exc))
