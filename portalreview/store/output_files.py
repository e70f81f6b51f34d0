"""Writing a report or an export file: through a temporary file beside it, written to disk
(fsync) and renamed over the target when complete, so that a failure, a kill or a power cut
leaves no half file and the old file as it was. A folder of several files that belong together
(:func:`write_files_together`) is written whole before any of them is renamed into place.

These failures are worded for the person here rather than left to the system's words:

- A file that cannot be written (a read-only folder or disk) is named as asked for, not by
  the temporary name or the hidden staging folder; removing the temporary file afterwards,
  which fails on a read-only disk too, never hides that message.
- A write that fails (a full disk: "[Errno 28] No space left on device", naming no file) is
  reported by :func:`output_error` naming the file and saying in words what happened: the
  disk is full, the file or folder may not be written, the disk is read-only.
- On Windows a file open in Excel (or another program that holds it) cannot be replaced. The
  system's error names the temporary file ("report.xlsx.tmp: access is denied"), which is gone
  by the time anybody reads the message; the message names the target and what to do.
- openpyxl's write-only workbook streams each sheet through a generator; a save that fails
  (a read-only folder, a full disk) left those to the garbage collector, which printed
  "Exception ignored ... I/O operation on closed file" tracebacks and kept the sheets'
  temporary files until the program ended. :func:`save_workbook` closes them itself.

Writing the folder's entry to disk after the rename (:func:`sync_folder`) is done where the
file system allows it; where it does not, the output written stays written and is not
reported as failed.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import logging
import os
import secrets
import shutil
import zipfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from portalreview.store import leftovers

# A folder of files being written together: ".portalreview-export-<pid>-<machine>-<random>" in
# the folder they go to (the same file system, so renaming them into place moves no data).
STAGING_PREFIX = ".portalreview-export-"
# One file being written: ".portalreview-output-<pid>-<machine>-<random>-<name>.tmp" beside
# it, hidden; one a killed run left (patients' words, half a file) is removed by a later output
# to the folder once abandoned. (Its permissions are the finished file's: the system's
# default.) <machine>: the process id is checked only on the computer that wrote it, as a
# shared folder is written by several (leftovers.machine_tag).
TEMPORARY_PREFIX = ".portalreview-output-"

log = logging.getLogger(__name__)


class OutputInUse(OSError):
    """An existing output file that could not be replaced: open in another program (Excel
    holds the files it shows), or one the user may not change."""


def replace_output(temporary: Path, target: Path) -> None:
    """Rename the finished ``temporary`` over ``target``; a refusal names ``target``."""
    try:
        os.replace(temporary, target)
    except PermissionError as exc:
        why = exc.strerror or "access is denied"
        why = why[:1].lower() + why[1:]
        if target.exists():
            raise OutputInUse(
                f"{target} cannot be written over ({why}): it may be open in another "
                "program, such as Excel. Close it there and try again."
            ) from exc
        raise PermissionError(exc.errno, exc.strerror, str(target)) from exc


def name_without_replacing(temporary: Path, target: Path) -> None:
    """Give the finished ``temporary`` the name ``target`` unless a file has it
    (FileExistsError naming ``target``), as a hard link: the system refuses it at once when
    the name exists, where checking first and then renaming would write over a file another
    program made in between. Where the file system has no hard links (FAT and exFAT drives,
    some network shares) the check and the rename remain. ``temporary`` may stay: the caller
    removes it."""
    taken = FileExistsError(errno.EEXIST, "the name is taken", str(target))
    try:
        os.link(temporary, target)
    except FileExistsError:
        raise taken from None
    except OSError:
        if target.exists():
            with contextlib.suppress(OSError):
                if os.path.samefile(temporary, target):
                    return  # made after all (a network share that lost the reply)
            raise taken from None
        os.replace(temporary, target)


class OutputNotWritten(OSError):
    """An output file that could not be written, the reason in words (its ``errno`` kept)."""


def output_error(exc: OSError, target: Path) -> OSError:
    """``exc``, met writing ``target`` (perhaps through a temporary file), naming ``target``
    and saying in words what happened where the system's words are a number and a phrase."""
    reason = exc.strerror or os.strerror(exc.errno or 0)
    worded = _worded_output_failure(exc.errno, reason, target)
    if worded is None:
        return OSError(exc.errno, exc.strerror, str(target))  # PermissionError stays one
    failure = OutputNotWritten(worded)
    failure.errno = exc.errno
    return failure


