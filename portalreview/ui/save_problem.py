"""Why the last save failed, above the editor until a save succeeds.

The status bar cut a long reason off at its width and dropped it after a while, so the
reason is shown here whole, wrapped and selectable (to copy for support). When the answer
was saved from another workstation since the unit was opened here
(``portalreview.store.service.SavedElsewhere``), two buttons let the person choose which
answer stays.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAccessible, QAccessibleEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
)

from portalreview.ui.study_setup_dialog import add_shortcut

KEPT_NOTE = (
    " What you typed is also kept on this computer, and offered back when you open this study "
    "again if it is closed before it is saved."
)


class SaveProblemBar(QFrame):
    """The reason, framed in the text's colour (every colour scheme), and when two answers
    compete, "Keep mine" / "Show theirs"."""

    keep_mine = Signal()
    take_theirs = Signal()

    def __init__(self) -> None:
        super().__init__()
        self.setObjectName("saveProblem")
        self.setFrameShape(QFrame.Shape.Box)
        self.label = QLabel()
        self.label.setAccessibleName("Why your change is not saved")
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextSelectableByMouse
            | Qt.TextInteractionFlag.TextSelectableByKeyboard
        )
        self.keep_button = QPushButton("Keep what is on screen here (Alt+K)")
        self.keep_button.setToolTip("Save this answer over the one saved elsewhere")
        self.keep_button.clicked.connect(self.keep_mine)
        self.take_button = QPushButton("Show the answer saved there (Alt+W)")
        self.take_button.setToolTip("Show the answer saved elsewhere; what is here is dropped")
        self.take_button.clicked.connect(self.take_theirs)
        # the window's keys, wherever the focus is (the editor, mostly); active only while the
        # buttons are shown. Not mnemonics: "S&how" took Alt+H from the Help menu
        self._keys = [
            add_shortcut(self, "Alt+K", self.keep_button.click),
            add_shortcut(self, "Alt+W", self.take_button.click),
        ]
        for key in self._keys:
            key.setEnabled(False)
        buttons = QHBoxLayout()
        buttons.addWidget(self.keep_button)
        buttons.addWidget(self.take_button)
        buttons.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addWidget(self.label)
        layout.addLayout(buttons)
        self.hide()

    def text(self) -> str:
        return self.label.text()

    def show_problem(self, message: str, kept: bool, choice: bool) -> None:
        """Show ``message`` (``kept``: the text is kept on this computer too; ``choice``: the
        answer was saved elsewhere, so the buttons to choose which stays)."""
        self.label.setText(f"⚠ {message}" + (KEPT_NOTE if kept else ""))
        self.keep_button.setVisible(choice)
        self.take_button.setVisible(choice)
        for key in self._keys:
            key.setEnabled(choice)
        self.show()
        QAccessible.updateAccessibility(QAccessibleEvent(self.label, QAccessible.Event.Alert))
