"""Making a new project file whole or not at all: it is built under a hidden temporary name
beside its final one (``<prefix><pid>-<random>.prproj``, with SQLite's -wal and -shm and the
lock file beside it), written to disk, and only then given its name. A making cut short, even
by a kill or a power cut, never leaves a half-made project under the name asked for (one that
opens with "making it was cut short ... Delete it and make it again", and that the same
command then refuses to make again because the file exists). What a killed run left is removed
by the next one in the same folder (:func:`remove_abandoned_builds`, judged as
:mod:`portalreview.store.leftovers` tells).

The demo study (:mod:`portalreview.demo`) and ``portalreview new`` (and the desktop program's
*New project*) are made this way.
"""

from __future__ import annotations

import os
import re
import secrets
import sqlite3
from collections.abc import Callable
from pathlib import Path

from sqlalchemy.exc import DBAPIError

from portalreview.store import leftovers
from portalreview.store.errors import SaveFailed, StoreError
from portalreview.store.output_files import (
    name_without_replacing,
    output_error,
    sync_file,
    sync_folder,
)
from portalreview.store.project import (
    SUFFIX,
    Project,
    ProjectError,
    backup_dir,
)

NEW_PREFIX = ".portalreview-new-"  # a project file `portalreview new` is making


def build_file(path: Path, fill: Callable[[Path], None], prefix: str) -> Path:
    """Make the project file ``path`` (which must not exist) by calling ``fill`` on a new
    file's hidden temporary name beside it (``fill`` creates it, fills it and closes it);
    rename it to ``path`` once whole, and return ``path``. On any failure, nothing is left."""
    remove_abandoned_builds(path.parent, prefix)
    building = path.with_name(f"{prefix}{os.getpid()}-{secrets.token_hex(4)}{SUFFIX}")
    try:
        fill(building)
        seal(building)
        publish(building, path)
    finally:
        remove_build(building)  # what is left of it: all of it on a failure
    return path


def seal(path: Path) -> None:
    """Fold the write-ahead log into the closed project file ``path`` and write the file to
    disk: only the file is renamed, so all of it must be in the file."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        busy, _frames, _moved = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    finally:
        conn.close()
    wal = path.with_name(path.name + "-wal")
    if busy or (wal.exists() and wal.stat().st_size > 0):
        raise ProjectError("The new project file could not be completed; try again.")
    sync_file(path)


def publish(building: Path, path: Path) -> None:
    """Give the finished file its name; never over a file (another program made one first).

    (:func:`~portalreview.store.output_files.name_without_replacing`: checking first and
    then renaming would write over a file another program made in between)."""
    try:
        name_without_replacing(building, path)
    except FileExistsError:
        raise ProjectError(f"{path} appeared while it was being made; open that one.") from None
    sync_folder(path.parent)  # the new name survives a power cut too (the build is removed)


def remove_build(building: Path) -> None:
    """Remove a build's temporary file and what SQLite and the program made beside it."""
    for ending in ("", "-wal", "-shm", "-journal", ".lock"):
        leftovers.remove(building.with_name(building.name + ending))
    leftovers.remove(backup_dir(building))


def _build_name(prefix: str) -> re.Pattern[str]:
    """``(<prefix><pid>-<random>)(.prproj... | .backups)``: a build's file or what is beside it."""
    return re.compile(rf"({re.escape(prefix)}(\d+)-[0-9a-f]+)({re.escape(SUFFIX)}.*|\.backups)")


def remove_abandoned_builds(folder: Path, prefix: str) -> list[Path]:
    """Remove the builds named ``prefix...`` that a killed program left in ``folder``
    (abandoned as :func:`portalreview.store.leftovers.is_abandoned` tells: never one that a
    running program is making). Returns the build files removed."""
    pattern = _build_name(prefix)
    builds: dict[str, tuple[int, list[Path]]] = {}
    try:
        for entry in folder.iterdir():
            if named := pattern.fullmatch(entry.name):
                builds.setdefault(named[1], (int(named[2]), []))[1].append(entry)
    except OSError:
        return []
    removed = []
    for stem, (pid, entries) in builds.items():
        if leftovers.is_abandoned(entries, pid):
            for entry in entries:
                leftovers.remove(entry)
            removed.append(folder / (stem + SUFFIX))
    return removed


def create_project_file(
    path: str | os.PathLike,
    name: str | None = None,
    fill: Callable[[Project], None] | None = None,
) -> Path:
    """Create the project file ``path`` (:meth:`Project.create`; ``name`` defaults to the
    file's stem) and call ``fill`` on it (adding its people), all before it gets its name
    (:func:`build_file`), so that it exists whole or not at all. Returns its path, closed."""
    path = Path(path).resolve()
    if path.exists():
        raise ProjectError(f"{path} already exists; choose another name.")
    if not path.parent.is_dir():
        raise ProjectError(f"The folder {path.parent} does not exist.")

    def make(building: Path) -> None:
        project = Project.create(building, name=name or path.stem)
        try:
            if fill is not None:
                fill(project)
        finally:
            project.close()

    try:
        return build_file(path, make, NEW_PREFIX)
    except BUILD_ERRORS as exc:
        raise not_made(path, exc) from exc


#: What building a project file can meet, worded by :func:`not_made`.
BUILD_ERRORS = (ProjectError, StoreError, OSError, sqlite3.Error, DBAPIError)


def not_made(path: Path, exc: Exception, prefix: str = NEW_PREFIX) -> ProjectError:
    """``exc``, met making ``path`` (:func:`build_file` has removed all of it), for a person:
    naming ``path``, not the hidden name it was made under that nobody will find, and saying
    that nothing was left behind."""
    if isinstance(exc, SaveFailed) and isinstance(exc.__cause__, DBAPIError):
        exc = exc.__cause__  # its words are for a save ("Nothing was saved ... save again")
    if isinstance(exc, (sqlite3.Error, DBAPIError)):  # a full disk while adding the people
        why = f"{path.name} could not be made ({getattr(exc, 'orig', exc)})."
    elif isinstance(exc, OSError) and exc.errno is not None:
        why = str(output_error(exc, path))
    else:  # worded already (a refusal, or the disk's failure to create the file)
        hidden = rf"{re.escape(prefix)}\d+-[0-9a-f]+{re.escape(SUFFIX)}"
        why = re.sub(hidden, path.name, str(exc))
    if "left behind" not in why:
        why = f"{why.rstrip('.')}. Nothing was left behind."
    return ProjectError(why)