def _worded_output_failure(code: int | None, reason: str, target: Path) -> str | None:
    """As the project's own saves word a failure (``service.readable_file_error``)."""
    if code in (errno.ENOSPC, errno.EDQUOT):
        return (
            f"The disk holding {target} is full ({reason}): {target.name} was not written. "
            "Make room on that disk, then try again."
        )
    if code == errno.EROFS:
        return (
            f"{target} could not be written: its disk is read-only ({reason}). "
            "Write it to another folder."
        )
    if code in (errno.EACCES, errno.EPERM):
        return (
            f"{target} could not be written: you may not write to it or its folder "
            f"({reason}). Write it to another folder, or ask for the right to write there."
        )
    return None


def write_through_temporary(
    target: Path,
    write: Callable[[Path], Any],
    temporary: Path | None = None,
    replace: bool = True,
) -> Path:
    """Call ``write`` on a temporary file beside ``target`` (``temporary``, by default a
    hidden one named with this process's id), then rename it to ``target``
    (:func:`replace_output`; with ``replace=False`` never over a file,
    :func:`name_without_replacing`); the temporary file never stays behind, and one a killed
    run left beside it is removed (:func:`remove_abandoned_staging`)."""
    if temporary is None:
        remove_abandoned_staging(target.parent, TEMPORARY_PREFIX)
        name = f"{_unique_prefix(TEMPORARY_PREFIX)}-{target.name}.tmp"
        temporary = target.with_name(name)
    try:
        try:
            write(temporary)
            sync_file(temporary)
        except OSError as exc:
            if exc.filename not in (None, str(temporary)) or exc.errno is None:
                raise
            # the message names the file asked for, not a temporary one nobody will find
            raise output_error(exc, target) from exc
        if replace:
            replace_output(temporary, target)
        else:
            name_without_replacing(temporary, target)
        sync_folder(target.parent)
    finally:
        # on a read-only disk this fails too, and would hide the worded error raised above
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)
    return target


def sync_file(path: Path) -> None:
    """Write ``path``'s content to disk: renamed over an older file before that, a power cut
    could leave the name with an empty or half file."""
    with path.open("rb+") as fh:
        os.fsync(fh.fileno())


def sync_folder(folder: Path) -> None:
    """Write ``folder``'s entries (a rename into it) to disk (POSIX; Windows has no way to),
    as far as the file system allows. Called once the file is in place, so a refusal never
    fails the output: some file systems (FUSE, 9p, network mounts) reject fsync on a folder
    (EINVAL, ENOTSUP), and a folder one may write but not read cannot be opened (EACCES).
    SQLite ignores these errors too."""
    if os.name != "posix":
        return
    try:
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        log.debug("the folder %s could not be written to disk (%s)", folder, exc)


