"""Submit (Ctrl+Enter) on a unit where nothing was entered stores nothing: it once stored an
empty draft, which then counted as begun. Found by an explorer (x_rank p18)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from ui_support import open_window, show_kind, stored_answer, wait_saved


def _submit(window) -> None:
    QTest.keyClick(window, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)


@pytest.mark.parametrize(
    ("kind", "missing"),
    [
        ("urgency", "choose which patient needs care first"),
        ("rank", "Response A, Response B not ranked yet"),
    ],
)
def test_submitting_an_untouched_unit_stores_nothing(qtbot, gui, prefs, kind, missing):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, kind)
    window.editors[kind].setFocus()
    _submit(window)
    assert stored_answer(gui.path, gui.ids.units[kind], "ava") is None
    message = window.statusBar().currentMessage()
    assert message.startswith("Not submitted, nothing saved:")
    assert missing in message


def test_a_touched_unit_keeps_its_draft_and_time_on_submit(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "rank")
    editor = window.editors["rank"]
    editor.setFocus()
    window.session.clock.seconds = 30.0  # time spent reading before the first key
    QTest.keyClick(editor, Qt.Key.Key_1)
    _submit(window)
    stored = stored_answer(gui.path, gui.ids.units["rank"], "ava")
    assert stored.status == "draft"
    assert stored.active_seconds >= 30.0
    assert window.statusBar().currentMessage().startswith("Saved as a draft, not submitted:")


def test_a_complete_answer_already_saved_still_submits(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "rank")
    editor = window.editors["rank"]
    editor.setFocus()
    for key in (Qt.Key.Key_1, Qt.Key.Key_Y, Qt.Key.Key_Down, Qt.Key.Key_2, Qt.Key.Key_Y):
        QTest.keyClick(editor, key)
    wait_saved(qtbot, window)  # stored as a draft: nothing is pending when it is submitted
    _submit(window)
    assert stored_answer(gui.path, gui.ids.units["rank"], "ava").status == "submitted"
