"""The project file: refusing bad files untouched, the lock, read-only access, migrations,
backups (made by hand, before an upgrade, and automatically when a project is opened for work)."""

from __future__ import annotations

import errno
import hashlib
import io
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from portalreview.store import lock as lock_module
from portalreview.store import migrations
from portalreview.store import project as project_module
from portalreview.store.project import (
    APPLICATION_ID,
    Project,
    ProjectDamagedError,
    ProjectError,
    ProjectLockedError,
    WalNotItsOwnError,
    backup_dir,
    copy_backup_beside,
    latest_backup,
    list_backups,
    make_backup,
)
from portalreview.store.service import StudyService
from tests.conftest import build_small_study


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


@pytest.mark.parametrize("step", ["trigger_statements", "start_study"])
def test_a_project_that_cannot_be_made_leaves_nothing_behind(tmp_path, monkeypatch, step):
    def disk_full(*args, **kwargs) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(project_module, step, disk_full)
    with pytest.raises(ProjectError, match=r"could not be created \(database or disk is full\)"):
        Project.create(tmp_path / "s.prproj")
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()  # space freed: the same name can be used
    with Project.create(tmp_path / "s.prproj") as p:
        assert p.meta("name") == "s"


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
        # what a program killed while creating it leaves
        (
            lambda p: _sqlite_file(p, APPLICATION_ID),
            "making it was cut short, so it holds no work. Delete it and make it again",
        ),
    ],
    ids=["zero-bytes", "random-bytes", "csv", "other-sqlite", "creation-cut-short"],
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


@pytest.mark.parametrize(
    ("damage", "what"),
    [
        (lambda data: b"", "is empty (0 bytes)"),
        (lambda data: b"\0" * 4096 + data[4096:], "is not an SQLite database file"),
    ],
    ids=["cut-to-nothing", "start-zeroed"],
)
def test_a_project_whose_start_was_lost_names_its_backup(tmp_path, damage, what):
    path = tmp_path / "s.prproj"
    with Project.create(path) as p:
        StudyService(p).add_annotator("ava")
    backup = make_backup(path, "manual")
    path.write_bytes(damage(path.read_bytes()))
    before = _digest(path)
    with pytest.raises(ProjectDamagedError) as refused:
        Project.open(path)
    assert refused.value.latest_backup == backup
    assert str(refused.value) == (
        f"s.prproj is damaged: it {what}. Restore the latest backup from s.backups/: "
        f"{backup.name}."
    )
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


def test_a_project_open_here_is_named_as_this_program_s_not_another(tmp_path):
    """Opened twice by this very program (two windows or tools at once), the second opener is
    not told that "another PortalReview" has it."""
    path = tmp_path / "s.prproj"
    Project.create(path).close()
    with Project.open(path), pytest.raises(ProjectLockedError) as info:
        Project.open(path)
    assert info.value.holder.here and info.value.holder.pid == os.getpid()
    message = str(info.value)
    assert "already open for writing in this PortalReview" in message
    assert "another PortalReview" not in message and "read-only" in message
    Project.open(path).close()  # released on close


def test_a_project_dropped_without_closing_releases_its_lock(tmp_path):
    """A project nobody closed (dropped by a window that lost track of it) releases its lock
    when it is collected, not when the program ends: opening the file again works."""
    path = tmp_path / "s.prproj"
    Project.create(path).close()
    dropped = Project.open(path)
    service = StudyService(dropped)
    service.me = service  # kept alive by a reference cycle until the collector runs
    del dropped, service
    with Project.open(path) as again:  # the collector is run for a lock held here
        assert again.integrity_check() == "ok"
    assert not (tmp_path / "s.prproj.lock").exists()


class _WindowsLocks:
    """A stand-in for msvcrt's byte-range locks, with Windows' rule that they are mandatory:
    a read that covers a byte another handle has locked is refused (ERROR_LOCK_VIOLATION)."""

    LK_NBLCK, LK_UNLCK = 2, 0

    def __init__(self) -> None:
        self.held: dict[tuple[int, int], dict[int, int]] = {}  # file -> {first byte: handle}

    @staticmethod
    def _file(path_or_fd: Path | int) -> tuple[int, int]:
        info = os.fstat(path_or_fd) if isinstance(path_or_fd, int) else os.stat(path_or_fd)
        return info.st_dev, info.st_ino

    def locking(self, fd: int, mode: int, nbytes: int) -> None:
        assert nbytes == 1
        start = os.lseek(fd, 0, os.SEEK_CUR)  # msvcrt locks from the file position
        held = self.held.setdefault(self._file(fd), {})
        if mode == self.LK_UNLCK:
            del held[start]
        elif held.get(start, fd) != fd:
            raise PermissionError(errno.EACCES, "Permission denied")
        else:
            held[start] = fd

    def refuses_reading(self, path: Path) -> bool:
        """Reading a whole small file asks for its bytes and a read-ahead buffer beyond."""
        end = path.stat().st_size + io.DEFAULT_BUFFER_SIZE
        return any(start < end for start in self.held.get(self._file(path), {}))


