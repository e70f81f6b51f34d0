"""Match beside the work queue on a 1024-pixel screen: the reference and the draft stack one
above the other instead of the page scrolling sideways (the draft cut at the right-hand edge,
the live scores off screen); on a wider window they stay side by side."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect
from PySide6.QtWidgets import QScrollArea, QWidget
from ui_support import make_gui_study, open_window, preferences, show_kind


def in_view(widget: QWidget, page: QScrollArea) -> bool:
    """The widget lies wholly inside the page's visible area."""
    corner = widget.mapTo(page.viewport(), QPoint(0, 0))
    return page.viewport().rect().contains(QRect(corner, widget.size()))


def test_match_stacks_beside_the_queue_on_a_small_screen_and_not_on_a_wide_one(qtbot, tmp_path):
    study = make_gui_study(tmp_path)
    window = open_window(qtbot, preferences(tmp_path), study.path, "ava")
    window.queue_dock.setVisible(True)
    show_kind(window, "match")
    editor = window.session.editor
    page = window.findChild(QScrollArea, "matchPage")
    window.resize(1020, 610)  # a 1024 x 640 screen, less the window's frame
    qtbot.waitUntil(lambda: not editor.work.side_by_side())
    qtbot.wait(50)
    assert window.queue_dock.isVisible()
    assert page.horizontalScrollBar().maximum() == 0
    for part in (editor.ref_table, editor.draft_view, editor.match_button, editor.scores):
        assert in_view(part, page), part.objectName() or type(part).__name__
    assert editor.draft_view.height() >= 70  # room to select words in
    window.resize(1500, 900)
    qtbot.waitUntil(lambda: editor.work.side_by_side())
    qtbot.wait(50)
    assert page.horizontalScrollBar().maximum() == 0
    left, right = editor.work.sizes()
    assert left > 300 and right > 300


def test_match_turns_once_per_resize_near_the_width_it_needs(qtbot, tmp_path):
    """With a reference sentence chosen (its wrapped instruction shown), the parts need a
    little more width side by side than stacked, and the page's scroll bar comes and goes:
    at some widths they turned back and forth 200 times a second."""
    study = make_gui_study(tmp_path)
    window = open_window(qtbot, preferences(tmp_path), study.path, "ava")
    window.queue_dock.setVisible(True)
    show_kind(window, "match")
    editor = window.session.editor
    window.resize(1020, 610)
    qtbot.waitUntil(lambda: not editor.work.side_by_side())
    editor.ref_table.selectRow(1)
    turns = []
    editor.work.arranged.connect(turns.append)
    for width in range(1230, 1300, 7):
        window.resize(width, 700)
        before = len(turns)
        qtbot.wait(150)
        assert len(turns) - before <= 1, width
    window.resize(1600, 900)
    qtbot.waitUntil(lambda: editor.work.side_by_side())