def make_folder(folder: Path) -> None:
    """Make the output folder ``folder`` (and its parents) unless it exists; a failure (a
    read-only disk, a full one) is worded by :func:`output_error`, naming ``folder``."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise output_error(exc, folder) from exc


@contextlib.contextmanager
def output_folder(folder: Path) -> Iterator[None]:
    """Make the output folder ``folder`` unless it exists (:func:`make_folder`); when the
    block fails (a full disk, Cancel) and the folder was made for it, it is removed again if
    nothing is left in it."""
    made = not folder.exists()
    make_folder(folder)
    try:
        yield
    except BaseException:
        if made:
            with contextlib.suppress(OSError):  # only when empty
                folder.rmdir()
        raise


def write_files_together(folder: Path, files: Mapping[str, bytes]) -> list[Path]:
    """Write ``files`` (name -> content) into ``folder`` so that they replace the folder's
    earlier ones together: every file is first written whole, and to disk, in a hidden staging
    folder inside ``folder``; only then are they renamed into place, one after the other with
    nothing else in between. A failure or a kill while they are written leaves the earlier
    files as they were, and no half file under a file's name; so does a file that cannot be
    replaced (open in Excel on Windows). The staging folder a killed run leaves is removed by
    the next (:func:`remove_abandoned_staging`). Other files in ``folder`` are left alone."""
    with staging_folder(folder) as staging:
        for name, data in files.items():
            write_staged(
                staging / name, folder / name, lambda path, data=data: path.write_bytes(data)
            )
        move_into_place(staging, folder, list(files))
    return [folder / name for name in files]


@contextlib.contextmanager
def staging_folder(folder: Path) -> Iterator[Path]:
    """A new hidden staging folder inside ``folder`` (made when missing), for files written
    whole (:func:`write_staged`) before they replace the folder's (:func:`move_into_place`);
    removed with what is left in it when the block ends, however it ends, and ``folder`` too
    when it was made for this and nothing came of it (a failure, Ctrl+C). One a killed run
    left is removed by the next (:func:`remove_abandoned_staging`)."""
    made = not folder.exists()
    make_folder(folder)
    remove_abandoned_staging(folder)
    staging = folder / _unique_prefix(STAGING_PREFIX)
    try:
        staging.mkdir()
    except OSError as exc:  # a read-only disk: named as asked for, never the hidden staging
        raise output_error(exc, folder) from exc
    done = False
    try:
        yield staging
        done = True
    finally:
        leftovers.remove(staging)
        if made and not done:
            with contextlib.suppress(OSError):  # only when empty
                folder.rmdir()


def write_staged(path: Path, shown: Path, write: Callable[[Path], Any]) -> None:
    """Call ``write`` on ``path`` (a file in a staging folder), then write the file to disk; a
    failure names ``shown``, the file asked for, never the staging folder."""
    try:
        write(path)
        sync_file(path)
    except OSError as exc:
        if exc.errno is None:
            raise
        raise output_error(exc, shown) from exc


def move_into_place(staging: Path, folder: Path, names: list[str]) -> None:
    """Rename the files ``names``, written whole in ``staging``, over ``folder``'s, one straight
    after the other (:func:`_move_into_place`); a failure names ``folder``, never the staging
    folder (the disk full while the earlier files are kept)."""
    try:
        sync_folder(staging)
        _move_into_place(staging, folder, names)
        sync_folder(folder)
    except OSError as exc:
        if exc.errno is None or not _names_a_file_in(exc, staging):
            raise
        raise output_error(exc, folder) from exc


def _names_a_file_in(exc: OSError, folder: Path) -> bool:
    return exc.filename is not None and Path(os.fsdecode(exc.filename)).is_relative_to(folder)


def _move_into_place(staging: Path, folder: Path, names: list[str]) -> None:
    """Rename the staged files over the folder's. When one cannot be (a file open in Excel on
    Windows: :class:`OutputInUse`), the files already renamed get their earlier content back,
    so that the folder keeps the earlier export whole, and the refusal is raised."""
    earlier = _keep_earlier(staging / ".earlier", folder, names)
    renamed: list[str] = []
    try:
        for name in names:
            replace_output(staging / name, folder / name)
            renamed.append(name)
    except OSError:
        for name in renamed:
            if (kept := earlier[name]) is None:
                (folder / name).unlink(missing_ok=True)
            else:
                os.replace(kept, folder / name)
        raise


def _keep_earlier(kept_in: Path, folder: Path, names: list[str]) -> dict[str, Path | None]:
    """A second name in ``kept_in`` (a copy where the disk has no hard links) of each of the
    folder's files about to be replaced; None for a file not there yet."""
    kept_in.mkdir()
    kept: dict[str, Path | None] = {}
    for name in names:
        target, kept[name] = folder / name, None
        if target.is_file():
            kept[name] = kept_in / name
            try:
                os.link(target, kept_in / name)
            except OSError:
                shutil.copy2(target, kept_in / name)
    return kept


def remove_abandoned_staging(folder: Path, prefix: str = STAGING_PREFIX) -> list[Path]:
    """Remove the staging folders (or, with ``TEMPORARY_PREFIX``, the temporary files) in
    ``folder`` that a killed run left (abandoned as
    :func:`portalreview.store.leftovers.is_abandoned` tells: never one a running export is
    filling). Returns those removed."""
    removed = []
    with contextlib.suppress(OSError):
        for entry in folder.iterdir():
            if not entry.name.startswith(prefix):
                continue
            pid = leftovers.pid_in_name(entry.name, prefix)
            here = leftovers.made_on_this_machine(entry.name, prefix)
            if leftovers.is_abandoned([entry], pid, made_here=here):
                leftovers.remove(entry)
                removed.append(entry)
    return removed


def _unique_prefix(prefix: str) -> str:
    """``<prefix><pid>-<machine>-<random>``: a name no other run takes, on any computer."""
    return f"{prefix}{os.getpid()}-{leftovers.machine_tag()}-{secrets.token_hex(4)}"


def save_workbook(book: Any, path: Path) -> None:
    """Save the openpyxl workbook ``book`` as ``path`` (what ``book.save`` does), closing its
    zip file and its write-only sheets' streams when that fails."""
    from openpyxl.writer.excel import ExcelWriter

    if book.write_only and not book.worksheets:
        book.create_sheet()
    book.properties.modified = datetime.datetime.now(tz=datetime.UTC).replace(tzinfo=None)
    try:
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, allowZip64=True) as archive:
            ExcelWriter(book, archive).save()
    except BaseException:
        close_sheets(book)
        raise


def close_sheets(book: Any) -> None:
    """Finish the streams of the write-only sheets and delete their temporary files (what
    saving them would have done): for a workbook that will not be saved."""
    if not book.write_only:
        return
    for sheet in book.worksheets:
        # already failing: the first error is the one reported
        if not sheet.closed:
            with contextlib.suppress(Exception):
                sheet.close()
        writer = getattr(sheet, "_writer", None)
        if writer is not None:
            with contextlib.suppress(Exception):  # gone already when it was saved
                writer.cleanup()
