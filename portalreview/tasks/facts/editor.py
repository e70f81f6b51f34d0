"""Fact checks of an edited response (seed 004, MedFactChecking, Section 3.3): the patient's
message at the top (the expert saw the message with both replies, Section 3.1: an error
category such as "Adds Unnecessary Advice", advice unrelated to the patient's query, is judged
against it; its title folds it away), the original and the edited response side by side under
it, the medical facts of each (typed by the annotator, or taken from a selection in the text),
and for each fact whether the *other* text entails it: a fact of the original is kept when the
edited response entails it, a fact of the edit is supported when the original entails it. A
fact that was lost or added gets the expert error category of Supplementary Table 3.
Fact-Recall (kept / facts of the original) and Fact-Precision (supported / facts of the edit)
of the pair are shown live (``metrics.facts``).

Keys: in a response, select text and press F to list it as a fact of that response; in the
box under a fact list, type a fact and press Enter. In a fact list: Y the other text entails
the fact, N it does not, 0 not judged yet, 1-9 the error category (and "not entailed"),
F2 edits the fact's wording, Delete removes it. A wording or a new fact typed without Enter is
entered when the unit is submitted or left (:meth:`FactsEditor.finish_editing`). When neither
response holds a medical fact (a two-line "thank you, see you Friday" reply), tick "No medical
facts on either side" (or press X in a response or a fact list): the answer can then be
submitted with no facts, and the report scores the pair 1.0 for recall and precision (seed
004's empty-set rule). Listing a fact unticks it; it cannot be ticked while facts are listed.
"""

from __future__ import annotations

import copy
import html
from typing import Any

from PySide6.QtCore import QEvent, QSize, Qt
from PySide6.QtGui import QFont, QFontMetrics
from PySide6.QtWidgets import (
    QAbstractItemDelegate,
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QSizePolicy,
    QSplitter,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionComboBox,
    QStylePainter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)
from shiboken6 import isValid

from portalreview.domain.catalogs import Catalogs, ErrorCategory
from portalreview.metrics.facts import fact_scores_from_counts
from portalreview.store.service import AnswerView, UnitView
from portalreview.tasks.common import colours
from portalreview.tasks.common.case_panel import CasePanel
from portalreview.tasks.common.editor_base import (
    CommentBox,
    Editor,
    LineTyping,
    LiveFigure,
    keep_out_control_characters,
    wheel_only_when_focused,
    without_control_characters,
)
from portalreview.tasks.common.safe_text import plain_tip
from portalreview.tasks.common.screen import WrappingColumn
from portalreview.tasks.eppc.editor import FittedText

SIDES = ("original", "edited")
_OTHER = {"original": "edited", "edited": "original"}
_QUESTION = {
    "original": "Kept in the edit?",
    "edited": "Supported by the original?",
}
_HEADER = {"original": "Kept?", "edited": "Supported?"}
_HEADER_TIP = {
    "original": "Does the edited response entail this fact of the original (kept), or not (lost)?",
    "edited": "Does the original response entail this fact of the edit (supported), or not "
    "(added)?",
}
_CATEGORY_TIP = {
    "original": "For a lost fact: the kind of error (Supplementary Table 3)",
    "edited": "For an added fact: the kind of error (Supplementary Table 3)",
}
_DIGITS = {getattr(Qt.Key, f"Key_{i}"): i for i in range(10)}
_ENTAILED_CHOICES = (("? not judged", None), ("Yes", True), ("No", False))
_NO_CATEGORY = "—"
ENTAILED_COLUMN, CATEGORY_COLUMN = 2, 3  # the fact list's judgement columns
UNJUDGED_NAMED = 5  # a message names this many unjudged facts, then counts the rest
MESSAGE_LINES = 4  # the message's first height, in lines: most are read whole, a long one scrolls
MIN_MESSAGE_LINES = 2  # the least of the message shown while it is unfolded
MIN_FACT_ROWS = 3  # a fact list has room for its header and this many facts at least


def category_keys(count: int) -> str:
    """The keys of the error categories, for the keyboard help (", 1-6 error category"): one
    digit each, so the first nine of a codebook extended past nine (the rest from a fact's
    drop-down); "" for a codebook without categories."""
    if count == 0:
        return ""
    keys = "1" if count == 1 else f"1-{min(count, 9)}"
    if count <= 9:
        return f", {keys} error category"
    rest = "10" if count == 10 else f"10-{count}"
    return f", {keys} error category ({rest}: the fact's drop-down)"


def _short(wording: str, most: int = 30) -> str:
    """A fact's wording cut to about ``most`` characters, at a word, for a message."""
    if len(wording) <= most:
        return wording
    cut = wording[:most].rsplit(" ", 1)[0] or wording[:most]
    return f"{cut}…"


def _one_line(text: str) -> str:
    """A fact's wording: one line, single spaces, no control characters."""
    return " ".join(without_control_characters(text).split())


def _empty_state() -> dict[str, Any]:
    return {"original": [], "edited": [], "no_facts": False}


