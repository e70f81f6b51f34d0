"""Writing an output file (store/output_files.py): a failure is worded for the person and names
the file or folder asked for, never a temporary one; writing the folder's entry to disk after
the rename is done where the file system allows it and never fails an output written."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from portalreview.store import merge
from portalreview.store.errors import StoreError
from portalreview.store.output_files import (
    STAGING_PREFIX,
    OutputNotWritten,
    write_files_together,
    write_through_temporary,
)
from portalreview.store.project import Project
from tests.conftest import open_in_excel

REFUSALS = [errno.EROFS, errno.EACCES, errno.ENOSPC]
WORDS = {
    errno.EROFS: "its disk is read-only",
    errno.EACCES: "you may not write to it or its folder",
    errno.ENOSPC: "is full",
}


def _fail(code: int, filename: Path | None = None) -> OSError:
    return OSError(code, os.strerror(code), None if filename is None else str(filename))


@pytest.mark.parametrize("code", REFUSALS)
def test_a_temporary_file_that_cannot_be_removed_hides_nothing(tmp_path, monkeypatch, code):
    """On a read-only disk removing the temporary file fails too: that error replaced the
    worded one, which the person never saw."""
    target = tmp_path / "report.json"
    real_unlink = Path.unlink

    def refused(path: Path, *args, **kwargs) -> None:
        if path.name.endswith(".tmp"):
            raise _fail(code, path)
        real_unlink(path, *args, **kwargs)

    def write(path: Path) -> None:
        raise _fail(code, path)

    monkeypatch.setattr(Path, "unlink", refused)
    with pytest.raises(OutputNotWritten) as failure:
        write_through_temporary(target, write)
    assert str(target) in str(failure.value) and WORDS[code] in str(failure.value)
    assert failure.value.errno == code


@pytest.mark.parametrize("code", REFUSALS)
def test_a_staging_folder_that_cannot_be_made_names_the_folder_asked_for(
    tmp_path, monkeypatch, code
):
    """The message named the hidden ``.portalreview-export-<pid>-...`` folder, in the
    system's words."""
    folder = tmp_path / "labelstudio"
    folder.mkdir()
    real_mkdir = Path.mkdir

    def refused(path: Path, *args, **kwargs) -> None:
        if path.name.startswith(STAGING_PREFIX):
            raise _fail(code, path)
        real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", refused)
    with pytest.raises(OutputNotWritten) as failure:
        write_files_together(folder, {"tasks.json": b"[]"})
    message = str(failure.value)
    assert str(folder) in message and WORDS[code] in message, message
    assert STAGING_PREFIX not in message
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize("code", REFUSALS)
def test_an_output_folder_that_cannot_be_made_is_worded(tmp_path, monkeypatch, code):
    folder = tmp_path / "weekly"

    def refused(path: Path, *args, **kwargs) -> None:
        raise _fail(code, path)

    monkeypatch.setattr(Path, "mkdir", refused)
    with pytest.raises(OutputNotWritten, match=WORDS[code]) as failure:
        write_files_together(folder, {"report.json": b"{}"})
    assert str(folder) in str(failure.value)


def test_a_full_disk_keeping_the_earlier_files_names_the_folder(tmp_path, monkeypatch):
    folder = tmp_path / "weekly"
    folder.mkdir()
    (folder / "report.json").write_bytes(b"last week")
    real_mkdir = Path.mkdir

    def full(path: Path, *args, **kwargs) -> None:
        if path.name == ".earlier":
            raise _fail(errno.ENOSPC, path)
        real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", full)
    with pytest.raises(OutputNotWritten, match=f"The disk holding {folder} is full") as failure:
        write_files_together(folder, {"report.json": b"this week"})
    assert STAGING_PREFIX not in str(failure.value)
    assert [p.name for p in folder.iterdir()] == ["report.json"]
    assert (folder / "report.json").read_bytes() == b"last week"


# --- an offline copy held open by another program ------------------------------------------


