"""EPPC coding of one sentence (seed 003, EPPCMinerBen): the sentence with the one before and
after it and who wrote it; the codes it carries (multi-label), one subcode per code (only that
code's own), and the evidence span(s) for each code-subcode pair, selected with the mouse in
the sentence (several spans make a discontinuous evidence span).

Keys (anywhere in the editor but the comment box):

* 1-9: choose code n and make it the current code; on a chosen code that is not current, make
  it current; on the current code, remove it (Space in the code list also ticks / unticks);
* Alt+1-9: the current code's subcode n;
* select text in the sentence (mouse, or Shift+arrows), then E or Enter: add it as evidence of
  the current code; Delete: remove the evidence span chosen in the evidence list (the last one
  when none is chosen);
* W: show or hide the whole message (the sentence's other sentences).

The codebook (definitions of every code and subcode) is on the right, scrolled to the current
code; each code and subcode also has its definition as a tooltip. Offsets are stored as
Python character offsets into the sentence (see :mod:`portalreview.tasks.common.offsets`).
"""

from __future__ import annotations

import copy
import html
from typing import Any

from PySide6.QtCore import QEvent, QSize, Qt, QTimer
from PySide6.QtGui import QBrush, QColor, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QBoxLayout,
    QButtonGroup,
    QFrame,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QRadioButton,
    QSizePolicy,
    QSplitter,
    QTextBrowser,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)

from portalreview.domain.catalogs import Catalogs, EppcCode
from portalreview.domain.spans import merge_spans
from portalreview.store.service import AnswerView, SentenceView, UnitView
from portalreview.tasks.common import colours
from portalreview.tasks.common.editor_base import (
    CommentBox,
    Editor,
    clear_layout,
    keep_selection_keys,
)
from portalreview.tasks.common.offsets import TextOffsets, trim_span
from portalreview.tasks.common.safe_text import plain_tip
from portalreview.tasks.common.screen import SideBySide, WrappingColumn

_DIGITS = {getattr(Qt.Key, f"Key_{i}"): i for i in range(1, 10)}
KEYED = 9  # codes and subcodes with a key: 1-9, Alt+1-9 (a codebook can be extended past it)

# One colour per code (light and dark themes), so evidence of different codes can be told apart.


def key_help(codes: int) -> str:
    """The keys under the codes; a codebook extended past nine codes (or a code past nine
    subcodes) gives the rest no key, which the list and the help say instead of a number
    that does nothing."""
    later = " (the 10th on: click it)" if codes > KEYED else ""
    return (
        f"1-9 choose a code{later} (again: remove it) · Alt+1-9 its subcode · select text, "
        "then E or Enter: evidence · Del removes a span · W whole message"
    )


def _numbered(number: int, name: str) -> str:
    """A code as the list shows it: its key's number first, where it has one."""
    return f"{number}  {name}" if number <= KEYED else name


class FittedText(QTextEdit):
    """A read-only text whose height follows its text (between ``min_lines`` and
    ``max_lines``)."""

    def __init__(self, min_lines: int = 2, max_lines: int = 8) -> None:
        super().__init__()
        self.setReadOnly(True)
        self.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextSelectableByKeyboard
            | Qt.TextInteractionFlag.TextSelectableByMouse
        )
        keep_selection_keys(self)
        self._lines = (min_lines, max_lines)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.document().documentLayout().documentSizeChanged.connect(self._fit)

    def _fit(self, *_args) -> None:
        self.setFixedHeight(self.height_for_lines(self.document().size().height()))

    def height_for_lines(self, text_height: float) -> int:
        """The view's height for ``text_height`` pixels of text, held between ``min_lines``
        and ``max_lines``."""
        low, high = self._lines
        line = self.fontMetrics().lineSpacing()
        height = max(low * line, min(high * line, text_height))
        return int(height) + 2 * self.frameWidth() + 4

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._fit()

    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:
            self._fit()


class TitledBox(QGroupBox):
    """A group box whose title is cut with "…" to the box's width, rather than widening the
    box to a long code's name ("Current code: Information seeking: social determinants of
    health" made the page scroll sideways on a laptop's screen); the whole title is in
    :attr:`full_title` and the tooltip."""

    def __init__(self, title: str) -> None:
        super().__init__(title)
        self.full_title = title

    def setTitle(self, title: str) -> None:  # (Qt's name)
        self.full_title = title
        self._elide()

    def _elide(self) -> None:
        room = max(self.width() - 24, 60)  # the frame's corners and the title's margins
        super().setTitle(
            self.fontMetrics().elidedText(self.full_title, Qt.TextElideMode.ElideRight, room)
        )

    def minimumSizeHint(self) -> QSize:
        hint = super().minimumSizeHint()
        layout = self.layout()
        if layout is None:
            return hint
        return QSize(layout.totalMinimumSize().width(), hint.height())

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._elide()