def category_labels(catalogs: Catalogs) -> list[tuple[str, ErrorCategory]]:
    """Each error category with its label in a fact's drop-down: "3 Clinical inaccuracy"."""
    return [(f"{n} {c.name}", c) for n, c in enumerate(catalogs.error_categories, start=1)]


def drop_down_width(widget: QWidget, text: str) -> int:
    """The width a drop-down in ``widget``'s font and style needs to show ``text`` whole."""
    option = QStyleOptionComboBox()
    option.initFrom(widget)
    metrics = widget.fontMetrics()
    room = QSize(metrics.horizontalAdvance(text), metrics.height())
    style = widget.style()
    return style.sizeFromContents(QStyle.ContentsType.CT_ComboBox, option, room, widget).width()


def _chosen_category_tip(box: QComboBox) -> str:
    """The chosen category's whole name and definition ("" for none): its box may cut it."""
    if box.currentData() is None:
        return ""
    definition = box.itemData(box.currentIndex(), Qt.ItemDataRole.ToolTipRole)
    return f"{box.currentText()}: {definition}"


class _CutChoice(QComboBox):
    """A drop-down whose chosen text, where the box is narrower than it, is cut with "…"
    (a chosen category read "3 Clinical inacc", as if that were its name); the whole text
    is in its tooltip."""

    def shown_text(self) -> str:
        """The chosen text as the box shows it: whole, or cut to the box's width."""
        option = QStyleOptionComboBox()
        self.initStyleOption(option)
        return self._cut(option)

    def _cut(self, option: QStyleOptionComboBox) -> str:
        style = self.style()
        field = style.subControlRect(
            QStyle.ComplexControl.CC_ComboBox, option, QStyle.SubControl.SC_ComboBoxEditField, self
        )
        room = field.width() - 2  # the style draws the label a pixel in from each side
        return self.fontMetrics().elidedText(option.currentText, Qt.TextElideMode.ElideRight, room)

    def paintEvent(self, _event) -> None:  # QComboBox's own, with the text cut
        painter = QStylePainter(self)
        option = QStyleOptionComboBox()
        self.initStyleOption(option)
        painter.drawComplexControl(QStyle.ComplexControl.CC_ComboBox, option)
        option.currentText = self._cut(option)
        painter.drawControl(QStyle.ControlElement.CE_ComboBoxLabel, option)


class MessagePanel(CasePanel):
    """The patient's message (no chart: seed 004's experts saw the message and both replies,
    Section 3.1), over the replies: MESSAGE_LINES lines high at first, its title folds it, the
    handle under it drags it taller, a longer message scrolls."""

    def __init__(self) -> None:
        super().__init__(title="The patient's message", chart=False)
        self.setObjectName("factsMessage")
        self.setAccessibleName("The patient's message")
        # its minimum is another folded: the splitter it is in asks again
        self.message_section.toggle.toggled.connect(lambda _open: self.updateGeometry())

    def sizeHint(self) -> QSize:
        margins = 32  # the panel's margins and spacing, the message's own margin
        return QSize(super().sizeHint().width(), self._height_for(MESSAGE_LINES, margins))

    def minimumSizeHint(self) -> QSize:
        """The case's line, the title and MIN_MESSAGE_LINES of the message (the page's
        minimum-height layout, :meth:`FactsEditor.heightForWidth`, left it half a line at
        14 pt, cut through the text); folded, what the panel itself needs."""
        hint = super().minimumSizeHint()
        if not self.message_section.toggle.isChecked():
            return hint
        above = 14  # the panel's top margin, the spacings under the case's line and title
        return QSize(hint.width(), self._height_for(MIN_MESSAGE_LINES, above))

    def _height_for(self, message_lines: int, margins: int) -> int:
        """The panel's height for the case's line, the title, ``message_lines`` lines of the
        message and ``margins`` pixels."""
        lines = self.fontMetrics().lineSpacing()
        inside = self.viewport().width() - 12  # (the margins of the panel's column)
        case_line = max(self.header.heightForWidth(inside), lines)
        title = max(self.message_section.toggle.sizeHint().height(), lines)
        return case_line + title + message_lines * lines + margins


def _figure(value: float, judged: int, listed: list) -> str:
    """A live figure, or "—" where the side's facts are listed and none is judged yet."""
    return "—" if listed and not judged else f"{value:.2f}"


