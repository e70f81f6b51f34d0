"""Screenshots of the desktop app on the demo study, for the README and docs/.

    QT_QPA_PLATFORM=offscreen .venv/bin/python docs/screenshots/take_screenshots.py

Builds the demo study in a temporary folder, signs in as the clinician who still has work to
do, and saves one PNG per screen next to this script. Look at every image after running it.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QSettings, Qt, QTimer
from PySide6.QtGui import QTextCursor
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from portalreview.demo import build_demo
from portalreview.tasks.common.editor_base import TextBox
from portalreview.ui.app import application
from portalreview.ui.main_window import MainWindow, apply_color_scheme
from portalreview.ui.settings import Preferences
from portalreview.ui.sign_in import SignInDialog

HERE = Path(__file__).resolve().parent
WHO = "np_chloe"


def settle(ms: int = 150) -> None:
    QTest.qWait(ms)


def open_demo(path: Path, prefs: Preferences) -> MainWindow:
    window = MainWindow(prefs)
    window.resize(1440, 900)
    window.show()
    window.open_project(path, annotator=WHO)
    while window.session is None:
        QTest.qWait(20)
    settle()
    return window


def show(window: MainWindow, kind: str, number: int | None = None) -> None:
    window.kind_tabs.setCurrentIndex(window.kinds.index(kind))
    if number is not None:
        window.queue.jump_to_number(number)
    settle()


def save(widget, name: str) -> None:
    settle()
    widget.grab().save(str(HERE / name))
    print("saved", name)


def respond_screens(window: MainWindow) -> None:
    show(window, "respond")
    editor = window.editors["respond"]
    typing = {
        "empathy": "I'm sorry the cough keeps waking you up - that is exhausting.",
        "symptom_questions": "Do you notice heartburn or a sour taste when it happens?",
        "planning": "Try raising the head of your bed and avoid eating 3 hours before bed.",
        "logistics": "I'll have the front desk offer you a visit next week.",
    }
    for box_id, text in typing.items():
        QTest.keyClicks(editor.findChild(TextBox, f"box_{box_id}"), text)
    save(window, "respond-theme-guided.png")
    edit_units = [
        i
        for i, item in enumerate(window.queue.all_items, start=1)
        if window.session.service.read_unit(item.unit_id).responses
    ]
    if edit_units:
        window.queue.jump_to_number(edit_units[-1])
        save(window, "respond-edit-draft.png")


def rank_screen(window: MainWindow) -> None:
    show(window, "rank")
    editor = window.editors["rank"]
    editor.setFocus()
    for key in (
        Qt.Key.Key_2,
        Qt.Key.Key_Y,
        Qt.Key.Key_Down,
        Qt.Key.Key_1,
        Qt.Key.Key_Y,
        Qt.Key.Key_Down,
        Qt.Key.Key_2,
        Qt.Key.Key_N,
    ):
        QTest.keyClick(editor, key)
    QTest.keyClick(editor, Qt.Key.Key_1, Qt.KeyboardModifier.AltModifier)
    save(window, "rank.png")


def match_screen(window: MainWindow) -> None:
    show(window, "match")
    editor = window.editors["match"]
    first = editor.draft.sentences[1]
    cursor = editor.draft_view.textCursor()
    cursor.setPosition(first.start)
    cursor.setPosition(first.end, QTextCursor.MoveMode.KeepAnchor)
    editor.draft_view.setTextCursor(cursor)
    editor.match_selection()
    editor.mark_no_match()
    save(window, "match.png")


def sign_in_screen(path: Path, prefs: Preferences) -> None:
    from portalreview.store.project import Project
    from portalreview.store.service import StudyService

    with Project.open(path, read_only=True) as project:
        people = [a for a in StudyService(project).annotators() if not a.is_model]
    dialog = SignInDialog("PortalReview demo study (synthetic)", people, WHO)
    dialog.show()
    save(dialog, "sign-in.png")
    dialog.close()


def main() -> None:
    application()
    folder = Path(tempfile.mkdtemp(prefix="screens_"))
    prefs = Preferences(QSettings(str(folder / "s.ini"), QSettings.Format.IniFormat))
    path = build_demo(folder / "demo.prproj")
    sign_in_screen(path, prefs)
    window = open_demo(path, prefs)
    respond_screens(window)
    rank_screen(window)
    match_screen(window)
    window.close()
    apply_color_scheme("dark")
    dark = open_demo(path, prefs)
    show(dark, "match")
    save(dark, "match-dark.png")
    dark.close()
    QTimer.singleShot(0, QApplication.instance().quit)


if __name__ == "__main__":
    sys.exit(main())
