"""The project file: create, open (checked, locked, migrated, backed up), back up, close.

A project is one SQLite file (``*.prproj``) in WAL mode with foreign keys on and
``synchronous=FULL``, so that a save reported as done survives a killed process or a power cut.
Each commit is merged into the file itself, and a save is refused once the file is no longer at
its name (renamed, moved or deleted while open; see ``file_place.py``), so that no save goes
into a ``-wal`` or a file nobody will open again.
The file carries an application id (so another SQLite file is recognised as not ours) and the
schema version in ``PRAGMA user_version``.

Opening never changes a file it refuses: a file whose size shows it was cut short is refused
before SQLite reads it, and the other checks run on a read-only connection.

Backups lie in ``<stem>.backups/`` beside the file (folder 0700, files 0600), named
``<stem>-<number>-<UTC time>-<reason>.prproj``. The number, one more than the largest in the
folder, orders them (so that names sort oldest to newest): not the time, since a clock set back
(run ahead, then put right) would make the newest backup look the oldest, to be deleted at once.
Names from before the number (``<stem>-<UTC time>-<reason>.prproj``) are older than every
numbered one, and ordered by their time. A very long ``<stem>`` is cut there (see
:func:`_backup_stem`), so that a backup's name keeps within the system's limit. There are
three kinds, each kept by its own rule, so that no kind pushes out another:

* **automatic** (``auto``): made when a project is opened for writing, the state at the start of
  a working session; skipped when the newest automatic backup is younger than
  ``AUTO_BACKUP_EVERY`` (re-opening, switching person, a script of many commands) or holds the
  same content (ten copies of one state would push the older states out). The newest
  ``BACKUPS_KEPT`` are kept, and the newest whole one (see :func:`_roll`) whatever the count.
* **by hand** (:meth:`Project.backup`): the newest ``BACKUPS_KEPT`` of them are kept.
* **before an upgrade** to a newer project format: never deleted by the program (one per
  upgrade; the only copy in the format the older version reads); an upgrade tried again on the
  same content (one refused, or cut short) reuses it.
"""

from __future__ import annotations

import contextlib
import errno
import filecmp
import glob
import logging
import os
import re
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import QueuePool

from portalreview import __version__
from portalreview.domain.catalogs import DEFAULT_CATALOGS, Catalogs
from portalreview.store import migrations
from portalreview.store.claims import LocalClaims
from portalreview.store.closing import Closing
from portalreview.store.errors import ReadFailed, SaveFailed, readable_read_error
from portalreview.store.file_place import FilePlace
from portalreview.store.lock import LockHolder, ProjectLock
from portalreview.store.models import Base, ProjectMeta, utc_now
from portalreview.store.output_files import sync_folder
from portalreview.store.schema_sql import trigger_statements

log = logging.getLogger(__name__)

APPLICATION_ID = 0x50525256  # "PRRV"
SUFFIX = ".prproj"
BACKUPS_KEPT = 10  # automatic backups kept, and as many made by hand
AUTO_BACKUP = "auto"
UPGRADE_BACKUP = "before-upgrade"
AUTO_BACKUP_EVERY = timedelta(hours=1)
_SQLITE_HEADER = b"SQLite format 3\x00"
_HEADER_SIZE = 100  # https://www.sqlite.org/fileformat2.html#the_database_header
_WAL_HEADER_SIZE = 32
_BACKUP_STEP_PAGES = 1024  # pages copied between two progress reports
_STALE_PARTIAL = timedelta(hours=1)  # a half-written backup untouched this long was abandoned

Progress = Callable[[int, int], None]


class ProjectError(Exception):
    """A project file cannot be created or opened; the message says why, for a person."""


class ProjectLockedError(ProjectError):
    """Someone else has the project open for writing; ``why`` says who, without the advice."""

    def __init__(self, path: Path, holder: LockHolder) -> None:
        self.holder = holder
        if holder.here:  # this very program (another of its windows or tools) has it open
            self.why = (
                f"{path.name} is already open for writing in this PortalReview (process "
                f"{holder.pid}), in another of its windows or tools"
            )
            super().__init__(f"{self.why}. You can open it read-only, or close it there first.")
            return
        self.why = f"{path.name} is open in another PortalReview: {holder.describe()}"
        super().__init__(f"{self.why}. You can open it read-only, or ask them to close it.")


class ProjectNotWritableError(ProjectError):
    """The person may read the project but not write it (the file's or its folder's
    permissions, a read-only disk): it can be opened read-only. ``why`` is the message without
    that advice."""

    def __init__(self, why: str, advice: str) -> None:
        self.why = why
        super().__init__(f"{why}{advice}")


class ProjectDamagedError(ProjectError):
    """The file is damaged. ``latest_backup`` is the newest backup beside it (None if there is
    none), so that the app can offer to open a copy of it."""

    def __init__(self, path: Path, what: str) -> None:
        self.what = what
        self.latest_backup, damaged = newest_whole_backup(path)
        super().__init__(f"{what} {self._advice(path, damaged)}")

    def _advice(self, path: Path, damaged: list[tuple[Path, str]]) -> str:
        folder = backup_dir(path).name
        if self.latest_backup is None and not damaged:
            return f"There is no backup of it in {folder}/ beside it: restore your own backup."
        if self.latest_backup is None:
            many = f"Its {len(damaged)} backups" if len(damaged) > 1 else "Its backup"
            are = "are" if len(damaged) > 1 else "is"
            return f"{many} in {folder}/ {are} damaged too: restore your own backup."
        if not damaged:
            return f"Restore the latest backup from {folder}/: {self.latest_backup.name}."
        return (
            f"Restore the latest backup that is whole from {folder}/: "
            f"{self.latest_backup.name}. " + _damaged_too(damaged)
        )


class WalNotItsOwnError(ProjectDamagedError):
    """A file whole alone but damaged as read with the ``-wal`` beside it: that -wal holds
    saves of another state of the project (a backup copied over the file by hand while a
    killed program's unmerged saves were still beside it; the two copied at different
    moments). A backup restored by hand in its place meets the same -wal: moving the -wal
    aside is what helps. (A backup opened as a copy, under another name, is safe from it.)"""

    def __init__(self, path: Path) -> None:
        wal = f"{path.name}-wal"
        super().__init__(
            path,
            f"{path.name} is damaged as read with {wal} beside it, but {path.name} alone is "
            f"whole: {wal} does not belong to it. It holds saves of another state of the "
            "project (left by a program that stopped before merging them, before "
            f"{path.name} was put back from a backup, or copied at another moment).",
        )

    def _advice(self, path: Path, damaged: list[tuple[Path, str]]) -> str:
        move = (
            f"Move {path.name}-wal and {path.name}-shm out of the folder {path.parent} (keep "
            "them, do not delete them: they may hold someone's saves), then open "
            f"{path.name} again."
        )
        if self.latest_backup is None and not damaged:
            return f"{move} (There is no backup of it in {backup_dir(path).name}/ beside it.)"
        earlier = super()._advice(path, damaged)
        return f"{move} For an earlier state, {earlier[0].lower()}{earlier[1:]}"


def _damaged_too(damaged: list[tuple[Path, str]]) -> str:
    """The newer backups passed over, and what is wrong with the newest of them."""
    (newest, why), *others = damaged
    more = f" (and {len(others)} more)" if others else ""
    return f"The newer {newest.name}{more} is damaged too: {why}"


# --- connections ---------------------------------------------------------------------------


def _writable(path: Path, folder: bool = False) -> bool:
    """Whether this process may write ``path`` (for a folder: create files in it)."""
    mode = os.W_OK | (os.X_OK if folder else 0)
    if os.access in os.supports_effective_ids:
        return os.access(path, mode, effective_ids=True)
    return os.access(path, mode)


