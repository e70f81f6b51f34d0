"""A real version-1 project file (written by the version-1 code, kept in tests/store/data) opens
in the current version: version 2's prompt templates and edit-a-draft units (then the later
versions' steps, see test_migration_v3 and test_migration_refused_reason), nothing lost, the
same schema as a new file."""

from __future__ import annotations

import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from portalreview.store import migrations
from portalreview.store.audit_verify import verify_file
from portalreview.store.migrations import SCHEMA_VERSION
from portalreview.store.project import Project, ProjectError, backup_dir
from portalreview.store.service import StudyService

V1_FILE = Path(__file__).parent / "data" / "v1-small.prproj"


def schema(path: Path) -> dict[tuple[str, str], str]:
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT type, name, sql FROM sqlite_master "
            "WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%'"
        ).fetchall()
    finally:
        conn.close()
    return {(t, n): re.sub(r'\s+|"', "", sql) for t, n, sql in rows}


@pytest.fixture
def upgraded(tmp_path):
    path = tmp_path / "old.prproj"
    shutil.copy(V1_FILE, path)
    return path


def test_the_file_is_version_1():
    conn = sqlite3.connect(V1_FILE)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    conn.close()


def test_a_version_1_file_is_upgraded_with_nothing_lost(upgraded):
    with Project.open(upgraded) as project:
        svc = StudyService(project)
        info = svc.info()
        assert [a["name"] for a in info["annotators"]] == ["ava", "ben", "pat"]
        ava = svc.as_viewer("ava")
        units = {item.unit_id for item in ava.queue("respond")}
        answer = ava.get_answer(next(iter(units)))
        assert answer.payload["parts"] == {"empathy": "Sorry to hear."}
        assert project.integrity_check() == "ok"
    conn = sqlite3.connect(upgraded)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    conn.close()
    assert any(backup_dir(upgraded).iterdir())


def test_the_upgraded_schema_is_the_schema_of_a_new_file(upgraded, tmp_path):
    Project.open(upgraded).close()
    fresh = tmp_path / "fresh.prproj"
    Project.create(fresh).close()
    assert schema(upgraded) == schema(fresh)


def test_an_upgraded_file_takes_edit_a_draft_units(upgraded):
    with Project.open(upgraded) as project:
        svc = StudyService(project)
        case = svc.read_unit(1).cases[0].id
        draft = next(
            r.id for r in svc.read_unit(2).responses
        )  # the rank unit's first draft, a response to the same case
        unit_set = svc.create_unit_set("edit", "respond")
        unit = svc.add_unit(unit_set, case, response_id=draft)
        assert svc.read_unit(unit).responses[0].id == draft


def test_a_verify_that_cannot_upgrade_its_copy_names_no_backup(upgraded, monkeypatch):
    """verify reads an older file through an upgraded temporary copy, removed afterwards: when
    that upgrade fails, the message must not point to a backup made (and removed) in there."""

    def broken(conn: sqlite3.Connection) -> None:
        raise RuntimeError("step failed")

    monkeypatch.setitem(migrations.STEPS, 1, broken)
    with pytest.raises(ProjectError) as refused:
        verify_file(upgraded)
    message = str(refused.value)
    assert "old.prproj" in message and "step failed" in message and "unchanged" in message
    assert "copy was saved" not in message and "before-upgrade" not in message
    assert not backup_dir(upgraded).exists()