def test_on_windows_the_holder_of_a_lock_is_named(tmp_path, monkeypatch):
    """Windows refuses to read a locked byte: the lock is taken past the holder's details, so
    a second opener can still read who has the project open (not "unknown on unknown")."""
    windows = _WindowsLocks()
    monkeypatch.setattr(lock_module, "msvcrt", windows)
    monkeypatch.setattr(lock_module, "_try_lock", lock_module._windows_try_lock)
    monkeypatch.setattr(lock_module, "_unlock", lock_module._windows_unlock)
    read_text = Path.read_text

    def windows_read_text(self: Path, *args, **kwargs) -> str:
        if windows.refuses_reading(self):
            raise PermissionError(errno.EACCES, "locked a portion of the file", str(self), 33)
        return read_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", windows_read_text)
    path = tmp_path / "s.prproj"
    Project.create(path).close()
    with Project.open(path), pytest.raises(ProjectLockedError) as info:
        Project.open(path)
    assert info.value.holder.pid == os.getpid() and "unknown" not in str(info.value)
    Project.open(path).close()  # released on close


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


@pytest.mark.skipif(not hasattr(os, "symlink") or os.name == "nt", reason="symbolic links")
def test_a_symbolic_link_leads_to_the_same_lock_and_backups(tmp_path):
    path = tmp_path / "s.prproj"
    Project.create(path).close()
    (tmp_path / "shortcuts").mkdir()
    link = tmp_path / "shortcuts" / "s.prproj"
    link.symlink_to(path)
    with Project.open(path), pytest.raises(ProjectLockedError):
        Project.open(link)  # one writer only, whatever name the file is opened by
    with Project.open(link) as p:
        assert p.path == path.resolve()
        assert p.backup().parent == backup_dir(path).resolve()
    assert sorted(os.listdir(link.parent)) == ["s.prproj"]  # no lock, no backups beside it


