"""A project file from the first desktop-app builds (1285cd4..073926e, "0.1.0"; kept in
tests/store/data/v1b-small.prproj, see make_v1b_small.py there) is in format 1 but its units
table already lets a respond unit name a draft to edit. It upgrades like any version-1 file:
every answer kept, the edit-a-draft units still working, the same schema as a new file."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from portalreview.store.migrations import SCHEMA_VERSION
from portalreview.store.project import Project
from portalreview.store.service import StudyService
from tests.store.test_migration_v2 import schema

V1B_FILE = Path(__file__).parent / "data" / "v1b-small.prproj"
EDIT_UNIT = 8


@pytest.fixture
def old_file(tmp_path: Path) -> Path:
    path = tmp_path / "old.prproj"
    shutil.copy(V1B_FILE, path)
    return path


def answers_in(path: Path) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(
            "SELECT a.unit_id, a.annotator_id, a.status, r.mode, r.base_response_id, "
            "r.final_text, r.notes FROM answers a JOIN respond_answers r ON r.answer_id = a.id "
            "ORDER BY a.id"
        ).fetchall()
    finally:
        conn.close()


def test_the_file_is_version_1_with_an_edit_a_draft_unit():
    conn = sqlite3.connect(V1B_FILE)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
        (response,) = conn.execute(
            "SELECT response_id FROM units WHERE id = ?", (EDIT_UNIT,)
        ).fetchone()
    finally:
        conn.close()
    assert response is not None


def test_it_upgrades_with_every_answer_kept(old_file):
    before = answers_in(old_file)
    with Project.open(old_file) as project:
        ava = StudyService(project).as_viewer("ava")
        answer = ava.get_answer(EDIT_UNIT)
        assert answer.status == "submitted"
        assert answer.payload["final_text"] == "I am sorry. Please go to the emergency room now."
        assert project.integrity_check() == "ok"
    assert answers_in(old_file) == before
    conn = sqlite3.connect(old_file)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    finally:
        conn.close()


def test_the_upgraded_schema_is_the_schema_of_a_new_file(old_file, tmp_path):
    Project.open(old_file).close()
    fresh = tmp_path / "fresh.prproj"
    Project.create(fresh).close()
    assert schema(old_file) == schema(fresh)
