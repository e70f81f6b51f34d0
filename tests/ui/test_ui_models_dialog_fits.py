"""Tools > Models… shows its explanations whole: at 11 pt on a 1280 x 800 screen it opened at
640 x 420 whatever its text needed, the server's, own-examples', on-this-computer and quality
gates' explanations were cut off and overlapped, and the model list was one row high (found by
an explorer, x_a11y2 models_clip.py)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint
from PySide6.QtGui import QKeySequence
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QAbstractButton, QDialogButtonBox, QLabel, QListWidget
from ui_support import open_window

from portalreview.ui.model_panel import ModelDialog


def _cut_labels(dialog) -> list[str]:
    """The shown word-wrapped labels lower than their text needs at their width."""
    return [
        label.text()[:60]
        for label in dialog.findChildren(QLabel)
        if label.isVisible()
        and label.wordWrap()
        and label.height() < label.heightForWidth(label.width())
    ]


@pytest.mark.parametrize("points", [11, 18])
def test_the_models_dialog_shows_its_explanations_whole(qtbot, gui, prefs, font_size, points):
    font_size(points)
    window = open_window(qtbot, prefs, gui.path, "pat")
    dialog = ModelDialog(window.suggestions.host, window)
    qtbot.addWidget(dialog)
    dialog.show()
    QTest.qWait(50)
    assert _cut_labels(dialog) == []
    models = dialog.findChild(QListWidget, "modelList")
    assert models.height() >= 4 * models.fontMetrics().lineSpacing()
    area = dialog.screen().availableGeometry()
    assert area.contains(dialog.frameGeometry())
    close = dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Close)
    assert area.contains(close.mapToGlobal(QPoint(close.width(), close.height())))
    window.close()


def test_the_models_dialog_s_mnemonics_are_unique(qtbot, gui, prefs):
    """Its buttons "Models &folder…" and "Choose a &file…" were both Alt+F: the second could
    not be reached from the keyboard (found by an explorer)."""
    window = open_window(qtbot, prefs, gui.path, "pat")
    dialog = ModelDialog(window.suggestions.host, window)
    qtbot.addWidget(dialog)
    texts = [b.text() for b in dialog.findChildren(QAbstractButton)]
    texts += [label.text() for label in dialog.findChildren(QLabel) if label.buddy()]
    keys = {text: QKeySequence.mnemonic(text).toString() for text in texts}
    taken = [key for key in keys.values() if key]
    assert len(taken) >= 6 and len(taken) == len(set(taken)), keys
    window.close()
