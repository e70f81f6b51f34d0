"""What a killed program leaves behind is removed by a later run, and only when abandoned: the
upgraded temporary copy of an older file that a verify or a merge reads (a whole study in the
system's temporary folder), and a half-delivered offline copy on the clinician's drive."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from portalreview.store import leftovers, merge
from portalreview.store.audit_verify import verify_file
from portalreview.store.merge import make_copy
from portalreview.store.project import Project
from portalreview.store.service import StudyService

DATA = Path(__file__).parent / "data"
PACKAGE_ROOT = str(Path(merge.__file__).parents[2])
WEEK_AGO = time.time() - 7 * 24 * 3600
# the program's folders in the system's temporary folder
COPY, MERGE, VERIFY, SELFTEST = (
    "portalreview-copy-work-",
    ".portalreview-merge-",
    ".portalreview-verify-",
    ".portalreview-selftest-",
)

KILLED_VERIFY = r"""
import os, signal, sys
import portalreview.store.audit_verify as A

def killed(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)  # a crash, a power cut, the task manager

A.verify_project = killed  # the upgraded copy made, being checked
A.verify_file(sys.argv[1])
"""

KILLED_DELIVERY = r"""
import os, shutil, signal, sys
import portalreview.store.merge as M
from portalreview.store.project import Project
from portalreview.store.service import StudyService

class DyingShutil:  # the copy killed while it is written to the drive
    def __getattr__(self, name):
        return getattr(shutil, name)

    def copyfileobj(self, source, target, length=0):
        target.write(source.read(4096))
        target.flush()
        os.kill(os.getpid(), signal.SIGKILL)

M.shutil = DyingShutil()
with Project.open(sys.argv[1]) as p:
    M.make_copy(p, sys.argv[2], annotator="ava", only_assigned=True)
"""


def _killed(script: str, *args, tmp: Path) -> None:
    env = dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=PACKAGE_ROOT)
    done = subprocess.run([sys.executable, "-c", script, *map(str, args)], env=env)
    assert done.returncode == -signal.SIGKILL


@pytest.fixture
def local_tmp(tmp_path, monkeypatch) -> Path:
    """A temporary folder of its own, as this machine's, for this process and its children."""
    local = tmp_path / "local-tmp"
    local.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(local))
    return local


@pytest.fixture
def processes():
    """The id of a process that runs (as this user) and of one that has ended."""
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    ended = subprocess.Popen([sys.executable, "-c", ""])
    ended.wait()
    yield running.pid, ended.pid
    running.kill()
    running.wait()


def _aged(path: Path) -> Path:
    os.utime(path, (WEEK_AGO, WEEK_AGO))
    return path


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
def test_a_killed_verify_of_an_older_file_leaves_its_copy_only_until_the_next_verify(
    tmp_path, local_tmp
):
    """The upgraded copy of the study was removed only when verify ended normally: killed, it
    stayed in the temporary folder for good (patient data)."""
    old = tmp_path / "old.prproj"
    shutil.copy(DATA / "v1-small.prproj", old)
    _killed(KILLED_VERIFY, old, tmp=local_tmp)
    (left,) = list(local_tmp.iterdir())
    assert left.name.startswith(VERIFY)
    assert any(p.suffix == ".prproj" for p in left.iterdir())  # the whole study
    assert verify_file(old).ok
    assert list(local_tmp.iterdir()) == []


def test_only_abandoned_temporary_folders_are_removed(local_tmp, processes):
    """A folder another running program (or this one, in another thread) uses stays."""
    running, ended = processes

    def folder(name: str, aged: bool = False) -> Path:
        made = local_tmp / name
        made.mkdir()
        (made / "study.prproj").write_bytes(b"x")
        if aged:
            _aged(made / "study.prproj")
            _aged(made)
        return made

    gone = [folder(f"{prefix}{ended}-abc") for prefix in (COPY, MERGE, VERIFY)]
    gone.append(folder(f"{SELFTEST}{running}-reused", aged=True))
    gone.append(folder(f"{VERIFY}ab_12cd3", aged=True))  # no process id in it
    kept = [
        folder(f"{VERIFY}{os.getpid()}-this-program", aged=True),
        folder(f"{MERGE}{running}-another-program"),
        folder(f"{VERIFY}ab_12cd3x"),  # no process id: young
        folder(f".portalreview-other-{ended}-x", aged=True),  # not one of ours
    ]
    in_use = local_tmp / f"{MERGE}{running}-writing-now"
    in_use.mkdir()
    (in_use / "study.prproj").write_bytes(b"x")  # changed just now, in the folder
    kept.append(_aged(in_use))
    assert sorted(merge.remove_leftover_work()) == sorted(gone)
    assert sorted(local_tmp.iterdir()) == sorted(kept)
    assert merge.TEMPORARY_PREFIXES == (COPY, MERGE, VERIFY, SELFTEST)


