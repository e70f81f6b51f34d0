"""The user guide's window: README.md and the docs it links to, read from the files shipped
with the program, offline. A link to another page of the guide opens here (at its heading);
any other link (a screenshot, a web page) goes to the system's own program for it."""

from __future__ import annotations

import re
from pathlib import Path

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QDesktopServices, QKeySequence, QShortcut, QTextDocument
from PySide6.QtWidgets import QHBoxLayout, QPushButton, QTextBrowser, QVBoxLayout, QWidget

from portalreview.tasks.common.screen import fit_to_screen

GUIDE_SUFFIXES = (".md", ".markdown")


class UserGuideWindow(QWidget):
    """README.md first; Back (Alt+Left) and Contents go where they say; Escape closes."""

    def __init__(self, readme: Path, parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Window)
        self.setWindowTitle("PortalReview user guide")
        self.setObjectName("userGuide")
        self.contents = QUrl.fromLocalFile(str(readme))
        self.browser = QTextBrowser()
        self.browser.setObjectName("guideText")
        self.browser.setOpenLinks(False)  # each link is followed by follow_link
        self.browser.anchorClicked.connect(self.follow_link)
        self.browser.setSearchPaths([str(readme.parent)])
        back = QPushButton("Back (Alt+Left)")
        back.clicked.connect(self.browser.backward)
        self.browser.backwardAvailable.connect(back.setEnabled)
        back.setEnabled(False)
        home = QPushButton("Contents")
        home.clicked.connect(lambda: self.show_page(self.contents))
        buttons = QHBoxLayout()
        buttons.addWidget(back)
        buttons.addWidget(home)
        buttons.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addLayout(buttons)
        layout.addWidget(self.browser, 1)
        QShortcut(QKeySequence(Qt.Key.Key_Escape), self, self.close)
        fit_to_screen(self, 980, 820)
        self.show_page(self.contents)

    def page(self) -> Path:
        """The file of the page shown."""
        return Path(self.browser.source().toLocalFile())

    def follow_link(self, link: QUrl) -> None:
        """A page of the guide (and a heading in it) opens here; anything else outside."""
        target = self.browser.source().resolved(link)
        if target.isLocalFile() and target.path().lower().endswith(GUIDE_SUFFIXES):
            self.show_page(target)
        else:
            QDesktopServices.openUrl(target)

    def show_page(self, url: QUrl) -> None:
        """Show the guide's page at ``url``, at the heading its fragment names (as GitHub
        names a heading: ``#a-team-study-on-a-postgresql-server``)."""
        fragment = url.fragment()
        page = QUrl.fromLocalFile(url.toLocalFile())  # (without the fragment)
        if page != self.browser.source():
            self.browser.setSource(page, QTextDocument.ResourceType.MarkdownResource)
        self.scroll_to_heading(fragment)

    def scroll_to_heading(self, fragment: str) -> None:
        """Scroll to the heading whose GitHub anchor is ``fragment`` (the top when none is)."""
        document = self.browser.document()
        block = document.begin()
        while block.isValid():
            heading = block.blockFormat().headingLevel() > 0
            if fragment and heading and github_anchor(block.text()) == fragment:
                top = document.documentLayout().blockBoundingRect(block).top()
                self.browser.verticalScrollBar().setValue(int(top))
                return
            block = block.next()
        self.browser.verticalScrollBar().setValue(0)


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, spaces to hyphens, punctuation dropped."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
