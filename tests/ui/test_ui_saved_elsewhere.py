"""The same person signed in at two workstations of a team study: a unit left open at one
while the other saved it is not saved over; the window says so and lets her choose which
answer stays (``SavedElsewhere``, the banner's two buttons)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox
from ui_support import open_window, show_kind, stored_answer, wait_saved

from portalreview.store.service import StudyService
from portalreview.tasks.common.editor_base import TextBox

THERE = {"mode": "theme_guided", "parts": {"empathy": "Written at the other desk."}}


@pytest.fixture
def warned(monkeypatch) -> list[str]:
    shown: list[str] = []
    monkeypatch.setattr(
        QMessageBox, "warning", staticmethod(lambda *args, **_kw: shown.append(args[2]))
    )
    return shown


def _saved_here(qtbot, window, text: str = "Here.") -> tuple[int, TextBox]:
    """``text`` typed in the first respond unit at this desk, and saved."""
    show_kind(window, "respond")
    window.queue.jump_to_number(1)
    box = window.editors["respond"].findChild(TextBox, "box_empathy")
    qtbot.keyClicks(box, text)
    wait_saved(qtbot, window)
    return window.session.unit.unit_id, box


def _left_open_while_saved_elsewhere(qtbot, window) -> tuple[int, TextBox]:
    """'Here.' saved at this desk; then the other desk submits THERE; then she types on here."""
    unit, box = _saved_here(qtbot, window)
    other_desk = StudyService(window.project).as_viewer("ava")
    other_desk.save_answer(unit, THERE, status="submitted")
    qtbot.keyClicks(box, " Typed later here.")
    window.save_now()
    return unit, box


def test_an_answer_saved_elsewhere_is_not_saved_over(qtbot, gui, prefs, warned):
    window = open_window(qtbot, prefs, gui.path, "ava")
    unit, box = _left_open_while_saved_elsewhere(qtbot, window)
    stored = stored_answer(gui.path, unit, "ava")
    assert stored.status == "submitted" and stored.payload["parts"] == THERE["parts"]
    bar = window.save_problem
    assert window.save_label.text() == "⚠ Not saved" and bar.isVisible()
    assert "saved from another computer" in bar.text()
    assert bar.keep_button.isVisible() and bar.take_button.isVisible()
    window.act_next.trigger()  # leaving would drop one of the two: refused until she chooses
    assert window.session.unit.unit_id == unit and warned
    assert box.toPlainText() == "Here. Typed later here."


def test_showing_the_answer_saved_there_drops_this_one(qtbot, gui, prefs, warned):
    window = open_window(qtbot, prefs, gui.path, "ava")
    unit, box = _left_open_while_saved_elsewhere(qtbot, window)
    qtbot.mouseClick(window.save_problem.take_button, Qt.MouseButton.LeftButton)
    assert box.toPlainText() == "Written at the other desk."
    assert not window.session.pending and not window.save_problem.isVisible()
    assert window.unit_label.text().startswith("done")
    stored = stored_answer(gui.path, unit, "ava")
    assert stored.status == "submitted" and stored.payload["parts"] == THERE["parts"]
    qtbot.keyClicks(box, " And on.")  # saving goes on from the answer shown
    wait_saved(qtbot, window)
    saved = stored_answer(gui.path, unit, "ava").payload["parts"]["empathy"]
    assert saved.replace(" And on.", "") == "Written at the other desk."


def test_keeping_what_is_here_saves_it_over_the_other(qtbot, gui, prefs, warned):
    window = open_window(qtbot, prefs, gui.path, "ava")
    unit, box = _left_open_while_saved_elsewhere(qtbot, window)
    qtbot.mouseClick(window.save_problem.keep_button, Qt.MouseButton.LeftButton)
    assert not window.session.pending and not window.save_problem.isVisible()
    stored = stored_answer(gui.path, unit, "ava")
    assert stored.payload["parts"]["empathy"] == "Here. Typed later here."
    assert window.session.unsaved.kept() == []  # nothing left kept on this computer
    qtbot.keyClicks(box, " More.")
    wait_saved(qtbot, window)


def test_a_submission_stopped_by_it_is_made_when_she_keeps_hers(qtbot, gui, prefs, warned):
    window = open_window(qtbot, prefs, gui.path, "ava")
    unit, _box = _saved_here(qtbot, window, "Mine, finished.")
    StudyService(window.project).as_viewer("ava").save_answer(unit, THERE)
    window.submit()
    assert window.save_problem.keep_button.isVisible()
    window.save_problem.keep_button.click()
    stored = stored_answer(gui.path, unit, "ava")
    assert stored.status == "submitted" and stored.payload["parts"]["empathy"] == "Mine, finished."


def test_the_choice_is_made_from_the_keyboard(qtbot, gui, prefs, warned):
    """Alt+W shows the answer saved there (it was Alt+H, which the Help menu also has: the
    first press only moved the focus, the second opened Help); Alt+K keeps this one."""
    window = open_window(qtbot, prefs, gui.path, "ava")
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow)
    _unit, box = _left_open_while_saved_elsewhere(qtbot, window)
    qtbot.keyClick(box, Qt.Key.Key_W, Qt.KeyboardModifier.AltModifier)
    assert box.toPlainText() == "Written at the other desk." and not window.session.pending


def test_time_spent_at_the_other_desk_is_not_saved_over(qtbot, gui, prefs, warned):
    """Desk B re-read the unit for 300 s and left it unchanged (a time-only save: no choice to
    make); desk A's next save sent its own old total and put 0.7 s over the 300."""
    window = open_window(qtbot, prefs, gui.path, "ava")
    unit, box = _saved_here(qtbot, window)
    other_desk = StudyService(window.project).as_viewer("ava")
    payload = other_desk.get_answer(unit).payload
    other_desk.save_answer(unit, payload, add_seconds=300.0)
    qtbot.keyClicks(box, " More.")
    wait_saved(qtbot, window)
    assert not window.save_problem.isVisible()
    assert stored_answer(gui.path, unit, "ava").active_seconds >= 300.0


def test_closing_with_the_choice_open_says_a_newer_answer_exists(qtbot, gui, prefs, warned):
    window = open_window(qtbot, prefs, gui.path, "ava")
    _left_open_while_saved_elsewhere(qtbot, window)
    assert not window.close()  # the stand-in answers None: not Close, so the window stays
    assert "saved from another computer since you opened it here" in warned[-1]
    assert "see above the editor" in warned[-1] and "status bar" not in warned[-1]
    window.session.take_theirs()