class EppcEditor(Editor):
    kind = "eppc"
    title = "Code sentences (EPPC)"

    def __init__(self, catalogs: Catalogs, parent: QWidget | None = None) -> None:
        super().__init__(catalogs, parent)
        self.codes: list[EppcCode] = list(catalogs.eppc_codes)
        self.state: dict[str, Any] = {"labels": {}}
        self.current: str | None = None
        self.sentence: SentenceView | None = None
        self.offsets = TextOffsets("")
        self.message_text = ""
        self.message_sentences: tuple[SentenceView, ...] = ()
        self._notice = ""
        self.subcode_buttons: dict[str, QRadioButton] = {}
        self._filling = False

        self._build_context()
        self._build_codes()
        self._build_label_box()
        self.codebook = QTextBrowser()
        self.codebook.setObjectName("codebook")
        self.codebook.setAccessibleName("EPPC codebook: definitions of codes and subcodes")
        self.codebook.setOpenLinks(False)
        self.comment = CommentBox(self.undo_stack)
        self.comment.textEdited.connect(lambda _t: self.emit_changed())
        self._build_layout()
        for widget in (
            self,
            self.sentence_view,
            self.codes_list,
            self.evidence_list,
            self.message_view,
            self.codebook,
            self.message_toggle,
            self.add_button,
            self.remove_button,
        ):
            widget.installEventFilter(self)

    # --- building ---------------------------------------------------------------------------

    def _build_context(self) -> None:
        self.sender_label = QLabel()
        self.sender_label.setObjectName("eppcSender")
        self.position_label = QLabel()
        self.position_label.setObjectName("eppcPosition")
        self.position_label.setWordWrap(True)  # (its width is not the column's minimum)
        self.previous_label = self._context_label("eppcPrevious")
        self.next_label = self._context_label("eppcNext")
        self.sentence_view = FittedText(min_lines=2, max_lines=8)
        self.sentence_view.setObjectName("eppcSentence")
        self.sentence_view.setAccessibleName(
            "Current sentence: select the evidence for the current code"
        )
        self.sentence_view.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextSelectableByMouse
            | Qt.TextInteractionFlag.TextSelectableByKeyboard
        )
        self.sentence_view.setFrameShape(QFrame.Shape.Box)
        self.message_toggle = QPushButton("Whole message (W)")
        self.message_toggle.setCheckable(True)
        self.message_toggle.setToolTip("Show the message this sentence comes from")
        self.message_toggle.toggled.connect(self._show_message)
        self.message_view = QTextEdit(readOnly=True)
        self.message_view.setObjectName("eppcMessage")
        self.message_view.setAccessibleName("The whole message, the current sentence marked")
        self.message_view.setVisible(False)

    @staticmethod
    def _context_label(name: str) -> QLabel:
        label = QLabel()
        label.setObjectName(name)
        label.setWordWrap(True)
        label.setTextFormat(Qt.TextFormat.RichText)
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        label.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)
        return label

    def _build_codes(self) -> None:
        self.codes_list = QListWidget()
        self.codes_list.setObjectName("eppcCodes")
        self.codes_list.setAccessibleName("EPPC codes: tick every code the sentence carries")
        self.codes_list.setWordWrap(True)
        self.codes_list.setUniformItemSizes(False)
        self.codes_list.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.codes_list.setSpacing(1)
        for number, code in enumerate(self.codes, start=1):
            item = QListWidgetItem()
            item.setFlags(
                Qt.ItemFlag.ItemIsEnabled
                | Qt.ItemFlag.ItemIsSelectable
                | Qt.ItemFlag.ItemIsUserCheckable
            )
            item.setCheckState(Qt.CheckState.Unchecked)
            item.setData(Qt.ItemDataRole.UserRole, code.id)
            no_key = "" if number <= KEYED else "<br><i>No key: click its box.</i>"
            item.setToolTip(
                f"<b>{html.escape(code.name)}</b> ({html.escape(code.id)})<br>"
                f"{html.escape(code.definition)}{no_key}"
            )
            item.setText(_numbered(number, code.name))
            item.setTextAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
            self.codes_list.addItem(item)
        self.codes_list.itemChanged.connect(self._on_code_item)
        self.codes_list.currentRowChanged.connect(self._on_code_row)

    def _build_label_box(self) -> None:
        self.label_box = TitledBox("Current code")
        self.label_box.setObjectName("eppcLabel")
        box = QVBoxLayout(self.label_box)
        self.label_title = QLabel()
        self.label_title.setWordWrap(True)
        box.addWidget(self.label_title)
        sub = QWidget()
        self.subcodes_layout = QVBoxLayout(sub)
        self.subcodes_layout.setContentsMargins(0, 0, 0, 0)
        self.subcodes_layout.setSpacing(2)
        self.subcode_group = QButtonGroup(self)
        self.subcode_group.setExclusive(True)
        subcode_part = QWidget()
        sub_column = QVBoxLayout(subcode_part)
        sub_column.setContentsMargins(0, 0, 0, 0)
        sub_column.addWidget(QLabel("<b>Subcode</b> (one; Alt+number)"))
        sub_column.addWidget(sub)
        sub_column.addStretch(1)
        evidence_part = QWidget()
        evidence_column = QVBoxLayout(evidence_part)
        evidence_column.setContentsMargins(0, 0, 0, 0)
        evidence_title = QLabel("<b>Evidence</b> (select it in the sentence)")
        evidence_title.setWordWrap(True)
        evidence_column.addWidget(evidence_title)
        self.evidence_list = QListWidget()
        self.evidence_list.setObjectName("eppcEvidence")
        self.evidence_list.setAccessibleName("Evidence spans of the current code")
        self.evidence_list.setWordWrap(True)
        self.evidence_list.setMaximumHeight(150)
        self.add_button = QPushButton("Add selection (E)")
        self.add_button.setToolTip("Add the text selected in the sentence as evidence (E, Enter)")
        self.add_button.clicked.connect(self.add_selection)
        self.remove_button = QPushButton("Remove span (Del)")
        self.remove_button.setToolTip("Remove the chosen evidence span (Delete)")
        self.remove_button.clicked.connect(self.remove_span)
        # the list above its buttons (side by side with the subcodes), or beside them, the
        # buttons one above the other (under the subcodes: the page's height is short)
        self.evidence_buttons = QBoxLayout(QBoxLayout.Direction.LeftToRight)
        self.evidence_buttons.addWidget(self.add_button)
        self.evidence_buttons.addWidget(self.remove_button)
        self.evidence_buttons.addStretch(1)
        self.evidence_row = QBoxLayout(QBoxLayout.Direction.TopToBottom)
        self.evidence_row.addWidget(self.evidence_list, 1)
        self.evidence_row.addLayout(self.evidence_buttons)
        evidence_column.addLayout(self.evidence_row)
        evidence_column.addStretch(1)
        # side by side on a wide screen; Evidence under Subcode on a laptop's
        self.label_body = SideBySide(
            subcode_part,
            evidence_part,
            lambda: (subcode_part.minimumSizeHint().width(), self._evidence_width_side_by_side()),
        )
        self.label_body.arranged.connect(self._arrange_evidence)
        box.addWidget(self.label_body)
        self.notice_label = QLabel()
        self.notice_label.setObjectName("eppcNotice")
        self.notice_label.setWordWrap(True)
        self.notice_label.setVisible(False)
        box.addWidget(self.notice_label)

    def _show_title(self) -> None:
        """The code's definition (or, with no code, what to do) above the subcodes; not when
        they are stacked, where the codebook shows the definition."""
        self.label_title.setVisible(self.current is None or self.label_body.side_by_side())

    def _evidence_width_side_by_side(self) -> int:
        """The evidence column's minimum width with its buttons in a row (side by side with
        the subcodes), whichever way it is arranged now."""
        buttons = (
            self.add_button.minimumSizeHint().width()
            + max(self.evidence_buttons.spacing(), 0)
            + self.remove_button.minimumSizeHint().width()
        )
        return max(buttons, self.evidence_list.minimumSizeHint().width())

    def _arrange_evidence(self, side_by_side: bool) -> None:
        """Side by side: the list (up to 150 px) above its buttons. Stacked (the page is short
        of width, and so of height): the list beside its buttons, as tall as the two of them,
        and the code's definition left to the codebook beside (scrolled to it, marked)."""
        self._show_title()
        if side_by_side:
            self.evidence_row.setDirection(QBoxLayout.Direction.TopToBottom)
            self.evidence_buttons.setDirection(QBoxLayout.Direction.LeftToRight)
            self.evidence_list.setMaximumHeight(150)
        else:
            self.evidence_row.setDirection(QBoxLayout.Direction.LeftToRight)
            self.evidence_buttons.setDirection(QBoxLayout.Direction.TopToBottom)
            buttons = self.add_button.sizeHint().height() + self.remove_button.sizeHint().height()
            self.evidence_list.setMaximumHeight(buttons + max(self.evidence_buttons.spacing(), 0))

    def _build_layout(self) -> None:
        left = WrappingColumn()
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        keys = f"1-{min(len(self.codes), KEYED)}"
        keys += ", then click" if len(self.codes) > KEYED else ""
        left_layout.addWidget(QLabel(f"<b>Codes</b> of this sentence ({keys})"))
        left_layout.addWidget(self.codes_list, 1)
        self.summary_label = QLabel()
        self.summary_label.setObjectName("eppcSummary")
        self.summary_label.setTextFormat(Qt.TextFormat.PlainText)  # it names codes
        self.summary_label.setWordWrap(True)
        left_layout.addWidget(self.summary_label)
        # here, not under the sentence: the middle column's height goes to the sentence, the
        # subcodes and the evidence (on a laptop's screen it has none to spare)
        help_text = QLabel(key_help(len(self.codes)))
        help_text.setObjectName("keyHelp")
        help_text.setWordWrap(True)
        left_layout.addWidget(help_text)
        left.setMinimumWidth(280)

        middle = WrappingColumn()
        mid = QVBoxLayout(middle)
        mid.setContentsMargins(0, 0, 0, 0)
        top = QHBoxLayout()
        top.addWidget(self.sender_label)
        top.addWidget(self.position_label, 1)
        top.addWidget(self.message_toggle)
        mid.addLayout(top)
        mid.addWidget(self.previous_label)
        mid.addWidget(self.sentence_view)
        mid.addWidget(self.next_label)
        mid.addWidget(self.message_view, 1)
        mid.addWidget(self.label_box)
        self.filler = QWidget()
        mid.addWidget(self.filler, 1)

        right = QWidget()
        right_layout = QVBoxLayout(right)
        right_layout.setContentsMargins(0, 0, 0, 0)
        right_layout.addWidget(QLabel("<b>Codebook</b>"))
        right_layout.addWidget(self.codebook, 1)
        right.setMinimumWidth(220)

        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(left)
        splitter.addWidget(middle)
        splitter.addWidget(right)
        splitter.setStretchFactor(0, 2)
        splitter.setStretchFactor(1, 5)
        splitter.setStretchFactor(2, 2)
        splitter.setSizes([300, 620, 280])
        splitter.setChildrenCollapsible(False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(splitter, 1)
        layout.addWidget(self.comment)  # across the whole width, under the columns

    # --- Editor interface -------------------------------------------------------------------

    def show_unit(self, unit: UnitView, answer: AnswerView | None) -> None:
        self.sentence = unit.sentence
        text = unit.sentence.text if unit.sentence else ""
        self.offsets = TextOffsets(text)
        self.sentence_view.setPlainText(text)
        if unit.sender == "provider" and unit.responses:
            self.message_text = unit.responses[0].text
            self.message_sentences = unit.responses[0].sentences
        elif unit.cases:
            self.message_text = unit.cases[0].message
            self.message_sentences = unit.cases[0].sentences
        else:
            self.message_text, self.message_sentences = text, ()
        self._show_context(unit)
        labels = (answer.payload if answer else {}).get("labels", [])
        self.state = {
            "labels": {
                lb["code"]: {
                    "subcode": lb.get("subcode"),
                    "spans": [list(s) for s in lb.get("spans", [])],
                }
                for lb in labels
            }
        }
        self.comment.set_loaded(answer.comment if answer else "")
        chosen = [c.id for c in self.codes if c.id in self.state["labels"]]
        self.current = chosen[0] if chosen else None
        self._notice = ""
        self._refresh()

    def payload(self) -> dict[str, Any]:
        labels = []
        for code in self.codes:
            label = self.state["labels"].get(code.id)
            if label is not None:
                labels.append(
                    {
                        "code": code.id,
                        "subcode": label["subcode"],
                        "spans": [list(s) for s in label["spans"]],
                    }
                )
        return {"labels": labels}

    def comment_text(self) -> str | None:
        return self.comment.stored_text()

    def focus_first(self) -> None:
        self.codes_list.setFocus()

    def set_text_zoom(self, point_size: float) -> None:
        super().set_text_zoom(point_size)
        font = self.sentence_view.font()
        font.setPointSizeF(point_size * 1.25)
        self.sentence_view.setFont(font)

    # --- changes (all through the undo history) ---------------------------------------------

    def _change(self, text: str, mutate) -> None:
        before = copy.deepcopy(self.state)
        after = copy.deepcopy(self.state)
        mutate(after)
        self.push(text, self._apply, before, after)

    def _apply(self, state: dict[str, Any]) -> None:
        self.state = copy.deepcopy(state)
        if self.current not in self.state["labels"]:
            chosen = [c.id for c in self.codes if c.id in self.state["labels"]]
            self.current = chosen[-1] if chosen else None
        self._refresh()

    def code(self, code_id: str) -> EppcCode:
        return next(c for c in self.codes if c.id == code_id)

    def set_code(self, code_id: str, chosen: bool) -> None:
        """Choose (with no subcode or evidence yet) or remove a code."""
        if chosen:
            self.current = code_id
            if code_id not in self.state["labels"]:
                self._change(
                    f"code {code_id}",
                    lambda s: s["labels"].__setitem__(code_id, {"subcode": None, "spans": []}),
                )
        elif code_id in self.state["labels"]:
            self._change(f"remove {code_id}", lambda s: s["labels"].pop(code_id, None))
        self._refresh()

    def press_code_number(self, number: int) -> None:
        """Number key n: choose code n, go to it if chosen, remove it if it is current."""
        if not 1 <= number <= len(self.codes):
            return
        code_id = self.codes[number - 1].id
        if code_id in self.state["labels"] and code_id != self.current:
            self.current = code_id
            self._refresh()
        else:
            self.set_code(code_id, code_id not in self.state["labels"])

    def set_subcode(self, code_id: str, subcode: str | None) -> bool:
        """Give a chosen code its subcode. A subcode of another code is refused (False, and
        a message under the subcodes names the code's own)."""
        if code_id not in self.state["labels"]:
            self._say(f"Choose the code {self.code(code_id).name} first.")
            return False
        own = [s.id for s in self.code(code_id).subcodes]
        if subcode is not None and subcode not in own:
            names = ", ".join(s.name for s in self.code(code_id).subcodes)
            self._say(
                f"“{subcode}” is not a subcode of {self.code(code_id).name}. "
                f"Its subcodes are: {names}."
            )
            return False
        self._notice = ""
        self._change(
            f"subcode {subcode}",
            lambda s: s["labels"][code_id].__setitem__("subcode", subcode),
        )
        self._refresh()
        return True

    def selected_span(self) -> tuple[int, int] | None:
        """The mouse (or keyboard) selection in the sentence as Python offsets, trimmed of
        surrounding spaces; None when nothing but spaces is selected."""
        cursor = self.sentence_view.textCursor()
        if not cursor.hasSelection():
            return None
        start, end = self.offsets.span_from_qt(cursor.selectionStart(), cursor.selectionEnd())
        start, end = trim_span(self.offsets.text, start, end)
        return (start, end) if end > start else None

    def add_selection(self) -> None:
        if self.current is None:
            self._say("Choose a code first (1-9), then select its evidence in the sentence.")
            return
        span = self.selected_span()
        if span is None:
            self._say("Select the evidence in the sentence first (mouse, or Shift+arrows).")
            return
        self.add_span(self.current, *span)

    def add_span(self, code_id: str, start: int, end: int) -> None:
        """Add ``[start, end)`` (Python offsets into the sentence) as evidence of a code."""
        self._notice = ""
        self._change(
            "evidence",
            lambda s: s["labels"][code_id].__setitem__(
                "spans", merge_spans([*s["labels"][code_id]["spans"], [start, end]])
            ),
        )
        self.sentence_view.moveCursor(QTextCursor.MoveOperation.Start)
        self._refresh()

    def remove_span(self) -> None:
        if self.current is None or not self.state["labels"][self.current]["spans"]:
            return
        code_id = self.current
        row = self.evidence_list.currentRow()
        spans = self.state["labels"][code_id]["spans"]
        index = row if 0 <= row < len(spans) else len(spans) - 1
        self._change("remove evidence", lambda s: s["labels"][code_id]["spans"].pop(index))
        self._refresh()

    def toggle_message(self) -> None:
        self.message_toggle.toggle()

    def _say(self, text: str, again: bool = False) -> None:
        """Show ``text`` in the notice (``again``: redrawn, not said anew)."""
        self._notice = text
        error = colours.text("error")
        self.notice_label.setText(f"<span style='color:{error}'>{html.escape(text)}</span>")
        self.notice_label.setVisible(bool(text))
        if text and not again:
            self.said.emit(text)

    # --- keyboard ---------------------------------------------------------------------------

    def handle_key(self, event, watched=None) -> bool:
        if watched is self and self.comment.hasFocus():
            return False
        return self._handle_key(event)

    def _handle_key(self, event) -> bool:
        key, mods = event.key(), event.modifiers()
        mods &= ~Qt.KeyboardModifier.KeypadModifier
        if key in _DIGITS and mods == Qt.KeyboardModifier.AltModifier:
            self._subcode_key(_DIGITS[key])
            return True
        if mods != Qt.KeyboardModifier.NoModifier:
            return False
        if key in _DIGITS:
            self.press_code_number(_DIGITS[key])
        elif key in (Qt.Key.Key_E, Qt.Key.Key_Return, Qt.Key.Key_Enter):
            self.add_selection()
        elif key in (Qt.Key.Key_Delete, Qt.Key.Key_Backspace):
            self.remove_span()
        elif key == Qt.Key.Key_W:
            self.toggle_message()
        else:
            return False
        return True

    def _subcode_key(self, number: int) -> None:
        if self.current is None:
            self._say("Choose a code first (1-9); Alt+number then picks its subcode.")
            return
        subcodes = self.code(self.current).subcodes
        if not 1 <= number <= len(subcodes):
            self._say(
                f"{self.code(self.current).name} has {len(subcodes)} subcodes; "
                f"Alt+{number} is not one of them."
            )
            return
        self.set_subcode(self.current, subcodes[number - 1].id)

    # --- reacting to the widgets ------------------------------------------------------------

    def _on_code_item(self, item: QListWidgetItem) -> None:
        if self.loading or self._filling:
            return
        code_id = item.data(Qt.ItemDataRole.UserRole)
        self.set_code(code_id, item.checkState() == Qt.CheckState.Checked)

    def _on_code_row(self, row: int) -> None:
        if self._filling or not 0 <= row < len(self.codes):
            return
        code_id = self.codes[row].id
        if code_id in self.state["labels"] and code_id != self.current:
            self.current = code_id
            self._refresh()
        else:
            self._show_codebook(code_id)

    def _on_subcode_button(self, subcode: str) -> None:
        if self.current is not None:
            self.set_subcode(self.current, subcode)

    # --- display ----------------------------------------------------------------------------

    def _show_context(self, unit: UnitView) -> None:
        sender = unit.sender or "patient"
        colour = colours.sender("patient" if sender == "patient" else "provider")
        self.sender_label.setText(
            f"<span style='color:white;background:{colour};'>&nbsp;From the {sender}&nbsp;</span>"
        )
        total = len(self.message_sentences)
        where = (self.sentence.position + 1) if self.sentence else 0
        self.position_label.setText(f"Sentence {where} of {total}" if total else "")
        self.position_label.setToolTip(
            f"Sentence {where} of the {total} of this message" if total else ""
        )
        muted = colours.text("muted")

        def context(title: str, sentence: SentenceView | None, missing: str) -> str:
            body = html.escape(sentence.text) if sentence else f"<i>{missing}</i>"
            return f"<span style='color:{muted}'><b>{title}:</b> {body}</span>"

        self.previous_label.setText(
            context("Before", unit.previous_sentence, "(this is the first sentence)")
        )
        self.next_label.setText(context("After", unit.next_sentence, "(this is the last sentence)"))
        self.message_view.setPlainText(self.message_text)
        self._mark_in_message()

    def _mark_in_message(self) -> None:
        if self.sentence is None:
            self.message_view.setExtraSelections([])
            return
        offsets = TextOffsets(self.message_text)
        start, end = self.sentence.start, self.sentence.end
        if not 0 <= start <= end <= len(self.message_text):
            return
        selection = QTextEdit.ExtraSelection()
        cursor = QTextCursor(self.message_view.document())
        cursor.setPosition(offsets.to_qt(start))
        cursor.setPosition(offsets.to_qt(end), QTextCursor.MoveMode.KeepAnchor)
        selection.cursor = cursor
        fmt = QTextCharFormat()
        fmt.setBackground(colours.mark("current_sentence"))
        fmt.setFontWeight(700)
        selection.format = fmt
        self.message_view.setExtraSelections([selection])
        anchor = QTextCursor(self.message_view.document())
        anchor.setPosition(offsets.to_qt(start))
        self.message_view.setTextCursor(anchor)
        self.message_view.ensureCursorVisible()

    def _show_message(self, shown: bool) -> None:
        self.message_view.setVisible(shown)
        self.filler.setVisible(not shown)
        self.previous_label.setVisible(not shown)
        self.next_label.setVisible(not shown)
        if shown:
            self._mark_in_message()

    def _colour(self, code_id: str) -> QColor:
        return colours.code_mark([c.id for c in self.codes].index(code_id))

    def _refresh(self) -> None:
        self._filling = True
        try:
            self._show_codes()
        finally:
            self._filling = False
        self._show_label_box()
        self._highlight()
        self._show_codebook(self.current)
        self._show_summary()

    def _show_codes(self) -> None:
        labels = self.state["labels"]
        for row, code in enumerate(self.codes):
            item = self.codes_list.item(row)
            label = labels.get(code.id)
            item.setCheckState(Qt.CheckState.Checked if label else Qt.CheckState.Unchecked)
            marker = "▶ " if code.id == self.current else ""
            text = f"{marker}{_numbered(row + 1, code.name)}"
            if label is not None:
                sub = self._subcode_name(code, label["subcode"]) or (
                    "no subcode yet" if code.subcodes else "no subcodes to choose"
                )
                n = len(label["spans"])
                spans = f"{n} span{'s' if n != 1 else ''}" if n else "no evidence yet"
                text += f"\n→ {sub} · {spans}"
                # the code's colour, as its evidence has in the sentence (an icon would upset
                # Qt's layout of wrapped item text)
                item.setBackground(self._colour(code.id))
            else:
                item.setBackground(QBrush())
            item.setText(text)
            font = item.font()
            font.setBold(code.id == self.current)
            item.setFont(font)
        if self.current is not None:
            row = [c.id for c in self.codes].index(self.current)
            if self.codes_list.currentRow() != row:
                self.codes_list.setCurrentRow(row)

    @staticmethod
    def _subcode_name(code: EppcCode, subcode: str | None) -> str | None:
        return next((s.name for s in code.subcodes if s.id == subcode), subcode)

    def _order_subcodes_for_tab(self) -> None:
        """Tab reaches the subcodes where they are on screen, between the sentence and the
        evidence (made anew, they came last, after the comment box)."""
        previous = self.sentence_view
        for button in self.subcode_buttons.values():
            QWidget.setTabOrder(previous, button)
            previous = button
        QWidget.setTabOrder(previous, self.evidence_list)

    def _show_label_box(self) -> None:
        # The subcode buttons are made anew: the one with the focus is deleted, and the focus
        # went to the work queue's filter (an arrow key then emptied the queue).
        subcode_had_focus = QApplication.focusWidget() in self.subcode_group.buttons()
        clear_layout(self.subcodes_layout)
        for button in self.subcode_group.buttons():
            self.subcode_group.removeButton(button)
        self.subcode_buttons = {}
        self.evidence_list.clear()
        current = self.current
        enabled = current is not None
        self.label_body.setVisible(enabled)
        self.add_button.setEnabled(enabled)
        self.remove_button.setEnabled(enabled and bool(self.state["labels"][current]["spans"]))
        self._show_title()
        if current is None:
            self.label_box.setTitle("Current code")
            self.label_box.setToolTip("")
            self.label_title.setText(
                "<i>No code chosen yet. Press 1-9 or tick a code on the left; a sentence that "
                "carries no EPPC code is left with none.</i>"
            )
        else:
            code = self.code(current)
            label = self.state["labels"][current]
            self.label_box.setTitle(f"Current code: {code.name}")
            self.label_title.setText(f"<i>{html.escape(code.definition)}</i>")
            self.label_box.setToolTip(
                f"<b>{html.escape(code.name)}</b><br>{html.escape(code.definition)}"
            )
            for number, subcode in enumerate(code.subcodes, start=1):
                keyed = f"Alt+{number}  " if number <= KEYED else ""
                button = QRadioButton(f"{keyed}{subcode.name}")
                button.setToolTip(plain_tip(subcode.definition))
                button.setObjectName(f"subcode_{number}")
                button.setChecked(label["subcode"] == subcode.id)
                button.clicked.connect(lambda _=False, s=subcode.id: self._on_subcode_button(s))
                button.installEventFilter(self)
                self.subcode_group.addButton(button)
                self.subcode_buttons[subcode.id] = button
                self.subcodes_layout.addWidget(button)
                button.show()  # now, not at the next event loop turn
            self._order_subcodes_for_tab()
            text = self.offsets.text
            for start, end in label["spans"]:
                item = QListWidgetItem(f"“{text[start:end]}”")
                item.setToolTip(f"Characters {start} to {end} of the sentence")
                self.evidence_list.addItem(item)
            if not label["spans"]:
                item = QListWidgetItem("none yet: select it in the sentence, then E")
                item.setFlags(Qt.ItemFlag.NoItemFlags)
                self.evidence_list.addItem(item)
        if subcode_had_focus:  # on the subcode chosen, else back to the editor's keys
            chosen = None if current is None else self.state["labels"][current]["subcode"]
            button = self.subcode_buttons.get(chosen)
            (button or next(iter(self.subcode_buttons.values()), self)).setFocus()
        if self._notice:
            self._say(self._notice, again=True)
        else:
            self.notice_label.clear()
            self.notice_label.setVisible(False)

    def _highlight(self) -> None:
        selections = []
        for code in self.codes:
            label = self.state["labels"].get(code.id)
            if not label:
                continue
            for start, end in label["spans"]:
                if not 0 <= start < end <= len(self.offsets.text):
                    continue
                selection = QTextEdit.ExtraSelection()
                cursor = QTextCursor(self.sentence_view.document())
                qs, qe = self.offsets.span_to_qt(start, end)
                cursor.setPosition(qs)
                cursor.setPosition(qe, QTextCursor.MoveMode.KeepAnchor)
                selection.cursor = cursor
                fmt = QTextCharFormat()
                fmt.setBackground(self._colour(code.id))
                # not by colour alone: evidence is underlined (dotted), the current code's
                # evidence with a full line and in bold
                fmt.setUnderlineStyle(QTextCharFormat.UnderlineStyle.DotLine)
                if code.id == self.current:
                    fmt.setUnderlineStyle(QTextCharFormat.UnderlineStyle.SingleUnderline)
                    fmt.setFontWeight(700)
                selection.format = fmt
                selections.append(selection)
        self.sentence_view.setExtraSelections(selections)

    def _show_codebook(self, code_id: str | None) -> None:
        marked = colours.mark("focus_entry").name()
        parts = []
        for number, code in enumerate(self.codes, start=1):
            style = f" style='background:{marked}'" if code.id == code_id else ""
            subs = "".join(
                f"<li><b>{html.escape(s.name)}</b>: {html.escape(s.definition)}</li>"
                for s in code.subcodes
            )
            parts.append(
                f"<a name='code{number}'></a><div{style}><p><b>{number} · "
                f"{html.escape(code.name)}</b> <small>({html.escape(code.id)})</small><br>"
                f"{html.escape(code.definition)}</p><ul style='margin-left:-20px'>{subs}</ul>"
                "</div>"
            )
        self.codebook.setHtml("".join(parts))
        if code_id is not None:
            number = [c.id for c in self.codes].index(code_id) + 1
            self.codebook.scrollToAnchor(f"code{number}")
            # again once the layout has settled (a new page is laid out after this call)
            QTimer.singleShot(
                0, self.codebook, lambda: self.codebook.scrollToAnchor(f"code{number}")
            )

    def _show_summary(self) -> None:
        labels = self.state["labels"]
        if not labels:
            self.summary_label.setText("No code chosen: the sentence carries no EPPC code.")
            return
        missing = [
            self.code(c).name
            for c, lb in labels.items()
            if lb["subcode"] is None or not lb["spans"]
        ]
        text = f"{len(labels)} code{'s' if len(labels) != 1 else ''} chosen."
        if missing:
            text += " Still to do (subcode or evidence): " + ", ".join(missing) + "."
        self.summary_label.setText(text)
