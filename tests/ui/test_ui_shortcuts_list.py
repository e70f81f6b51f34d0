"""F1's shortcut list fits the screen and scrolls: it was a message box, 856-964 px tall for a
clinician at 11 pt (2,046 at 18 pt), whose editor keys and OK button were below a 1024 x 640
screen (found by an explorer, x_a11y2 f1list.py). The small-screen tour checks it at 1024 x 600
in each kind of work; here the test's own screen (800 x 800) and a larger font do."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QDialogButtonBox, QTextBrowser
from ui_support import open_window, show_kind

EDITOR_HEADINGS = {"facts": "Facts:", "rank": "Ranking:"}


def _what_f1_opens(qtbot, window) -> dict:
    """Press F1, measure the window it opens against the screen, and close it (a timer does:
    a message box waits in F1's action until it is closed)."""
    seen: dict = {}

    def measure() -> None:
        shown = QApplication.activeModalWidget()
        try:
            area = shown.screen().availableGeometry()
            ok = shown.findChild(QDialogButtonBox).buttons()[0]
            corners = [ok.mapToGlobal(p) for p in (ok.rect().topLeft(), ok.rect().bottomRight())]
            text = shown.findChild(QTextBrowser)
            seen.update(
                frame=shown.frameGeometry(),
                area=area,
                ok_on_screen=ok.isVisible() and all(area.contains(p) for p in corners),
                text=text.toPlainText() if text else "",
                scrolls=text is not None and text.verticalScrollBar().maximum() > 0,
            )
        finally:
            shown.close()

    QTimer.singleShot(300, measure)
    window.act_shortcuts.trigger()
    qtbot.waitUntil(lambda: bool(seen), timeout=5000)
    return seen


@pytest.mark.parametrize("points", [11, 18])
@pytest.mark.parametrize("kind", ["facts", "rank"])
def test_the_shortcut_list_of_a_clinician_at_work_fits_the_screen(
    qtbot, gui, prefs, font_size, kind, points
):
    font_size(points)
    window = open_window(qtbot, prefs, gui.path, "ava")
    show_kind(window, kind)
    seen = _what_f1_opens(qtbot, window)
    assert seen["area"].contains(seen["frame"]), seen
    assert seen["ok_on_screen"], seen
    assert seen["scrolls"], seen  # the rest of the list is there, below
    assert EDITOR_HEADINGS[kind] in seen["text"]
    window.close()
