"""The case panel every editor shows: the patient's message and the chart summary in its four
sections (demographics, problems, encounters, medications; seed 000 Section 2 / App. G), each
section collapsible, its items as a list."""

from __future__ import annotations

import html

from PySide6.QtCore import QEvent, QSize, Qt
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from portalreview.store.service import CaseView
from portalreview.tasks.common.screen import FocusFollowingScrollArea, FocusRing

MIN_CHARACTERS = 14  # the case panel's narrowest line, in average characters
WANTED_CHARACTERS = 36  # and the line it would like

CHART_SECTIONS = (
    ("demographics", "Demographics"),
    ("problems", "Problems"),
    ("encounters", "Recent encounters"),
    ("medications", "Medications"),
)


class CollapsibleSection(QWidget):
    """A titled block whose body folds away with a click (or Space on the title). The title
    wraps in a narrow panel: the arrow is the button (named by the title), the words beside it
    are a label that a click folds too."""

    def __init__(self, title: str, body: QWidget, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.toggle = QToolButton(text=title, checkable=True, checked=True)
        self.toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonIconOnly)
        self.toggle.setArrowType(Qt.ArrowType.DownArrow)
        self.toggle.setAutoRaise(True)
        self.toggle.toggled.connect(self._on_toggled)
        self.title = QLabel(title)
        self.title.setTextFormat(Qt.TextFormat.PlainText)
        self.title.setWordWrap(True)
        self.title.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        font = self.title.font()
        font.setBold(True)
        self.title.setFont(font)
        self.title.installEventFilter(self)
        head = QHBoxLayout()
        head.setSpacing(2)
        head.addWidget(self.toggle, 0, Qt.AlignmentFlag.AlignTop)
        head.addWidget(self.title, 1)
        self.body = body
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addLayout(head)
        layout.addWidget(body)

    def eventFilter(self, watched, event) -> bool:
        if watched is self.title and event.type() == QEvent.Type.MouseButtonRelease:
            self.toggle.toggle()  # a click on the words folds, as on the arrow
            return True
        return super().eventFilter(watched, event)

    def _on_toggled(self, open_: bool) -> None:
        self.toggle.setArrowType(Qt.ArrowType.DownArrow if open_ else Qt.ArrowType.RightArrow)
        self.body.setVisible(open_)

    @property
    def is_open(self) -> bool:
        return self.toggle.isChecked()


def _reading_label(text: str = "", rich: bool = False) -> QLabel:
    label = QLabel()
    label.setTextFormat(Qt.TextFormat.RichText if rich else Qt.TextFormat.PlainText)
    label.setText(text)
    label.setWordWrap(True)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    # wraps to the panel's width, however narrow (a long word is broken, never scrolled to)
    label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Minimum)
    label.setContentsMargins(18, 0, 4, 4)
    return label


def items_html(items: list[str]) -> str:
    """A chart section's items as an HTML list (escaped); a dash when the section is empty."""
    if not items:
        return "<i>none recorded</i>"
    rows = "".join(f"<li>{html.escape(item)}</li>" for item in items)
    return f"<ul style='margin-left:-18px'>{rows}</ul>"


class _ReadingColumn(QWidget):
    """The panel's contents, as tall as their text at the panel's width (height for width):
    the height a word-wrapped label asks for at its narrowest made a short panel (the facts
    editor's) scroll on through blank space."""

    def minimumSizeHint(self) -> QSize:
        return QSize(super().minimumSizeHint().width(), 0)


class CasePanel(FocusFollowingScrollArea):
    """Read-only view of one case. ``show_case`` replaces what is shown. ``chart=False``: the
    message alone, for a task whose raters saw no chart (seed 004's fact checks). Tab to a
    fold button scrolled out of the panel's view scrolls it into view."""

    def __init__(
        self, parent: QWidget | None = None, title: str = "Patient message", chart: bool = True
    ) -> None:
        super().__init__(parent)
        # (still a Tab stop: the only way to scroll a long message with the keyboard)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.focus_ring = FocusRing(self)
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        # Everything wraps to the panel's width: read top to bottom, never sideways.
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        inner = _ReadingColumn()
        layout = QVBoxLayout(inner)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.setSpacing(6)
        self.header = QLabel()
        self.header.setWordWrap(True)
        self.header.setObjectName("caseHeader")
        self.header.setTextFormat(Qt.TextFormat.PlainText)  # the case's id, as imported
        self.header.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        layout.addWidget(self.header)
        self.message = _reading_label()
        self.message.setObjectName("patientMessage")
        self.message_section = CollapsibleSection(title, self.message)
        layout.addWidget(self.message_section)
        self.sections: dict[str, CollapsibleSection] = {}
        self.section_labels: dict[str, QLabel] = {}
        for key, name in CHART_SECTIONS if chart else ():
            label = _reading_label(rich=True)
            self.section_labels[key] = label
            self.sections[key] = CollapsibleSection(name, label)
            layout.addWidget(self.sections[key])
        layout.addStretch(1)
        self.setWidget(inner)

    def _width_for(self, characters: int) -> int:
        """The panel's width for lines of about ``characters`` average characters."""
        bar = self.verticalScrollBar().sizeHint().width()
        return self.fontMetrics().averageCharWidth() * characters + bar + 12

    def minimumSizeHint(self) -> QSize:
        """Never a sliver: room for about MIN_CHARACTERS characters a line (and the scroll
        bar), so the splitters it is in keep it that wide."""
        hint = super().minimumSizeHint()
        return QSize(max(hint.width(), self._width_for(MIN_CHARACTERS)), hint.height())

    def sizeHint(self) -> QSize:
        """What it would like: lines of about WANTED_CHARACTERS (the text wraps to any width,
        so its own hint says little)."""
        return QSize(self._width_for(WANTED_CHARACTERS), super().sizeHint().height())

    def show_case(self, case: CaseView) -> None:
        who = ", ".join(x for x in (case.age_band, case.gender) if x)
        self.header.setText(f"Case {case.external_id}" + (f"  ·  {who}" if who else ""))
        self.message.setText(case.message)
        for key, label in self.section_labels.items():
            label.setText(items_html(case.chart.get(key, [])))