def _small_master(path: Path) -> Path:
    """A study with one unit for ava (a copy for someone with nothing to do is refused)."""
    with Project.create(path, name="Leftovers") as project:
        service = StudyService(project)
        ava = service.add_annotator("ava")
        case = service.add_case("c1", "My knee hurts.")
        unit = service.add_unit(service.create_unit_set("replies", "respond"), case)
        service.assign(unit, ava)
    return path


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
def test_a_copy_killed_while_delivered_leaves_a_part_file_the_next_copy_removes(
    tmp_path, local_tmp
):
    """A copy killed while written to the clinician's drive left a hidden .part file there
    for good (the copy's study data, on a USB stick)."""
    master = _small_master(tmp_path / "master.prproj")
    stick = tmp_path / "usb"
    stick.mkdir()
    _killed(KILLED_DELIVERY, master, stick / "ava.prproj", tmp=local_tmp)
    (left,) = list(stick.iterdir())
    assert left.name.startswith(".ava") and left.name.endswith(".part")
    with Project.open(master) as project:
        make_copy(project, stick / "ben.prproj", annotator="ava", only_assigned=True)
    assert [p.name for p in stick.iterdir()] == ["ben.prproj"]
    assert list(local_tmp.iterdir()) == []


def test_only_abandoned_part_files_are_removed(tmp_path, processes):
    """A copy another program (perhaps on another computer, the drive being shared) is still
    writing stays; so do other programs' .part files."""
    running, ended = processes
    here, elsewhere = leftovers.machine_tag(), "0123abcd"

    def part(stem: str, pid: int, machine: str, aged: bool = False) -> Path:
        made = tmp_path / f".{stem}.portalreview-{pid}-{machine}-a1b2_c3d.part"
        made.write_bytes(b"x")
        return _aged(made) if aged else made

    gone = [
        part("ava", ended, here),
        part("ben", running, here, aged=True),  # a process id reused
        part("cy", ended, elsewhere, aged=True),
    ]
    kept = [
        part("dee", os.getpid(), here),
        part("eve", running, here),
        part("fay", ended, elsewhere),  # that computer's process may run
    ]
    for other in ("download.pdf.part", ".ava-k2j3_x9z.part"):  # perhaps not ours
        (tmp_path / other).write_bytes(b"x")
        kept.append(_aged(tmp_path / other))
    assert sorted(merge.remove_abandoned_parts(tmp_path)) == sorted(gone)
    assert sorted(tmp_path.iterdir()) == sorted(kept)


def test_another_users_leftover_is_never_abandoned(tmp_path, monkeypatch):
    made = tmp_path / "x"
    made.write_bytes(b"x")
    _aged(made)
    assert leftovers.is_abandoned([made], None)
    monkeypatch.setattr(os, "getuid", lambda: made.stat().st_uid + 1, raising=False)
    assert not leftovers.is_abandoned([made], None)


def test_a_report_file_a_killed_run_left_half_written_is_removed_by_the_next(
    tmp_path, processes
):
    """A kill while the workbook was written left "study.xlsx.tmp" (half a workbook with
    patients' words) beside the report for good (found by an explorer). The temporary file
    is hidden, named with its process id and computer, and the next output to the folder
    removes one whose run on this computer has ended; a running export's stays, and so does
    one another computer is writing to a shared folder (its process id means nothing here:
    the check removed it, found by an explorer)."""
    from portalreview.store.output_files import TEMPORARY_PREFIX, write_through_temporary

    running, ended = processes
    here, elsewhere = leftovers.machine_tag(), "0123abcd"

    def left(pid: int, machine: str, name: str) -> Path:
        made = tmp_path / f"{TEMPORARY_PREFIX}{pid}-{machine}-0a1b2c3d-{name}.xlsx.tmp"
        made.write_bytes(b"half a workbook")
        return made

    left(ended, here, "study")
    kept = [left(running, here, "other"), left(ended, elsewhere, "theirs")]
    seen = []

    def write(temporary: Path) -> None:
        seen.append(temporary.name)
        temporary.write_text("the report", encoding="utf-8")

    write_through_temporary(tmp_path / "study.xlsx", write)
    [name] = seen
    assert name.startswith(f"{TEMPORARY_PREFIX}{os.getpid()}-{here}-") and name.endswith(".tmp")
    assert sorted(tmp_path.iterdir()) == sorted([*kept, tmp_path / "study.xlsx"])
    assert (tmp_path / "study.xlsx").read_text(encoding="utf-8") == "the report"
    _aged(kept[1])  # untouched for hours: abandoned, wherever it was written
    write_through_temporary(tmp_path / "study.xlsx", write)
    assert sorted(tmp_path.iterdir()) == sorted([kept[0], tmp_path / "study.xlsx"])