def _beside(path: Path, ending: str) -> Path:
    return path.with_name(path.name + ending)


def _same_file(a: Path, b: Path) -> bool:
    """Whether two existing names are one file (a hard link; a name differing only in case
    on a file system that ignores case)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


class OutputIsProject(ValueError):
    """A report or export was asked to write over the project's own files."""


def refuse_project_output(project: object, out: str | os.PathLike) -> None:
    """Refuse ``out`` where it is the project file or one SQLite or PortalReview keeps beside
    it (``-wal``, ``-shm``, ``-journal``, ``.lock``), by its real path (a link to it too):
    writing a report there would destroy the study. ``project`` is an open project or a
    project file's path; a server study has no file and anything goes."""
    path = project if isinstance(project, (str, os.PathLike)) else getattr(project, "path", None)
    if path is None:
        return
    own = Path(path).resolve()
    target = Path(out).resolve()
    companions = [own, *(_beside(own, e) for e in ("-wal", "-shm", "-journal", ".lock"))]
    if target in companions or any(_same_file(target, c) for c in companions):
        raise OutputIsProject(
            f"{Path(out).name} would write over the project file {own.name} (or a file SQLite "
            "keeps beside it) and destroy the study. Choose another file name."
        )


_NEWEST_ENTRY = "SELECT id, hash FROM audit_log ORDER BY id DESC LIMIT 1"


def _newest_entry(session: Session) -> tuple | None:
    """The project's newest audit entry (id, hash), as ``session`` sees it."""
    row = session.execute(text(_NEWEST_ENTRY)).first()
    return None if row is None else tuple(row)


def _newest_entry_in_file(path: Path) -> tuple | None:
    """The newest audit entry in the file's own pages, its -wal left out (immutable: the open
    connections may answer from pages they hold in memory, and a new one from the -wal's
    pages laid over another file copied in); ``("unreadable",)`` where it cannot be read."""
    try:
        conn = sqlite3.connect(sqlite_uri(path.resolve(), "mode=ro&immutable=1"), uri=True)
        try:
            row = conn.execute(_NEWEST_ENTRY).fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        return ("unreadable",)
    return None if row is None else tuple(row)


def _wal_has_frames(path: Path) -> bool:
    """Whether a ``-wal`` beside the file may hold saves not yet merged into it."""
    try:
        return _beside(path, "-wal").stat().st_size > _WAL_HEADER_SIZE
    except FileNotFoundError:
        return False


def _read_only_query(path: Path) -> str:
    """How to open ``path`` read-only.

    SQLite reads a WAL database through its ``-shm``, which it creates beside the file if it is
    not there. In a folder the person cannot write to, with no WAL holding saves, the file alone
    is the whole project and is opened *immutable* (no ``-shm``, no locks). That is safe for us
    (nothing is written) but assumes nobody writes the file meanwhile: if its owner opens it for
    writing while it is open here, this view does not follow their saves and may report an
    error; closing and reopening shows their work. With a WAL that holds saves, the ``-shm``
    must be there to read them (checked by :func:`_probe`)."""
    if _writable(path.parent, folder=True) or _wal_has_frames(path):
        return "mode=ro"
    return "mode=ro&immutable=1"


def sqlite_uri(path: Path, query: str) -> str:
    """An SQLite URI of ``path`` with ``query``. Every byte of the path as the file system
    spells it is percent-encoded: ``#``, ``?`` and ``%`` are URI syntax (a folder named
    "Station #5" was cut short, and SQLite created a stray file), and SQLite hands the decoded
    bytes to the file system as they are (a UTF-8 path under a Latin-1 locale named no file)."""
    return f"file:{quote(os.fsencode(path))}?{query}"


def _connect(path: Path, read_only: bool) -> sqlite3.Connection:
    query = _read_only_query(path) if read_only else "mode=rw"
    uri = sqlite_uri(path.resolve(), query)
    conn = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA busy_timeout = 5000")
    if not read_only:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
    return conn


def _connect_backup(path: Path) -> sqlite3.Connection:
    """A backup, read-only: immutable (reading it leaves nothing beside it), unless someone
    opened it and left saves in a WAL beside it, which only a normal connection reads."""
    if _wal_has_frames(path):
        return _connect(path, read_only=True)
    return sqlite3.connect(sqlite_uri(path.resolve(), "mode=ro&immutable=1"), uri=True)


def _make_engine(path: Path, read_only: bool, life: Closing | None = None) -> Engine:
    """The project's engine; with ``life``, it makes no connection once the project is closed
    (a disposed engine would otherwise reconnect for whoever still holds the project)."""

    def connect() -> sqlite3.Connection:
        if life is not None:
            life.refuse_connection()
        return _connect(path, read_only)

    # The URL names no file (the creator does), so the pool must be given explicitly: the
    # default for "sqlite://" would share one connection per thread.
    engine = create_engine("sqlite://", creator=connect, poolclass=QueuePool)

    # pysqlite's own transaction handling is off (isolation_level=None); SQLAlchemy's "begin"
    # emits ours, IMMEDIATE for writers so that two writers queue instead of deadlocking.
    @event.listens_for(engine, "begin")
    def _begin(conn) -> None:
        mode = conn.get_execution_options().get("sqlite_begin", "DEFERRED")
        conn.exec_driver_sql(f"BEGIN {mode}")

    return engine


# --- the checks before opening ---------------------------------------------------------------


def _probe(path: Path) -> tuple[int, int]:
    """Check that ``path`` is a readable project; return (application_id, user_version).

    Raises ProjectError without writing anything to the file.
    """
    header, size = read_header(path)
    _check_size(path, header, size)
    _check_wal_readable(path)
    try:
        conn = _connect(path, read_only=True)
        try:
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            # A WAL with frames beside the file (after a crash, or a copy taken while the app
            # saved) can disagree with the file in ways only the full check sees (an index
            # that misses rows of its table): then the full check, else the quick one.
            pragma = "integrity_check" if _wal_has_frames(path) else "quick_check"
            check = _check_result(conn.execute(f"PRAGMA {pragma}").fetchall())
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise _classify(path, exc) from exc
    if app_id != APPLICATION_ID:
        raise ProjectError(f"{path.name} is an SQLite database but not a PortalReview project.")
    if check != "ok":
        raise _wal_not_its_own(path) or ProjectDamagedError(
            path, f"{path.name} failed its integrity check ({check})."
        )
    if version > migrations.SCHEMA_VERSION:
        raise ProjectError(
            f"{path.name} was written by a newer PortalReview (project format "
            f"{version}; this version {__version__} reads up to {migrations.SCHEMA_VERSION}). "
            "Install the newer version to open it."
        )
    if version < 1:  # our id is written first, the format with the tables (_write_schema)
        raise ProjectError(
            f"{path.name} has no project format version: making it was cut short, so it "
            "holds no work. Delete it and make it again."
        )
    return app_id, version


def read_header(path: Path) -> tuple[bytes, int]:
    """The first bytes of an SQLite database file, and its size; ProjectError if it is none."""
    if not path.exists():
        raise ProjectError(f"There is no file {path}.")
    if not path.is_file():
        raise ProjectError(f"{path} is a folder, not a PortalReview project file.")
    try:
        with path.open("rb") as fh:
            header = fh.read(_HEADER_SIZE)
            size = os.fstat(fh.fileno()).st_size
    except OSError as exc:
        raise ProjectError(f"{path} cannot be read: {exc.strerror}.") from exc
    if not header:
        raise _not_a_project(path, "is empty (0 bytes)")
    if header[: len(_SQLITE_HEADER)] != _SQLITE_HEADER:
        raise _not_a_project(path, "is not an SQLite database file")
    return header, size


