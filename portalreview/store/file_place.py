"""Whether an open project file is still where it was opened: the file at its name.

SQLite keeps writing to the file it opened whatever happens to its name. A file renamed while
open (a file manager allows it on macOS and Linux) goes on taking saves into the ``-wal`` of
its old name, which nobody opening the new name reads; a file deleted (or its folder) takes
them into a file nobody can open again. Both were reported "saved" and lost. So every save
first checks that the name still leads to the file opened, and is refused otherwise.

The name is looked up in the folder the file was opened in, held open by a descriptor, so that
a folder renamed or moved with the file in it (its ``-wal`` and lock beside it) is no trouble:
the folder's own descriptor finds the file in it wherever the folder went. Windows refuses to
rename or delete a file SQLite holds open; there the path itself is looked up.
"""

from __future__ import annotations

import contextlib
import os
import weakref
from pathlib import Path

from portalreview.store.errors import SaveFailed

_CAN_FOLLOW_FOLDER = os.stat in os.supports_dir_fd


def _identity(stat: os.stat_result) -> tuple[int, int]:
    return stat.st_dev, stat.st_ino


def _size_and_time(stat: os.stat_result) -> tuple[int, int]:
    return stat.st_size, stat.st_mtime_ns


def _open_folder(folder: Path) -> int | None:
    """A descriptor of ``folder``; None where it cannot be had (a folder one may enter but
    not list): then the path itself is looked up."""
    try:
        return os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return None


class FilePlace:
    """The file opened at ``path``, and its folder, followed wherever the folder goes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._folder_fd: int | None = None
        self._finalizer: weakref.finalize | None = None
        if _CAN_FOLLOW_FOLDER:
            self._folder_fd = _open_folder(path.parent)
        if self._folder_fd is not None:
            # closed when the project is closed, or when it is collected without being closed
            self._finalizer = weakref.finalize(self, os.close, self._folder_fd)
        try:
            stat = self._stat()
            self._identity = _identity(stat)
            self._left = _size_and_time(stat)
        except BaseException:
            self.close()
            raise

    def _stat(self) -> os.stat_result:
        if self._folder_fd is None:
            return os.stat(self.path)
        return os.stat(self.path.name, dir_fd=self._folder_fd)

    def in_place(self) -> bool:
        """Whether the file's name (in its folder, wherever that is now) still leads to the
        file opened: False once it was renamed, moved away, deleted or replaced."""
        try:
            return _identity(self._stat()) == self._identity
        except OSError:
            return False

    def left_as_noted(self) -> bool:
        """Whether the file's size and time are still those :meth:`note_left` saw: another
        program writing into it (a backup copied over it) moves them. So does a drive that
        sets a file's time itself: the caller then compares the contents."""
        try:
            return _size_and_time(self._stat()) == self._left
        except OSError:
            return False

    def note_left(self) -> None:
        """Note the file's size and time as this program left it (after each save)."""
        with contextlib.suppress(OSError):
            self._left = _size_and_time(self._stat())

    def refuse_save_if_gone(self) -> None:
        """:class:`SaveFailed`, in words, where a save would go into a file no name leads to."""
        if self.in_place():
            return
        name = self.path.name
        raise SaveFailed(
            f"{name} was moved, renamed or deleted while it was open: it is no longer at "
            f"{self.path}. Nothing was saved (it would have been lost). Close the project and "
            "open the file where it is now (every earlier save is in it), then enter this "
            "again; if it was deleted, restore it from a backup."
        )

    def close(self) -> None:
        if self._finalizer is not None:
            self._finalizer()  # os.close, once
            self._finalizer = None
        self._folder_fd = None
