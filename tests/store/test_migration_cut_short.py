"""An upgrade cut short by the disk (full, or a write refused) after its backup was made: SQLite
has rolled the upgrade back already, and `portalreview upgrade` says so in words (exit 2), not
with a traceback of the ROLLBACK that found no transaction. The file is unchanged, the backup
kept."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

from portalreview.cli import main
from portalreview.store import migrations
from portalreview.store.project import backup_dir

V2_FILE = Path(__file__).parent / "data" / "v2-small.prproj"

#: `portalreview upgrade FILE` with each file limited to LIMIT bytes from the upgrade on (the
#: backup before it made in full): room for the -shm (32 KiB), not for the upgrade's -wal.
_UPGRADE_WITH_WRITES_LIMITED = """
import resource, signal, sys
from portalreview.cli import main
from portalreview.store import migrations

upgrade = migrations.upgrade

def upgrade_with_writes_limited(*args):
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (40_000, resource.RLIM_INFINITY))
    upgrade(*args)

migrations.upgrade = upgrade_with_writes_limited
sys.exit(main(["upgrade", sys.argv[1]]))
"""


def _old_file(tmp_path: Path) -> Path:
    path = tmp_path / "a.prproj"
    shutil.copy(V2_FILE, path)
    return path


def _backups(path: Path) -> list[Path]:
    return sorted(backup_dir(path).glob("*before-upgrade*"))


def _format(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("PRAGMA user_version").fetchone()[0]
    finally:
        conn.close()


def test_an_upgrade_on_a_full_disk_says_so_and_names_the_backup(tmp_path, monkeypatch, capsys):
    path = _old_file(tmp_path)

    def cut_short_by_a_full_disk(conn: sqlite3.Connection) -> None:
        conn.execute("ROLLBACK")  # as SQLite does when a write finds the disk full
        error = sqlite3.OperationalError("database or disk is full")
        error.sqlite_errorname = "SQLITE_FULL"
        raise error

    last = migrations.SCHEMA_VERSION - 1
    monkeypatch.setitem(migrations.STEPS, last, cut_short_by_a_full_disk)
    assert main(["upgrade", str(path)]) == 2
    said = capsys.readouterr().err
    (backup,) = _backups(path)
    assert "the disk is full" in said and "unchanged" in said, said
    assert f"a.backups/{backup.name}" in said and "rollback" not in said, said
    assert path.read_bytes() == V2_FILE.read_bytes()
    assert _format(backup) == 2


def test_an_upgrade_whose_writes_fail_is_refused_in_words(tmp_path):
    path = _old_file(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", _UPGRADE_WITH_WRITES_LIMITED, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).parents[2],  # this checkout's portalreview
    )
    (backup,) = _backups(path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "rollback" not in done.stderr, done.stderr
    assert "unchanged" in done.stderr and backup.name in done.stderr, done.stderr
    assert _format(path) == 2