def _not_a_project(path: Path, what: str) -> ProjectError:
    """A file that is no SQLite file: a project whose start was lost (a crash, a sync tool)
    if the program has backed it up (then its newest backup is named), else a foreign file."""
    if latest_backup(path) is not None:
        return ProjectDamagedError(path, f"{path.name} is damaged: it {what}.")
    return ProjectError(f"{path.name} {what}: it is not a PortalReview project.")


def _check_result(rows) -> str:
    """An integrity check's rows as one text: "ok", or the first findings."""
    found = [str(row[0]) for row in rows]
    if found == ["ok"]:
        return "ok"
    shown = "; ".join(found[:3])
    return shown + (f"; and {len(found) - 3} more" if len(found) > 3 else "")


def _check_size(path: Path, header: bytes, size: int) -> None:
    """Refuse a file cut short, before SQLite reads it: SQLite reads the missing end of a page
    as zeros, and a read-only quick_check may pass such a file.

    SQLite writes the file in whole pages, and the header's page count (when valid: its
    "valid-for" number equals the change counter) is never more than the pages there are. Both
    hold whenever no WAL with frames (or rollback journal) lies beside the file: those may
    complete a file whose merge a crash interrupted, so with them the checks are left to SQLite.
    """
    if len(header) < _HEADER_SIZE:
        raise ProjectDamagedError(
            path, f"{path.name} is damaged: at {size} bytes it is shorter than its header."
        )
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if not 512 <= page_size <= 65536 or page_size & (page_size - 1):
        raise ProjectDamagedError(
            path, f"{path.name} is damaged: its header gives no valid page size ({page_size})."
        )
    if _wal_has_frames(path) or _beside(path, "-journal").exists():
        return
    counted = int.from_bytes(header[28:32], "big")
    counted_is_valid = header[24:28] == header[92:96]
    if size % page_size and counted_is_valid and 0 < counted * page_size < size:
        raise ProjectDamagedError(  # not cut short: the header's pages are all there
            path,
            f"{path.name} is damaged: it is {size:,} bytes long, {size - counted * page_size:,} "
            f"bytes more than the {counted:,} pages of {page_size:,} bytes its header counts: "
            "something was written after its end.",
        )
    if size % page_size:
        raise ProjectDamagedError(
            path,
            f"{path.name} is damaged: it is {size:,} bytes long, not a whole number of "
            f"{page_size:,}-byte pages, so it was cut short.",
        )
    if counted_is_valid and counted > size // page_size:
        raise ProjectDamagedError(
            path,
            f"{path.name} is damaged: it holds {size // page_size:,} of the {counted:,} pages "
            "its header counts, so its end is missing.",
        )


def _check_wal_readable(path: Path) -> None:
    """A WAL that holds saves can be read only through its ``-shm``; in a folder the person
    cannot write to, SQLite cannot make one."""
    if (
        _wal_has_frames(path)
        and not _beside(path, "-shm").exists()
        and not _writable(path.parent, folder=True)
    ):
        raise ProjectError(
            f"{path.name} has saves in {path.name}-wal not yet merged into it, and it is in a "
            "folder you cannot write to, where they cannot be read. Copy both files together "
            "to a folder of yours and open the copy, or ask its owner to open and close it."
        )


# I/O errors that say the file itself is bad, not that nothing could be written beside it.
_DAMAGE_IOERRS = ("SQLITE_IOERR_READ", "SQLITE_IOERR_SHORT_READ", "SQLITE_IOERR_CORRUPTFS")


def _classify(path: Path, exc: sqlite3.DatabaseError) -> ProjectError:
    """SQLite's refusal of the read-only connection, for a person: damage, access, or a full
    disk."""
    name = getattr(exc, "sqlite_errorname", "")
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        return ProjectError(f"{path.name} is busy in another program ({exc}); try again.")
    if name == "SQLITE_READONLY_ROLLBACK":  # a hot -journal that only a writer can undo
        return ProjectError(
            f"A save of {path.name} was interrupted (its program stopped or the computer went "
            f"off), and {path.name}-journal beside it holds what is needed to undo it. Open it "
            "for writing, in a folder you can write to, and it is put right. Keep "
            f"{path.name}-journal with it: never copy or move {path.name} without it."
        )
    if name.startswith(("SQLITE_CANTOPEN", "SQLITE_READONLY", "SQLITE_PERM", "SQLITE_AUTH")):
        return ProjectError(
            f"{path.name} cannot be opened here ({exc}). If you cannot write to its folder, "
            "copy it to a folder of yours."
        )
    if name == "SQLITE_FULL" or (
        name.startswith("SQLITE_IOERR") and name not in _DAMAGE_IOERRS
    ):  # e.g. no room for the -shm SQLite makes beside the file
        return _disk_problem(path, f"its working files ({path.name}-wal, -shm)", exc)
    return _wal_not_its_own(path) or ProjectDamagedError(
        path, f"{path.name} is damaged and cannot be opened ({exc})."
    )


def _wal_not_its_own(path: Path) -> WalNotItsOwnError | None:
    """The refusal of a file that is whole alone but damaged with the ``-wal`` beside it
    (:class:`WalNotItsOwnError`); None when there is no such -wal, or the file alone is not
    whole either. Reads the file alone (immutable: the -wal unread), changing nothing."""
    if not _wal_has_frames(path):
        return None
    try:
        conn = sqlite3.connect(sqlite_uri(path.resolve(), "mode=ro&immutable=1"), uri=True)
        try:
            alone = _check_result(conn.execute("PRAGMA quick_check").fetchall())
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return None
    return WalNotItsOwnError(path) if alone == "ok" else None


def _refuse_if_not_writable(path: Path) -> None:
    """Opening for writing where saves would fail: say so before anything is changed (SQLite
    would open a file it cannot write without a word, and fail at the first save)."""
    if not _writable(path.parent, folder=True):
        raise ProjectNotWritableError(
            f"{path.name} is in a folder you cannot write to ({path.parent})",
            ": open it read-only, or copy it to a folder of yours.",
        )
    for part in (path, _beside(path, "-wal"), _beside(path, "-shm")):
        if part.exists() and not _writable(part):
            raise ProjectNotWritableError(
                f"{path.name} is read-only for you (you may not write {part.name})",
                ": open it read-only, or copy it to a folder of yours.",
            )


def _lock_for_writing(path: Path) -> ProjectLock:
    """The project's lock, taken; ProjectError if it cannot be written or someone holds it."""
    _refuse_if_not_writable(path)
    lock = ProjectLock(path)
    try:
        holder = lock.acquire()
    except PermissionError as exc:  # another person's lock file, private to them
        raise ProjectNotWritableError(
            f"{path.name} cannot be locked for writing: {lock.path.name} belongs to another "
            "person (their PortalReview has it open, or stopped without closing it)",
            ". Open it read-only, or ask them to open and close it.",
        ) from exc
    except OSError as exc:
        raise _disk_problem(path, lock.path.name, exc) from exc
    if holder is not None:
        raise ProjectLockedError(path, holder)
    return lock


def _lock_to_open(path: Path, version: int) -> ProjectLock:
    """The lock, taken. A file in an older format that cannot be locked is not offered
    read-only: this version reads it only once it is upgraded, which writes it."""
    try:
        return _lock_for_writing(path)
    except (ProjectLockedError, ProjectNotWritableError) as exc:
        if version >= migrations.SCHEMA_VERSION:
            raise
        raise _older_format_refusal(path, version, exc) from exc


def _older_format_refusal(
    path: Path, version: int, exc: ProjectLockedError | ProjectNotWritableError
) -> ProjectError:
    if isinstance(exc, ProjectLockedError):
        advice = "Open it again once it is closed there: it is upgraded then."
    else:
        advice = (
            "Ask someone who may write it to open it in this version, or to run "
            f"`portalreview upgrade {path.name}`; or copy it to a folder of yours and open "
            "the copy."
        )
    return ProjectError(
        f"{exc.why}. It is in an older project format ({version}), which this version reads "
        "only once it is upgraded, and upgrading writes to it (after a backup), so it cannot "
        f"be opened read-only. {advice}"
    )


