"""The project file: create, open (checked, locked, migrated), back up, close.

A project is one SQLite file (``*.prproj``) in WAL mode with foreign keys on and
``synchronous=FULL``, so that a save reported as done survives a killed process or a power cut.
The file carries an application id (so another SQLite file is recognised as not ours) and the
schema version in ``PRAGMA user_version``.

Opening never changes a file it refuses: the checks run on a read-only connection first.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import QueuePool

from portalreview import __version__
from portalreview.domain.catalogs import DEFAULT_CATALOGS, Catalogs
from portalreview.store import migrations
from portalreview.store.lock import LockHolder, ProjectLock
from portalreview.store.models import Base, ProjectMeta, utc_now
from portalreview.store.schema_sql import trigger_statements

APPLICATION_ID = 0x50525256  # "PRRV"
SUFFIX = ".prproj"
BACKUPS_KEPT = 10
_SQLITE_HEADER = b"SQLite format 3\x00"


class ProjectError(Exception):
    """A project file cannot be created or opened; the message says why, for a person."""


class ProjectLockedError(ProjectError):
    def __init__(self, path: Path, holder: LockHolder) -> None:
        self.holder = holder
        super().__init__(
            f"{path.name} is open in another PortalReview: {holder.describe()}. "
            "You can open it read-only, or ask them to close it."
        )


def _connect(path: Path, read_only: bool) -> sqlite3.Connection:
    mode = "ro" if read_only else "rw"
    uri = f"file:{quote(str(path.resolve()))}?mode={mode}"
    conn = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA busy_timeout = 5000")
    if not read_only:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
    return conn


def _make_engine(path: Path, read_only: bool) -> Engine:
    # The URL names no file (the creator does), so the pool must be given explicitly: the
    # default for "sqlite://" would share one connection per thread.
    engine = create_engine(
        "sqlite://", creator=lambda: _connect(path, read_only), poolclass=QueuePool
    )

    # pysqlite's own transaction handling is off (isolation_level=None); SQLAlchemy's "begin"
    # emits ours, IMMEDIATE for writers so that two writers queue instead of deadlocking.
    @event.listens_for(engine, "begin")
    def _begin(conn) -> None:
        mode = conn.get_execution_options().get("sqlite_begin", "DEFERRED")
        conn.exec_driver_sql(f"BEGIN {mode}")

    return engine


def _probe(path: Path) -> tuple[int, int]:
    """Check that ``path`` is a readable project; return (application_id, user_version).

    Raises ProjectError without writing anything to the file.
    """
    if not path.exists():
        raise ProjectError(f"There is no file {path}.")
    if not path.is_file():
        raise ProjectError(f"{path} is a folder, not a PortalReview project file.")
    try:
        with path.open("rb") as fh:
            header = fh.read(len(_SQLITE_HEADER))
    except OSError as exc:
        raise ProjectError(f"{path} cannot be read: {exc.strerror}.") from exc
    if not header:
        raise ProjectError(f"{path.name} is empty (0 bytes): it is not a PortalReview project.")
    if header != _SQLITE_HEADER:
        raise ProjectError(
            f"{path.name} is not a PortalReview project (it is not an SQLite database file)."
        )
    try:
        conn = _connect(path, read_only=True)
        try:
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            check = conn.execute("PRAGMA quick_check").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise ProjectError(
            f"{path.name} is damaged and cannot be opened ({exc}). "
            f"Restore the latest backup from {backup_dir(path).name}/."
        ) from exc
    if app_id != APPLICATION_ID:
        raise ProjectError(f"{path.name} is an SQLite database but not a PortalReview project.")
    if check != "ok":
        raise ProjectError(
            f"{path.name} failed its integrity check ({check}). "
            f"Restore the latest backup from {backup_dir(path).name}/."
        )
    if version > migrations.SCHEMA_VERSION:
        raise ProjectError(
            f"{path.name} was written by a newer PortalReview (project format "
            f"{version}; this version {__version__} reads up to {migrations.SCHEMA_VERSION}). "
            "Install the newer version to open it."
        )
    if version < 1:
        raise ProjectError(f"{path.name} has no project format version: it is not usable.")
    return app_id, version


def backup_dir(path: Path) -> Path:
    return path.with_name(path.stem + ".backups")


class Project:
    """An open project file. Use :meth:`create` or :meth:`open`, and close it (or use
    ``with``) when done: closing releases the lock."""

    def __init__(self, path: Path, engine: Engine, lock: ProjectLock | None, read_only: bool):
        self.path = path
        self.read_only = read_only
        self._engine = engine
        self._lock = lock
        self._reader = sessionmaker(engine, expire_on_commit=False)
        self._writer = sessionmaker(
            engine.execution_options(sqlite_begin="IMMEDIATE"), expire_on_commit=False
        )

    # --- lifecycle ------------------------------------------------------------------------

    @classmethod
    def create(
        cls, path: str | os.PathLike, name: str | None = None, catalogs: Catalogs | None = None
    ) -> Project:
        """Create a new, empty project file (readable and writable by its owner only)."""
        path = Path(path)
        if path.exists():
            raise ProjectError(f"{path} already exists; choose another name.")
        if not path.parent.is_dir():
            raise ProjectError(f"The folder {path.parent} does not exist.")
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.close(fd)
        try:
            conn = _connect(path, read_only=False)
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.close()
            engine = _make_engine(path, read_only=False)
            with engine.begin() as sa_conn:
                Base.metadata.create_all(sa_conn)
                for statement in trigger_statements():
                    sa_conn.exec_driver_sql(statement)
                sa_conn.exec_driver_sql(f"PRAGMA user_version = {migrations.SCHEMA_VERSION}")
            engine.dispose()
        except Exception:
            path.unlink(missing_ok=True)
            raise
        project = cls.open(path)
        with project.write() as session:
            meta = {
                "project_id": str(uuid.uuid4()),
                "name": name or path.stem,
                "created_at": utc_now(),
                "created_by_version": __version__,
            }
            session.add_all(ProjectMeta(key=k, value=v) for k, v in meta.items())
        from portalreview.store.catalog_store import install_catalogs

        install_catalogs(project, catalogs or DEFAULT_CATALOGS)
        return project

    @classmethod
    def open(cls, path: str | os.PathLike, read_only: bool = False) -> Project:
        """Open a project: check it, lock it (unless read-only), migrate it if it is older."""
        path = Path(path)
        _, version = _probe(path)
        if read_only:
            if version < migrations.SCHEMA_VERSION:
                raise ProjectError(
                    f"{path.name} is in an older project format ({version}); open it once "
                    "for writing so that it is upgraded (a backup is made first)."
                )
            return cls(path, _make_engine(path, read_only=True), None, read_only=True)
        lock = ProjectLock(path)
        holder = lock.acquire()
        if holder is not None:
            raise ProjectLockedError(path, holder)
        try:
            if version < migrations.SCHEMA_VERSION:
                backup = make_backup(path, reason=f"before-upgrade-from-v{version}")
                try:
                    migrations.upgrade(path, version, backup)
                except migrations.MigrationError as exc:
                    raise ProjectError(str(exc)) from exc
            return cls(path, _make_engine(path, read_only=False), lock, read_only=False)
        except BaseException:
            lock.release()
            raise

    def close(self) -> None:
        self._engine.dispose()
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> Project:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- sessions -------------------------------------------------------------------------

    @contextlib.contextmanager
    def read(self) -> Iterator[Session]:
        """A session for reading (one consistent snapshot)."""
        with self._reader() as session, session.begin():
            yield session

    @contextlib.contextmanager
    def write(self) -> Iterator[Session]:
        """One short write transaction: committed when the block ends, rolled back on error."""
        if self.read_only:
            raise ProjectError(f"{self.path.name} is open read-only; changes cannot be saved.")
        with self._writer() as session, session.begin():
            yield session

    def meta(self, key: str) -> str | None:
        with self.read() as session:
            row = session.get(ProjectMeta, key)
            return row.value if row else None

    def integrity_check(self) -> str:
        with self._engine.connect() as conn:
            return conn.execute(text("PRAGMA integrity_check")).scalar_one()

    def backup(self, reason: str = "manual") -> Path:
        return make_backup(self.path, reason)


def make_backup(path: Path, reason: str) -> Path:
    """Copy the project (consistently, through SQLite's backup API) into the backups folder
    beside it, keeping the newest ``BACKUPS_KEPT`` copies."""
    folder = backup_dir(path)
    folder.mkdir(mode=0o700, exist_ok=True)
    stamp = utc_now().replace(":", "").replace("-", "").replace(".", "")
    target = folder / f"{path.stem}-{stamp}-{reason}{SUFFIX}"
    source = _connect(path, read_only=True)
    try:
        fd = os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.close(fd)
        dest = sqlite3.connect(target)
        try:
            source.backup(dest)
        finally:
            dest.close()
    finally:
        source.close()
    old = sorted(folder.glob(f"{path.stem}-*{SUFFIX}"))
    for stale in old[:-BACKUPS_KEPT]:
        stale.unlink(missing_ok=True)
    return target
