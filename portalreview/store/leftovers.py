"""What the program's temporary work leaves behind when it is killed (a crash, a power cut, the
task manager), and when that is abandoned, so that a later run may remove it.

The program cleans up after itself on every failure it sees; a killed process sees none, so its
temporary files stay: a whole study in the system's temporary folder, a half-delivered offline
copy on a clinician's drive, a half-built demo. Each of those names carries the id of the
process that made it (``<prefix><pid>-<random>``). They are **abandoned** when:

* that process is gone (POSIX only, and only for names made on this machine: a process id says
  nothing about another computer's processes on a shared drive); or
* nothing in them has changed for ``STALE_AFTER`` (a process id reused by another program, or a
  system where no process can be checked).

Never removed: what this very process made (another of its threads may be using it), another
user's entries, and symbolic links. Names from versions that put no process id in them are
judged by their age alone.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import socket
import stat
import time
from collections.abc import Iterable
from pathlib import Path

STALE_AFTER = 6 * 3600.0  # seconds without a change after which a leftover counts as abandoned


def process_is_gone(pid: int) -> bool:
    """Whether no process ``pid`` runs on this machine (False where that cannot be told)."""
    if os.name != "posix":
        return False  # (no safe test there; the age decides)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # it runs, as another user
    return False


def machine_tag() -> str:
    """A digest of this computer's name, put after the process id in the names of what is
    written to a folder other computers may share, so that the process id is only checked on
    the computer that wrote it."""
    return hashlib.sha256(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:8]


def made_on_this_machine(name: str, prefix: str) -> bool:
    """Whether ``<prefix><pid>-<machine>-<rest>`` names this computer (:func:`machine_tag`);
    False for a name without one (an older version's: judged by its age alone)."""
    _pid, _dash, rest = name[len(prefix) :].partition("-")
    return rest.partition("-")[0] == machine_tag()


def pid_in_name(name: str, prefix: str) -> int | None:
    """The process id in ``<prefix><pid>-<rest>``; None for a name without one."""
    head, dash, _rest = name[len(prefix) :].partition("-")
    if not dash or not head.isdigit():
        return None
    return int(head)


def _newest_change(entry: Path, info: os.stat_result) -> float:
    """The last change to ``entry``; for a folder, also to what lies directly in it (writing a
    file inside does not change the folder's own time)."""
    newest = info.st_mtime
    if stat.S_ISDIR(info.st_mode):
        for child in entry.iterdir():
            newest = max(newest, child.lstat().st_mtime)
    return newest


def is_abandoned(
    entries: Iterable[Path],
    pid: int | None,
    *,
    made_here: bool = True,
    older_than: float = STALE_AFTER,
) -> bool:
    """Whether ``entries``, made together by one run of the program whose process id was
    ``pid`` (None: unknown), are abandoned (see the module docstring). False when any of them
    cannot be read, is a link, or belongs to another user."""
    if made_here and pid == os.getpid():
        return False
    try:
        infos = [(entry, entry.lstat()) for entry in entries]
        if not infos:
            return False
        for _entry, info in infos:
            if stat.S_ISLNK(info.st_mode):
                return False
            if hasattr(os, "getuid") and info.st_uid != os.getuid():
                return False
        if made_here and pid is not None and process_is_gone(pid):
            return True
        newest = max(_newest_change(entry, info) for entry, info in infos)
    except OSError:
        return False
    return time.time() - newest > older_than


def remove(entry: Path) -> None:
    """Remove a leftover file or folder; what cannot be removed (in use on Windows) stays for
    a later run."""
    if entry.is_dir() and not entry.is_symlink():
        shutil.rmtree(entry, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            entry.unlink(missing_ok=True)
