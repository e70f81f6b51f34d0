"""How much one Ctrl+Z takes back of what a clinician typed: about a word, or a paste, as in a
word processor; never a whole paragraph typed in pauses, which was then autosaved as gone."""

from __future__ import annotations

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
