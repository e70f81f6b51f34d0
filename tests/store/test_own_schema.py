"""``verify`` finds nothing in the schema of any project the program itself makes (a new one,
the demo, every older format once upgraded, an offline copy of either kind, a master a copy
was merged into) to report as not PortalReview's; and an offline copy leaves behind whatever
a database tool can add to a file (a full-text table, ANALYZE's statistics)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from portalreview.store.audit_verify import verify_file
from portalreview.store.merge import make_copy, merge_copy
from portalreview.store.project import Project
from portalreview.store.service import StudyService
from tests.store.test_migration_v2 import schema

DATA = Path(__file__).parent / "data"


def _verified(path: Path) -> None:
    result = verify_file(path)
    assert result.schema_problems == (), result.describe()
    assert result.ok, result.describe()


def test_a_new_project_verifies(tmp_path):
    path = tmp_path / "new.prproj"
    Project.create(path).close()
    _verified(path)


@pytest.mark.parametrize("name", ["v1-small", "v1b-small", "v2-small", "v6-gold"])
def test_every_older_format_verifies_as_read_and_once_upgraded(name, tmp_path):
    path = tmp_path / "old.prproj"
    shutil.copyfile(DATA / f"{name}.prproj", path)
    _verified(path)  # in an upgraded temporary copy
    Project.open(path).close()  # upgraded in place
    _verified(path)


def test_the_demo_its_offline_copies_and_the_merged_master_verify(demo_study_file, tmp_path):
    master = tmp_path / "demo.prproj"
    shutil.copyfile(demo_study_file, master)
    _verified(master)
    hers, whole = tmp_path / "chloe.prproj", tmp_path / "whole.prproj"
    with Project.open(master, automatic_backup=False) as project:
        make_copy(project, hers, annotator="np_chloe", only_assigned=True)
        make_copy(project, whole, annotator="np_chloe")
    _verified(hers)
    _verified(whole)
    with Project.open(hers, automatic_backup=False) as copy:
        chloe = StudyService(copy).as_viewer("np_chloe")
        unit = next(item.unit_id for item in chloe.queue("respond") if item.status == "todo")
        chloe.save_answer(unit, {"mode": "theme_guided", "parts": {"planning": "Come in today."}})
    _verified(hers)
    with Project.open(master, automatic_backup=False) as project:
        assert len(merge_copy(project, hers).added) == 1
    _verified(master)


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


def test_a_server_study_s_file_and_offline_copy_verify(server_study, tmp_path):
    from portalreview.store.transfer import copy_study

    _server, _database, project, _study = server_study
    whole, hers = tmp_path / "study.prproj", tmp_path / "ava.prproj"
    copy_study(project, whole).close()
    make_copy(project, hers, annotator="ava", only_assigned=True)
    _verified(whole)
    _verified(hers)
