"""The note a clinician leaves with a unit flagged for the PI (Ctrl+Shift+F).

Qt's ready-made multi-line input dialog lets its box keep Tab and Enter as characters, so a
keyboard user could not reach "OK" without cancelling by mistake. Here Tab leaves the box,
Ctrl+Enter flags from inside it, Enter on a button presses that button and Esc cancels.
"""

from __future__ import annotations

from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QVBoxLayout,
    QWidget,
)

from portalreview.tasks.common.editor_base import PlainTextBox

QUESTION = "What should the principal investigator look at?"


class FlagNoteDialog(QDialog):
    """Asks for the flag's note; ``note()`` is the text typed."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Flag for the PI")
        self.box = PlainTextBox()  # (pasted control characters left out)
        self.box.setObjectName("flagNote")
        self.box.setTabChangesFocus(True)
        self.box.setAccessibleName(QUESTION)
        label = QLabel(QUESTION)
        label.setBuddy(self.box)
        hint = QLabel("Ctrl+Enter flags the unit; Tab reaches the buttons; Esc cancels.")
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("&Flag")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        for keys in ("Ctrl+Return", "Ctrl+Enter"):
            QShortcut(QKeySequence(keys), self, activated=self.accept)
        layout = QVBoxLayout(self)
        layout.addWidget(label)
        layout.addWidget(self.box)
        layout.addWidget(hint)
        layout.addWidget(buttons)
        self.box.setFocus()

    def note(self) -> str:
        return self.box.toPlainText()
