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


def test_a_choice_the_levels_given_contradict_is_kept_as_a_draft(qtbot, gui, prefs):
    """Left patient level 3, right patient level 5, and the right one chosen to need care
    first: it was submitted with "Submitted." (found by an explorer). It is kept as a draft
    and the status bar says what contradicts; a level changed to agree, it is submitted."""
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "urgency")
    editor = window.editors["urgency"]
    editor.setFocus()
    for key in (Qt.Key.Key_L, Qt.Key.Key_3, Qt.Key.Key_R, Qt.Key.Key_5, Qt.Key.Key_Right):
        QTest.keyClick(editor, key)
    _submit(window)
    unit = gui.ids.units["urgency"]
    assert stored_answer(gui.path, unit, "ava").status == "draft"
    message = window.statusBar().currentMessage()
    assert message.startswith("Saved as a draft, not submitted:")
    assert "the right patient, chosen to need care first, has level 5, less urgent" in message
    for key in (Qt.Key.Key_R, Qt.Key.Key_2):
        QTest.keyClick(editor, key)
    _submit(window)
    answer = stored_answer(gui.path, unit, "ava")
    assert answer.status == "submitted" and answer.payload["more_urgent_case_id"] == (
        editor.case_ids[1]
    )
