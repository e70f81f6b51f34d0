"""Text that must be read whole is shown whole on a 1280 x 720 and a 1024 x 768 screen: the
patient's message and the chart wrap to the case panel's width (read top to bottom, never
sideways) and the panel is never a sliver."""

from __future__ import annotations

import pytest
from PySide6.QtTest import QTest
from ui_support import open_window, show_kind

from portalreview.tasks.common.case_panel import CasePanel

# The main window's size on those screens (their available area less the window's frame).
SCREENS = {"1280x720": (1280, 690), "1024x768": (1024, 738)}


def sized(window, screen: str) -> None:
    window.resize(*SCREENS[screen])
    QTest.qWait(50)


@pytest.mark.parametrize("screen", SCREENS)
@pytest.mark.parametrize("kind", ["respond", "rank", "match", "empathy"])
def test_the_patient_s_message_wraps_to_the_case_panel(qtbot, gui, prefs, screen, kind):
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, kind)
    sized(window, screen)
    panel = window.editors[kind].findChild(CasePanel)
    assert panel.isVisible() and panel.message.text()
    viewport = panel.viewport().width()
    assert panel.widget().width() <= viewport  # nothing hidden to the right
    assert not panel.horizontalScrollBar().isVisible()
    assert panel.message.width() <= viewport
    assert viewport >= 8 * panel.fontMetrics().averageCharWidth()  # never a sliver
    for section in panel.sections.values():  # titles wrap too, never cut
        assert section.title.width() <= viewport
