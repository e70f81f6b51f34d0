"""Two parts side by side only where both fit (``ui.screen.SideBySide``): arranged again when a
part's minimum width changes with the window's width unchanged, never taking turns between
the two arrangements; the EPPC editor's subcodes and evidence buttons are never cut."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QLabel, QPushButton, QVBoxLayout, QWidget
from ui_support import open_window, show_kind

from portalreview.tasks.common.screen import SideBySide


def test_a_part_grown_wider_stacks_the_parts_without_a_resize(qtbot):
    first, second = QLabel("short"), QLabel("x" * 30)
    parts = SideBySide(first, second)
    page = QWidget()
    QVBoxLayout(page).addWidget(parts)
    qtbot.addWidget(page)
    room = 2 * second.minimumSizeHint().width()
    page.setFixedWidth(room)
    page.show()
    QTest.qWait(20)
    assert parts.side_by_side()
    width = parts.width()
    first.setText("y" * 36)  # alone it fits; beside the second part it does not
    QTest.qWait(20)
    assert parts.width() == width and not parts.side_by_side()
    first.setText("short")
    QTest.qWait(20)
    assert parts.side_by_side()


def test_a_part_arranged_otherwise_when_stacked_does_not_make_the_parts_take_turns(qtbot):
    """The second part is narrower stacked (its buttons one above the other) than side by side
    (in a row): measured stacked, the two would fit side by side; arranged so, they would not."""
    first = QLabel("x" * 40)
    second = QWidget()
    column = QVBoxLayout(second)
    buttons = [QPushButton("A rather long button"), QPushButton("Another long button")]
    for button in buttons:
        column.addWidget(button)

    def in_a_row() -> int:
        return sum(b.minimumSizeHint().width() for b in buttons) + column.spacing()

    turns = []
    parts = SideBySide(first, second, lambda: (first.minimumSizeHint().width(), in_a_row()))
    parts.arranged.connect(turns.append)
    qtbot.addWidget(parts)
    width = first.minimumSizeHint().width() + in_a_row() - 20  # enough stacked, not in a row
    parts.resize(width, 200)
    parts.show()
    QTest.qWait(50)
    first.setText("y" * 40)  # a layout request, the widths unchanged
    QTest.qWait(50)
    assert not parts.side_by_side()
    assert turns == [False]


@pytest.mark.parametrize("size", [(1440, 900), (1280, 690), (1024, 738)])
def test_every_code_s_subcodes_and_the_evidence_buttons_are_whole(qtbot, gui, prefs, size):
    """At 1440 x 900 the subcodes of Information giving ("Appointment-related information") and
    the Remove span button were cut: the parts stayed side by side when the current code's
    subcodes needed more room, since the window's width had not changed."""
    window = open_window(qtbot, prefs, gui.path, "ava")
    window.resize(*size)
    show_kind(window, "eppc")
    editor = window.editors["eppc"]
    for number in range(1, len(editor.codes) + 1):
        key = getattr(Qt.Key, f"Key_{number}")
        qtbot.keyClick(editor.codes_list, key)  # chosen and current
        QTest.qWait(30)
        assert editor.current == editor.codes[number - 1].id
        cut = [
            w.text()
            for w in (*editor.subcode_buttons.values(), editor.add_button, editor.remove_button)
            if w.width() < w.minimumSizeHint().width()
        ]
        assert not cut, (editor.current, cut)
