"""The project file: refusing bad files untouched, the lock, read-only access, migrations."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from portalreview.store import migrations
from portalreview.store.project import Project, ProjectError, ProjectLockedError, backup_dir
from portalreview.store.service import StudyService


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_create_then_open(tmp_path):
    path = tmp_path / "s.prproj"
    with Project.create(path, name="Pilot") as p:
        StudyService(p).add_annotator("ava")
    with Project.open(path) as p:
        assert p.meta("name") == "Pilot"
        assert [a.name for a in StudyService(p).annotators()] == ["ava"]
        assert p.integrity_check() == "ok"


def test_new_file_is_private_to_its_owner(tmp_path):
    path = tmp_path / "s.prproj"
    Project.create(path).close()
    if os.name == "posix":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_create_refuses_an_existing_file(tmp_path):
    path = tmp_path / "s.prproj"
    path.write_text("precious")
    with pytest.raises(ProjectError, match="already exists"):
        Project.create(path)
    assert path.read_text() == "precious"


def test_connections_enforce_foreign_keys_and_use_wal(project):
    with project.read() as s:
        conn = s.connection()
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL


def _sqlite_file(path: Path, app_id: int | None = None, version: int = 0) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (x)")
    if app_id is not None:
        conn.execute(f"PRAGMA application_id = {app_id}")
    conn.execute(f"PRAGMA user_version = {version}")
    conn.commit()
    conn.close()


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p.write_bytes(b""), "empty"),
        (lambda p: p.write_bytes(os.urandom(4096)), "not an SQLite database"),
        (lambda p: p.write_text("record_id,message\n1,hello\n"), "not an SQLite database"),
        (lambda p: _sqlite_file(p), "not a PortalReview project"),
    ],
    ids=["zero-bytes", "random-bytes", "csv", "other-sqlite"],
)
def test_bad_files_are_refused_and_left_untouched(tmp_path, make, message):
    path = tmp_path / "bad.prproj"
    make(path)
    before = _digest(path)
    with pytest.raises(ProjectError, match=message):
        Project.open(path)
    assert _digest(path) == before
    assert not path.with_name("bad.prproj.lock").exists()


def test_truncated_project_is_refused_with_the_backup_folder_named(tmp_path):
    path = tmp_path / "s.prproj"
    with Project.create(path) as p:
        svc = StudyService(p)
        for i in range(200):
            svc.add_case(f"c{i}", "A message long enough to fill some pages. " * 20)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    before = _digest(path)
    with pytest.raises(ProjectError, match=r"damaged|integrity check|s\.backups"):
        Project.open(path)
    assert _digest(path) == before


def test_missing_file_and_folder(tmp_path):
    with pytest.raises(ProjectError, match="no file"):
        Project.open(tmp_path / "nope.prproj")
    with pytest.raises(ProjectError, match="folder"):
        Project.open(tmp_path)


def test_file_from_a_newer_version_is_refused(tmp_path):
    path = tmp_path / "s.prproj"
    Project.create(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {migrations.SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    before = _digest(path)
    with pytest.raises(ProjectError, match="newer PortalReview"):
        Project.open(path)
    assert _digest(path) == before


_HOLDER = textwrap.dedent(
    """
    import sys, time
    from portalreview.store.project import Project
    p = Project.open(sys.argv[1])
    print("open", flush=True)
    sys.stdin.readline()
    p.close()
    """
)


def test_second_opener_is_told_who_holds_the_project_and_can_read_only(tmp_path):
    path = tmp_path / "s.prproj"
    with Project.create(path) as p:
        StudyService(p).add_annotator("ava")
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "open"
        with pytest.raises(ProjectLockedError) as info:
            Project.open(path)
        message = str(info.value)
        assert f"process {holder.pid}" in message
        assert info.value.holder.host and info.value.holder.user in message
        assert "since 20" in message and "read-only" in message
        with Project.open(path, read_only=True) as ro:
            assert [a.name for a in StudyService(ro).annotators()] == ["ava"]
            with pytest.raises(ProjectError, match="read-only"), ro.write():
                pass
    finally:
        holder.communicate("\n", timeout=30)
    with Project.open(path) as p:  # released on close
        assert p.integrity_check() == "ok"


def test_lock_of_a_killed_process_is_taken_over(tmp_path):
    path = tmp_path / "s.prproj"
    Project.create(path).close()
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "open"
    holder.kill()
    holder.wait(timeout=30)
    with Project.open(path) as p:
        assert p.integrity_check() == "ok"


def test_two_opens_in_one_process_are_refused_too(tmp_path):
    path = tmp_path / "s.prproj"
    with Project.create(path), pytest.raises(ProjectLockedError):
        Project.open(path)


def test_migration_runs_after_a_backup(tmp_path, monkeypatch):
    """A file of the current format is upgraded by a registered next step: the backup holds
    the old file, the step ran, the version moved on."""
    path = tmp_path / "s.prproj"
    with Project.create(path) as p:
        StudyService(p).add_annotator("ava")
    old_version = migrations.SCHEMA_VERSION

    def add_column(conn: sqlite3.Connection) -> None:
        conn.execute("ALTER TABLE annotators ADD COLUMN email TEXT DEFAULT ''")

    monkeypatch.setattr(migrations, "SCHEMA_VERSION", old_version + 1)
    monkeypatch.setitem(migrations.STEPS, old_version, add_column)
    with Project.open(path) as p, p.read() as s:
        conn = s.connection()
        assert conn.exec_driver_sql("PRAGMA user_version").scalar() == old_version + 1
        assert conn.exec_driver_sql("SELECT email FROM annotators").scalar() == ""
    backups = list(backup_dir(path).glob("*before-upgrade*"))
    assert len(backups) == 1
    conn = sqlite3.connect(backups[0])
    assert conn.execute("PRAGMA user_version").fetchone()[0] == old_version
    assert conn.execute("SELECT name FROM annotators").fetchall() == [("ava",)]
    conn.close()


def test_failed_migration_leaves_the_file_unchanged(tmp_path, monkeypatch):
    path = tmp_path / "s.prproj"
    Project.create(path).close()
    old_version = migrations.SCHEMA_VERSION

    def broken(conn: sqlite3.Connection) -> None:
        conn.execute("ALTER TABLE annotators ADD COLUMN email TEXT")
        raise RuntimeError("step failed half-way")

    monkeypatch.setattr(migrations, "SCHEMA_VERSION", old_version + 1)
    monkeypatch.setitem(migrations.STEPS, old_version, broken)
    with pytest.raises(ProjectError, match="unchanged"):
        Project.open(path)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == old_version
    columns = [r[1] for r in conn.execute("PRAGMA table_info(annotators)")]
    assert "email" not in columns
    conn.close()
    assert not path.with_name("s.prproj.lock").exists()


def test_older_file_opened_read_only_asks_for_an_upgrade(tmp_path, monkeypatch):
    path = tmp_path / "s.prproj"
    Project.create(path).close()
    monkeypatch.setattr(migrations, "SCHEMA_VERSION", migrations.SCHEMA_VERSION + 1)
    with pytest.raises(ProjectError, match="older project format"):
        Project.open(path, read_only=True)


def test_backups_roll(tmp_path, monkeypatch):
    from portalreview.store import project as project_module

    monkeypatch.setattr(project_module, "BACKUPS_KEPT", 3)
    path = tmp_path / "s.prproj"
    with Project.create(path) as p:
        made = [p.backup(f"n{i}") for i in range(5)]
    kept = sorted(backup_dir(path).iterdir())
    assert kept == sorted(made[-3:])
    with Project.open(kept[-1], read_only=True) as copy:
        assert copy.integrity_check() == "ok"