def _disk_problem(path: Path, beside: str, exc: Exception) -> ProjectError:
    """Something beside the project could not be written: the project itself is intact."""
    why = getattr(exc, "strerror", None) or str(exc)
    return ProjectError(
        f"{path.name} cannot be opened: {beside} could not be written beside it ({why}; is the "
        "disk full?). The project was not changed: free some space and open it again."
    )


def _undo_interrupted_save(path: Path) -> None:
    """Undo a save cut short in rollback-journal mode (an older file, an offline copy, an
    upgrade): ``<file>-journal`` holds the pages as they were before it, and only a connection
    that may write puts them back (a read-only one refuses the file). The caller holds the
    lock. The committed state comes back: what SQLite itself does on opening such a file."""
    read_header(path)  # never let SQLite write into a file that is no database
    try:
        conn = sqlite3.connect(sqlite_uri(path, "mode=rw"), uri=True, isolation_level=None)
        try:
            conn.execute("PRAGMA busy_timeout = 5000")
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # rolls it back
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise _classify(path, exc) from exc


def _write_schema(path: Path) -> None:
    """The tables and triggers of the current format, into the new, empty file ``path``."""
    conn = _connect(path, read_only=False)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.close()
    engine = _make_engine(path, read_only=False)
    try:
        with engine.begin() as sa_conn:
            Base.metadata.create_all(sa_conn)
            for statement in trigger_statements():
                sa_conn.exec_driver_sql(statement)
            sa_conn.exec_driver_sql(f"PRAGMA user_version = {migrations.SCHEMA_VERSION}")
    finally:
        engine.dispose()


def _remove_new_file(path: Path) -> None:
    """Remove a project file this program created (never one it opened), and its companions."""
    for ending in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(OSError):
            _beside(path, ending).unlink(missing_ok=True)


def _not_created(path: Path, exc: BaseException) -> ProjectError | None:
    """A failure of the disk to create ``path`` (the file is already removed), for a person;
    None for any other failure (raised as it is)."""
    if isinstance(exc, ProjectError) and exc.__cause__ is not None:
        exc = exc.__cause__  # e.g. the lock file could not be written
    if not isinstance(exc, (OSError, sqlite3.Error, DBAPIError)):
        return None
    why = str(getattr(exc, "strerror", None) or getattr(exc, "orig", None) or exc)
    hint = "" if "full" in why else "; is the disk full?"
    return ProjectError(
        f"{path.name} could not be created ({why}{hint}). Nothing was left behind."
    )


def _back_up_before_upgrade(path: Path, version: int) -> Path:
    """The backup an upgrade needs first (the only copy the older version reads): without
    it, no upgrade."""
    try:
        return make_upgrade_backup(path, version)
    except (OSError, sqlite3.Error) as exc:
        why, advice = _backup_failure(path, exc)
        raise ProjectError(
            f"{path.name} could not be backed up into {backup_dir(path).name}/ before upgrading "
            f"it: {why}; nothing was changed. {advice}, then open it again."
        ) from exc


# What the system's words about a failed write mean, by errno and by SQLite's error name.
_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
_DENIED_ERRNOS = (errno.EACCES, errno.EPERM)


def _failure_kind(exc: BaseException) -> str | None:
    """What a write refused with ``exc`` met: "full", "read-only", "denied" or "too long";
    None for anything else."""
    code = getattr(exc, "errno", None)
    name = getattr(exc, "sqlite_errorname", "") or ""
    if code in _FULL_ERRNOS or name.startswith("SQLITE_FULL") or "disk is full" in str(exc):
        return "full"
    if code == errno.EROFS or name.startswith("SQLITE_READONLY"):
        return "read-only"
    if code in _DENIED_ERRNOS or name.startswith(("SQLITE_PERM", "SQLITE_AUTH")):
        return "denied"
    if code == errno.ENAMETOOLONG:
        return "too long"
    return None


def _backup_failure(path: Path, exc: BaseException) -> tuple[str, str]:
    """Why a backup of ``path`` could not be made, and what to do, naming its backups folder:
    the system's message names the hidden ``.partial`` copy, which nobody will find."""
    folder = backup_dir(path)
    reason = getattr(exc, "strerror", None) or str(exc)  # an OSError's without the file
    if folder.exists() and not folder.is_dir():
        return f"{folder.name} is a file, not a folder", "Move it away"
    kind = _failure_kind(exc)
    if kind == "full":
        return f"the disk holding {folder} is full ({reason})", "Free some space on the disk"
    elsewhere = "or move the project to a folder you may write to"
    if kind == "read-only":
        return (
            f"{folder} is on a read-only disk ({reason})",
            f"Make that disk writable, {elsewhere}",
        )
    if kind == "denied":
        return (
            f"you may not write in {folder} ({reason})",
            f"Ask for the right to write there, {elsewhere}",
        )
    if kind == "too long" or _room_for_stem(folder, _longest_backup_tail()) < _SHORTEST_CUT:
        return (
            f"the path of {folder} is too long for a backup's name in it ({reason})",
            "Move the project to a folder with a shorter path",
        )
    return (
        f"it could not be written into {folder} ({reason})",
        "Check that you may write in that folder and that its disk has room",
    )


def _real_path(path: str | os.PathLike) -> Path:
    """The file itself, whatever name it was given by: a symbolic link (or ``..``) leads to
    the same lock file and backups folder as the real name, so two programs cannot both write
    it. A second hard link is another name of one file that nothing can trace back: opened by
    both names at once, it would be written twice (the lock cannot see that; don't make them)."""
    return Path(path).resolve()


def backup_dir(path: Path) -> Path:
    return path.with_name(path.stem + ".backups")


