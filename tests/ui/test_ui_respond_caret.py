"""Write responses: the line being typed stays in view. A box grows with its text (up to 16
lines) but the form did not scroll with it: at 1024 x 640 the last lines typed in the third
box were below the form's edge, typed blind (found by an explorer)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from ui_support import open_window, show_kind

from portalreview.tasks.common.editor_base import TextBox


def _caret_in_view(editor, box) -> bool:
    viewport = editor.form.viewport()
    caret = box.cursorRect()
    top = box.viewport().mapTo(viewport, caret.topLeft()).y()
    bottom = box.viewport().mapTo(viewport, caret.bottomLeft()).y()
    return top >= 0 and bottom <= viewport.height()


def test_the_caret_stays_in_view_as_a_box_grows(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "ava")
    window.resize(1024, 640)
    show_kind(window, "respond")
    window.queue.jump_to_number(1)
    editor = window.editors["respond"]
    box = editor.findChild(TextBox, "box_medication_questions")
    box.setFocus()
    qtbot.waitUntil(box.hasFocus)
    for line in range(12):
        qtbot.keyClicks(box, f"Line {line} of what I would ask about this patient's medicines")
        qtbot.keyClick(box, Qt.Key.Key_Return)
        qtbot.wait(5)
    qtbot.waitUntil(lambda: _caret_in_view(editor, box), timeout=2000)
    window.close()