def test_a_full_disk_when_locking_is_named_and_leaves_no_lock_behind(tmp_path, monkeypatch):
    path = tmp_path / "s.prproj"
    Project.create(path).close()
    before = _digest(path)

    def disk_full(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(lock_module.os, "write", disk_full)
    with pytest.raises(ProjectError, match=r"s.prproj.lock could not be written .*disk full"):
        Project.open(path)
    monkeypatch.undo()  # space freed: the same program opens it
    assert _digest(path) == before
    with Project.open(path) as p:
        assert p.integrity_check() == "ok"


def test_no_room_beside_the_file_is_not_called_damage(tmp_path, monkeypatch):
    path = tmp_path / "s.prproj"
    Project.create(path).close()
    make_backup(path, "manual")
    error = sqlite3.OperationalError("disk I/O error")
    error.sqlite_errorname = "SQLITE_IOERR_SHMSIZE"  # SQLite could not make the -shm

    def no_room(path: Path, read_only: bool) -> sqlite3.Connection:
        raise error

    monkeypatch.setattr(project_module, "_connect", no_room)
    with pytest.raises(ProjectError, match="disk full") as refused:
        Project.open(path)
    assert not isinstance(refused.value, ProjectDamagedError)
    assert "was not changed" in str(refused.value)


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


def test_a_failed_upgrade_tried_again_keeps_one_backup_of_the_file(tmp_path, monkeypatch):
    """Before-upgrade backups are never deleted: each refused attempt (open, upgrade, merge...)
    on the same content names the same copy instead of adding another full one."""
    path = tmp_path / "s.prproj"
    Project.create(path).close()
    old_version = migrations.SCHEMA_VERSION

    def broken(conn: sqlite3.Connection) -> None:
        raise RuntimeError("step failed")

    monkeypatch.setattr(migrations, "SCHEMA_VERSION", old_version + 1)
    monkeypatch.setitem(migrations.STEPS, old_version, broken)
    messages = []
    for _ in range(3):
        with pytest.raises(ProjectError, match="unchanged") as refused:
            Project.open(path)
        messages.append(str(refused.value))
    (backup,) = [b for b in list_backups(path) if b.kind == "before upgrade"]
    assert all(backup.path.name in message for message in messages)
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE changed_since (x)")  # a new state gets a copy of its own
    conn.close()
    with pytest.raises(ProjectError, match="unchanged"):
        Project.open(path)
    assert len([b for b in list_backups(path) if b.kind == "before upgrade"]) == 2


def _interrupt_a_save(path: Path) -> None:
    """Leave ``path`` as a program killed during a save in rollback-journal mode (an older
    file, an offline copy) leaves it: changed pages in the file, the old ones in a hot
    ``-journal`` beside it (copies of both taken while the save is under way)."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()
    work = path.with_name("work.prproj")
    shutil.copy(path, work)
    conn = sqlite3.connect(work, isolation_level=None)
    conn.execute("PRAGMA cache_size = 1")  # changed pages spill into the file at once
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("UPDATE annotators SET name = 'half-saved'")
    conn.execute("CREATE TABLE filler (x)")
    conn.execute("INSERT INTO filler SELECT randomblob(500) FROM annotators, pragma_table_list")
    shutil.copy(work, path)
    shutil.copy(work.with_name("work.prproj-journal"), path.with_name(path.name + "-journal"))
    conn.execute("ROLLBACK")
    conn.close()
    work.unlink()


def test_a_save_interrupted_in_rollback_journal_mode_is_undone_on_opening(tmp_path):
    path = tmp_path / "s.prproj"
    with Project.create(path) as p:
        StudyService(p).add_annotator("ava")
    _interrupt_a_save(path)
    with pytest.raises(ProjectError) as refused:
        Project.open(path, read_only=True)  # only a writer can undo it
    message = str(refused.value)
    assert "A save of s.prproj was interrupted" in message and "Open it for writing" in message
    assert "never copy or move s.prproj without it" in message
    with Project.open(path) as p:
        assert p.integrity_check() == "ok"
        assert [a.name for a in StudyService(p).annotators()] == ["ava"]
    assert not path.with_name("s.prproj-journal").exists()


def test_an_upgrade_runs_in_wal_mode(tmp_path, monkeypatch):
    """Killed during an upgrade, a file leaves its half-done work in a WAL nobody reads, not in
    the file with a -journal beside it that only a writer can undo."""
    path = tmp_path / "s.prproj"
    Project.create(path).close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = DELETE")  # as an offline copy is
    conn.close()
    modes = []
    old_version = migrations.SCHEMA_VERSION
    monkeypatch.setattr(migrations, "SCHEMA_VERSION", old_version + 1)
    monkeypatch.setitem(
        migrations.STEPS,
        old_version,
        lambda conn: modes.append(conn.execute("PRAGMA journal_mode").fetchone()[0]),
    )
    Project.open(path).close()
    assert modes == ["wal"]


def _file_in_the_way(path: Path, monkeypatch) -> None:
    backup_dir(path).write_text("a file where the backups folder should be")


def _disk_full(path: Path, monkeypatch) -> None:
    def no_room(*args) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(project_module, "_copy_database", no_room)


def _refused_by_the_system(code: int):
    """The system refuses the hidden copy a backup is written as first, with ``code``."""

    def obstacle(path: Path, monkeypatch) -> None:
        def refused(source, target: Path, progress) -> None:
            partial = target.with_name(f".{target.name}.partial")
            raise OSError(code, os.strerror(code), str(partial))

        monkeypatch.setattr(project_module, "_copy_database", refused)

    return obstacle


@pytest.mark.parametrize(
    ("obstacle", "advice"),
    [
        (_file_in_the_way, "s.backups is a file, not a folder; nothing was changed. Move it away"),
        (_disk_full, "is full (database or disk is full); nothing was changed. Free some space"),
        (
            _refused_by_the_system(errno.EROFS),
            "s.backups is on a read-only disk (Read-only file system); nothing was changed. "
            "Make that disk writable, or move the project to a folder you may write to",
        ),
        (
            _refused_by_the_system(errno.EACCES),
            "you may not write in {folder} (Permission denied); nothing was changed. Ask for "
            "the right to write there",
        ),
    ],
    ids=["file-in-the-way", "disk-full", "read-only", "permission"],
)
def test_no_upgrade_without_its_backup(tmp_path, monkeypatch, obstacle, advice):
    path = tmp_path / "s.prproj"
    Project.create(path).close()
    before = _digest(path)
    old_version = migrations.SCHEMA_VERSION
    monkeypatch.setattr(migrations, "SCHEMA_VERSION", old_version + 1)
    monkeypatch.setitem(migrations.STEPS, old_version, lambda conn: None)
    obstacle(path, monkeypatch)
    with pytest.raises(ProjectError) as refused:
        Project.open(path)
    message = str(refused.value)
    assert message.startswith("s.prproj could not be backed up into s.backups/ before upgrading")
    assert advice.format(folder=backup_dir(path)) in message, message
    assert ".partial" not in message and ("Free some" in advice) == ("Free some" in message)
    assert _digest(path) == before
    assert not path.with_name("s.prproj.lock").exists()


def test_older_file_opened_read_only_asks_for_an_upgrade(tmp_path, monkeypatch):
    path = tmp_path / "s.prproj"
    Project.create(path).close()
    monkeypatch.setattr(migrations, "SCHEMA_VERSION", migrations.SCHEMA_VERSION + 1)
    with pytest.raises(ProjectError, match="older project format") as refused:
        Project.open(path, read_only=True)
    assert "run `portalreview upgrade s.prproj`" in str(refused.value)  # the verb, by name


def test_an_older_file_the_person_cannot_write_is_not_offered_read_only(tmp_path, monkeypatch):
    """Read-only is no way into a file this version reads only once upgraded: the refusal
    (a plain ProjectError, which the app does not answer with "open it read-only?") says what
    to do instead."""
    path = tmp_path / "s.prproj"
    Project.create(path).close()
    monkeypatch.setattr(migrations, "SCHEMA_VERSION", migrations.SCHEMA_VERSION + 1)
    real = project_module._writable
    monkeypatch.setattr(
        project_module, "_writable", lambda p, folder=False: p != path and real(p, folder)
    )
    with pytest.raises(ProjectError) as refused:
        Project.open(path)
    assert type(refused.value) is ProjectError
    message = str(refused.value)
    assert message.startswith("s.prproj is read-only for you (you may not write s.prproj). ")
    assert "older project format" in message and "open it read-only" not in message.lower()
    assert "`portalreview upgrade s.prproj`" in message and "copy it to a folder" in message
    assert not backup_dir(path).exists()


def test_backups_roll(tmp_path, monkeypatch):
    monkeypatch.setattr(project_module, "BACKUPS_KEPT", 3)
    path = tmp_path / "s.prproj"
    with Project.create(path) as p:
        made = [p.backup(f"n{i}") for i in range(5)]
    kept = sorted(backup_dir(path).iterdir())
    assert kept == sorted(made[-3:])
    with Project.open(kept[-1], read_only=True) as copy:
        assert copy.integrity_check() == "ok"


def test_a_backup_opened_to_work_in_is_not_rolled_away(tmp_path, monkeypatch):
    """Someone opened the oldest backup and saved in it; the next opening of the project
    deleted it, with that work, while it was open."""
    monkeypatch.setattr(project_module, "BACKUPS_KEPT", 3)
    path = tmp_path / "s.prproj"
    with Project.create(path) as p:
        made = [p.backup(f"n{i}") for i in range(3)]
    with Project.open(made[0]) as opened:
        StudyService(opened).add_annotator("worked_in_the_backup")
        with Project.open(path) as p:
            p.backup("n3")  # one too many: the oldest, open, is spared
        assert made[0].exists()
    with Project.open(path) as p:
        p.backup("n4")  # closed now: surplus again
    assert not made[0].exists()


# --- automatic and rolling backups ---------------------------------------------------------------


def _annotators_in(backup: Path) -> list[str]:
    """The annotators a backup holds, read straight from it with sqlite3."""
    conn = sqlite3.connect(f"file:{backup}?mode=ro&immutable=1", uri=True)
    try:
        return [name for (name,) in conn.execute("SELECT name FROM annotators ORDER BY id")]
    finally:
        conn.close()


@pytest.fixture
def every_open(monkeypatch):
    """Automatic backups at every opening for writing (not at most one an hour)."""
    monkeypatch.setattr(project_module, "AUTO_BACKUP_EVERY", timedelta(0))


def test_each_opening_for_work_backs_up_the_state_it_starts_from(tmp_path, every_open):
    path = tmp_path / "s.prproj"
    with Project.create(path) as p:
        StudyService(p).add_annotator("p0")
    for i in range(1, 4):
        with Project.open(path) as p:
            StudyService(p).add_annotator(f"p{i}")
    autos = [b for b in list_backups(path) if b.kind == "automatic"]
    # Opening i (1..3) saw p0 .. p(i-1).
    assert [_annotators_in(b.path) for b in autos] == [["p0"], ["p0", "p1"], ["p0", "p1", "p2"]]
    assert [b.path for b in autos] == sorted(b.path for b in autos)  # the names sort by time
    assert autos[0].made_at < autos[1].made_at < autos[2].made_at


def test_the_newest_whole_backup_is_never_rolled_out(tmp_path, monkeypatch, every_open):
    """A project damaged in a way the quick check on opening misses (an index that no longer
    matches its table) opened every day: each day's automatic backup holds the damage, and
    after ten days every whole backup was deleted. The newest whole one is kept whatever the
    count, and a damaged newest backup is said (the project itself is then suspect)."""
    monkeypatch.setattr(project_module, "BACKUPS_KEPT", 2)
    path = tmp_path / "s.prproj"
    with Project.create(path) as p:
        StudyService(p).add_annotator("p0")
    with Project.open(path) as p:
        whole = p.automatic_backup
    checked = []

    def damage(backup: Path) -> str | None:  # every backup after the first holds the damage
        checked.append(backup.name)
        return None if backup == whole else "it failed its integrity check (test)."

    monkeypatch.setattr(project_module, "backup_damage", damage)
    for i in range(1, 6):
        with Project.open(path) as p:
            StudyService(p).add_annotator(f"p{i}")
            if i >= 3:  # (before, there is nothing to delete, and nothing is checked)
                assert "failed SQLite's integrity check" in p.backup_problem
                assert f"{whole.name} is kept as the newest whole backup" in p.backup_problem
    assert whole.name in checked
    autos = [b.path for b in list_backups(path) if b.kind == "automatic"]
    assert whole in autos and len(autos) == 3  # the two newest, and the newest whole one
    assert _annotators_in(whole) == ["p0"]


def test_automatic_backups_keep_the_newest_and_spare_the_other_kinds(
    tmp_path, monkeypatch, every_open
):
    monkeypatch.setattr(project_module, "BACKUPS_KEPT", 3)
    path = tmp_path / "s.prproj"
    with Project.create(path) as p:
        StudyService(p).add_annotator("p0")
        by_hand = p.backup()
    upgrade = make_backup(path, "before-upgrade-from-v1")
    (backup_dir(path) / "notes.txt").write_text("the PI's own notes")
    other_project = backup_dir(path) / "other-2020-01-01T00-00-00.000Z-auto.prproj"
    other_project.write_bytes(b"not ours")
    for i in range(1, 7):
        with Project.open(path) as p:
            StudyService(p).add_annotator(f"p{i}")
    autos = [b.path for b in list_backups(path) if b.kind == "automatic"]
    # Six automatic backups, of p0..p0, p0..p1, ... p0..p5: the last three are kept.
    assert [len(_annotators_in(a)) for a in autos] == [4, 5, 6]
    assert by_hand.exists() and upgrade.exists()
    assert (backup_dir(path) / "notes.txt").exists() and other_project.exists()
    # Backups by hand roll among themselves, and leave the automatic ones alone.
    with Project.open(path, read_only=True) as p:
        made = [p.backup(f"by-hand-{i}") for i in range(4)]
    kinds = {}
    for b in list_backups(path):
        kinds.setdefault(b.kind, []).append(b.path)
    assert kinds == {"by hand": made[-3:], "before upgrade": [upgrade], "automatic": autos}


def test_a_project_opened_again_within_the_hour_is_not_backed_up_again(tmp_path):
    path = tmp_path / "s.prproj"
    Project.create(path).close()
    with Project.open(path) as p:
        first = p.automatic_backup
        StudyService(p).add_annotator("ava")
    with Project.open(path) as p:
        assert p.automatic_backup is None
    assert [b.path for b in list_backups(path)] == [first]
    # The same backup made two hours ago: the next opening makes a new one.
    two_hours_ago = datetime.now(UTC) - timedelta(hours=2)
    stamp = (
        two_hours_ago.strftime("%Y-%m-%dT%H-%M-%S") + f".{two_hours_ago.microsecond // 1000:03d}Z"
    )
    older = first.with_name(f"s-{stamp}-auto.prproj")
    first.rename(older)
    with Project.open(path) as p:
        second = p.automatic_backup
    assert second is not None and second != older
    assert [b.path for b in list_backups(path)] == [older, second]
    assert _annotators_in(older) == [] and _annotators_in(second) == ["ava"]


def test_an_unchanged_project_is_not_backed_up_twice(tmp_path, every_open):
    path = tmp_path / "s.prproj"
    with Project.create(path) as p:
        StudyService(p).add_annotator("ava")
    with Project.open(path) as p:
        first = p.automatic_backup
    with Project.open(path) as p:
        assert p.automatic_backup is None  # the same content: nothing written
    with Project.open(path) as p:
        StudyService(p).add_annotator("ben")
    with Project.open(path) as p:
        second = p.automatic_backup
    assert [b.path for b in list_backups(path)] == [first, second]
    assert not any(name.startswith(".") for name in os.listdir(backup_dir(path)))


class _Clock(datetime):
    """``datetime`` with a workstation clock ``ahead`` of the true time."""

    ahead = timedelta(0)

    @classmethod
    def now(cls, tz=None):
        return datetime.now(tz) + cls.ahead


def test_a_clock_set_back_keeps_the_backup_just_made_and_offers_it(tmp_path, monkeypatch):
    # The clock ran a year ahead for three working days, then was put right (NTP): the backups
    # made since must not sort as the oldest, to be deleted at once.
    monkeypatch.setattr(project_module, "BACKUPS_KEPT", 3)
    monkeypatch.setattr(project_module, "datetime", _Clock)
    path = tmp_path / "s.prproj"
    Project.create(path).close()
    for day in range(1, 4):
        _Clock.ahead = timedelta(days=365 + day)
        with Project.open(path) as p:
            StudyService(p).add_annotator(f"ahead{day}")
    for day in range(1, 3):
        _Clock.ahead = timedelta(days=day)
        with Project.open(path) as p:
            made = p.automatic_backup
            StudyService(p).add_annotator(f"right{day}")
        assert made is not None and made.exists()
        assert latest_backup(path) == made
    assert _annotators_in(latest_backup(path)) == ["ahead1", "ahead2", "ahead3", "right1"]
    with Project.open(path) as p:  # within the hour of the newest backup, by the right clock
        assert p.automatic_backup is None
    autos = [b for b in list_backups(path) if b.kind == "automatic"]
    assert [len(_annotators_in(b.path)) for b in autos] == [2, 3, 4]
    assert [b.path.name for b in autos] == sorted(b.path.name for b in autos)


def test_backups_named_before_their_number_still_list_and_come_first(tmp_path):
    path = tmp_path / "s.prproj"
    Project.create(path).close()
    folder = backup_dir(path)
    folder.mkdir()
    oldest = folder / "s-20240101T000000000+0000-auto.prproj"
    older = folder / "s-2030-01-01T00-00-00.000Z-auto.prproj"  # made with the clock ahead
    for legacy in (oldest, older):
        shutil.copyfile(path, legacy)
    newest = make_backup(path, "manual")
    assert [b.path for b in list_backups(path)] == [oldest, older, newest]
    assert [b.number for b in list_backups(path)] == [0, 0, 1]
    assert list_backups(path)[1].made_at == datetime(2030, 1, 1, tzinfo=UTC)
    assert latest_backup(path) == newest


def test_no_automatic_backup_when_opened_read_only_or_refused_for_the_lock(tmp_path, every_open):
    path = tmp_path / "s.prproj"
    with Project.create(path) as p:
        StudyService(p).add_annotator("ava")
    with Project.open(path, read_only=True) as p:
        assert p.automatic_backup is None
    assert not backup_dir(path).exists()
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "open"
        made_by_holder = list_backups(path)
        assert [b.kind for b in made_by_holder] == ["automatic"]
        with pytest.raises(ProjectLockedError):
            Project.open(path)
        assert list_backups(path) == made_by_holder
    finally:
        holder.communicate("\n", timeout=30)


def _big_project(path: Path) -> int:
    """A project of more pages than one backup step copies; returns its page count."""
    with Project.create(path) as p:
        svc = StudyService(p)
        svc.add_annotator("ava")
        for i in range(150):
            svc.add_case(f"c{i}", f"Message {i}: " + "many words " * 4000)
    conn = sqlite3.connect(path)
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.close()
    assert pages > project_module._BACKUP_STEP_PAGES
    return pages


def test_the_backup_on_opening_reports_its_progress_in_pages(tmp_path):
    path = tmp_path / "s.prproj"
    pages = _big_project(path)
    reports: list[tuple[int, int]] = []
    with Project.open(path, progress=lambda done, total: reports.append((done, total))) as p:
        assert p.automatic_backup is not None
    step = project_module._BACKUP_STEP_PAGES
    # One report a step: after 1024, 2048, ... pages, then the last, partial step.
    expected = [(min(done, pages), pages) for done in range(step, pages + step, step)]
    assert reports == expected


_SLOW_BACKUP = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from portalreview.store.project import make_backup

    def stall(done, total):
        print("copying", flush=True)
        time.sleep(600)

    make_backup(Path(sys.argv[1]), "manual", progress=stall)
    """
)