class Project:
    """An open project file. Use :meth:`create` or :meth:`open`, and close it (or use
    ``with``) when done: closing releases the lock."""

    def __init__(
        self,
        path: Path,
        engine: Engine,
        lock: ProjectLock | None,
        read_only: bool,
        life: Closing | None = None,
        place: FilePlace | None = None,
    ):
        self.path = path
        self.read_only = read_only
        # The automatic backup made on opening (None: not made, see make_automatic_backup), or
        # why it failed (the project is open all the same: no saved work is at risk).
        self.automatic_backup: Path | None = None
        self.backup_problem: str | None = None
        self.upgraded_from: int | None = None  # the format it was upgraded from on opening
        self._engine = engine
        self._lock = lock
        self._place = place  # a writer's: saves are refused once the file is not at its name
        # Each save merged into the file itself (a checkpoint; a save's median time 1.1x, see
        # benchmarks/bench_save.py), not left in the -wal: a file renamed, moved or copied
        # alone while open holds every save so far (the -wal of its old name is read by no
        # one). Off only for a file being built under a temporary name (the demo's thousands
        # of saves), merged once when done.
        self.merge_each_save = True
        self._wal_merged = False  # every save in the -wal merged into the file (the last save's)
        # closed: every later session or connection is refused (see store/closing.py)
        self._life = life or Closing(path.name)
        self._claims = LocalClaims()  # (this program is the file's only writer: lock.py)
        # A save's commit and the note of how it left the file, one step for the other
        # threads' saves (see _refuse_save_if_replaced).
        self._leaving = threading.Lock()
        self._left_entry: tuple | None = None  # the newest audit entry saved
        # and the newest one in the file's own pages (older while a reader kept the last
        # saves in the -wal: see _merge_into_file)
        self._file_entry: tuple | None = None
        self._reader = sessionmaker(engine, expire_on_commit=False)
        self._writer = sessionmaker(
            engine.execution_options(sqlite_begin="IMMEDIATE"), expire_on_commit=False
        )

    @property
    def location(self) -> str:
        """Where the study is, for people and logs (a server study's says which server)."""
        return str(self.path)

    @property
    def label(self) -> str:
        """How messages name the study: the file's name (a server study: its address)."""
        return self.path.name

    @property
    def stem(self) -> str:
        """The start of names of files made from the study (reports, copies)."""
        return self.path.stem

    @property
    def folder(self) -> Path:
        """Where files made from the study go by default: beside it."""
        return self.path.parent

    # --- lifecycle ------------------------------------------------------------------------

    @classmethod
    def create(
        cls, path: str | os.PathLike, name: str | None = None, catalogs: Catalogs | None = None
    ) -> Project:
        """Create a new, empty project file (readable and writable by its owner only). On any
        failure (a full disk) nothing is left behind."""
        project = cls.create_empty(path)
        try:
            start_study(project, name or Path(path).stem, catalogs)
        except BaseException as exc:
            project.discard_new()
            if (error := _not_created(project.path, exc)) is None:
                raise
            raise error from exc
        return project

    @classmethod
    def create_empty(cls, path: str | os.PathLike) -> Project:
        """A new project file with the schema and nothing in it, not even its identity (for
        :func:`portalreview.store.transfer.copy_study`, which fills it). On any failure
        nothing is left behind."""
        path = _real_path(path)
        if path.exists():
            raise ProjectError(f"{path} already exists; choose another name.")
        if not path.parent.is_dir():
            raise ProjectError(f"The folder {path.parent} does not exist.")
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except OSError as exc:
            raise ProjectError(f"{path.name} could not be created ({exc.strerror}).") from exc
        os.close(fd)
        try:
            _write_schema(path)
            return cls._open(path, read_only=False, automatic_backup=False)  # nothing to keep
        except BaseException as exc:
            _remove_new_file(path)
            if (error := _not_created(path, exc)) is None:
                raise
            raise error from exc

    def discard_new(self) -> None:
        """Close a project file this program has just created and remove it, with what SQLite
        made beside it: a half-made project (no identity, no catalogs) is no use to anyone."""
        self.close()
        _remove_new_file(self.path)

    @classmethod
    def open(
        cls,
        path: str | os.PathLike,
        read_only: bool = False,
        progress: Progress | None = None,
        *,
        automatic_backup: bool = True,
    ) -> Project:
        """Open a project: check it, lock it (unless read-only), migrate it if it is older,
        and (for writing) make the automatic backup, reporting its ``progress(done, total)``
        in pages. ``automatic_backup=False`` is for the program's own temporary files (an
        offline copy being written), which nobody works in."""
        started = time.perf_counter()
        project = cls._open(
            Path(path), read_only, automatic_backup=automatic_backup, progress=progress
        )
        log.info(
            "project opened: %s (%s) in %.3f s",
            project.path,
            "read-only" if read_only else "for writing",
            time.perf_counter() - started,
        )
        return project

    @classmethod
    def _open(
        cls,
        path: Path,
        read_only: bool,
        automatic_backup: bool,
        progress: Progress | None = None,
    ) -> Project:
        path = _real_path(path)
        if read_only:
            return cls._open_read_only(path)
        lock = place = None
        if _beside(path, "-journal").exists():
            lock = _lock_for_writing(path)  # nobody else may write while the save is undone
        try:
            if lock is not None:
                _undo_interrupted_save(path)
            _, version = _probe(path)
            if lock is None:
                lock = _lock_to_open(path, version)
            upgraded = version < migrations.SCHEMA_VERSION
            if upgraded:
                backup = _back_up_before_upgrade(path, version)
                try:
                    migrations.upgrade(path, version, backup)
                except migrations.MigrationError as exc:
                    raise ProjectError(str(exc)) from exc
            place = FilePlace(path)
            life = Closing(path.name)
            engine = _make_engine(path, read_only=False, life=life)
            project = cls(path, engine, lock, read_only=False, life=life, place=place)
            project.upgraded_from = version if upgraded else None
            with project.read() as session:
                project._left_entry = _newest_entry(session)
            project._file_entry = _newest_entry_in_file(path)
        except BaseException:
            if place is not None:
                place.close()
            if lock is not None:
                lock.release()
            raise
        if automatic_backup and not upgraded:  # an upgrade has just made its own
            project._back_up_automatically(progress)
        return project

    @classmethod
    def _open_read_only(cls, path: Path) -> Project:
        _, version = _probe(path)
        if version < migrations.SCHEMA_VERSION:
            raise ProjectError(
                f"{path.name} is in an older project format ({version}), which this version "
                f"reads only once it is upgraded: run `portalreview upgrade {path.name}` (a "
                "backup is made first), or open it in the app."
            )
        life = Closing(path.name)
        engine = _make_engine(path, read_only=True, life=life)
        return cls(path, engine, None, read_only=True, life=life)

    def _back_up_automatically(self, progress: Progress | None) -> None:
        try:
            said: list[str] = []
            self.automatic_backup = make_automatic_backup(self.path, progress, said)
            self.backup_problem = " ".join(said) or None
        except (OSError, sqlite3.Error) as exc:
            why, _ = _backup_failure(self.path, exc)
            self.backup_problem = (
                f"The automatic backup of {self.path.name} into {backup_dir(self.path).name}/ "
                f"failed ({why}). Your work is saved as usual; back the project up yourself."
            )
            log.warning("%s", self.backup_problem)

    def close(self) -> None:
        """Close for good: later reads and saves (from work still under way on another thread)
        are refused with ProjectClosed; the saves under way are waited for (a little) before
        the lock is released, so that nothing is written after another program may hold it."""
        self._life.close()
        self._empty_orphaned_wal()
        if self._replaced_with_saves_unmerged():
            self._close_setting_the_wal_aside()
        else:
            self._engine.dispose()
        if self._place is not None:
            self._place.close()
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> Project:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- sessions -------------------------------------------------------------------------

    @contextlib.contextmanager
    def read(self, quick: bool = False) -> Iterator[Session]:
        """A session for reading (one consistent snapshot). A file that cannot be read any
        more (moved or deleted, its drive gone, damaged, held locked by another program past
        the busy timeout) raises :class:`ReadFailed`, in words, not the driver's error; a
        project closed, :class:`ProjectClosed`. (``quick``, a clinician's read on the
        window's thread, matters on a server only: its reads are bounded there.)"""
        self._life.check()
        try:
            with self._reader() as session, session.begin():
                yield session
        except DBAPIError as exc:
            if not isinstance(exc.orig, sqlite3.Error):
                raise
            raise ReadFailed(readable_read_error(self.path, exc.orig)) from exc
        except sqlite3.Error as exc:  # the frames' readers use the driver's cursor directly
            raise ReadFailed(readable_read_error(self.path, exc)) from exc

    def claim(self, key: str) -> contextlib.AbstractContextManager[bool]:
        """Hold ``key`` while working on it (True), or False when another thread of this
        program holds it: see store/claims.py."""
        return self._claims.claim(key)

    @contextlib.contextmanager
    def write(self, quick: bool = False) -> Iterator[Session]:
        """One short write transaction: committed when the block ends, rolled back on error.
        A file no longer at its name (renamed, moved away, deleted: see store/file_place.py)
        takes no save: :class:`SaveFailed`, in words, before the transaction and before its
        commit. (``quick``, a clinician's save, matters on a server only: a file has one
        writer.)"""
        if self.read_only:
            raise ProjectError(f"{self.path.name} is open read-only; changes cannot be saved.")
        with self._life.writing(), self._writer() as session:
            transaction = session.begin()
            try:
                self._refuse_save_if_gone()
                self._refuse_save_if_replaced(session)
                yield session
                self._refuse_save_if_gone()  # the commit is next: never into a file gone meanwhile
                newest = _newest_entry(session)
            except BaseException:
                transaction.rollback()
                raise
            with self._leaving:  # another thread's save checks the file once this is noted
                transaction.commit()
                if self.merge_each_save:
                    self._merge_into_file()
                self._note_left(newest)

    def _merge_into_file(self) -> None:
        """Copy the saves in the -wal into the file (a passive checkpoint: it waits for no
        reader, and what a reader still uses is merged with the next save). The save is
        committed already: a failure here loses nothing, it is merged later."""
        self._wal_merged = False
        try:
            busy, frames, merged = self._checkpoint("PASSIVE")
            self._wal_merged = busy == 0 and frames == merged
        except (sqlite3.Error, DBAPIError) as exc:
            log.warning("the saves in %s-wal were not merged into it now: %s", self.label, exc)

    def _checkpoint(self, mode: str) -> tuple[int, int, int]:
        """``PRAGMA wal_checkpoint(mode)`` on a pooled connection: (busy, frames in the -wal,
        frames merged)."""
        raw = self._engine.raw_connection()
        try:
            return tuple(raw.driver_connection.execute(f"PRAGMA wal_checkpoint({mode})").fetchone())
        finally:
            raw.close()

    def _empty_orphaned_wal(self) -> None:
        """A file renamed or moved while open leaves its -wal under the old name when closed,
        and SQLite replays a -wal into whatever file next has that name (the file renamed
        back after another program saved into it: older pages over newer ones). When every
        save is merged into the file already, the -wal is emptied (a truncating checkpoint
        that copies nothing). Otherwise it is left alone: copying its last saves into the
        file now could write over another program's newer ones, and renaming the file back
        still brings them in."""
        if self._place is None or not self._wal_merged or self._place.in_place():
            return
        try:
            busy, _, _ = self._checkpoint("TRUNCATE")  # waits for readers up to busy_timeout
        except (sqlite3.Error, DBAPIError) as exc:
            busy, why = 1, str(exc)
        else:
            why = "a reader held it"
        if busy:
            log.warning(
                "the -wal left under the old name of %s was not emptied: %s", self.label, why
            )

    def _refuse_save_if_gone(self) -> None:
        if self._place is not None:
            self._place.refuse_save_if_gone()

    def _note_left(self, newest: tuple | None) -> None:
        """The file as this program left it: its newest audit entry, that of its own pages
        (read only where the -wal was not all merged into it), its size and time."""
        self._left_entry = newest
        if self._place is not None:
            merged = self.merge_each_save and self._wal_merged
            self._file_entry = newest if merged else _newest_entry_in_file(self.path)
            self._place.note_left()

    def _replaced(self) -> bool:
        """Whether another program wrote into the file since this one last left it: its size
        or time moved, and the newest audit entry in its own pages is none this program left
        there."""
        return not self._place.left_as_noted() and _newest_entry_in_file(self.path) not in (
            self._file_entry,
            self._left_entry,
        )

    def _replaced_with_saves_unmerged(self) -> bool:
        """A file replaced while a reader kept the last saves in the -wal: closing would merge
        them into the file put there (SQLite merges on closing), damaging it."""
        return (
            self._place is not None
            and self.merge_each_save
            and not self._wal_merged
            and self._place.in_place()
            and self._replaced()
        )

    def _close_setting_the_wal_aside(self) -> None:
        """Close without merging the -wal into the file put in this one's place, and set the
        -wal aside (renamed), so that no later opening merges it either. A reading connection
        open meanwhile keeps SQLite from merging as the others close, and merges nothing
        itself as it closes, being read-only. A file SQLite cannot read (cut short) is closed
        as any other."""
        wal = _beside(self.path, "-wal")
        guard = sqlite3.connect(sqlite_uri(self.path.resolve(), "mode=ro"), uri=True)
        try:
            guard.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.Error:
            guard.close()
            self._engine.dispose()
            return
        try:
            self._engine.dispose()
        finally:
            guard.close()
        aside = _beside(self.path, f"-wal-of-the-file-replaced-{_stamp()}")
        try:
            os.replace(wal, aside)
        except OSError as exc:
            log.warning("the -wal of %s (replaced while open) stays: %s", self.label, exc)
        else:
            log.warning(
                "%s was replaced while open: its last saves, not merged into it, were set "
                "aside in %s, not merged into the file put there",
                self.label,
                aside.name,
            )

    def _refuse_save_if_replaced(self, session: Session) -> None:
        """:class:`SaveFailed` where another program wrote into the file since this one last
        saved (a backup copied over it): SQLite would go on from the pages it holds, and the
        next saves mixed the two states into a damaged file. The file's size and time tell;
        where they moved, the newest audit entry in its own pages is compared with the one
        this program left there, so that a drive setting a file's time itself stops nothing
        (the -wal's pages left out: laid over a copy, they showed this program's last save)."""
        if self._place is None or self._place.left_as_noted():
            return
        session.connection()  # BEGIN IMMEDIATE: none of our other saves commits meanwhile
        with self._leaving:  # (another of ours may have noted it meanwhile: _replaced sees)
            if self._replaced():
                raise SaveFailed(
                    f"{self.path.name} was changed by another program while it was open here "
                    "(another file copied over it, such as a backup?). Nothing was saved: "
                    "saving now would mix the two into a damaged file. Copy what you entered "
                    "somewhere safe, close the project and open it again (it then holds what "
                    "was put in its place), and enter it again."
                )
            self._place.note_left()  # only its time moved, or our own save moved it

    @contextlib.contextmanager
    def trial(self) -> Iterator[Session]:
        """A write transaction that is always rolled back, for a dry run (see
        ``ServerProject.trial``; a file has one writer, so it is a write never committed).
        A file no longer at its name refuses it as it would the save."""
        if self.read_only:
            raise ProjectError(f"{self.path.name} is open read-only; changes cannot be saved.")
        with self._life.writing(), self._writer() as session:
            session.begin()
            try:
                self._refuse_save_if_gone()
                yield session
            finally:
                session.rollback()

    def listen(self, on_change: Callable[[str], None]) -> None:
        """A file tells no one of saves (its app learns of its own directly); see
        ``ServerProject.listen``."""
        return None

    def last_audit_hash(self, session: Session) -> str | None:
        """The newest audit entry's hash, which the next entry chains to."""
        return session.scalar(text("SELECT hash FROM audit_log ORDER BY id DESC LIMIT 1"))

    def meta(self, key: str) -> str | None:
        with self.read() as session:
            row = session.get(ProjectMeta, key)
            return row.value if row else None

    def integrity_check(self) -> str:
        """"ok", or SQLite's findings (the first few, joined)."""
        self._life.check()
        with self._engine.connect() as conn:
            return _check_result(conn.execute(text("PRAGMA integrity_check")).all())

    def backup(self, reason: str = "manual") -> Path:
        """A backup by hand (the newest ``BACKUPS_KEPT`` of those are kept)."""
        return make_backup(self.path, reason)


