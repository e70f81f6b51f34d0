"""Match content: a submission refused names the sentences still without a decision or a
theme, by their numbers in their lists (found by an explorer: "2 sentence(s) have no theme
label yet" left the clinician to search both tables, the draft's mostly off screen)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from ui_support import open_window, show_kind, stored_answer, wait_saved

from portalreview.tasks.match.editor import _numbers


def test_sentence_numbers_read_as_a_list():
    assert _numbers([4]) == "4"
    assert _numbers([4, 12]) == "4 and 12"
    assert _numbers([1, 4, 12]) == "1, 4 and 12"
    assert _numbers(list(range(1, 12))) == "1, 2, 3, 4, 5, 6, 7, 8 and 3 more"


def test_a_refused_submission_names_the_sentences_left(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "match")
    editor = window.editors["match"]
    qtbot.keyClick(editor.draft_view, Qt.Key.Key_X)  # reference sentence 1: NO MATCH
    wait_saved(qtbot, window)
    window.act_submit.trigger()
    message = window.statusBar().currentMessage()
    assert "no match decision yet (M or X) for reference sentence 2 and 3" in message
    for _sentence in (2, 3):
        qtbot.keyClick(editor.draft_view, Qt.Key.Key_X)
    editor.ref_table.setCurrentCell(0, 1)
    qtbot.keyClick(editor.ref_table, Qt.Key.Key_1)  # reference sentence 1 only has a theme
    editor.draft_table.setCurrentCell(0, 1)
    qtbot.keyClick(editor.draft_table, Qt.Key.Key_4)  # and draft sentence 1
    wait_saved(qtbot, window)
    window.act_submit.trigger()
    message = window.statusBar().currentMessage()
    assert "no theme yet (a number key in its list) for reference sentence 2 and 3" in message
    assert "and draft sentence 2" in message  # (1 has its theme)
    unit = window.session.unit.unit_id
    assert stored_answer(gui.path, unit, "ava").status == "draft"
    window.close()