def test_an_offline_copy_is_never_delivered_over_a_file(tmp_path, monkeypatch):
    """A file at the copy's name when it is delivered (``copy -o`` refuses one that is there
    when it starts; this one came since), even one open elsewhere on Windows, is kept: the
    delivery once renamed over it."""
    finished = tmp_path / "built.prproj"
    finished.write_bytes(b"x" * 100)
    out = tmp_path / "copy-ava.prproj"
    out.write_bytes(b"the copy the clinician has open")
    open_in_excel(monkeypatch, out)
    with pytest.raises(StoreError, match="appeared while the copy was being made"):
        merge._deliver(finished, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["built.prproj", "copy-ava.prproj"]
    assert out.read_bytes() == b"the copy the clinician has open"


# --- a folder whose entries cannot be written to disk --------------------------------------


def _is_folder(fd: int) -> bool:
    return stat.S_ISDIR(os.fstat(fd).st_mode)


def _fsync_refused_on_folders(monkeypatch, code: int) -> None:
    """fsync on a folder fails as on some FUSE, 9p and network file systems."""
    real = os.fsync

    def fsync(fd: int) -> None:
        if _is_folder(fd):
            raise OSError(code, os.strerror(code))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)


def _folders_not_readable(monkeypatch, tmp_path: Path) -> None:
    """Folders one may write but not read (``tmp_path`` and those in it, but for the ones the
    program makes itself): opening one (to fsync it) is refused."""
    real = os.open

    def open_(path, flags, *args, **kwargs):
        ours = Path(path).name.startswith(STAGING_PREFIX) or "dir_fd" in kwargs
        if Path(path).parent in (tmp_path, tmp_path.parent) and os.path.isdir(path) and not ours:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_)


REFUSED_FOLDER_SYNC = [
    pytest.param(lambda mp, _: _fsync_refused_on_folders(mp, errno.EINVAL), id="EINVAL"),
    pytest.param(lambda mp, _: _fsync_refused_on_folders(mp, errno.ENOTSUP), id="ENOTSUP"),
    pytest.param(lambda mp, _: _fsync_refused_on_folders(mp, errno.EBADF), id="EBADF"),
    pytest.param(_folders_not_readable, id="not-readable"),
]


@pytest.mark.skipif(os.name != "posix", reason="folders are written to disk on POSIX only")
@pytest.mark.parametrize("refuse", REFUSED_FOLDER_SYNC)
def test_a_folder_that_cannot_be_written_to_disk_fails_no_output(tmp_path, monkeypatch, refuse):
    """The output was already in place when writing the folder to disk failed, and the person
    was told it failed."""
    refuse(monkeypatch, tmp_path)
    report = write_through_temporary(tmp_path / "r.json", lambda p: p.write_bytes(b"{}"))
    assert report.read_bytes() == b"{}"
    together = write_files_together(tmp_path / "csv", {"a.csv": b"1\n", "b.csv": b"2\n"})
    assert [p.read_bytes() for p in together] == [b"1\n", b"2\n"]
    assert sorted(p.name for p in (tmp_path / "csv").iterdir()) == ["a.csv", "b.csv"]


@pytest.mark.skipif(os.name != "posix", reason="folders are written to disk on POSIX only")
def test_a_backup_in_a_folder_that_cannot_be_written_to_disk_is_made(tmp_path, monkeypatch):
    with Project.create(tmp_path / "s.prproj") as project:
        _fsync_refused_on_folders(monkeypatch, errno.EINVAL)
        made = project.backup()
    assert made.is_file() and not list(made.parent.glob(".*.partial"))


def test_a_name_given_whose_reply_was_lost_is_not_taken_for_another_file(tmp_path, monkeypatch):
    """A network share can make the link and lose the reply: the name then holds our own
    file, which is no clash."""
    from portalreview.store import output_files

    finished = tmp_path / "built.prproj"
    finished.write_bytes(b"ours")
    real_link = os.link

    def link_then_lose_the_reply(source, target) -> None:
        real_link(source, target)
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "link", link_then_lose_the_reply)
    output_files.name_without_replacing(finished, tmp_path / "copy.prproj")
    assert (tmp_path / "copy.prproj").read_bytes() == b"ours"
