"""The store's refusals, in words: defined here so that the project (``project.py``) and the
service layer (``service.py``, which re-exports them) raise the same classes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

#: PostgreSQL's SQLSTATE for a right the signed-in account lacks (a table's grant, a row's
#: policy): a clinician's database role on a team study doing what only the PI may.
INSUFFICIENT_PRIVILEGE = "42501"
#: ... and for a write into a view the server refuses (a clinician's blinded ``cases``).
FEATURE_NOT_SUPPORTED = "0A000"


class StoreError(ValueError):
    """A request the project refuses (unknown id, duplicate, broken rule); the message says
    what is wrong in words a person can act on."""


class SaveFailed(StoreError):
    """A project file that cannot take a save (the disk full or failing, the file gone
    read-only or damaged): the transaction was rolled back, nothing of it was kept."""


class SaveOutcomeUnknown(StoreError):
    """A save that may or may not have been kept: the connection to the study server was lost
    while its COMMIT was under way, and the server could not say what became of it (the
    person is told that saving again replaces it). :meth:`kept` asks again."""

    def __init__(self, message: str, ask: Callable[[], bool | None]) -> None:
        super().__init__(message)
        self._ask = ask

    def kept(self) -> bool | None:
        """Whether the save was kept: True or False, None while that is still not known (the
        server has not finished it, or cannot be asked)."""
        return self._ask()


class ReadFailed(StoreError):
    """A project file, open already, that cannot be read any more (moved or deleted, its
    drive gone, damaged, held by another program): nothing was read, and nothing was
    changed by trying."""


class ProjectClosed(StoreError):
    """The project was closed: nothing more is read from it or saved in it (work still under
    way when it closed, on another thread, stops here instead of reconnecting)."""


# I/O errors that say the file itself is bad, not that the drive could not be reached.
_DAMAGE_IOERRS = ("SQLITE_IOERR_READ", "SQLITE_IOERR_SHORT_READ", "SQLITE_IOERR_CORRUPTFS")


def readable_read_error(path: Path, error: BaseException) -> str:
    """Why SQLite could not read the open project file ``path``, for the person who asked.
    SQLite's own message ("unable to open database file") names neither the file nor what
    to do."""
    name = getattr(error, "sqlite_errorname", "") or ""
    reason = str(error)
    file = f"The project file {path.name}"
    if name.startswith(("SQLITE_CANTOPEN", "SQLITE_NOTFOUND")) or (
        name.startswith("SQLITE_IOERR") and name not in _DAMAGE_IOERRS
    ):
        return (
            f"{file} cannot be read: it was moved or deleted, or the drive it is on "
            f"({path.parent}) is no longer there ({reason}). Nothing was read. Check that the "
            "drive is connected and the file is where it was, then try again."
        )
    if name.startswith(("SQLITE_PERM", "SQLITE_AUTH", "SQLITE_READONLY")):
        return (
            f"{file} cannot be read: you may no longer read it or its folder ({path.parent})"
            f" ({reason})."
        )
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        return (
            f"{file} is busy in another program, which holds it locked ({reason}): nothing "
            "could be read. Close that program (a database browser, a backup or sync tool), "
            "or wait, then try again."
        )
    if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")) or name in _DAMAGE_IOERRS:
        return (
            f"{file} is damaged ({reason}): it cannot be read. Close it and open it again "
            "to see what can be done (its latest backup is offered, if there is one)."
        )
    if name.startswith("SQLITE_FULL"):
        return f"{file} could not be read: the disk is full ({reason}). Make room, then try again."
    return f"{file} could not be read ({reason})."
