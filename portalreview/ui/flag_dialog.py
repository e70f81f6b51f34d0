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
#: ``exec()``'s answer when the person takes the flag off (Accepted: flag, or keep the note).
REMOVE_FLAG = 2


class FlagNoteDialog(QDialog):
    """Asks for the flag's note; ``note()`` is the text typed. Given the ``note`` of a unit
    already flagged, it shows the note to read or change, and offers to take the flag off
    (``exec()`` returns :data:`REMOVE_FLAG`): the key that flags a unit once took the flag and
    its note off at once, with no undo and nowhere to read the note first."""

    def __init__(self, parent: QWidget | None = None, note: str | None = None) -> None:
        super().__init__(parent)
        flagged = note is not None
        self.setWindowTitle("Flagged for the PI" if flagged else "Flag for the PI")
        self.box = PlainTextBox()  # (pasted control characters left out)
        self.box.setObjectName("flagNote")
        self.box.setTabChangesFocus(True)
        self.box.setAccessibleName(QUESTION)
        if flagged:
            self.box.setPlainText(note)
            self.box.moveCursor(self.box.textCursor().MoveOperation.End)
        label = QLabel(QUESTION)
        label.setBuddy(self.box)
        keep = "keeps the note" if flagged else "flags the unit"
        hint = QLabel(f"Ctrl+Enter {keep}; Tab reaches the buttons; Esc cancels.")
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText(
            "&Keep the note" if flagged else "&Flag"
        )
        if flagged:
            remove = buttons.addButton("&Remove the flag", QDialogButtonBox.ButtonRole.ActionRole)
            remove.setObjectName("removeFlag")
            remove.clicked.connect(lambda: self.done(REMOVE_FLAG))
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
