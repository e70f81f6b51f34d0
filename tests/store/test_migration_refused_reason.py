"""A real version-2 project file (written by the version-2 code with a model suggestion and an
answer that accepted it; kept in tests/store/data) opens in the current version: the
suggestions table gains ``refused_reason`` (NULL for the suggestions it had), nothing is lost,
and the schema is that of a new file. (Written against the step numbers of no one version:
other steps may come before or after this one.)"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from test_migration_v2 import schema

from portalreview.store import migrations
from portalreview.store.project import Project, backup_dir
from portalreview.store.service import StoreError, StudyService
from portalreview.store.templates import latest_suggestion, refused_suggestions

V2_FILE = Path(__file__).parent / "data" / "v2-small.prproj"
EMPATHY_UNIT = 6  # the unit the version-2 file holds a suggestion for


@pytest.fixture
def upgraded(tmp_path):
    path = tmp_path / "old.prproj"
    shutil.copy(V2_FILE, path)
    return path


def test_the_file_is_version_2_without_the_column():
    conn = sqlite3.connect(V2_FILE)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
    columns = [row[1] for row in conn.execute("PRAGMA table_info(suggestions)")]
    assert "refused_reason" not in columns and "created_at" in columns
    conn.close()


def test_a_version_2_file_is_upgraded_with_nothing_lost(upgraded):
    before = sqlite3.connect(V2_FILE)
    old_rows = before.execute("SELECT * FROM suggestions").fetchall()
    before.close()
    with Project.open(upgraded) as project:
        svc = StudyService(project)
        view = latest_suggestion(svc, EMPATHY_UNIT)
        assert view is not None and view.model_file == "tiny.gguf"
        assert view.payload == json.loads(old_rows[0][3])  # payload_json, read before
        assert refused_suggestions(svc) == []
        ava = svc.as_viewer("ava")
        answer = ava.get_answer(EMPATHY_UNIT)
        assert (answer.suggestion_id, answer.suggestion_use) == (view.id, "accepted")
        assert project.integrity_check() == "ok"
    conn = sqlite3.connect(upgraded)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == migrations.SCHEMA_VERSION >= 3
    rows = conn.execute("SELECT * FROM suggestions").fetchall()
    # the same values, then refused_reason and (format 5) for_annotator_id, both empty
    assert [row[:-2] for row in rows] == old_rows
    assert [row[-2:] for row in rows] == [(None, None)]
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    conn.close()
    assert any(backup_dir(upgraded).iterdir())


def test_the_upgraded_schema_is_the_schema_of_a_new_file(upgraded, tmp_path):
    Project.open(upgraded).close()
    fresh = tmp_path / "fresh.prproj"
    Project.create(fresh).close()
    assert schema(upgraded) == schema(fresh)


def test_an_upgraded_file_keeps_refusals(upgraded):
    with Project.open(upgraded) as project:
        svc = StudyService(project)
        sid = svc.add_suggestion(
            EMPATHY_UNIT,
            {},
            model_file="small.gguf",
            model_sha256="cd" * 32,
            template_id="empathy_judge@v1",
            refused_reason="empty: no choice",
        )
        assert latest_suggestion(svc, EMPATHY_UNIT).model_file == "tiny.gguf"
        assert [r.id for r in refused_suggestions(svc)] == [sid]
        with pytest.raises(StoreError, match="refused by the quality gates"):
            svc.save_answer(
                EMPATHY_UNIT,
                {"equal": True},
                annotator_id=svc.annotators()[1].id,
                suggestion_id=sid,
            )


def test_a_file_not_in_the_version_2_shape_is_left_unchanged(upgraded):
    conn = sqlite3.connect(upgraded)
    conn.execute("ALTER TABLE suggestions ADD COLUMN refused_reason TEXT")
    conn.commit()
    conn.close()
    with pytest.raises(Exception, match="suggestions table is not in the expected shape"):
        Project.open(upgraded)
    conn = sqlite3.connect(upgraded)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
    conn.close()