class _AutosavedCells(QStyledItemDelegate):
    """A fact cell's editor (F2) whose wording is saved as it is typed, as the new-fact box's
    is, and saved back when the editor closes without entering it (Esc): killed meanwhile,
    the program lost a rewording while the status bar said "Saved"."""

    def __init__(self, table: QTableWidget, editor: FactsEditor) -> None:
        super().__init__(table)
        self.editor = editor
        self._typed = False  # in the cell open now: a cell opened and left (Esc) is no change
        self._typing: LineTyping | None = None  # the open cell's steps on the undo history
        self.closeEditor.connect(self._closed)

    def createEditor(self, parent, option, index) -> QWidget:
        cell = super().createEditor(parent, option, index)
        self._typed = False
        if isinstance(cell, QLineEdit):
            self._typing = LineTyping(cell, self.editor.undo_stack, "the fact's wording")
            cell.textEdited.connect(self._on_typed)
        return cell

    def setModelData(self, cell: QWidget, model, index) -> None:
        """Enter the wording: one "edit fact" step, in place of the steps typed in the cell."""
        self._drop_typing_steps()
        super().setModelData(cell, model, index)

    def _drop_typing_steps(self) -> None:
        if self._typing is not None and isValid(self._typing):
            self._typing.drop_steps()

    def _on_typed(self, _text: str) -> None:
        self._typed = True
        self.editor.emit_changed()

    def _closed(self, *_args) -> None:
        """The wording entered, or the old one put back (Esc): a change only if typed in (the
        adjudication window marked a decision changed after F2 then Esc)."""
        self._drop_typing_steps()
        if self._typed:
            self._typed = False
            self.editor.emit_changed()

    def setEditorData(self, cell: QWidget, index) -> None:
        # Qt sets it again whenever the fact's row is shown again (judged with the mouse wheel
        # on its drop-down, an Edit > Undo): that put the old wording over the one being typed
        if isinstance(cell, QLineEdit) and cell.isModified():
            return
        super().setEditorData(cell, index)


class _ResponseText(FittedText):
    """A response's text, as tall as the text (up to its ``max_lines``) where the page has the
    room; where it has not, down to ``min_lines``, and the text scrolls: at 1280 x 720 a
    7-line reply kept its height and left its fact list 46 pixels, one fact of six."""

    def __init__(self, min_lines: int, max_lines: int) -> None:
        super().__init__(min_lines, max_lines)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Maximum)

    def _fit(self, *_args) -> None:
        self.setMinimumHeight(self.height_for_lines(0))
        self.setMaximumHeight(self.height_for_lines(self.document().size().height()))
        self.updateGeometry()

    def sizeHint(self) -> QSize:
        return QSize(super().sizeHint().width(), self.maximumHeight())


class _FactTable(QTableWidget):
    """The fact list, never shorter than its header and MIN_FACT_ROWS facts (the response
    above it gives up its room first). On a narrow pane the judgement columns give up room
    to the wording, down to their headers' widest word (a header then shows a word a line):
    fixed widths of 120 + 190 pixels left the wording 32 at 1024 x 768, and 64 + 96 at the
    narrowest cut the headers ("upportec", "rror categor") at a large font."""

    def __init__(self, titles: list[str], choices: dict[int, list[str]]) -> None:
        super().__init__(0, len(titles))
        self.setHorizontalHeaderLabels(titles)
        self._titles = titles
        self._choices = choices  # each judgement column's drop-down texts

    def judgement_widths(self) -> dict[int, tuple[int, int, int]]:
        """Each judgement column's widths in the fonts shown now: (its header whole on one
        line, a word a line; its header and its longest choice whole)."""
        header = self.horizontalHeader()
        bold = QFont(header.font())
        bold.setBold(True)  # (Qt sizes a header's sections in bold)
        metrics = QFontMetrics(bold)
        widths = {}
        for column, texts in self._choices.items():
            shown = self.horizontalHeaderItem(column).text().split("\n")
            margins = header.sectionSizeHint(column) - max(map(metrics.horizontalAdvance, shown))
            title = self._titles[column]
            whole = metrics.horizontalAdvance(title) + margins
            a_word_a_line = max(map(metrics.horizontalAdvance, title.split())) + margins
            longest = max(drop_down_width(self, text) for text in texts) + int(self.showGrid())
            widths[column] = (whole, a_word_a_line, max(whole, longest))
        return widths

    def fit_judgement_columns(self) -> None:
        """The judgement columns as wide as their longest choice where that leaves the
        wording half the room; where it does not, each its header's words wide (a word a
        line) and of the rest of that half a share in proportion to what it would take."""
        widths = self.judgement_widths()
        half = (self.viewport().width() - self.columnWidth(0)) / 2  # the wording: the other
        least = sum(narrowest for _whole, narrowest, _wide in widths.values())
        wanted = sum(wide - narrowest for _whole, narrowest, wide in widths.values())
        share = 1.0 if wanted <= 0 else min(max((half - least) / wanted, 0.0), 1.0)
        for column, (whole, a_word_a_line, wide) in widths.items():
            shown = a_word_a_line + int((wide - a_word_a_line) * share)
            self.setColumnWidth(column, shown)
            title = self._titles[column]
            self._show_header(column, title if shown >= whole else "\n".join(title.split()))

    def _show_header(self, column: int, text: str) -> None:
        item = self.horizontalHeaderItem(column)
        if item.text() != text:
            item.setText(text)
            self.updateGeometry()  # the header's height: the table's minimum

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self.fit_judgement_columns()

    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:
            self.fit_judgement_columns()

    def minimumSizeHint(self) -> QSize:
        rows = sum(self._row_height(row) for row in range(MIN_FACT_ROWS))
        height = self.horizontalHeader().sizeHint().height() + rows + 2 * self.frameWidth()
        if self.horizontalScrollBar().isVisible():
            height += self.horizontalScrollBar().sizeHint().height()
        return QSize(super().minimumSizeHint().width(), height)

    def sizeHint(self) -> QSize:
        """Its minimum: the room left over comes to it by its stretch, after the response
        above it has had what its text needs."""
        return QSize(super().sizeHint().width(), self.minimumSizeHint().height())

    def _row_height(self, row: int) -> int:
        """A fact's row as shown, or a row's default height where fewer facts are listed."""
        if row < self.rowCount():
            return self.rowHeight(row)
        return self.verticalHeader().defaultSectionSize()