def start_study(project, name: str, catalogs: Catalogs | None = None) -> None:
    """Give a study just made empty (a file or a server database) its identity and catalogs."""
    with project.write() as session:
        meta = {
            "project_id": str(uuid.uuid4()),
            "name": name,
            "created_at": utc_now(),
            "created_by_version": __version__,
        }
        session.add_all(ProjectMeta(key=k, value=v) for k, v in meta.items())
    from portalreview.store.catalog_store import install_catalogs

    install_catalogs(project, catalogs or DEFAULT_CATALOGS)


# --- backups -----------------------------------------------------------------------------------

_REASON = r"[A-Za-z0-9][A-Za-z0-9-]*"
# The number in a backup's name (absent in names from before it), padded so that names sort.
_NUMBER = r"(?:(\d{6,})-)?"
_NUMBER_WIDTH = 6
# The time in a backup's name: now "2025-06-01T14-30-12.123Z"; before, "20250601T143012123+0000".
_STAMPS = (
    r"(\d{4})-(\d\d)-(\d\d)T(\d\d)-(\d\d)-(\d\d)\.(\d{3})Z",
    r"(\d{4})(\d\d)(\d\d)T(\d\d)(\d\d)(\d\d)(\d{3})\+0000",
)
# A file name's limit, in bytes of UTF-8 (ext4, APFS; NTFS counts 255 UTF-16 units, fewer),
# and SQLite's on a file's whole path (its Unix build; "unable to open database file" past it).
_NAME_MAX = 255
_SQLITE_PATH_MAX = 512
# The least of a long project's name its backups' names keep.
_SHORTEST_CUT = 16
# What a backup's name must leave room for: the hidden copy it is written as first
# (".<name>.partial"), and the "-journal" SQLite makes beside that copy.
_BACKUP_NAME_ROOM = len(".") + len(".partial") + len("-journal")
# The longest reason the program gives a backup ("before-upgrade-from-v10"), with room to grow.
_LONGEST_REASON = len(f"{UPGRADE_BACKUP}-from-v999")


