"""Scrolling a list with the mouse wheel never changes the drop-downs the pointer passes over:
in Match content three notches over a theme drop-down turned "no theme" into a theme, saved
(found by an explorer); Check facts' judgement drop-downs turned the same way. A drop-down
turns with the wheel only once it has the focus."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication, QComboBox
from ui_support import open_window, show_kind, stored_answer


def _wheel(widget, notches: int = -3) -> None:
    """Turn the wheel over ``widget`` (negative: down, as when scrolling a list down)."""
    centre = QPointF(widget.rect().center())
    event = QWheelEvent(
        centre,
        QPointF(widget.mapToGlobal(QPoint(int(centre.x()), int(centre.y())))),
        QPoint(0, 0),
        QPoint(0, 120 * notches),
        Qt.MouseButton.NoButton,
        Qt.KeyboardModifier.NoModifier,
        Qt.ScrollPhase.NoScrollPhase,
        False,
    )
    QApplication.sendEvent(widget, event)


def test_the_wheel_over_a_theme_it_passes_changes_nothing(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "match")
    window.queue.jump_to_number(1)
    editor = window.editors["match"]
    box = next(iter(editor.ref_table.theme_boxes.values()))
    editor.setFocus()
    assert not box.hasFocus() and box.currentIndex() == 0
    _wheel(box)
    assert box.currentIndex() == 0 and not window.session.pending
    box.setFocus()  # chosen on purpose (clicked, or Tab): the wheel turns it
    qtbot.waitUntil(box.hasFocus)
    _wheel(box, -1)
    assert box.currentIndex() == 1
    window.close()


def test_the_wheel_over_a_fact_judgement_it_passes_changes_nothing(qtbot, gui, prefs):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, "facts")
    editor = window.editors["facts"]
    side = editor.sides["original"]
    side.entry.setFocus()
    qtbot.keyClicks(side.entry, "Go to the ER now")
    qtbot.keyClick(side.entry, Qt.Key.Key_Return)
    boxes = [b for b in side.table.findChildren(QComboBox) if b.isVisibleTo(side.table)]
    assert boxes
    judged = [b.currentIndex() for b in boxes]
    for box in boxes:
        _wheel(box)
    assert [b.currentIndex() for b in boxes] == judged
    window.save_now()
    stored = stored_answer(gui.path, gui.ids.units["facts"], "ava")
    assert [f["entailed"] for f in stored.payload["facts"]] == [None]
    window.close()
