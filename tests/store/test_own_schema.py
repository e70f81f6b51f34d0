"""An offline copy leaves behind whatever a database tool can add to a file (a full-text table,
ANALYZE's statistics): it holds the schema of a new file."""

from __future__ import annotations

import sqlite3

from portalreview.store.merge import make_copy
from portalreview.store.project import Project
from tests.store.test_migration_v2 import schema


def test_a_copy_leaves_a_full_text_table_and_statistics_behind(study_file, tmp_path):
    master, _units = study_file
    conn = sqlite3.connect(master)
    with conn:
        conn.execute("CREATE VIRTUAL TABLE search USING fts5(text)")
        conn.execute("INSERT INTO search SELECT message FROM cases")
    conn.execute("ANALYZE")
    conn.close()
    fresh = tmp_path / "fresh.prproj"
    Project.create(fresh).close()
    for name, only_assigned in (("ava.prproj", True), ("whole.prproj", False)):
        copy = tmp_path / name
        with Project.open(master, automatic_backup=False) as project:
            make_copy(project, copy, annotator="ava", only_assigned=only_assigned)
        assert schema(copy) == schema(fresh)
        conn = sqlite3.connect(copy)
        tables = {n for (n,) in conn.execute("SELECT name FROM sqlite_master")}
        conn.close()
        assert not {n for n in tables if n.startswith(("search", "sqlite_stat"))}
