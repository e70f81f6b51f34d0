"""Format 7 marks the assignments that only hold the PI's gold answer
(``assignments.is_gold_holder``). A real format-6 file (written by the format-6 code; kept in
tests/store/data) opens with its holders marked by what the old data allows: a gold answer and
no answer of the person's own. The file, made with ava and the PI pat, four respond units:

* unit 1 given to pat and ava; pat answered it and adjudicated it: pat's work;
* unit 2 given to pat, adjudicated, not answered: marked a holder (cannot be told apart);
* unit 3 given to ava (a draft); unit 4 adjudicated only: pat's holder.

The same study on a server, taken to format 6 and upgraded, gets the same marks."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import create_engine

from portalreview.store import migrations
from portalreview.store.backends import ServerProject, server_migrations
from portalreview.store.models import Assignment
from portalreview.store.project import Project
from portalreview.store.service import StudyService
from portalreview.store.study_setup import assign_units, plan_assignment, study_progress
from tests.store.test_migration_v2 import schema

V6_FILE = Path(__file__).parent / "data" / "v6-gold.prproj"
PAT = 2  # the PI's id in the file
HOLDERS = {(2, PAT), (4, PAT)}


@pytest.fixture
def upgraded(tmp_path) -> Path:
    path = tmp_path / "old.prproj"
    shutil.copy(V6_FILE, path)
    return path


def _holders(project) -> set[tuple[int, int]]:
    with project.read() as s:
        return {(a.unit_id, a.annotator_id) for a in s.query(Assignment) if a.is_gold_holder}


def test_the_file_is_format_6_without_the_column():
    conn = sqlite3.connect(V6_FILE)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 6
    assert "is_gold_holder" not in [r[1] for r in conn.execute("PRAGMA table_info(assignments)")]
    conn.close()


def test_a_format_6_file_is_upgraded_with_its_holders_marked(upgraded, tmp_path):
    before = sqlite3.connect(V6_FILE)
    old_rows = before.execute("SELECT * FROM assignments ORDER BY rowid").fetchall()
    before.close()
    with Project.open(upgraded) as project:
        assert _holders(project) == HOLDERS
        pat = StudyService(project).as_viewer("pat")
        assert [q.unit_id for q in pat.queue("respond")] == [1]
        assert {(r.annotator, r.assigned) for r in study_progress(project)} == {
            ("ava", 2),
            ("pat", 1),
        }
        assert project.integrity_check() == "ok"
        plan = plan_assignment(project, "R", ["pat"])  # holders are free: they become work
        assert plan.by_annotator == {"pat": (2, 4)}
        assign_units(project, plan)
        assert _holders(project) == set()
    conn = sqlite3.connect(upgraded)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == migrations.SCHEMA_VERSION >= 7
    rows = conn.execute("SELECT * FROM assignments ORDER BY rowid").fetchall()
    # the same rows, (2 and 4 handed out again) then the mark, cleared by the hand-out
    assert [r[:-1] for r in rows if r[0] in (1, 3)] == [r for r in old_rows if r[0] in (1, 3)]
    assert {r[-1] for r in rows} == {0}
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    conn.close()
    fresh = tmp_path / "fresh.prproj"
    Project.create(fresh).close()
    assert schema(upgraded) == schema(fresh)


def test_a_file_not_in_the_format_6_shape_is_left_unchanged(upgraded):
    conn = sqlite3.connect(upgraded)
    conn.execute("ALTER TABLE assignments ADD COLUMN is_gold_holder BOOLEAN")
    conn.commit()
    conn.close()
    with pytest.raises(Exception, match="assignments table is not in the expected shape"):
        Project.open(upgraded)
    conn = sqlite3.connect(upgraded)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 6
    conn.close()


def test_a_format_6_server_study_is_upgraded_as_the_file(postgres_server, upgraded, tmp_path):
    from tests.store.test_server_migrations import _fill_from_file
    from tests.store.test_transfer import _same_export

    address = postgres_server.url(postgres_server.new_database())
    ServerProject.create_empty(address).close()
    engine = create_engine(address)
    try:
        with engine.begin() as conn:
            server_migrations.downgrade(conn, "v6")
            _fill_from_file(conn, V6_FILE)
    finally:
        engine.dispose()
    ServerProject.upgrade(address)
    with ServerProject.open(address) as study, Project.open(upgraded) as file:
        assert _holders(study) == _holders(file) == HOLDERS
        _same_export(file, study, tmp_path, "upgraded")
