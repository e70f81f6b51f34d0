"""Sign in: choose who you are among the project's annotators (models excluded).

PortalReview runs on a shared hospital workstation under the clinician's own login; signing in
here says whose work this is (and so what the blinded queries show), it is not a password."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QVBoxLayout,
    QWidget,
)


class SignInDialog(QDialog):
    def __init__(
        self,
        project_name: str,
        annotators: list,
        last: str | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Sign in — PortalReview")
        self.setMinimumWidth(420)
        layout = QVBoxLayout(self)
        title = QLabel(f"<b>{html.escape(project_name)}</b><br>Who is annotating?")
        title.setTextFormat(Qt.TextFormat.RichText)
        title.setWordWrap(True)
        layout.addWidget(title)
        self.list = QListWidget()
        self.list.setObjectName("annotatorList")
        self.list.setAccessibleName("Annotators")
        for person in annotators:
            role = "principal investigator" if person.role == "pi" else "clinician"
            shown = person.display_name or person.name
            item = QListWidgetItem(f"{shown}  ({role})")
            item.setData(Qt.ItemDataRole.UserRole, person.name)
            self.list.addItem(item)
            if person.name == last:
                self.list.setCurrentItem(item)
        if self.list.currentItem() is None and self.list.count():
            self.list.setCurrentRow(0)
        self.list.itemDoubleClicked.connect(lambda _item: self.accept())
        layout.addWidget(self.list)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Sign in")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)

    def chosen(self) -> str | None:
        item = self.list.currentItem()
        return None if item is None else item.data(Qt.ItemDataRole.UserRole)
