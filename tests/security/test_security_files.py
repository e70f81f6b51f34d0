"""Project files are the owner's only; backups are kept beside the file and roll.

tests/store/test_project.py checks the new project file's mode and the rolling of
``Project.backup``; here: every file the program writes that holds the study (the file, its
``-wal`` and ``-shm``, the lock, the backups and their folder, a clinician's offline copy, the
demo) is readable by its owner only, whatever the umask; and the backups the program makes by
itself (before an upgrade, and when a project is opened for work) are in ``<name>.backups/``
beside the file.
"""

from __future__ import annotations

import os
import sqlite3
import stat

import pytest

from portalreview.store import migrations
from portalreview.store import project as project_module
from portalreview.store.merge import make_copy
from portalreview.store.project import Project, backup_dir
from portalreview.store.service import StudyService

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask():
    """The most permissive umask: whatever the program makes private, it made so itself."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def test_the_project_its_journal_and_its_lock_are_private(tmp_path, open_umask):
    path = tmp_path / "s.prproj"
    with Project.create(path) as project:
        StudyService(project).add_annotator("ava")  # a write: the WAL and SHM exist now
        for name in ("s.prproj", "s.prproj-wal", "s.prproj-shm", "s.prproj.lock"):
            assert _mode(tmp_path / name) == 0o600, name
        backup = project.backup("manual")
    assert backup.parent == backup_dir(path) == tmp_path / "s.backups"
    assert _mode(backup.parent) == 0o700
    assert _mode(backup) == 0o600


def test_an_offline_copy_and_the_demo_are_private(tmp_path, open_umask):
    from portalreview.demo import build_demo

    demo = build_demo(tmp_path / "demo.prproj")
    assert _mode(demo) == 0o600
    with Project.open(demo) as project:
        copy = tmp_path / "for-chloe.prproj"
        make_copy(project, copy, annotator="np_chloe", only_assigned=True)
    assert _mode(copy) == 0o600


def test_before_an_upgrade_a_private_backup_is_made_beside_the_file(
    tmp_path, monkeypatch, open_umask
):
    path = tmp_path / "s.prproj"
    with Project.create(path) as project:
        StudyService(project).add_annotator("ava")
    version = migrations.SCHEMA_VERSION
    monkeypatch.setattr(migrations, "SCHEMA_VERSION", version + 1)
    monkeypatch.setitem(migrations.STEPS, version, lambda conn: None)
    Project.open(path).close()
    (backup,) = backup_dir(path).iterdir()
    assert backup.name.startswith("s-") and backup.name.endswith(
        f"-before-upgrade-from-v{version}.prproj"
    )
    assert _mode(backup) == 0o600 and _mode(backup.parent) == 0o700
    conn = sqlite3.connect(backup)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == version
    assert conn.execute("SELECT name FROM annotators").fetchall() == [("ava",)]
    conn.close()


def test_backups_roll_keeping_the_newest(tmp_path, monkeypatch):
    monkeypatch.setattr(project_module, "BACKUPS_KEPT", 4)
    path = tmp_path / "s.prproj"
    with Project.create(path) as project:
        svc = StudyService(project)
        made = []
        for i in range(7):
            svc.add_annotator(f"person{i}")
            made.append(project.backup(f"n{i}"))
    kept = sorted(backup_dir(path).iterdir())
    assert kept == made[-4:]
    with Project.open(kept[-1], read_only=True) as newest:
        assert len(StudyService(newest).annotators()) == 7


def test_opening_a_project_for_work_leaves_a_private_backup_of_it(tmp_path, open_umask):
    path = tmp_path / "s.prproj"
    with Project.create(path) as project:
        StudyService(project).add_annotator("ava")
    assert not backup_dir(path).exists()  # a new project has nothing to keep yet
    with Project.open(path) as project:
        made = project.automatic_backup
        StudyService(project).add_annotator("ben")  # after the backup: not in it
    assert made is not None and list(backup_dir(path).iterdir()) == [made]
    assert made.name.startswith("s-") and made.name.endswith("-auto.prproj")
    assert _mode(made) == 0o600 and _mode(made.parent) == 0o700
    conn = sqlite3.connect(f"file:{made}?mode=ro&immutable=1", uri=True)
    assert conn.execute("SELECT name FROM annotators").fetchall() == [("ava",)]
    conn.close()
