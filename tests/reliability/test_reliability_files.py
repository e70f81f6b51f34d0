"""What a clinician meets when the project file is not what it should be, through the doors
they use (the command line and the app), beyond what tests/store/test_project.py checks on
``Project.open`` itself:

* a truncated (at many points), zero-byte, random-bytes or non-SQLite project file, and a
  folder: the command line names the file and says why (exit status 2, no traceback), the app shows
  the reason, and the file is left as it was;
* two instances on one project: the second app names who holds it and offers to open it
  read-only, and then saves nothing;
* a project on a read-only path (a share or a folder the person cannot write to).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from portalreview.store.project import Project, ProjectError
from portalreview.store.service import StudyService

REPO = Path(__file__).resolve().parents[2]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def good_bytes(tmp_path_factory) -> bytes:
    """A closed project of a few hundred KB (cases, units, answers)."""
    path = tmp_path_factory.mktemp("good") / "s.prproj"
    with Project.create(path) as project:
        svc = StudyService(project)
        ava = svc.add_annotator("ava")
        unit_set = svc.create_unit_set("r", "respond")
        for i in range(120):
            case = svc.add_case(
                f"c{i}", f"Message {i}. " + "I have a question about my care. " * 20
            )
            unit = svc.add_unit(unit_set, case)
            svc.assign(unit, ava)
            svc.as_viewer("ava").save_answer(unit, {"parts": {"empathy": f"Answer {i}."}})
    return path.read_bytes()


def _other_sqlite(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE patients (name TEXT)")
    conn.commit()
    conn.close()


BAD_FILES = {
    "zero-bytes": lambda p, good: p.write_bytes(b""),
    "random-bytes": lambda p, good: p.write_bytes(os.urandom(65536)),
    "a-spreadsheet": lambda p, good: p.write_text("record_id,message\n1,hello\n"),
    "other-sqlite": lambda p, good: _other_sqlite(p),
    "header-only": lambda p, good: p.write_bytes(good[:100]),
    "first-page": lambda p, good: p.write_bytes(good[:4096]),
    "half": lambda p, good: p.write_bytes(good[: len(good) // 2]),
    "last-page-missing": lambda p, good: p.write_bytes(good[:-4096]),
    "zeroed-page": lambda p, good: p.write_bytes(good[:8192] + bytes(4096) + good[12288:]),
}


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "QT_QPA_PLATFORM": "offscreen"}
    return subprocess.run(
        [sys.executable, "-m", "portalreview", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )


@pytest.mark.parametrize("name", BAD_FILES)
def test_a_bad_project_file_is_refused_with_its_name_and_left_as_it_was(tmp_path, good_bytes, name):
    path = tmp_path / "s.prproj"
    BAD_FILES[name](path, good_bytes)
    before = _digest(path)
    with pytest.raises(ProjectError) as refused:
        Project.open(path)
    assert "s.prproj" in str(refused.value)
    assert _digest(path) == before
    for verb in (["info"], ["report", "--format", "json", "-o", "r.json"]):
        result = _cli(verb[0], str(path), *verb[1:], cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        assert "Traceback" not in result.stderr
        assert result.stderr.startswith(f"portalreview {verb[0]}: s.prproj "), result.stderr
        assert _digest(path) == before
    assert not (tmp_path / "r.json").exists()
    assert not path.with_name("s.prproj.lock").exists()


def test_a_folder_named_like_a_project(tmp_path):
    folder = tmp_path / "s.prproj"
    folder.mkdir()
    result = _cli("info", str(folder), cwd=tmp_path)
    assert result.returncode == 2
    assert "is a folder" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("cut", [1, 7, 4095, 4096, 4097, 100_000])
def test_a_file_cut_short_opens_whole_or_is_refused(tmp_path, good_bytes, cut):
    """A cut that removes only bytes SQLite never needed may open; then everything is there
    and intact. Otherwise it is refused. Never a half-readable study. (A cut by a few bytes
    used to open: the read-only quick_check passed it, the writable integrity_check did not.)"""
    path = tmp_path / "s.prproj"
    path.write_bytes(good_bytes[:-cut])
    before = _digest(path)
    try:
        project = Project.open(path)
    except ProjectError as exc:
        assert "damaged" in str(exc) or "integrity" in str(exc)
        assert _digest(path) == before
        return
    with project:
        assert project.integrity_check() == "ok"
        ava = StudyService(project).as_viewer("ava")
        queue = ava.queue("respond")
        assert len(queue) == 120
        assert all(ava.get_answer(item.unit_id) is not None for item in queue)


def _pages(tmp_path: Path, data: bytes) -> tuple[int, int]:
    """(page size, page count) of a project's bytes, as SQLite reports them (not read from the
    header as the program does)."""
    whole = tmp_path / "whole.prproj"
    whole.write_bytes(data)
    conn = sqlite3.connect(f"file:{whole}?mode=ro&immutable=1", uri=True)
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    page_count = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.close()
    assert page_size * page_count == len(data)
    return page_size, page_count


def test_every_cut_within_the_last_page_is_refused_and_changes_nothing(tmp_path, good_bytes):
    """1 to page_size - 1 bytes missing: refused before SQLite reads the file, which stays
    byte for byte as it was, with nothing made beside it."""
    page_size, _ = _pages(tmp_path, good_bytes)
    path = tmp_path / "s.prproj"
    path.write_bytes(good_bytes)
    for cut in range(1, page_size):
        size = len(good_bytes) - cut
        os.truncate(path, size)
        with pytest.raises(ProjectError) as refused:
            Project.open(path)
        assert str(refused.value).startswith(
            f"s.prproj is damaged: it is {size:,} bytes long, not a whole number of "
            f"{page_size:,}-byte pages"
        ), cut
        assert path.read_bytes() == good_bytes[:size], cut
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.prproj", "whole.prproj"]


@pytest.mark.parametrize("extra", [1, 5000])
def test_bytes_written_after_the_end_are_refused_as_such(tmp_path, good_bytes, extra):
    """Bytes appended to a whole file were refused as "not a whole number of pages, so it was
    cut short", which it was not (found by an explorer): the message says what is wrong."""
    page_size, page_count = _pages(tmp_path, good_bytes)
    path = tmp_path / "s.prproj"
    path.write_bytes(good_bytes + os.urandom(extra))
    before = _digest(path)
    with pytest.raises(ProjectError) as refused:
        Project.open(path)
    assert str(refused.value).startswith(
        f"s.prproj is damaged: it is {len(good_bytes) + extra:,} bytes long, {extra:,} bytes "
        f"more than the {page_count:,} pages of {page_size:,} bytes its header counts: "
        "something was written after its end."
    )
    assert "cut short" not in str(refused.value)
    assert _digest(path) == before


