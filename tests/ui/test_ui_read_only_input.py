"""A read-only view keeps nothing, so it shows no change and says so: the PI looking at a
clinician's work ("Work of ...") and a clinician in a study opened read-only (as the app offers
when someone else holds the file). Before, every editor took typing and keys, the answer on
screen changed, Ctrl+Enter did nothing without a word, and the next unit dropped it all (found
by exploratory testing on the demo)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication
from ui_support import open_window, preferences, show_kind

from portalreview.tasks.registry import EDITORS
from portalreview.ui.main_window import MainWindow

CTRL = Qt.KeyboardModifier.ControlModifier


def answers_in(path: Path) -> list[tuple]:
    """Every answer row the file holds, every column."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return db.execute("SELECT * FROM answers ORDER BY id").fetchall()


def try_to_change_every_kind(qtbot, window: MainWindow) -> None:
    """Type into the reply, press each kind's answer keys and Ctrl+Enter, in every kind; the
    answer on screen never changes and the status bar says why."""
    for kind in EDITORS:
        if kind not in window.kinds:
            continue
        show_kind(window, kind)
        editor = window.editors[kind]
        before = editor.payload()
        window.statusBar().clearMessage()
        qtbot.wait(50)
        assert window.statusBar().currentMessage() == "", kind  # nothing refused unasked
        editor.focus_first()
        target = QApplication.focusWidget() or editor
        qtbot.keyClicks(target, "Please come in today.")
        for key in (Qt.Key.Key_1, Qt.Key.Key_Y, Qt.Key.Key_X, Qt.Key.Key_2):
            qtbot.keyClick(QApplication.focusWidget() or editor, key)
        qtbot.waitUntil(lambda e=editor, b=before: e.payload() == b, timeout=2000)
        assert "Read-only" in window.statusBar().currentMessage(), kind
        window.statusBar().clearMessage()
        qtbot.keyClick(QApplication.focusWidget() or editor, Qt.Key.Key_Return, CTRL)
        assert "nothing typed or chosen here is kept" in window.statusBar().currentMessage()
        assert editor.payload() == before, kind


def test_the_pi_looking_at_a_clinicians_work_changes_nothing_and_is_told(
    qtbot, demo_copy, tmp_path
):
    stored = answers_in(demo_copy)
    window = open_window(qtbot, preferences(tmp_path), demo_copy, "dr_pi")
    box = window.work_of_box
    box.setCurrentIndex(next(i for i in range(box.count()) if "Chloe" in box.itemText(i)))
    assert window.session.read_only
    try_to_change_every_kind(qtbot, window)
    assert "the work of Chloe" in window.session.read_only_notice()
    window.close()
    assert answers_in(demo_copy) == stored


def test_a_study_opened_read_only_changes_nothing_and_is_told(qtbot, demo_copy, tmp_path):
    stored = answers_in(demo_copy)
    window = MainWindow(preferences(tmp_path))
    qtbot.addWidget(window)
    window.show()
    window.open_project(demo_copy, annotator="np_chloe", read_only=True)
    qtbot.waitUntil(lambda: window.session is not None, timeout=20000)
    try_to_change_every_kind(qtbot, window)
    assert "opened read-only" in window.session.read_only_notice()
    window.close()
    assert answers_in(demo_copy) == stored
