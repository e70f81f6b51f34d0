"""How much one Ctrl+Z takes back of what a clinician typed: about a word, or a paste, as in a
word processor; never a whole paragraph typed in pauses, which was then autosaved as gone. And
typing in a one-line box (a comment, a new fact) is on the editor's undo history, so Ctrl+Z
there does what Edit > Undo does."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from ui_support import open_window, show_kind, stored_answer, wait_saved

from portalreview.tasks.common.editor_base import TextBox

CTRL = Qt.KeyboardModifier.ControlModifier
CTRL_SHIFT = Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier


def reply_box(qtbot, gui, prefs, box_id: str = "empathy"):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "respond")
    window.queue.jump_to_number(1)
    box = window.editors["respond"].findChild(TextBox, f"box_{box_id}")
    box.setFocus()
    return window, box


def test_one_ctrl_z_takes_back_the_last_word_not_the_paragraph(qtbot, gui, prefs):
    window, box = reply_box(qtbot, gui, prefs)
    for sentence in ("Your potassium is 5.9. ", "Please go to the ED today. ", "Stop it"):
        qtbot.keyClicks(box, sentence)
    qtbot.keyClick(box, Qt.Key.Key_Z, CTRL)
    kept = "Your potassium is 5.9. Please go to the ED today. Stop "
    assert box.toPlainText() == kept
    wait_saved(qtbot, window)
    parts = stored_answer(gui.path, gui.ids.units["respond"], "ava").payload["parts"]
    assert parts["empathy"] == kept
    qtbot.keyClick(box, Qt.Key.Key_Z, CTRL)
    assert box.toPlainText() == "Your potassium is 5.9. Please go to the ED today. "
    window.act_undo.trigger()
    assert box.toPlainText() == "Your potassium is 5.9. Please go to the ED "
    qtbot.keyClick(box, Qt.Key.Key_Z, CTRL_SHIFT)
    window.act_redo.trigger()
    qtbot.keyClick(box, Qt.Key.Key_Y, CTRL)
    assert box.toPlainText() == kept + "it"


def test_a_paste_is_a_step_of_its_own(qtbot, gui, prefs):
    """Typing, a paste, typing: the paste goes with neither (one Ctrl+Z took the paste and
    all that was typed after it)."""
    window, box = reply_box(qtbot, gui, prefs)
    qtbot.keyClicks(box, "I typed this. ")
    QGuiApplication.clipboard().setText("Pasted guideline text.\nSee section 4.")
    qtbot.keyClick(box, Qt.Key.Key_V, CTRL)
    qtbot.keyClicks(box, " More")
    pasted = "I typed this. Pasted guideline text.\nSee section 4."
    assert box.toPlainText() == pasted + " More"
    qtbot.keyClick(box, Qt.Key.Key_Z, CTRL)
    assert box.toPlainText() == pasted
    qtbot.keyClick(box, Qt.Key.Key_Z, CTRL)
    assert box.toPlainText() == "I typed this. "
    qtbot.keyClick(box, Qt.Key.Key_Z, CTRL)
    assert box.toPlainText() == "I typed "
    window.act_redo.trigger()
    window.act_redo.trigger()
    assert box.toPlainText() == pasted
    wait_saved(qtbot, window)
    parts = stored_answer(gui.path, gui.ids.units["respond"], "ava").payload["parts"]
    assert parts["empathy"] == pasted


def comment_box(qtbot, gui, prefs, kind: str):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, kind)
    assert window.queue.select_unit(gui.ids.units[kind])
    editor = window.editors[kind]
    return window, editor, editor.comment


def test_ctrl_z_in_the_comment_box_undoes_the_choice_as_edit_undo_does(qtbot, gui, prefs):
    """A rank given, then the comment box clicked: Ctrl+Z there did nothing (the line edit
    took the key) while Edit > Undo read "Undo rank Response A"."""
    window, editor, comment = comment_box(qtbot, gui, prefs, "rank")
    editor.setFocus()
    qtbot.keyClick(editor, Qt.Key.Key_1)
    first = editor.order[0]
    assert editor.state["ranks"][first] == 1
    comment.setFocus()
    qtbot.keyClick(comment, Qt.Key.Key_Z, CTRL)
    assert editor.state["ranks"][first] is None
    qtbot.keyClick(comment, Qt.Key.Key_Z, CTRL_SHIFT)
    assert editor.state["ranks"][first] == 1
    qtbot.keyClicks(comment, "see B")
    window.act_undo.trigger()  # the comment's last word, not the rank given before it
    assert (comment.text(), editor.state["ranks"][first]) == ("see ", 1)
    qtbot.keyClick(comment, Qt.Key.Key_Z, CTRL)
    qtbot.keyClick(comment, Qt.Key.Key_Z, CTRL)
    assert (comment.text(), editor.state["ranks"][first]) == ("", None)


@pytest.mark.parametrize("kind", ["rank", "urgency", "empathy", "eppc", "facts"])
def test_typing_in_a_comment_is_undone_and_redone_a_word_at_a_time(qtbot, gui, prefs, kind):
    window, _editor, comment = comment_box(qtbot, gui, prefs, kind)
    comment.setFocus()
    qtbot.keyClicks(comment, "see B, unsafe")
    qtbot.keyClick(comment, Qt.Key.Key_Z, CTRL)
    assert comment.text() == "see B, "
    assert window.act_undo.text().replace("&", "") == "Undo typing in the comment"
    window.act_undo.trigger()
    assert comment.text() == "see "
    qtbot.keyClick(comment, Qt.Key.Key_Y, CTRL)
    assert comment.text() == "see B, "
    wait_saved(qtbot, window)
    assert stored_answer(gui.path, gui.ids.units[kind], "ava").comment == "see B, "
    window.act_redo.trigger()
    assert comment.text() == "see B, unsafe"
    assert not window.act_redo.isEnabled()


def test_a_new_fact_typed_is_undone_by_the_word_then_added_as_one_step(qtbot, gui, prefs):
    window, editor, _comment = comment_box(qtbot, gui, prefs, "facts")
    entry = editor.sides["original"].entry
    entry.setFocus()
    qtbot.keyClicks(entry, "Go to the ER")
    qtbot.keyClick(entry, Qt.Key.Key_Z, CTRL)
    assert entry.text() == "Go to the "
    qtbot.keyClicks(entry, "ED")
    qtbot.keyClick(entry, Qt.Key.Key_Return)
    assert [f["text"] for f in editor.state["original"]] == ["Go to the ED"]
    qtbot.keyClick(entry, Qt.Key.Key_Z, CTRL)  # the fact added, as one step
    assert (editor.state["original"], entry.text()) == ([], "")
    assert not window.act_undo.isEnabled()