@pytest.mark.parametrize("pages", [1, 2, 5])
def test_whole_pages_missing_at_the_end_are_refused(tmp_path, good_bytes, pages):
    """Cut at a page boundary: the header counts more pages than the file holds."""
    page_size, page_count = _pages(tmp_path, good_bytes)
    path = tmp_path / "s.prproj"
    path.write_bytes(good_bytes[: -pages * page_size])
    before = _digest(path)
    with pytest.raises(ProjectError, match="damaged") as refused:
        Project.open(path)
    assert f"it holds {page_count - pages:,} of the {page_count:,} pages its header counts" in str(
        refused.value
    )
    assert "There is no backup of it in s.backups/" in str(refused.value)
    assert _digest(path) == before


# --- the app -----------------------------------------------------------------------------------


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch):
    """A main window with its own settings file, and every message box it shows recorded
    (answered with ``window.answer``)."""
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QMessageBox

    from portalreview.ui import main_window
    from portalreview.ui.settings import Preferences

    shown: list[tuple[str, str]] = []
    prefs = Preferences(QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat))
    win = main_window.MainWindow(prefs)
    qtbot.addWidget(win)
    win.messages = shown
    win.answer = QMessageBox.StandardButton.No

    def record(kind):
        def box(parent, title, text, *args, **kwargs):
            shown.append((kind, text))
            return win.answer

        return box

    for kind in ("critical", "question", "warning", "information"):
        monkeypatch.setattr(main_window.QMessageBox, kind, record(kind))
    win.show()
    return win


@pytest.mark.parametrize("name", ["zero-bytes", "random-bytes", "half", "other-sqlite"])
def test_the_app_says_why_it_refuses_a_bad_file(qtbot, window, tmp_path, good_bytes, name):
    path = tmp_path / "s.prproj"
    BAD_FILES[name](path, good_bytes)
    before = _digest(path)
    window.open_project(path, annotator="ava")
    qtbot.waitUntil(lambda: bool(window.messages), timeout=20000)
    kind, text = window.messages[0]
    assert kind == "critical"
    assert text.startswith("Could not open s.prproj:")
    assert any(word in text for word in ("empty", "not a PortalReview", "damaged", "integrity"))
    assert window.project is None
    assert _digest(path) == before


