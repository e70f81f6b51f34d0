"""What the app offers when a project cannot be opened as it is: the newest backup of a damaged
project (opened as a copy beside it, the damaged file kept as it was), read-only access to a
project the person cannot write to, and a warning when the automatic backup failed."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QMessageBox

from portalreview.store import project as project_module
from portalreview.store.project import Project, backup_dir, latest_backup
from portalreview.store.service import StudyService
from portalreview.ui import main_window, workers
from portalreview.ui.main_window import MainWindow

SHOTS = Path("/tmp/portalreview-ui-backups")
RESTORE = "Open the latest backup (as a copy)"
V1_FILE = Path(__file__).parents[1] / "store" / "data" / "v1-small.prproj"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def window(qtbot, prefs):
    win = MainWindow(prefs)
    qtbot.addWidget(win)
    win.show()
    return win


@pytest.fixture
def boxes(monkeypatch):
    """The static message boxes the window shows, recorded (and answered with ``answer``)."""
    shown: list[tuple[str, str]] = []
    answer = {"button": QMessageBox.StandardButton.Yes}

    def record(kind):
        def box(parent, title, text, *args, **kwargs):
            shown.append((kind, text))
            return answer["button"]

        return box

    for kind in ("critical", "question", "warning", "information"):
        monkeypatch.setattr(main_window.QMessageBox, kind, record(kind))
    return shown


def _damaged_with_a_backup(path: Path) -> Path:
    """Open the project once for work (the automatic backup), add a person after it, then
    cut the file short by one byte; returns the backup."""
    with Project.open(path) as project:
        backup = project.automatic_backup
        StudyService(project).add_annotator("late", "Added after the backup")
    assert backup is not None and latest_backup(path) == backup
    path.write_bytes(path.read_bytes()[:-1])
    return backup


def _answer_the_box(qtbot, button_text: str, shot: str, seen: list[QMessageBox]) -> None:
    """When the damaged-project box appears: save a picture of it, click ``button_text``."""

    def click() -> None:
        box = QApplication.activeModalWidget()
        if not isinstance(box, QMessageBox):
            QTimer.singleShot(50, click)
            return
        seen.append(box)
        SHOTS.mkdir(exist_ok=True)
        box.grab().save(str(SHOTS / shot))
        (button,) = [b for b in box.buttons() if b.text() == button_text]
        button.click()

    QTimer.singleShot(50, click)


def test_a_damaged_project_offers_its_newest_backup_as_a_copy(qtbot, window, gui):
    backup = _damaged_with_a_backup(gui.path)
    damaged, kept = _digest(gui.path), _digest(backup)
    seen: list[QMessageBox] = []
    _answer_the_box(qtbot, RESTORE, "damaged-offer.png", seen)
    window.open_project(gui.path, annotator="ava")
    qtbot.waitUntil(lambda: window.session is not None, timeout=20000)
    (box,) = seen
    assert box.text().startswith("Could not open gui.prproj:\ngui.prproj is damaged: it is ")
    assert f"Restore the latest backup from gui.backups/: {backup.name}." in box.text()
    assert backup.name in box.informativeText()
    # The copy is beside the damaged file, named after the backup's time; both files unchanged.
    stamp = backup.name.removeprefix("gui-000001-").removesuffix("-auto.prproj")
    copy = gui.path.with_name(f"gui-restored-{stamp}.prproj")
    assert window.project.path == copy and not window.project.read_only
    assert _digest(gui.path) == damaged and _digest(backup) == kept
    names = [a.name for a in window.admin.annotators()]
    assert "ava" in names and "late" not in names  # the backup's state
    assert copy.name in window.statusBar().currentMessage()
    window.grab().save(str(SHOTS / "restored-copy-open.png"))
    window.close_project()


def test_closing_the_offer_opens_nothing_and_copies_nothing(qtbot, window, gui):
    _damaged_with_a_backup(gui.path)
    before = sorted(p.name for p in gui.path.parent.iterdir())
    seen: list[QMessageBox] = []
    _answer_the_box(qtbot, "Close", "damaged-close.png", seen)
    window.open_project(gui.path, annotator="ava")
    qtbot.waitUntil(lambda: bool(seen), timeout=20000)
    qtbot.wait(300)  # time for a copy to start, were one started...
    qtbot.waitUntil(lambda: not workers._running, timeout=20000)  # ...and to end
    assert window.project is None
    assert sorted(p.name for p in gui.path.parent.iterdir()) == before


def test_a_damaged_project_without_backups_is_only_explained(qtbot, window, boxes, gui):
    gui.path.write_bytes(gui.path.read_bytes()[:-1])
    assert not backup_dir(gui.path).exists()
    window.open_project(gui.path, annotator="ava")
    qtbot.waitUntil(lambda: bool(boxes), timeout=20000)
    ((kind, text),) = boxes
    assert kind == "critical"
    assert text.endswith(
        "There is no backup of it in gui.backups/ beside it: restore your own backup."
    )
    assert window.project is None


def test_a_project_the_person_cannot_write_is_offered_read_only(
    qtbot, window, boxes, gui, monkeypatch
):
    """The permission itself is checked for real (as another user) in
    tests/reliability/test_reliability_files.py; here, what the app does with the refusal."""
    real = project_module._writable
    monkeypatch.setattr(
        project_module, "_writable", lambda p, folder=False: p != gui.path and real(p, folder)
    )
    window.open_project(gui.path, annotator="ava")
    qtbot.waitUntil(lambda: window.session is not None, timeout=20000)
    ((kind, text),) = boxes
    assert kind == "question"
    assert text == (
        "gui.prproj is read-only for you (you may not write gui.prproj): open it read-only, "
        "or copy it to a folder of yours.\n\nOpen it read-only to look at it?"
    )
    assert window.project.read_only and window.session.read_only
    # (whole in the tooltip; the line shows what fits of it, and "…")
    assert "you cannot write to this project file or its folder" in window.person_label.toolTip()
    SHOTS.mkdir(exist_ok=True)
    window.grab().save(str(SHOTS / "not-writable-read-only.png"))
    window.close_project()


def test_an_older_project_the_person_cannot_write_says_what_to_do(
    qtbot, window, boxes, tmp_path, monkeypatch
):
    """Not "open it read-only?" (then "open it once for writing"): the app reads an older
    format only once upgraded, which writes the file."""
    path = tmp_path / "old.prproj"
    shutil.copy(V1_FILE, path)
    real = project_module._writable
    monkeypatch.setattr(
        project_module, "_writable", lambda p, folder=False: p != path and real(p, folder)
    )
    window.open_project(path, annotator="ava")
    qtbot.waitUntil(lambda: bool(boxes), timeout=20000)
    ((kind, text),) = boxes
    assert kind == "critical"
    assert "older project format (1)" in text and "`portalreview upgrade old.prproj`" in text
    assert "open it read-only" not in text.lower()
    assert window.project is None


def test_a_failed_automatic_backup_is_told_but_the_project_opens(qtbot, window, boxes, gui):
    backup_dir(gui.path).write_text("a file where the backups folder should be")
    window.open_project(gui.path, annotator="ava")
    qtbot.waitUntil(lambda: bool(boxes), timeout=20000)
    ((kind, text),) = boxes
    assert kind == "warning"
    assert text.startswith("The automatic backup of gui.prproj into gui.backups/ failed (")
    assert window.session is not None and not window.project.read_only
    window.close_project()


def test_another_backup_can_be_chosen_and_a_damaged_one_is_refused(
    qtbot, window, gui, monkeypatch
):
    """Only the newest whole backup was offered: the state of an older one (before a mistake)
    could be had only by copying files by hand."""
    older = project_module.make_backup(gui.path, "manual")
    newest = _damaged_with_a_backup(gui.path)
    chosen = [str(newest), str(older)]  # first a damaged one, then the older, whole one
    newest.write_bytes(newest.read_bytes()[:-4096])
    monkeypatch.setattr(
        main_window.QFileDialog, "getOpenFileName", lambda *a, **k: (chosen.pop(0), "")
    )
    refused: list[str] = []
    monkeypatch.setattr(
        main_window.QMessageBox, "critical", lambda _p, _t, text, *a: refused.append(text)
    )
    seen: list[QMessageBox] = []
    _answer_the_box(qtbot, "Choose another backup…", "damaged-choose.png", seen)
    window.open_project(gui.path, annotator="ava")
    qtbot.waitUntil(lambda: bool(refused), timeout=20000)
    assert f"The backup {newest.name} is damaged" in refused[0]
    assert window.project is None and not list(gui.path.parent.glob("gui-restored-*"))
    _answer_the_box(qtbot, "Choose another backup…", "damaged-choose.png", seen)
    window.open_project(gui.path, annotator="ava")
    qtbot.waitUntil(lambda: window.session is not None, timeout=20000)
    assert window.project.path.name.startswith("gui-restored-")
    assert "late" not in [a.name for a in window.admin.annotators()]
    assert older.name in window.statusBar().currentMessage()
    window.close_project()
