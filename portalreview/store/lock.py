"""The lock that keeps two programs from writing one project file at once.

A lock file beside the project (``study.prproj.lock``) holds an OS-level exclusive lock for as
long as the project is open for writing, and records who holds it (user, machine, process,
since when) so that a second program can tell the person what is going on. The OS lock, not the
file's presence, decides: if the holder was killed, the OS released its lock and the next
program takes the file over.

Within one program, a lock is released when its project is closed, or else when the lock is
garbage-collected (a project dropped without being closed); a lock this very program holds is
told apart from another program's (``LockHolder.here``), and one held only by a dropped project
is collected and taken over.

The lock goes by the file's name: a project file renamed while open may be opened for writing
under its new name at once. It still has one writer: the program that had it open refuses every
save once the file is no longer at its name (``file_place.py``), and has merged each earlier
save into the file itself. (A lock on the database file itself would follow it, but SQLite's
own locks on it are POSIX locks, which any other descriptor of that file closed in the process
drops, and NFS emulates ``flock`` with them.)
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import getpass
import json
import os
import socket
import weakref
from dataclasses import dataclass
from pathlib import Path

from portalreview.store.models import utc_now

# Windows byte-range locks are mandatory: another program cannot even read a locked byte. The
# holder's details are written from byte 0 for others to read, so the lock is taken on one byte
# far past them (a lock may lie beyond the end of a file).
WINDOWS_LOCK_OFFSET = 1 << 20

if os.name == "nt":  # pragma: no cover - exercised by the Windows workflow
    import msvcrt
else:
    import fcntl

    msvcrt = None  # the Windows functions below are tested with a stand-in


def _windows_try_lock(fd: int) -> bool:
    os.lseek(fd, WINDOWS_LOCK_OFFSET, os.SEEK_SET)
    try:
        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
    except OSError:
        return False
    return True


def _windows_unlock(fd: int) -> None:
    os.lseek(fd, WINDOWS_LOCK_OFFSET, os.SEEK_SET)
    msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)


def _posix_try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def _posix_unlock(fd: int) -> None:
    fcntl.flock(fd, fcntl.LOCK_UN)


if os.name == "nt":  # pragma: no cover - exercised by the Windows workflow
    _try_lock, _unlock = _windows_try_lock, _windows_unlock
else:
    _try_lock, _unlock = _posix_try_lock, _posix_unlock


@dataclass(frozen=True)
class LockHolder:
    """Who holds a project open for writing."""

    user: str
    host: str
    pid: int
    since: str
    here: bool = False  # held by this very program (another of its windows or tools)

    def describe(self) -> str:
        return f"{self.user} on {self.host} (process {self.pid}) since {self.since}"


def _read_holder(lock_path: Path) -> LockHolder | None:
    try:
        data = json.loads(lock_path.read_text(encoding="utf-8"))
        return LockHolder(str(data["user"]), str(data["host"]), int(data["pid"]), data["since"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


_held_here: set[str] = set()  # the lock files this program holds


def _release(fd: int, path: Path, key: str) -> None:
    """Give the lock up: by :meth:`ProjectLock.release`, or when the lock is collected."""
    _held_here.discard(key)
    # Remove the file while still holding the lock, so nobody reads our stale details
    # (Windows refuses to remove an open file: there the empty lock file stays).
    with contextlib.suppress(OSError):
        os.unlink(path)
    _unlock(fd)
    os.close(fd)


class ProjectLock:
    """An exclusive, process-wide lock on one project file."""

    def __init__(self, project_path: Path) -> None:
        self.path = project_path.with_name(project_path.name + ".lock")
        self._fd: int | None = None
        self._key = os.path.realpath(self.path)
        self._finalizer: weakref.finalize | None = None

    def acquire(self) -> LockHolder | None:
        """Take the lock. Returns None on success, else who holds it. OSError (a full disk)
        leaves it not taken."""
        holder = self._acquire()
        if holder is not None and self._key in _held_here:
            # This program holds it: perhaps only a project dropped without being closed,
            # whose lock is released when it is collected.
            gc.collect()
            holder = self._acquire()
            if holder is not None and self._key in _held_here:
                holder = dataclasses.replace(holder, here=True)
        return holder

    def _acquire(self) -> LockHolder | None:
        for _ in range(3):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            if not _try_lock(fd):
                os.close(fd)
                return _read_holder(self.path) or LockHolder("unknown", "unknown", 0, "unknown")
            # The holder before us may have removed the file between our open and our lock;
            # then we locked an orphan and must try again with the file now at the path.
            try:
                same_file = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same_file = False
            if same_file:
                self._fd = fd
                _held_here.add(self._key)
                # released when the lock is collected, if nobody released it before
                self._finalizer = weakref.finalize(self, _release, fd, self.path, self._key)
                try:
                    self._write_holder()
                except BaseException:  # a full disk: never keep a lock nobody will release
                    self.release()
                    raise
                return None
            _unlock(fd)
            os.close(fd)
        raise RuntimeError(f"could not take the lock file {self.path}")

    def _write_holder(self) -> None:
        assert self._fd is not None
        holder = {
            "user": getpass.getuser(),
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "since": utc_now(),
        }
        data = json.dumps(holder).encode("utf-8")
        os.ftruncate(self._fd, 0)
        os.lseek(self._fd, 0, os.SEEK_SET)
        os.write(self._fd, data)

    def release(self) -> None:
        if self._fd is None:
            return
        if self._finalizer is not None:
            self._finalizer()  # _release, once
            self._finalizer = None
        self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None
