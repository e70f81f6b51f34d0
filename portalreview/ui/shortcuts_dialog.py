"""F1's list of keyboard shortcuts: a text that scrolls, in a window no larger than the screen
(a message box cannot scroll, and a clinician's list with the current editor's keys at its end
was taller than a 1024 x 640 screen at 11 pt)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QTextBrowser, QVBoxLayout, QWidget

from portalreview.tasks.common.screen import fit_to_screen

#: The list's comfortable width, in average characters.
WIDTH_IN_CHARACTERS = 72


class ShortcutsDialog(QDialog):
    """The shortcuts, as rich text, over an OK button; as tall as the text where the screen
    has room for it, else as tall as the screen, with the text scrolling."""

    def __init__(self, html: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Keyboard shortcuts")
        self.text = QTextBrowser()
        self.text.setObjectName("shortcutsText")
        self.text.setAccessibleName("Keyboard shortcuts")
        self.text.setHtml(html)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok)
        self.buttons.accepted.connect(self.accept)
        layout = QVBoxLayout(self)
        layout.addWidget(self.text, 1)
        layout.addWidget(self.buttons)
        width = self.fontMetrics().averageCharWidth() * WIDTH_IN_CHARACTERS
        fit_to_screen(self, width, self._height_for(width))
        self.text.setFocus(Qt.FocusReason.OtherFocusReason)  # PageDown scrolls at once

    def _height_for(self, width: int) -> int:
        """The dialog's height that shows the whole text at ``width``."""
        margins = self.layout().contentsMargins()
        frame = 2 * self.text.frameWidth()
        document = self.text.document().clone(self)
        document.setTextWidth(width - margins.left() - margins.right() - frame)
        text_height = int(document.size().height()) + frame
        document.deleteLater()
        return (
            margins.top()
            + text_height
            + self.layout().spacing()
            + self.buttons.sizeHint().height()
            + margins.bottom()
        )
