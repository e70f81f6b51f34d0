"""Enter on a focused button presses that button, and Enter on a drop-down or a line does nothing
more: it reached the editor's own Enter ("match the selection" in Match, "add the selection as
evidence" in EPPC), so Enter on NO MATCH saved the draft's selection as a match."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QTextCursor
from ui_support import open_window, show_kind


def _select_first_draft_sentence(editor) -> None:
    sentence = editor.draft.sentences[0]
    cursor = editor.draft_view.textCursor()
    cursor.setPosition(sentence.start)
    cursor.setPosition(sentence.end, QTextCursor.MoveMode.KeepAnchor)
    editor.draft_view.setTextCursor(cursor)


def test_enter_on_no_match_marks_no_match(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "match")
    editor = window.editors["match"]
    first = editor.current
    _select_first_draft_sentence(editor)
    editor.no_match_button.setFocus()
    qtbot.keyClick(editor.no_match_button, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: first in editor.state["decisions"])
    assert editor.state["decisions"][first] == []  # NO MATCH, not the selection


def test_enter_on_a_theme_drop_down_matches_nothing(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "match")
    editor = window.editors["match"]
    _select_first_draft_sentence(editor)
    box = next(iter(editor.ref_table.theme_boxes.values()))
    box.setFocus()
    qtbot.keyClick(box, Qt.Key.Key_Down)  # a theme chosen with the arrows...
    qtbot.keyClick(box, Qt.Key.Key_Return)  # ...and confirmed
    assert editor.state["decisions"] == {}


def test_enter_on_an_eppc_button_adds_no_evidence(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "eppc")
    editor = window.editors["eppc"]
    qtbot.keyClick(editor.codes_list, Qt.Key.Key_1)  # a code, now current
    cursor = editor.sentence_view.textCursor()
    cursor.setPosition(0)
    cursor.setPosition(len(editor.sentence_view.toPlainText()), QTextCursor.MoveMode.KeepAnchor)
    editor.sentence_view.setTextCursor(cursor)
    evidence = editor.evidence_list.count()
    editor.message_toggle.setFocus()
    qtbot.keyClick(editor.message_toggle, Qt.Key.Key_Return)
    qtbot.waitUntil(editor.message_toggle.isChecked)  # the button was pressed
    assert editor.evidence_list.count() == evidence
    editor.comment.setFocus()  # Enter in the comment line: nothing either
    qtbot.keyClick(editor.comment, Qt.Key.Key_Enter)
    assert editor.evidence_list.count() == evidence

