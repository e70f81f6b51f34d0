"""Time on task as the session stores it (README: active time; a gap of more than a minute
without input counts as a minute), with the session's clock under the test's control."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from ui_support import (
    make_gui_study,
    open_window,
    preferences,
    show_kind,
    stored_answer,
    wait_saved,
)

from portalreview.store.project import Project
from portalreview.store.service import StudyService
from portalreview.ui import adjudication


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _opened(qtbot, tmp_path, who: str = "ava", kind: str = "rank"):
    gui = make_gui_study(tmp_path)
    if who == "pat":
        with Project.open(gui.path) as project:
            StudyService(project).assign(gui.ids.units["rank"], gui.ids.pi)
    window = open_window(qtbot, preferences(tmp_path), gui.path, who)
    clock = FakeClock()
    window.session.clock._clock = clock
    show_kind(window, kind)
    window.session.clock.start()  # the unit opened at 1000 s
    return gui, window, clock


def test_autosaves_lose_no_time_between_inputs(qtbot, tmp_path):
    """A key every 15 s for 90 s, saved after each: 90 s. Every autosave used to restart the
    clock, dropping the gap to the next key (15 s was stored), and the time from opening the
    unit to the first key was never counted."""
    gui, window, clock = _opened(qtbot, tmp_path)
    editor = window.editors["rank"]
    editor.setFocus()
    keys = [Qt.Key.Key_1, Qt.Key.Key_Y, Qt.Key.Key_Down, Qt.Key.Key_2, Qt.Key.Key_Y]
    for step, key in enumerate(keys, start=1):
        clock.now = 1000.0 + 15 * step
        QTest.keyClick(editor, key)
        wait_saved(qtbot, window)
    clock.now = 1090.0
    QTest.keyClick(window, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)  # submit
    wait_saved(qtbot, window)
    stored = stored_answer(gui.path, gui.ids.units["rank"], "ava")
    assert stored.status == "submitted"
    assert stored.active_seconds == 90.0


def test_a_long_absence_counts_one_minute(qtbot, tmp_path):
    gui, window, clock = _opened(qtbot, tmp_path)
    editor = window.editors["rank"]
    editor.setFocus()
    clock.now = 1005.0
    QTest.keyClick(editor, Qt.Key.Key_1)
    clock.now = 1605.0  # ten minutes away
    QTest.keyClick(editor, Qt.Key.Key_Y)
    wait_saved(qtbot, window)
    window.session.leave()
    stored = stored_answer(gui.path, gui.ids.units["rank"], "ava")
    assert stored.active_seconds == 5.0 + 60.0


def test_work_in_a_tool_window_is_not_time_on_the_open_unit(qtbot, tmp_path):
    """The PI adjudicates for ten minutes beside their own open unit: that unit's time stays
    its own (input anywhere in the program used to count)."""
    gui, window, clock = _opened(qtbot, tmp_path, who="pat")
    editor = window.editors["rank"]
    editor.setFocus()
    clock.now = 1005.0
    QTest.keyClick(editor, Qt.Key.Key_1)
    wait_saved(qtbot, window)
    dialog = adjudication.open_tool(window)
    for minute in range(1, 11):
        clock.now = 1005.0 + 60 * minute
        QTest.keyClicks(dialog.note, "x")
    dialog.close()
    window.session.leave()
    stored = stored_answer(gui.path, gui.ids.units["rank"], "pat")
    assert stored.active_seconds == 5.0