class FactSide(WrappingColumn):
    """One response with its facts: the text, the fact list, and a box to type a new fact."""

    def __init__(self, editor: FactsEditor, side: str) -> None:
        super().__init__()
        self.editor = editor
        self.side = side
        self.title = QLabel()
        self.title.setWordWrap(True)
        self.text_view = _ResponseText(min_lines=3, max_lines=12)
        self.text_view.setObjectName(f"{side}Text")
        self.text_view.setAccessibleName(f"The {side} response: select text, then F")
        self.text_view.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextSelectableByMouse
            | Qt.TextInteractionFlag.TextSelectableByKeyboard
        )
        self.from_selection = QPushButton("List the selection as a fact (F)")
        # each side's buttons named for their side: a screen reader heard two of each
        self.from_selection.setAccessibleName(
            f"List the selection as a fact of the {side} response"
        )
        self.from_selection.clicked.connect(lambda: editor.add_selection(side))
        categories = [label for label, _category in category_labels(editor.catalogs)]
        choices = {
            ENTAILED_COLUMN: [text for text, _value in _ENTAILED_CHOICES],
            CATEGORY_COLUMN: [_NO_CATEGORY, *categories],
        }
        self.table = _FactTable(["#", "Fact", _HEADER[side], "Error category"], choices)
        self.table.setObjectName(f"{side}Facts")
        self.table.setAccessibleName(f"Facts of the {side} response")
        self.table.setTabKeyNavigation(False)  # Tab leaves the table; arrows move in it
        self.table.horizontalHeaderItem(ENTAILED_COLUMN).setToolTip(_HEADER_TIP[side])
        self.table.horizontalHeaderItem(CATEGORY_COLUMN).setToolTip(_CATEGORY_TIP[side])
        self.table.verticalHeader().setVisible(False)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(
            QAbstractItemView.EditTrigger.DoubleClicked
            | QAbstractItemView.EditTrigger.EditKeyPressed
        )
        self.table.setWordWrap(True)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.Interactive)
        header.setSectionResizeMode(3, QHeaderView.ResizeMode.Interactive)
        self.table.fit_judgement_columns()
        self.table.itemChanged.connect(self._on_item)
        self.table.setItemDelegate(_AutosavedCells(self.table, editor))
        self.entry = QLineEdit()
        keep_out_control_characters(self.entry)
        self.entry.setObjectName(f"{side}NewFact")
        self.entry.setPlaceholderText("New fact, then Enter")  # the side: its title above
        self.entry.setAccessibleName(f"New fact of the {side} response")
        hint = self.entry.fontMetrics().horizontalAdvance(self.entry.placeholderText())
        self.entry.setMinimumWidth(hint + 12)  # the hint is read whole
        self.entry.returnPressed.connect(self._add_typed)
        self.entry_typing = LineTyping(self.entry, editor.undo_stack, "the new fact")
        self.entry.textEdited.connect(lambda _t: self.editor.emit_changed())  # (autosaved)
        add = QPushButton("Add")
        add.setAccessibleName(f"Add the fact to the {side} response")
        add.setMaximumWidth(add.fontMetrics().horizontalAdvance("Add") + 32)  # room for the hint
        add.clicked.connect(self._add_typed)
        self.remove = QPushButton("Remove (Del)")  # the fact chosen in the list
        self.remove.setAccessibleName(f"Remove the chosen fact of the {side} response")
        self.remove.clicked.connect(lambda: editor.remove_fact(side, self.table.currentRow()))
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.title)
        layout.addWidget(self.text_view)
        row = QHBoxLayout()
        row.addWidget(self.from_selection)
        row.addStretch(1)
        layout.addLayout(row)
        layout.addWidget(self.table, 1)
        entry_row = QHBoxLayout()
        entry_row.addWidget(self.entry, 1)
        entry_row.addWidget(add)
        entry_row.addWidget(self.remove)
        layout.addLayout(entry_row)
        self.entailed_boxes: list[QComboBox] = []
        self.category_boxes: list[QComboBox] = []
        self._filling = False

    def finish_editing(self) -> None:
        """Enter an open cell editor's wording (F2) and a fact typed in the box (no Enter)."""
        cell = self._open_cell()
        if cell is not None:
            self.table.commitData(cell)  # itemChanged -> editor.edit_fact, as Enter does
            self.table.closeEditor(cell, QAbstractItemDelegate.EndEditHint.NoHint)
        self._add_typed()

    def _open_cell(self) -> QWidget | None:
        """The editor of the fact cell being edited (F2 or a double-click), if one is open."""
        index = self.table.currentIndex()
        editing = self.table.state() == QAbstractItemView.State.EditingState
        return self.table.indexWidget(index) if editing and index.column() == 1 else None

    def rewording(self) -> tuple[int, str] | None:
        """(row, wording) of the fact whose cell is open, its wording on one line; None when
        no cell is open or its wording is empty (a fact cannot be empty: the old one stays)."""
        cell = self._open_cell()
        text = _one_line(cell.text()) if isinstance(cell, QLineEdit) else ""
        return (self.table.currentRow(), text) if text else None

    def typed_fact(self) -> str:
        """The fact typed in the box and not yet entered, on one line ("" if none)."""
        return _one_line(self.entry.text())

    def _add_typed(self) -> None:
        text = self.typed_fact()
        if text:
            self.entry_typing.drop_steps()  # the fact added is the step
            self.editor.add_fact(self.side, text)
            self.entry.clear()

    def _on_item(self, item: QTableWidgetItem) -> None:
        if self._filling or item.column() != 1:
            return
        self.editor.edit_fact(self.side, item.row(), item.text())

    # --- display ----------------------------------------------------------------------------

    def show_facts(self, facts: list[dict[str, Any]]) -> None:
        self._filling = True
        try:
            same_rows = self.table.rowCount() == len(facts)
            if not same_rows:
                self._rebuild(len(facts))
            for row, fact in enumerate(facts):
                self._show_row(row, fact)
            self.table.resizeRowsToContents()
            self.table.updateGeometry()  # its minimum: the first facts' rows as now shown
        finally:
            self._filling = False
        self.remove.setEnabled(bool(facts))

    def _rebuild(self, n: int) -> None:
        cell = self._open_cell()
        if cell is not None:  # a fact added or taken back meanwhile: its row may hold another
            self.table.closeEditor(cell, QAbstractItemDelegate.EndEditHint.RevertModelCache)
        current = self.table.currentRow()
        self.table.setRowCount(n)
        self.entailed_boxes, self.category_boxes = [], []
        for row in range(n):
            number = QTableWidgetItem(str(row + 1))
            number.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable)
            self.table.setItem(row, 0, number)
            self.table.setItem(row, 1, QTableWidgetItem(""))
            entailed = QComboBox()
            entailed.setAccessibleName(f"{_QUESTION[self.side]} (fact {row + 1})")
            wheel_only_when_focused(entailed)  # scrolling the list turned the judgements
            for text, value in _ENTAILED_CHOICES:
                entailed.addItem(text, value)
            entailed.currentIndexChanged.connect(
                lambda _i, r=row, b=entailed: self._on_entailed(r, b.currentData())
            )
            category = _CutChoice()
            category.setAccessibleName(f"Error category (fact {row + 1})")
            wheel_only_when_focused(category)
            category.setSizeAdjustPolicy(
                QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
            )
            category.setMinimumContentsLength(8)
            category.addItem(_NO_CATEGORY, None)
            for label, cat in category_labels(self.editor.catalogs):
                category.addItem(label, cat.id)
                category.setItemData(
                    category.count() - 1, plain_tip(cat.definition), Qt.ItemDataRole.ToolTipRole
                )
            category.currentIndexChanged.connect(
                lambda _i, r=row, b=category: self.editor.set_category(
                    self.side, r, b.currentData()
                )
            )
            for box in (entailed, category):
                box.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
            self.table.setCellWidget(row, ENTAILED_COLUMN, entailed)
            self.table.setCellWidget(row, CATEGORY_COLUMN, category)
            self.entailed_boxes.append(entailed)
            self.category_boxes.append(category)
        if n:
            self.table.setCurrentCell(min(max(current, 0), n - 1), 1)

    def _on_entailed(self, row: int, value: bool | None) -> None:
        if not self._filling:
            self.editor.set_entailed(self.side, row, value)

    def _show_row(self, row: int, fact: dict[str, Any]) -> None:
        item = self.table.item(row, 1)
        item.setText(fact["text"])
        item.setToolTip(plain_tip(fact["text"]))
        entailed = fact["entailed"]  # also said in words in the row's own column
        if entailed is False:
            item.setBackground(colours.mark("fact_lost"))
        elif entailed is True:
            item.setBackground(colours.mark("fact_kept"))
        else:
            item.setBackground(self.table.palette().base())
        box = self.entailed_boxes[row]
        box.blockSignals(True)
        box.setCurrentIndex([v for _t, v in _ENTAILED_CHOICES].index(entailed))
        box.blockSignals(False)
        category = self.category_boxes[row]
        category.blockSignals(True)
        category.setCurrentIndex(max(0, category.findData(fact.get("error_category"))))
        category.setToolTip(_chosen_category_tip(category))
        category.setEnabled(entailed is False)
        category.blockSignals(False)