_HOLDER = textwrap.dedent(
    """
    import sys
    from portalreview.store.project import Project
    p = Project.open(sys.argv[1])
    print("open", flush=True)
    sys.stdin.readline()
    p.close()
    """
)


def _study(path: Path) -> int:
    with Project.create(path, name="Two instances") as project:
        svc = StudyService(project)
        ava = svc.add_annotator("ava")
        case = svc.add_case("c1", "Can I take ibuprofen with my new medicine?")
        unit = svc.add_unit(svc.create_unit_set("r", "respond"), case)
        svc.assign(unit, ava)
        svc.as_viewer("ava").save_answer(unit, {"parts": {"empathy": "Kept."}})
    return unit


def test_a_second_app_is_told_who_holds_the_project_and_may_look_read_only(qtbot, window, tmp_path):
    from PySide6.QtWidgets import QMessageBox

    path = tmp_path / "s.prproj"
    unit = _study(path)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert holder.stdout.readline().strip() == "open"
        # "No": nothing is opened.
        window.open_project(path, annotator="ava")
        qtbot.waitUntil(lambda: bool(window.messages), timeout=20000)
        kind, text = window.messages.pop()
        assert kind == "question"
        assert f"process {holder.pid}" in text and "since 20" in text
        assert "Open it read-only" in text
        assert window.project is None
        # "Yes": opened read-only, said so, and nothing typed is written.
        window.answer = QMessageBox.StandardButton.Yes
        window.open_project(path, annotator="ava")
        qtbot.waitUntil(lambda: window.session is not None, timeout=20000)
        assert window.project.read_only
        assert "(read-only)" in window.windowTitle()
        assert "read-only" in window.person_label.whole_text()
        assert window.session.read_only  # the editors save nothing
        before = _digest(path)
        window.close_project()
        assert _digest(path) == before
    finally:
        holder.communicate("\n", timeout=30)
    with Project.open(path, read_only=True) as project:
        answer = StudyService(project).as_viewer("ava").get_answer(unit)
        assert answer.payload["parts"] == {"empathy": "Kept."}


# --- a read-only path ----------------------------------------------------------------------------


_READ_ONLY_PROBE = textwrap.dedent(
    """
    import json, os, sys
    from portalreview.store.project import Project, ProjectError
    from portalreview.store.service import StudyService
    path, unit = sys.argv[1], int(sys.argv[2])
    out = {}
    for mode in ("write", "read_only"):
        try:
            with Project.open(path, read_only=(mode == "read_only")) as p:
                answer = StudyService(p).as_viewer("ava").get_answer(unit)
                out[mode] = {
                    "opened": "read-only" if p.read_only else "for writing",
                    "empathy": answer.payload["parts"]["empathy"],
                }
        except ProjectError as exc:
            out[mode] = {"refused": str(exc), "error": type(exc).__name__}
    out["folder"] = sorted(os.listdir(os.path.dirname(path)))
    print(json.dumps(out))
    """
)


def _as_someone_else() -> list[str] | None:
    """How to run Python as a user who cannot write what is made read-only:
    ourselves when we are not root, else ``nobody`` through setpriv (None if impossible)."""
    if os.name != "posix":
        return None
    if os.geteuid() != 0:
        return [sys.executable]
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    return [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable]