@dataclass(frozen=True)
class Backup:
    """One backup file of a project."""

    path: Path
    made_at: datetime  # by the clock then, which may have been wrong: never used for order
    reason: str
    number: int = 0  # the order they were made in; 0 in names from before the number

    @property
    def kind(self) -> str:
        """One of "automatic", "before upgrade", "by hand": each kind is kept by its own rule."""
        if self.reason == AUTO_BACKUP:
            return "automatic"
        if self.reason.startswith(UPGRADE_BACKUP):
            return "before upgrade"
        return "by hand"


def list_backups(path: Path) -> list[Backup]:
    """The backups of the project at ``path`` in the order they were made, oldest first, by
    the number in their names (see the module docstring; other files in the folder are not
    backups and are left alone)."""
    try:
        entries = list(backup_dir(path).iterdir())
    except OSError:  # no folder yet, or one we may not read
        return []
    found = (_parse_backup(path, entry) for entry in entries)
    return sorted(
        (b for b in found if b is not None), key=lambda b: (b.number, b.made_at, b.path.name)
    )


def _parse_backup(path: Path, entry: Path) -> Backup | None:
    """``entry`` as a backup of the project at ``path``; None if it is not one. Its name
    starts with the project's, or with the start of a long one (:func:`_backup_stem`: how
    much depends on the folder's path too, and the project may have been moved since)."""
    whole = _parse_backup_name(path.stem, entry)
    if whole is not None or len(path.stem.encode()) <= _SHORTEST_CUT:
        return whole
    return _parse_backup_name(path.stem, entry, cut=True)


def _parse_backup_name(stem: str, entry: Path, cut: bool = False) -> Backup | None:
    """``cut``: the name may start with the start of ``stem`` only."""
    head = "(.+?)" if cut else f"({re.escape(stem)})"
    for stamp in _STAMPS:
        match = re.fullmatch(rf"{head}-{_NUMBER}{stamp}-({_REASON}){re.escape(SUFFIX)}", entry.name)
        if match and (not cut or _is_cut_of(stem, match.group(1))):
            _, number, *fields, reason = match.groups()
            year, month, day, hour, minute, second, ms = map(int, fields)
            made_at = datetime(year, month, day, hour, minute, second, ms * 1000, UTC)
            return Backup(entry, made_at, reason, int(number or 0))
    return None


def _is_cut_of(stem: str, start: str) -> bool:
    """Whether :func:`_cut_to_fit` may have cut ``stem`` to ``start`` (at a character: up to 3
    bytes short of ``_SHORTEST_CUT``)."""
    return stem.startswith(start) and len(start.encode()) > _SHORTEST_CUT - 4


def _next_backup_name(path: Path, reason: str) -> str:
    """The name of the next backup: numbered one more than the newest backup kept, whatever
    the clock says (see the module docstring)."""
    backups = list_backups(path)
    number = (backups[-1].number if backups else 0) + 1
    return f"{_backup_stem(path)}-{number:0{_NUMBER_WIDTH}d}-{_stamp()}-{reason}{SUFFIX}"


def _backup_stem(path: Path) -> str:
    """The project's name as its backups' names start: whole, or cut (at a character) where
    the longest backup's name, or its path, would pass the system's limit on a file's name
    or SQLite's on a path (with room for the hidden copy it is written as first and that
    copy's journal). Every backup was refused ("unable to open database file") for a project
    named with some 190 characters or more. The number and the time that follow keep the
    names unique, and the backups folder is the project's own."""
    return _cut_to_fit(path.stem, _longest_backup_tail(), backup_dir(path))


def _longest_backup_tail() -> str:
    """What follows the project's name in the longest backup name the program gives."""
    return f"-{0:0{_NUMBER_WIDTH}d}-{_stamp()}-" + "x" * _LONGEST_REASON + SUFFIX


def _room_for_stem(folder: Path, tail: str) -> int:
    """The bytes left for the start of a file's name in ``folder`` before ``tail``."""
    taken = _BACKUP_NAME_ROOM + len(tail.encode())
    in_path = _SQLITE_PATH_MAX - len(os.fsencode(folder.absolute())) - len(os.sep) - taken
    return min(_NAME_MAX - taken, in_path)


def _cut_to_fit(stem: str, tail: str, folder: Path) -> str:
    """``stem``, cut at a character where ``folder/<stem><tail>`` would not fit (see
    :func:`_room_for_stem`); never shorter than ``_SHORTEST_CUT`` bytes (a folder whose path is
    that long takes no backup anyway)."""
    room = max(_room_for_stem(folder, tail), _SHORTEST_CUT)
    name = stem.encode()
    return stem if len(name) <= room else name[:room].decode(errors="ignore")


def latest_backup(path: Path) -> Path | None:
    """The newest backup of the project at ``path``, of any kind; None if there is none."""
    backups = list_backups(path)
    return backups[-1].path if backups else None


def backup_damage(backup: Path) -> str | None:
    """What is wrong with a backup (cut short, emptied, overwritten), in words; None when it
    is a whole project file (SQLite's full integrity check finds nothing). Reads it only."""
    try:
        if backup.stat().st_size == 0:
            return "it is empty (0 bytes)."
        header, size = read_header(backup)
        _check_size(backup, header, size)
        conn = _connect_backup(backup)
        try:
            if conn.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
                return "it is not a PortalReview project."
            check = _check_result(conn.execute("PRAGMA integrity_check").fetchall())
        finally:
            conn.close()
    except ProjectDamagedError as exc:
        return exc.what.removeprefix(f"{backup.name} is damaged: ")
    except ProjectError as exc:  # e.g. not an SQLite file
        return "it " + str(exc).removeprefix(f"{backup.name} ")
    except (OSError, sqlite3.DatabaseError) as exc:
        return f"it cannot be read ({exc})."
    return None if check == "ok" else f"it failed its integrity check ({check})."


def newest_whole_backup(path: Path) -> tuple[Path | None, list[tuple[Path, str]]]:
    """The newest backup of the project at ``path`` that is whole (None if none is), and the
    newer ones passed over, newest first, each with what is wrong with it."""
    damaged = []
    for backup in reversed(list_backups(path)):
        why = backup_damage(backup.path)
        if why is None:
            return backup.path, damaged
        damaged.append((backup.path, why))
    return None, damaged


def make_backup(path: Path, reason: str, progress: Progress | None = None) -> Path:
    """Copy the project (consistently, through SQLite's backup API) into the backups folder
    beside it, then delete what the keeping rules no longer keep (see the module docstring)."""
    made = _write_backup(path, reason, progress, unless_same_as=None)
    assert made is not None
    return made