class FactsEditor(Editor):
    kind = "facts"
    title = "Check facts"

    def __init__(self, catalogs: Catalogs, parent: QWidget | None = None) -> None:
        super().__init__(catalogs, parent)
        # the facts of each side, and "no_facts": the pair said to hold no medical fact at all
        self.state: dict[str, Any] = _empty_state()
        self._pair: int | None = None  # the unit shown (a suggestion shown keeps the boxes)
        self.case_panel = MessagePanel()  # above the replies: the fact tables need the width
        self.sides = {side: FactSide(self, side) for side in SIDES}
        self.scores = LiveFigure()
        self.scores.setObjectName("factScores")
        self.scores.setWordWrap(True)
        self.no_facts_box = QCheckBox("&No medical facts on either side (X)")
        self.no_facts_box.setObjectName("noFacts")
        self.no_facts_box.setToolTip(
            "Neither response states a medical fact (e.g. 'Thank you, see you Friday'): the check "
            "is complete with no facts, and scores 1.0 for recall and precision (seed 004). "
            "Different from not having listed the facts yet."
        )
        self.no_facts_box.clicked.connect(lambda checked: self.set_no_facts(bool(checked)))
        self.notice = QLabel()
        self.notice.setObjectName("factNotice")
        self.notice.setWordWrap(True)
        self.comment = CommentBox(self.undo_stack)
        self.comment.textEdited.connect(lambda _t: self.emit_changed())
        help_text = QLabel(
            "Select text and press F to list it as a fact · in a fact list: Y entailed by the "
            "other text, N not entailed, 0 not judged"
            f"{category_keys(len(catalogs.error_categories))}, F2 edit, Del remove "
            "· X: no medical facts on either side"
        )
        help_text.setObjectName("keyHelp")
        help_text.setWordWrap(True)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        for side in SIDES:
            splitter.addWidget(self.sides[side])
        splitter.setChildrenCollapsible(False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        self.reading = self._message_above(splitter)
        layout.addWidget(self.reading, 1)
        no_facts_row = QHBoxLayout()  # the box as wide as its words: a click beside it misses
        no_facts_row.addWidget(self.no_facts_box)
        no_facts_row.addStretch(1)
        layout.addLayout(no_facts_row)
        layout.addWidget(self.scores)
        layout.addWidget(self.notice)
        layout.addWidget(help_text)
        layout.addWidget(self.comment)
        for side in self.sides.values():
            side.table.installEventFilter(self)
            side.text_view.installEventFilter(self)

    def heightForWidth(self, width: int) -> int:
        """The height the page needs: its minimum, not its preferred height. The window's scroll
        area makes the page this tall (at least the view's height): at the preferred height
        the fact tables' hint was met first and the no-facts box, Fact-Recall, the keyboard
        help and the comment box fell below a laptop's screen (1280 x 720); at the minimum the
        tables take what room there is and the rest stays in view."""
        return self.layout().totalMinimumHeightForWidth(width)

    def _message_above(self, replies: QWidget) -> QSplitter:
        """The patient's message over the replies, at its panel's size hint: a taller window
        gives its room to the replies."""
        reading = QSplitter(Qt.Orientation.Vertical)
        reading.addWidget(self.case_panel)
        reading.addWidget(replies)
        reading.setChildrenCollapsible(False)
        reading.setStretchFactor(0, 0)
        reading.setStretchFactor(1, 1)
        self.case_panel.message_section.toggle.toggled.connect(self._message_folded)
        return reading

    def _message_folded(self, open_: bool) -> None:
        """A folded message gives its room to the replies; unfolded, it takes it back."""
        panel = self.case_panel
        if open_:
            wanted = panel.sizeHint().height()
        else:
            panel.message_section.updateGeometry()  # asked before Qt lays it out again
            wanted = panel.widget().heightForWidth(panel.viewport().width())
        total = sum(self.reading.sizes())
        self.reading.setSizes([wanted, max(0, total - wanted)])

    # --- Editor interface -------------------------------------------------------------------

    def show_unit(self, unit: UnitView, answer: AnswerView | None) -> None:
        self.case_panel.show_case(unit.cases[0])
        self.case_panel.verticalScrollBar().setValue(0)
        for side, response in zip(SIDES, unit.responses, strict=False):
            view = self.sides[side]
            other = "edited" if side == "original" else "original"
            view.title.setText(
                f"<b>{html.escape(response.label)} response</b> — its facts, each checked "
                f"against the {other} response"
            )
            view.text_view.setPlainText(response.text)
            if unit.unit_id != self._pair:  # typed for another pair: never filed under this
                view.entry.clear()
        self._pair = unit.unit_id
        state = _empty_state()
        payload = answer.payload if answer else {}
        state["no_facts"] = bool(payload.get("no_facts"))
        for fact in payload.get("facts", []):
            state[fact["side"]].append(
                {
                    "text": fact["text"],
                    "entailed": fact.get("entailed"),
                    "error_category": fact.get("error_category"),
                }
            )
        self.state = state
        self.comment.set_loaded(answer.comment if answer else "")
        self._say("")
        self._refresh()

    def payload(self) -> dict[str, Any]:
        # A fact being reworded in its cell (F2), or typed in a side's box, and not yet
        # entered is saved with the rest (as leaving the unit enters it): the autosave left
        # it out, and a crash lost it under "Saved".
        rewording = {side: self.sides[side].rewording() for side in SIDES}

        def wording(side: str, row: int, fact: dict[str, Any]) -> str:
            open_cell = rewording[side]
            return open_cell[1] if open_cell is not None and open_cell[0] == row else fact["text"]

        out: dict[str, Any] = {
            "facts": [
                {
                    "side": side,
                    "text": wording(side, row, fact),
                    "entailed": fact["entailed"],
                    "error_category": fact["error_category"] if fact["entailed"] is False else None,
                }
                for side in SIDES
                for row, fact in enumerate(self.state[side])
            ]
        }
        typed = [(side, self.sides[side].typed_fact()) for side in SIDES]
        pending = [
            {"side": side, "text": text, "entailed": None, "error_category": None}
            for side, text in typed
            if text
        ]
        out["facts"] += pending
        if self.state["no_facts"] and not pending:
            out["no_facts"] = True  # only when said, as the store reads it back
        return out

    def finish_editing(self) -> None:
        for side in SIDES:
            self.sides[side].finish_editing()

    def submit_problem(self) -> str | None:
        """The facts not judged yet, each by its side, number and the start of its wording (the
        store's own check only counts them: "1 fact(s) not yet judged" left the clinician to
        search both lists for it)."""
        unjudged = [
            f"{side} fact {row + 1} “{_short(fact['text'])}”"
            for side in SIDES
            for row, fact in enumerate(self.state[side])
            if fact["entailed"] is None
        ]
        if not unjudged:
            return None
        named = ", ".join(unjudged[:UNJUDGED_NAMED])
        more = len(unjudged) - UNJUDGED_NAMED
        rest = f" and {more} more" if more > 0 else ""
        return f"not judged yet (Y or N in its list): {named}{rest}"

    def comment_text(self) -> str | None:
        return self.comment.stored_text()

    def focus_first(self) -> None:
        self.sides["original"].text_view.setFocus()

    # --- changes (all through the undo history) ---------------------------------------------

    def _change(self, text: str, mutate) -> None:
        before = copy.deepcopy(self.state)
        after = copy.deepcopy(self.state)
        mutate(after)
        self.push(text, self._apply, before, after)
        self._refresh()

    def _apply(self, state: dict[str, Any]) -> None:
        self.state = copy.deepcopy(state)
        self._refresh()

    def add_fact(self, side: str, text: str) -> None:
        text = _one_line(text)
        if not text:
            return
        fact = {"text": text, "entailed": None, "error_category": None}

        def mutate(s):
            s[side].append(fact)
            s["no_facts"] = False  # a listed fact contradicts "no facts"

        self._change("add fact", mutate)
        table = self.sides[side].table
        table.setCurrentCell(len(self.state[side]) - 1, 1)

    def add_selection(self, side: str) -> None:
        cursor = self.sides[side].text_view.textCursor()
        text = cursor.selectedText().replace("\u2029", " ").replace("\u2028", " ")
        if not text.strip():
            self._say(f"Select the fact's words in the {side} response first.")
            return
        self._say("")
        self.add_fact(side, text)

    def remove_fact(self, side: str, row: int) -> None:
        if 0 <= row < len(self.state[side]):
            self._change("remove fact", lambda s: s[side].pop(row))

    def edit_fact(self, side: str, row: int, text: str) -> None:
        text = _one_line(text)  # (pasted in a fact's cell, as in the boxes: no control characters)
        if not 0 <= row < len(self.state[side]):
            return
        if not text:
            self._say("A fact cannot be empty; use Delete to remove it.")
            self._refresh()
            return
        self._change("edit fact", lambda s: s[side][row].__setitem__("text", text))

    def set_entailed(self, side: str, row: int, entailed: bool | None) -> None:
        if not 0 <= row < len(self.state[side]):
            return

        def mutate(s):
            s[side][row]["entailed"] = entailed
            if entailed is not False:
                s[side][row]["error_category"] = None

        self._change("entailment", mutate)

    def set_category(self, side: str, row: int, category: str | None) -> None:
        """The error category of a lost (original) or added (edited) fact; choosing one marks
        the fact as not entailed."""
        if not 0 <= row < len(self.state[side]):
            return
        known = {c.id for c in self.catalogs.error_categories}
        if category is not None and category not in known:
            self._say(f"Unknown error category {category!r}.")
            return

        def mutate(s):
            s[side][row]["error_category"] = category
            if category is not None:
                s[side][row]["entailed"] = False

        self._change("error category", mutate)

    def set_no_facts(self, no_facts: bool) -> None:
        """Say (or unsay) that neither response holds a medical fact; refused while facts are
        listed (the store refuses that answer too)."""
        listed = len(self.state["original"]) + len(self.state["edited"])
        if no_facts and listed:
            self._say(
                f"{listed} fact(s) are listed: remove them before saying that neither response "
                "holds a medical fact."
            )
            self._refresh()
            return
        self._say("")
        self._change(
            "no medical facts" if no_facts else "facts to list",
            lambda s: s.__setitem__("no_facts", no_facts),
        )

    def _say(self, text: str) -> None:
        error = colours.text("error")
        self.notice.setText(f"<span style='color:{error}'>{html.escape(text)}</span>")
        self.notice.setVisible(bool(text))
        if text:
            self.said.emit(text)

    # --- keyboard ---------------------------------------------------------------------------

    def handle_key(self, event, watched=None) -> bool:
        plain = event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier
        if plain != Qt.KeyboardModifier.NoModifier:
            return False
        for side, view in self.sides.items():
            if watched not in (view.table, view.text_view):
                continue
            if event.key() == Qt.Key.Key_X and not self._editing(view.table):
                self.set_no_facts(not self.state["no_facts"])
                return True
            if watched is view.table and self._table_key(side, event.key()):
                return True
            if watched is view.text_view and event.key() == Qt.Key.Key_F:
                self.add_selection(side)
                return True
        return False

    @staticmethod
    def _editing(table: QTableWidget) -> bool:
        return table.state() == QAbstractItemView.State.EditingState

    def _table_key(self, side: str, key: int) -> bool:
        table = self.sides[side].table
        if table.state() == QAbstractItemView.State.EditingState:
            return False
        row = table.currentRow()
        if not 0 <= row < len(self.state[side]):
            return False
        categories = self.catalogs.error_categories
        if key == Qt.Key.Key_Y:
            self.set_entailed(side, row, True)
        elif key == Qt.Key.Key_N:
            self.set_entailed(side, row, False)
        elif key == Qt.Key.Key_0:
            self.set_entailed(side, row, None)
        elif key in _DIGITS and 1 <= _DIGITS[key] <= len(categories):
            self.set_category(side, row, categories[_DIGITS[key] - 1].id)
        elif key in (Qt.Key.Key_Delete, Qt.Key.Key_Backspace):
            self.remove_fact(side, row)
        else:
            return False
        if key not in (Qt.Key.Key_Delete, Qt.Key.Key_Backspace) and row + 1 < table.rowCount():
            table.setCurrentCell(row + 1, 1)  # on to the next fact
        return True

    # --- display ----------------------------------------------------------------------------

    def _refresh(self) -> None:
        for side in SIDES:
            self.sides[side].show_facts(self.state[side])
        self.no_facts_box.setChecked(bool(self.state["no_facts"]))
        self._show_scores()

    def counts(self) -> dict[str, int]:
        original, edited = self.state["original"], self.state["edited"]
        return {
            "n_original": sum(f["entailed"] is not None for f in original),
            "n_preserved": sum(f["entailed"] is True for f in original),
            "n_edited": sum(f["entailed"] is not None for f in edited),
            "n_grounded": sum(f["entailed"] is True for f in edited),
            "undecided": sum(f["entailed"] is None for f in (*original, *edited)),
        }

    def _show_scores(self) -> None:
        c = self.counts()
        total = len(self.state["original"]) + len(self.state["edited"])
        if total == 0 and self.state["no_facts"]:
            scores = fact_scores_from_counts(0, 0, 0, 0)
            self.scores.setText(
                f"No medical facts on either side: <b>Fact-Recall {scores.recall:.2f}</b> and "
                f"<b>Fact-Precision {scores.precision:.2f}</b> (seed 004: both fact sets empty)."
            )
            return
        if total == 0:
            self.scores.setText(
                "<b>Fact-Recall</b> and <b>Fact-Precision</b> appear here as the facts are "
                "listed and judged."
            )
            return
        scores = fact_scores_from_counts(
            c["n_original"], c["n_preserved"], c["n_edited"], c["n_grounded"]
        )
        lost = c["n_original"] - c["n_preserved"]
        added = c["n_edited"] - c["n_grounded"]
        # A side whose facts are listed and none judged yet has no figure: seed 004's empty-set
        # rule (1.0) is for a side with no facts, and was shown for five facts not judged.
        recall = _figure(scores.recall, c["n_original"], self.state["original"])
        precision = _figure(scores.precision, c["n_edited"], self.state["edited"])
        f1 = "—" if "—" in (recall, precision) else f"{scores.f1:.2f}"
        text = (
            f"<b>Fact-Recall {recall}</b> ({c['n_preserved']} of {c['n_original']} "
            f"facts of the original kept; {lost} lost) · <b>Fact-Precision "
            f"{precision}</b> ({c['n_grounded']} of {c['n_edited']} facts of the edit "
            f"supported; {added} added) · F1 {f1}"
        )
        if c["undecided"]:
            text += f" · <i>{c['undecided']} fact(s) not judged yet (not counted)</i>"
        self.scores.setText(text)