@pytest.fixture
def share():
    """A folder another user can reach (pytest's own temporary folders are private to us),
    removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix="portalreview-share-"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        for folder in (root, *[p for p in root.rglob("*") if p.is_dir()]):
            folder.chmod(0o755)
        shutil.rmtree(root)


def _shared_study(root: Path) -> tuple[Path, int]:
    """A study in ``root/share/s.prproj``; returns its path and the unit ava answered."""
    folder = root / "share"
    folder.mkdir(parents=True)
    path = folder / "s.prproj"
    return path, _study(path)


def _probe_read_only(path: Path, unit: int, folder_writable: bool, file_mode: int = 0o444) -> dict:
    """Open ``path`` for writing, then read-only, as another person, for whom the files in its
    folder have ``file_mode`` (a lock file keeps its own) and the folder is writable or not;
    what happened, and what the folder then holds. Nothing already there may change."""
    runner = _as_someone_else()
    if runner is None:
        pytest.skip("needs a POSIX user without write access (setpriv as root)")
    folder = path.parent
    before = {p.name: _digest(p) for p in folder.iterdir() if p.is_file()}
    for name in before:
        if not name.endswith(".lock"):
            (folder / name).chmod(file_mode)
    folder.chmod(0o1777 if folder_writable else 0o555)
    try:
        result = subprocess.run(
            [*runner, "-c", _READ_ONLY_PROBE, str(path), str(unit)],
            capture_output=True,
            text=True,
            env={"PYTHONPATH": str(REPO), "PATH": os.environ.get("PATH", "")},
            timeout=120,
            cwd="/",
        )
    finally:
        folder.chmod(0o755)
    assert result.returncode == 0, result.stderr
    assert {name: _digest(folder / name) for name in before} == before
    return json.loads(result.stdout)


def test_a_project_in_a_read_only_folder_can_be_read_and_is_not_called_damaged(share):
    """(It used to be called "damaged ... restore the latest backup": SQLite could not make
    the -shm a WAL database is read through.) Read-only, it is opened immutable: nothing is
    made in the folder."""
    path, unit = _shared_study(share)
    out = _probe_read_only(path, unit, folder_writable=False)
    assert out["write"] == {
        "refused": f"s.prproj is in a folder you cannot write to ({path.parent}): open it "
        "read-only, or copy it to a folder of yours.",
        "error": "ProjectNotWritableError",
    }, out
    assert out["read_only"] == {"opened": "read-only", "empathy": "Kept."}, out
    assert out["folder"] == ["s.prproj"], out


def test_saves_still_in_the_wal_are_read_in_a_read_only_folder(share):
    """The owner's program was killed (or is still running): saves wait in the -wal. With its
    -shm they are read; without it they cannot be, and the message says what to do."""
    path, unit = _shared_study(share)
    writer = Project.open(path)
    StudyService(writer).as_viewer("ava").save_answer(unit, {"parts": {"empathy": "In the WAL."}})
    copies = {}
    for with_shm in (True, False):
        copy = share / f"copy-{with_shm}" / "s.prproj"
        copy.parent.mkdir()
        for ending in ("", "-wal") + (("-shm",) if with_shm else ()):
            shutil.copyfile(f"{path}{ending}", f"{copy}{ending}")
        copies[with_shm] = copy
    writer.close()
    assert os.path.getsize(f"{copies[True]}-wal") > 32  # the WAL holds frames
    out = _probe_read_only(copies[True], unit, folder_writable=False)
    assert out["read_only"] == {"opened": "read-only", "empathy": "In the WAL."}, out
    assert out["write"]["error"] == "ProjectNotWritableError", out
    out = _probe_read_only(copies[False], unit, folder_writable=False)
    for mode in ("write", "read_only"):
        assert out[mode] == {
            "refused": "s.prproj has saves in s.prproj-wal not yet merged into it, and it is "
            "in a folder you cannot write to, where they cannot be read. Copy both files "
            "together to a folder of yours and open the copy, or ask its owner to open and "
            "close it.",
            "error": "ProjectError",
        }, out
    assert out["folder"] == ["s.prproj", "s.prproj-wal"], out


def test_a_read_only_project_file_is_not_opened_for_writing(share):
    """(It used to open "for writing", and every save then failed.)"""
    path, unit = _shared_study(share)
    out = _probe_read_only(path, unit, folder_writable=True)
    assert out["write"] == {
        "refused": "s.prproj is read-only for you (you may not write s.prproj): open it "
        "read-only, or copy it to a folder of yours.",
        "error": "ProjectNotWritableError",
    }, out
    assert out["read_only"] == {"opened": "read-only", "empathy": "Kept."}, out
    assert "s.prproj.lock" not in out["folder"], out  # refused before the lock was taken


def test_a_lock_file_another_person_left_is_explained_and_read_only_offered(share):
    """Another person's program was killed with the project open: their lock file (private to
    them) stays. The next person is told, not shown "Permission denied", and may read."""
    path, unit = _shared_study(share)
    lock = path.with_name("s.prproj.lock")
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert holder.stdout.readline().strip() == "open"
    holder.kill()
    holder.wait(timeout=30)
    assert lock.exists() and stat.S_IMODE(lock.stat().st_mode) == 0o600
    out = _probe_read_only(path, unit, folder_writable=True, file_mode=0o666)
    assert out["write"] == {
        "refused": "s.prproj cannot be locked for writing: s.prproj.lock belongs to another "
        "person (their PortalReview has it open, or stopped without closing it). Open it "
        "read-only, or ask them to open and close it.",
        "error": "ProjectNotWritableError",
    }, out
    assert out["read_only"] == {"opened": "read-only", "empathy": "Kept."}, out