def test_a_backup_cut_short_by_a_kill_never_counts_as_one(tmp_path):
    path = tmp_path / "s.prproj"
    _big_project(path)
    copier = subprocess.Popen(
        [sys.executable, "-c", _SLOW_BACKUP, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert copier.stdout.readline().strip() == "copying"
    finally:
        copier.kill()
        copier.wait(timeout=30)
    (partial,) = (p for p in backup_dir(path).iterdir() if p.name.endswith(".partial"))
    assert partial.name.startswith(".s-") and partial.stat().st_size > 0
    assert list_backups(path) == [] and latest_backup(path) is None
    # An hour later it is swept away by the next backup; a fresh one would be left.
    an_hour_ago = partial.stat().st_mtime - 3601
    os.utime(partial, (an_hour_ago, an_hour_ago))
    with Project.open(path) as p:
        made = p.automatic_backup
    assert sorted(backup_dir(path).iterdir()) == [made]


def test_a_failed_automatic_backup_names_the_backups_folder_not_its_hidden_copy(
    tmp_path, monkeypatch
):
    path = tmp_path / "s.prproj"
    Project.create(path).close()
    _refused_by_the_system(errno.EROFS)(path, monkeypatch)
    with Project.open(path) as p:
        assert p.backup_problem == (
            f"The automatic backup of s.prproj into s.backups/ failed ({backup_dir(path)} is on "
            "a read-only disk (Read-only file system)). Your work is saved as usual; back the "
            "project up yourself."
        )


LONG_NAMES = ["p" * 200, "r" * 240, "é" * 120]  # the last: 240 bytes in UTF-8


@pytest.mark.parametrize("stem", LONG_NAMES, ids=["200", "240", "240-bytes-accented"])
def test_a_project_with_a_very_long_name_is_backed_up(tmp_path, monkeypatch, stem):
    """A backup's name adds some 61 characters to the project's, and its hidden copy and that
    copy's journal 17 more: past the system's 255 bytes, every backup was refused ("unable to
    open database file"), and an older file could not be upgraded at all."""
    path = tmp_path / f"{stem}.prproj"
    Project.create(path).close()
    with Project.open(path) as p:
        assert p.backup_problem is None and p.automatic_backup is not None
        made = [p.automatic_backup, p.backup()]
    old_version = migrations.SCHEMA_VERSION
    monkeypatch.setattr(migrations, "SCHEMA_VERSION", old_version + 1)
    monkeypatch.setitem(migrations.STEPS, old_version, lambda conn: None)
    with Project.open(path) as p:
        assert p.upgraded_from == old_version
    backups = list_backups(path)
    assert [b.path for b in backups[:2]] == made and len(backups) == 3
    assert [b.number for b in backups] == [1, 2, 3]
    assert backups[-1].reason == f"before-upgrade-from-v{old_version}"
    for backup in backups:
        assert len(f".{backup.path.name}.partial-journal".encode()) <= 255
        assert stem.startswith(backup.path.name.split("-0000")[0])  # cut at a character


def test_backups_named_with_a_long_name_whole_still_list(tmp_path):
    """Versions before the cut named backups of a long-named project with its whole name
    (those that fitted): they are still its backups, and the next one is numbered after."""
    stem = "p" * 180
    path = tmp_path / f"{stem}.prproj"
    Project.create(path).close()
    backup_dir(path).mkdir()
    old = backup_dir(path) / f"{stem}-000004-2025-06-01T14-30-12.345Z-auto.prproj"
    shutil.copy(path, old)
    made = make_backup(path, "manual")
    assert [b.path for b in list_backups(path)] == [old, made]
    assert made.name.startswith(stem[:100]) and "-000005-" in made.name and stem not in made.name


def test_a_long_named_project_moved_to_a_deeper_folder_keeps_its_backups(tmp_path):
    """How much of a long name a backup's name keeps depends on the folder's path too (SQLite
    opens no file whose path passes 512 bytes): the backups made before a move still count."""
    stem = "p" * 200
    first = tmp_path / f"{stem}.prproj"
    Project.create(first).close()
    earlier = make_backup(first, "manual")
    deeper = tmp_path / ("d" * 120)
    deeper.mkdir()
    moved = deeper / first.name
    shutil.move(first, moved)
    shutil.move(backup_dir(first), backup_dir(moved))
    made = make_backup(moved, "manual")
    assert [b.path for b in list_backups(moved)] == [backup_dir(moved) / earlier.name, made]
    assert len(made.name) < len(earlier.name) and "-000002-" in made.name


def test_a_backup_of_a_long_named_project_is_restored_beside_it(tmp_path):
    """The restored copy's name ("<name>-restored-<time>") is cut like a backup's."""
    path = tmp_path / f"{'p' * 220}.prproj"
    Project.create(path).close()
    backup = make_backup(path, "manual")
    restored = copy_backup_beside(backup, path)
    with Project.open(restored) as p:
        assert p.integrity_check() == "ok"
    assert "-restored-" in restored.name and restored.name.startswith("p" * 100)


def test_a_failed_automatic_backup_does_not_keep_the_project_closed(tmp_path):
    path = tmp_path / "s.prproj"
    with Project.create(path) as p:
        StudyService(p).add_annotator("ava")
    backup_dir(path).write_text("a file where the backups folder should be")
    with Project.open(path) as p:
        assert p.automatic_backup is None
        assert p.backup_problem.startswith(
            "The automatic backup of s.prproj into s.backups/ failed (s.backups is a file, not a "
            "folder)"
        )
        assert p.backup_problem.endswith(
            "Your work is saved as usual; back the project up yourself."
        )
        StudyService(p).add_annotator("ben")  # work goes on
    with Project.open(path, read_only=True) as p:
        assert [a.name for a in StudyService(p).annotators()] == ["ava", "ben"]


def _spoil(backup: Path, how: str) -> None:
    data = backup.read_bytes()
    spoilt = {
        "cut short": data[: len(data) - 4096],
        "emptied": b"",
        "overwritten": data[:100] + bytes(len(data) - 100),  # its header kept, the rest zeros
    }[how]
    backup.write_bytes(spoilt)


def _two_backups_then_damaged(tmp_path) -> tuple[Path, Path, Path]:
    """A project with a backup by hand, then a newer automatic one; the project damaged."""
    path = tmp_path / "s.prproj"
    with Project.create(path) as p:
        StudyService(p).add_annotator("ava")
    older = make_backup(path, "manual")
    with Project.open(path) as p:
        newest = p.automatic_backup
        StudyService(p).add_annotator("ben")
    path.write_bytes(path.read_bytes()[:-1])
    return path, older, newest


def test_a_damaged_file_names_its_newest_backup_and_a_copy_of_it_opens(tmp_path, every_open):
    path, older, newest = _two_backups_then_damaged(tmp_path)
    assert latest_backup(path) == newest != older
    with pytest.raises(ProjectDamagedError) as refused:
        Project.open(path)
    assert refused.value.latest_backup == newest
    assert str(refused.value).endswith(f"Restore the latest backup from s.backups/: {newest.name}.")
    damaged, kept = _digest(path), _digest(newest)
    copy = copy_backup_beside(newest, path)
    stamp = newest.name.removeprefix("s-000002-").removesuffix("-auto.prproj")  # the time
    assert copy == tmp_path / f"s-restored-{stamp}.prproj"
    assert _digest(path) == damaged and _digest(newest) == kept
    assert stat.S_IMODE(copy.stat().st_mode) == 0o600 or os.name != "posix"
    with Project.open(copy) as restored:
        assert restored.integrity_check() == "ok"
        assert [a.name for a in StudyService(restored).annotators()] == ["ava"]
    again = copy_backup_beside(newest, path)  # never over an earlier copy
    assert again == tmp_path / f"s-restored-{stamp}-2.prproj"


@pytest.mark.parametrize("how", ["cut short", "emptied", "overwritten"])
def test_a_damaged_file_offers_its_newest_backup_that_is_whole(tmp_path, every_open, how):
    """The newest backup was offered unchecked: one cut short or emptied on the backup disk
    was copied and opened for writing, and a clinician went on working in a broken copy."""
    path, older, newest = _two_backups_then_damaged(tmp_path)
    _spoil(newest, how)
    with pytest.raises(ProjectDamagedError) as refused:
        Project.open(path)
    assert refused.value.latest_backup == older
    said = str(refused.value)
    assert f"Restore the latest backup that is whole from s.backups/: {older.name}." in said
    assert f"The newer {newest.name} is damaged too" in said
    copy = copy_backup_beside(older, path)
    with Project.open(copy) as restored:
        assert [a.name for a in StudyService(restored).annotators()] == ["ava"]


def test_a_damaged_file_whose_backups_are_all_damaged_says_so(tmp_path, every_open):
    path, older, newest = _two_backups_then_damaged(tmp_path)
    _spoil(newest, "cut short")
    _spoil(older, "emptied")
    with pytest.raises(ProjectDamagedError) as refused:
        Project.open(path)
    assert refused.value.latest_backup is None
    assert str(refused.value).endswith(
        "Its 2 backups in s.backups/ are damaged too: restore your own backup."
    )


def test_a_damaged_file_whose_only_backup_is_damaged_says_so_in_the_singular(tmp_path, every_open):
    path, older, newest = _two_backups_then_damaged(tmp_path)
    older.unlink()
    _spoil(newest, "cut short")
    with pytest.raises(ProjectDamagedError) as refused:
        Project.open(path)
    assert str(refused.value).endswith(
        "Its backup in s.backups/ is damaged too: restore your own backup."
    )


def test_a_damaged_backup_is_not_copied(tmp_path, every_open):
    path, _older, newest = _two_backups_then_damaged(tmp_path)
    _spoil(newest, "overwritten")
    before = sorted(tmp_path.iterdir())
    with pytest.raises(ProjectError, match=f"The backup {newest.name} is damaged"):
        copy_backup_beside(newest, path)
    assert sorted(tmp_path.iterdir()) == before  # no copy left beside it


def _backup_copied_over_a_crashs_wal(tmp_path: Path) -> Path:
    """study.prproj put back by hand from an older copy of itself while a -wal of a later state
    (saves a program killed before merging them) is still beside it."""
    path = tmp_path / "study.prproj"
    with Project.create(path) as p:
        build_small_study(p)
    older = tmp_path / "older-copy.prproj"
    shutil.copy(path, older)
    with Project.open(path, automatic_backup=False) as p:
        for i in range(30):  # a later state, merged into the file: it grows
            StudyService(p).add_case(f"later-{i}", "More words. " * 300)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("CREATE TABLE scratch (x)")  # saves of that state, left in the -wal
    conn.execute("INSERT INTO scratch SELECT randomblob(3000) FROM cases")
    wal = Path(f"{path}-wal").read_bytes()
    conn.close()  # (merges them: the program that made them was killed first)
    shutil.copy(older, path)
    Path(f"{path}-wal").write_bytes(wal)
    return path


def test_a_whole_file_with_a_wal_not_its_own_says_to_move_the_wal_aside(tmp_path, every_open):
    """Called damaged, with "restore your own backup", which cannot help: the -wal stays and
    spoils the backup restored in the same way."""
    path = _backup_copied_over_a_crashs_wal(tmp_path)
    wal = Path(f"{path}-wal")
    before = _digest(path), _digest(wal)
    for read_only in (True, False):
        with pytest.raises(WalNotItsOwnError) as refused:
            Project.open(path, read_only=read_only)
        message = str(refused.value)
        assert message.startswith(
            "study.prproj is damaged as read with study.prproj-wal beside it, but study.prproj "
            "alone is whole: study.prproj-wal does not belong to it."
        )
        assert f"Move study.prproj-wal and study.prproj-shm out of the folder {tmp_path}" in message
        assert "do not delete them" in message and "restore your own backup" not in message
        assert message.endswith("(There is no backup of it in study.backups/ beside it.)")
    assert (_digest(path), _digest(wal)) == before and not backup_dir(path).exists()
    # SQLite's other word for it, raised while reading: the same advice
    malformed = sqlite3.DatabaseError("database disk image is malformed")
    malformed.sqlite_errorname = "SQLITE_CORRUPT"
    assert isinstance(project_module._classify(path, malformed), WalNotItsOwnError)
    # with a backup, offered for an earlier state (the app opens it as a copy, another name)
    backup_dir(path).mkdir()
    backup = backup_dir(path) / "study-000001-2025-06-01T14-30-12.345Z-auto.prproj"
    shutil.copy(tmp_path / "older-copy.prproj", backup)
    with pytest.raises(WalNotItsOwnError) as refused:
        Project.open(path)
    assert refused.value.latest_backup == backup
    assert str(refused.value).endswith(
        "then open study.prproj again. For an earlier state, restore the latest backup from "
        f"study.backups/: {backup.name}."
    )
    wal.rename(tmp_path / "aside-wal")
    with Project.open(path, read_only=True) as p:
        assert p.integrity_check() == "ok"


def test_a_damaged_file_with_a_wal_is_still_called_damaged(tmp_path):
    path = _backup_copied_over_a_crashs_wal(tmp_path)
    with path.open("r+b") as f:  # the file alone spoilt too
        f.seek(4096 * 3)
        f.write(b"\xff" * 4096 * 4)
    with pytest.raises(ProjectDamagedError):
        Project.open(path, read_only=True)


def test_a_damaged_file_without_backups_says_so(tmp_path):
    path = tmp_path / "s.prproj"
    Project.create(path).close()
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(ProjectDamagedError) as refused:
        Project.open(path)
    assert refused.value.latest_backup is None
    assert str(refused.value).endswith(
        "There is no backup of it in s.backups/ beside it: restore your own backup."
    )


def test_a_backup_reason_must_be_fit_for_a_file_name(tmp_path):
    path = tmp_path / "s.prproj"
    Project.create(path).close()
    for reason in ("", "../escape", "two words", "-leading"):
        with pytest.raises(ValueError, match="reason"):
            make_backup(path, reason)
    assert list_backups(path) == []


def test_an_sqlite_uri_spells_the_path_as_the_file_system_does(monkeypatch):
    """URI syntax in a folder name is quoted, and the path's bytes are the file system's own
    (under a Latin-1 locale "ü" is one byte, not UTF-8's two: SQLite opens those bytes)."""
    uri = project_module.sqlite_uri(Path("/data/Station #5/100%/Q?.prproj"), "mode=ro")
    assert uri == "file:/data/Station%20%235/100%25/Q%3F.prproj?mode=ro"
    monkeypatch.setattr(project_module.os, "fsencode", lambda p: str(p).encode("latin-1"))
    assert project_module.sqlite_uri(Path("/data/Müller.prproj"), "mode=rw") == (
        "file:/data/M%FCller.prproj?mode=rw"
    )


def test_a_file_made_at_the_name_while_the_project_is_built_is_never_written_over(
    tmp_path, monkeypatch
):
    """Another program makes a file at the name between the last check and the rename: the
    rename went over it (POSIX renames replace). It is kept and the new project is refused."""
    from portalreview.store import building

    path = (tmp_path / "s.prproj").resolve()
    real_seal = building.seal

    def seal_then_someone_else(file: Path) -> None:
        real_seal(file)
        path.write_bytes(b"someone else's file")

    monkeypatch.setattr(building, "seal", seal_then_someone_else)
    real_exists = Path.exists
    # the race itself: the name is still free when checked, taken when given
    monkeypatch.setattr(Path, "exists", lambda p: False if p == path else real_exists(p))
    with pytest.raises(ProjectError, match="appeared while it was being made"):
        building.create_project_file(path)
    monkeypatch.undo()
    assert path.read_bytes() == b"someone else's file"
    assert [p.name for p in tmp_path.iterdir()] == ["s.prproj"]  # the build removed


def test_a_project_is_made_where_the_file_system_has_no_hard_links(tmp_path, monkeypatch):
    """FAT and exFAT drives refuse hard links: the name is then given by a rename."""
    from portalreview.store import building

    def no_links(*args, **kwargs) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(building.os, "link", no_links)
    path = building.create_project_file(tmp_path / "s.prproj", name="Pilot")
    assert [p.name for p in tmp_path.iterdir()] == ["s.prproj"]
    with Project.open(path) as p:
        assert p.meta("name") == "Pilot"
