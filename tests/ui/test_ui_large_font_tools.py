"""The tool windows under a large system font (18 pt) on a 1024 x 640 screen: rows of controls
wrap (ui/screen.FlowRow), form fields go under their labels, the long set-up form scrolls and
a long check box's words are a label of their own, so that no window needs to be wider or
taller than the screen (README: tool windows open no larger than the screen)."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QApplication, QCheckBox, QPushButton
from ui_support import open_window, preferences

from portalreview.tasks.common.screen import MARGIN, FlowRow
from portalreview.ui.tools import TOOLS

SCREEN = (1024, 640)


def opened(before: set) -> list:
    return [w for w in QApplication.topLevelWidgets() if w not in before and w.isVisible()]


@pytest.mark.parametrize("title", [tool.title for tool in TOOLS])
def test_every_tool_window_needs_no_more_than_a_small_screen_at_18_pt(
    qtbot, tmp_path, demo_copy, font_size, title
):
    font_size(18)
    window = open_window(qtbot, preferences(tmp_path), demo_copy, "dr_pi")
    before = set(QApplication.topLevelWidgets())
    next(t for t in TOOLS if t.title == title).load()(window)
    qtbot.waitUntil(lambda: bool(opened(before)))
    [tool] = opened(before)
    # what it shows once it has read the study (the dashboard's status line grew then)
    qtbot.waitUntil(lambda: not getattr(tool, "loading", False), timeout=30_000)
    qtbot.wait(300)
    needed = tool.minimumSizeHint().expandedTo(tool.minimumSize())
    assert needed.width() <= SCREEN[0] - MARGIN, (title, needed)
    assert needed.height() <= SCREEN[1] - MARGIN, (title, needed)
    tool.close()
    window.close()


def test_a_flow_row_wraps_where_the_width_runs_out(qtbot):
    row = FlowRow()
    qtbot.addWidget(row)
    pieces = [QPushButton(f"A button of some width {n}") for n in range(3)]
    row.add(pieces[0])
    row.add(QCheckBox("ticked"), pieces[1])
    row.add(pieces[2])
    widest = max(row.flow.itemAt(i).sizeHint().width() for i in range(row.flow.count()))
    assert row.minimumSizeHint().width() == widest
    one_line = row.sizeHint()
    row.resize(one_line.width(), row.flow.heightForWidth(one_line.width()))
    row.show()
    qtbot.wait(20)
    assert len({p.mapTo(row, p.rect().topLeft()).y() for p in pieces}) == 1
    assert row.flow.heightForWidth(one_line.width()) == one_line.height()
    row.resize(widest, row.flow.heightForWidth(widest))
    qtbot.wait(20)
    assert len({p.mapTo(row, p.rect().topLeft()).y() for p in pieces}) == 3
    assert row.flow.heightForWidth(widest) > 2 * one_line.height()
    for piece in pieces:  # (the middle one inside its piece, with its check box)
        assert piece.mapTo(row, piece.rect().topRight()).x() < widest