def make_automatic_backup(
    path: Path, progress: Progress | None = None, said: list[str] | None = None
) -> Path | None:
    """The backup made when a project is opened for writing; None when none was needed (the
    newest automatic backup is younger than ``AUTO_BACKUP_EVERY`` or holds the same content).
    The caller must hold the project's lock, so that nobody writes while it copies."""
    automatic = [b for b in list_backups(path) if b.kind == "automatic"]
    newest = automatic[-1] if automatic else None
    if newest is not None:
        age = datetime.now(UTC) - newest.made_at
        if timedelta(0) <= age < AUTO_BACKUP_EVERY:  # a clock set back: back up again
            return None
    return _write_backup(
        path, AUTO_BACKUP, progress, unless_same_as=newest.path if newest else None, said=said
    )


def make_upgrade_backup(path: Path, version: int) -> Path:
    """The backup made before upgrading ``path`` from format ``version``. These are never
    deleted, so an upgrade tried again on the same content (one refused, or cut short) reuses
    the newest such backup rather than leaving one more full copy each time.
    The caller must hold the project's lock."""
    reason = f"{UPGRADE_BACKUP}-from-v{version}"
    earlier = [b for b in list_backups(path) if b.reason == reason]
    made = _write_backup(path, reason, None, unless_same_as=earlier[-1].path if earlier else None)
    return made or earlier[-1].path  # None only when it matched the newest one


def _write_backup(
    path: Path,
    reason: str,
    progress: Progress | None,
    unless_same_as: Path | None,
    said: list[str] | None = None,
) -> Path | None:
    """``said``: what a person should know of the backups (see :func:`_roll`)."""
    if not re.fullmatch(_REASON, reason):
        raise ValueError(f"a backup's reason must be letters, digits and '-': {reason!r}")
    folder = backup_dir(path)
    folder.mkdir(mode=0o700, exist_ok=True)
    target = _unused(lambda: folder / _next_backup_name(path, reason))
    source = _connect(path, read_only=True)
    try:
        partial = _copy_database(source, target, progress)
    finally:
        source.close()
    if unless_same_as is not None and filecmp.cmp(partial, unless_same_as, shallow=False):
        partial.unlink()  # the backup API copies one state to the same bytes
        return None
    replace_durably(partial, target)
    _roll(path, said if said is not None else [])
    return target


def _stamp(when: datetime | None = None) -> str:
    when = when or datetime.now(UTC)
    return when.strftime("%Y-%m-%dT%H-%M-%S") + f".{when.microsecond // 1000:03d}Z"


def _unused(name: Callable[[], Path]) -> Path:
    """A name not taken yet (two backups in one millisecond: wait for the next one)."""
    while (target := name()).exists():
        time.sleep(0.002)
    return target


def _copy_database(source: sqlite3.Connection, target: Path, progress: Progress | None) -> Path:
    """Copy ``source`` into a hidden ``.partial`` file beside ``target`` (owner-only) and
    return it; :func:`replace_durably` gives it its name once it is whole, so that a copy cut
    short by a kill or a full disk never looks like a backup."""
    partial = target.with_name(f".{target.name}.partial")
    partial.unlink(missing_ok=True)
    fd = os.open(partial, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    os.close(fd)
    try:
        dest = sqlite3.connect(partial)
        try:
            if progress is None:
                source.backup(dest)
            else:
                source.backup(
                    dest,
                    pages=_BACKUP_STEP_PAGES,
                    progress=lambda _status, left, total: progress(total - left, total),
                )
        finally:
            dest.close()
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return partial


def replace_durably(partial: Path, target: Path) -> None:
    """Rename a finished file to its name, the rename itself written to disk."""
    os.replace(partial, target)
    sync_folder(target.parent)  # the new name survives a power cut too


def _roll(path: Path, said: list[str]) -> None:
    """Delete the automatic and by-hand backups beyond the newest ``BACKUPS_KEPT`` of each
    kind, and half-written copies abandoned by a killed program. The newest backup that is
    whole is kept whatever the count: a project damaged in a way the quick check on opening
    misses gave a damaged backup at each opening, until every whole one was deleted. Then
    ``said`` gets a word of it (the project itself is suspect)."""
    backups = list_backups(path)
    for kind in ("automatic", "by hand"):
        of_kind = [b for b in backups if b.kind == kind]
        surplus = of_kind[: max(len(of_kind) - BACKUPS_KEPT, 0)]
        if not surplus:
            continue
        spared = _whole_one_to_spare(of_kind[len(surplus) :], surplus, said)
        for stale in surplus:
            if stale.path != spared and not _backup_in_use(stale.path):
                stale.path.unlink(missing_ok=True)
    cutoff = time.time() - _STALE_PARTIAL.total_seconds()
    for partial in backup_dir(path).glob(f".{glob.escape(_backup_stem(path))}-*{SUFFIX}.partial"):
        with contextlib.suppress(OSError):
            if partial.stat().st_mtime < cutoff:
                _beside(partial, "-journal").unlink(missing_ok=True)
                partial.unlink()


def _whole_one_to_spare(kept: list[Backup], surplus: list[Backup], said: list[str]) -> Path | None:
    """None when a backup kept is whole (checked newest first: usually the one just made, and
    only when some are to be deleted); else the newest whole one of ``surplus``, saying so."""
    if any(backup_damage(b.path) is None for b in reversed(kept)):
        return None
    spared = next((b.path for b in reversed(surplus) if backup_damage(b.path) is None), None)
    keeping = (
        f"{spared.name} is kept as the newest whole backup, whatever the count: copy it "
        "somewhere safe"
        if spared
        else "No older backup is whole either"
    )
    said.append(
        f"The newest backups ({kept[-1].path.name} among them) failed SQLite's integrity "
        "check: the project they were copied from may be damaged in a way opening it does "
        f"not check. {keeping}, and ask IT to check the project."
    )
    log.warning("%s", said[-1])
    return spared


def _backup_in_use(path: Path) -> bool:
    """A backup someone opened to work in (its lock held, or saves of theirs in its ``-wal`` or
    ``-journal``): never deleted as surplus. The next opening of the project deleted it, with
    the work saved in it, while it was open."""
    if _wal_has_frames(path) or _beside(path, "-journal").exists():
        return True
    lock = ProjectLock(path)
    try:
        holder = lock.acquire()
    except (OSError, RuntimeError):
        return True
    lock.release()
    return holder is not None


def copy_backup_beside(backup: Path, damaged: Path, progress: Progress | None = None) -> Path:
    """Copy ``backup`` next to the damaged project ``damaged`` under a new name, and return
    the copy, ready to open. Neither the damaged file nor the backup is changed: the damaged
    file may still hold work the backup lacks, for someone to recover."""
    parsed = _parse_backup(damaged, backup)
    stamp = _stamp(parsed.made_at if parsed else None)
    restored = f"-restored-{stamp}"
    name = _cut_to_fit(damaged.stem, f"{restored}-99{SUFFIX}", damaged.parent) + restored
    target = damaged.with_name(name + SUFFIX)
    n = 1
    while target.exists():
        n += 1
        target = damaged.with_name(f"{name}-{n}{SUFFIX}")
    why = backup_damage(backup)  # a copy cut short on the backup disk opened for work
    if why is not None:
        raise ProjectError(f"The backup {backup.name} is damaged: {why} Choose another one.")
    try:
        source = _connect_backup(backup)
        try:
            partial = _copy_database(source, target, progress)
        finally:
            source.close()
    except sqlite3.DatabaseError as exc:
        raise ProjectError(f"The backup {backup.name} cannot be read ({exc}).") from exc
    if target.exists():  # taken meanwhile: never overwrite a file
        partial.unlink()
        raise ProjectError(f"{target.name} appeared while the backup was copied; try again.")
    replace_durably(partial, target)
    return target
