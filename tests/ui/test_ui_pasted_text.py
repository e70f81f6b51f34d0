"""Text pasted into the boxes where clinicians write leaves out the control characters that come
with text copied from a PDF (a NUL above all): invisible, and a NUL cannot be stored on a study
server, where every save of the answer failed until she found a character she could not see."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QMimeData, Qt
from PySide6.QtWidgets import QApplication, QLineEdit, QMessageBox
from ui_support import open_window, show_kind, stored_answer, wait_saved

from portalreview.tasks.common.editor_base import TextBox, keep_out_control_characters
from portalreview.ui.flag_dialog import FlagNoteDialog

COPIED = "Copied from a PDF:\x00 please\x07 rest.\tTab\r\nand lines kept"
CLEAN = "Copied from a PDF: please rest.\tTab\nand lines kept"  # (a box gives "\n" back)
CTRL = Qt.KeyboardModifier.ControlModifier


@pytest.fixture(autouse=True)
def _unsaved_text_is_discarded_on_close(monkeypatch):
    """A save these tests expect to succeed that fails (a NUL kept) leaves the window asking,
    as it closes, whether to lose the text: answered, so that the test fails and never hangs."""
    discard = QMessageBox.StandardButton.Discard
    monkeypatch.setattr(QMessageBox, "warning", staticmethod(lambda *_a, **_k: discard))


@pytest.fixture(autouse=True)
def _clipboard_emptied():
    """Mime data a test put on the clipboard crashed Python as it exited (a segmentation fault
    after every test had passed): the clipboard is emptied after each test."""
    yield
    QApplication.clipboard().clear()


def _paste(qtbot, widget, text: str) -> None:
    clip = QMimeData()
    clip.setText(text)
    QApplication.clipboard().setMimeData(clip)
    widget.setFocus()
    qtbot.keyClick(widget, Qt.Key.Key_V, CTRL)


def test_a_theme_box_leaves_control_characters_out_of_pasted_text(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "respond")
    box = window.editors["respond"].findChild(TextBox, "box_empathy")
    _paste(qtbot, box, COPIED)
    assert box.toPlainText() == CLEAN
    dropped = QMimeData()
    dropped.setText(" Dropped\x00.")
    box.insertFromMimeData(dropped)  # (what a drop calls)
    assert box.toPlainText() == CLEAN + " Dropped."
    wait_saved(qtbot, window)
    stored = stored_answer(gui.path, gui.ids.units["respond"], "ava")
    assert stored.payload["parts"]["empathy"] == CLEAN + " Dropped."


def test_comment_and_fact_boxes_leave_control_characters_out(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "urgency")
    comment = window.editors["urgency"].comment
    _paste(qtbot, comment, "see\x00 chart\x1f")
    assert comment.text() == "see chart"
    show_kind(window, "facts")
    editor = window.editors["facts"]
    entry = editor.sides["original"].entry
    _paste(qtbot, entry, "Go to the ER\x00 now.")
    qtbot.keyClick(entry, Qt.Key.Key_Return)
    editor.edit_fact("original", 0, "Go to\x0b the\x00 ER.")  # (what a fact's cell editor sends)
    assert [f["text"] for f in editor.payload()["facts"]] == ["Go to the ER."]


def test_the_flag_note_and_any_free_text_line_leave_them_out(qtbot):
    dialog = FlagNoteDialog()
    qtbot.addWidget(dialog)
    _paste(qtbot, dialog.box, "Dose\x00 unclear")
    assert dialog.note() == "Dose unclear"
    line = QLineEdit()
    qtbot.addWidget(line)
    keep_out_control_characters(line)
    line.setText("ab")
    line.setCursorPosition(1)
    _paste(qtbot, line, "\x00x\x02y")
    assert (line.text(), line.cursorPosition()) == ("axyb", 3)
