"""Helpers for the GUI tests: a small study on disk, and a window signed in to it."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from PySide6 import QtGui
from PySide6.QtCore import QPoint, QSettings, Qt, QTimer
from PySide6.QtGui import QTextCursor, QTextDocument
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QDialogButtonBox, QLabel

from portalreview.store.project import Project
from portalreview.store.service import StudyService
from portalreview.ui.main_window import MainWindow
from portalreview.ui.settings import Preferences
from tests.conftest import SmallStudy, build_small_study


@dataclass
class GuiStudy:
    path: Path
    ids: SmallStudy
    edit_unit: int
    rank_units: list[int]


def make_gui_study(folder: Path, extra_rank_units: int = 0) -> GuiStudy:
    """The conftest small study, plus an edit-a-draft unit (and optionally rank units of five
    drafts each), written to a closed project file the app can open."""
    path = folder / "gui.prproj"
    project = Project.create(path, name="GUI test study")
    try:
        ids = build_small_study(project)
        svc = StudyService(project)
        edit_set = svc.create_unit_set("edit set", "respond")
        edit_unit = svc.add_unit(edit_set, ids.case1, response_id=ids.draft1)
        for person in (ids.ava, ids.ben):
            svc.assign(edit_unit, person)
        rank_units = []
        if extra_rank_units:
            rank_set = svc.create_unit_set("five drafts", "rank")
            for i in range(extra_rank_units):
                drafts = [
                    svc.add_response(
                        ids.case2,
                        f"x{i}-{j}",
                        f"Draft {j} of set {i}.",
                        author_kind="model",
                        author=f"m{j}",
                        source=f"m{j}",
                    )
                    for j in range(5)
                ]
                unit = svc.add_unit(rank_set, ids.case2, members=drafts)
                for person in (ids.ava, ids.ben):
                    svc.assign(unit, person)
                rank_units.append(unit)
    finally:
        project.close()
    return GuiStudy(path, ids, edit_unit, rank_units)


def preferences(folder: Path) -> Preferences:
    return Preferences(QSettings(str(folder / "settings.ini"), QSettings.Format.IniFormat))


def open_window(qtbot, prefs: Preferences, path: Path, who: str | None) -> MainWindow:
    """A main window that opened ``path`` and signed in as ``who`` (None: through the
    sign-in dialog, which the caller must answer)."""
    window = MainWindow(prefs)
    qtbot.addWidget(window)
    window.show()
    window.open_project(path, annotator=who)
    qtbot.waitUntil(lambda: window.session is not None, timeout=20000)
    return window


def answer_sign_in_dialog(qtbot, name: str) -> None:
    """Pick ``name`` in the sign-in dialog when it appears, and click Sign in."""

    def pick() -> None:
        dialog = QApplication.activeModalWidget()
        if dialog is None or (dialog.objectName() == "" and not hasattr(dialog, "chosen")):
            QTimer.singleShot(50, pick)
            return
        for row in range(dialog.list.count()):
            if dialog.list.item(row).data(Qt.ItemDataRole.UserRole) == name:
                dialog.list.setCurrentRow(row)
        ok = dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok)
        qtbot.mouseClick(ok, Qt.MouseButton.LeftButton)

    QTimer.singleShot(50, pick)


def stored_answer(path: Path, unit_id: int, annotator: str):
    """The answer as the project file holds it (read by a separate, read-only connection)."""
    with Project.open(path, read_only=True) as project:
        svc = StudyService(project).as_viewer(annotator)
        return svc.get_answer(unit_id)


def show_kind(window: MainWindow, kind: str) -> None:
    """Switch the window to a kind's tab, as a click on it does."""
    window.kind_tabs.setCurrentIndex(window.kinds.index(kind))
    assert window.kind == kind


def shown_text(label: QLabel) -> str:
    """A label's text as it shows it: rich text (so set, or judged so by Qt) read as plain."""
    text = label.text()
    rich = label.textFormat() == Qt.TextFormat.RichText or (
        label.textFormat() == Qt.TextFormat.AutoText and QtGui.Qt.mightBeRichText(text)
    )
    if not rich:
        return text
    document = QTextDocument()
    document.setHtml(text)
    return document.toPlainText()


def wait_saved(qtbot, window: MainWindow) -> None:
    qtbot.waitUntil(lambda: not window.session.pending, timeout=5000)


def drag_select(view, start: int, end: int) -> None:
    """Drag the mouse over the document positions ``start`` to ``end`` of a text view (Qt's
    own positions: an emoji counts two)."""

    def point(position: int) -> QPoint:
        cursor = QTextCursor(view.document())
        cursor.setPosition(position)
        rect = view.cursorRect(cursor)
        return QPoint(rect.left() + 1, rect.center().y())

    viewport = view.viewport()
    QTest.mousePress(
        viewport, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, point(start)
    )
    QTest.mouseMove(viewport, point(end))
    QTest.mouseRelease(
        viewport, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, point(end)
    )


@contextlib.contextmanager
def held_off_gui_thread(
    monkeypatch, owner: object, name: str
) -> Iterator[tuple[threading.Event, list[threading.Thread]]]:
    """``owner.name`` held back, when called off the GUI thread, until the event is set (20 s
    at most); yields the event and the threads it was called on. For checking that a window
    reads in the background and says so meanwhile."""
    release = threading.Event()
    threads: list[threading.Thread] = []
    original = getattr(owner, name)

    def held(*args, **kwargs):
        threads.append(threading.current_thread())
        if threading.current_thread() is not threading.main_thread():
            release.wait(20)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, held)
    try:
        yield release, threads
    finally:
        release.set()


def shortcuts_shown(window: MainWindow) -> str:
    """Press F1 (the Help menu's action) and return the text of the shortcut list it opens,
    then close the list."""
    from portalreview.ui.shortcuts_dialog import ShortcutsDialog

    window.act_shortcuts.trigger()
    dialog = window.findChild(ShortcutsDialog)
    text = dialog.text.toPlainText()
    dialog.close()
    return text
