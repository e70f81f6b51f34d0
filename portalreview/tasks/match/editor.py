"""Match: for each sentence of the reference (clinician) response, the verbatim part of the
draft that carries the same content, or NO MATCH; and a theme label for every sentence of both
responses (seed 000, Section 3, Algorithm 1; the labels feed Theme-Level Edit-F1, Section 3.2).

Keys: select text in the draft (mouse, or Shift+arrows; S selects the draft sentence at the
cursor), then M or Enter matches it to the current reference sentence; X marks NO MATCH;
Delete clears the current sentence's decision. The current sentence moves on to the next
undecided one after each decision; Up/Down in the reference list move it by hand. In either
sentence list, number key n gives the selected sentence the n-th theme (0 removes it) and moves
down a row.
"""

from __future__ import annotations

import copy
import html
import itertools
import math
from typing import Any

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QColor, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSplitter,
    QStyle,
    QTableWidget,
    QTableWidgetItem,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)

from portalreview.domain.catalogs import Catalogs
from portalreview.domain.spans import merge_spans
from portalreview.metrics.edit_f1 import content_edit_f1, theme_edit_f1
from portalreview.store.service import AnswerView, ResponseView, SentenceView, UnitView
from portalreview.tasks.common import colours
from portalreview.tasks.common.case_panel import CasePanel
from portalreview.tasks.common.editor_base import (
    Editor,
    LiveFigure,
    keep_in_view_when_focused,
    keep_selection_keys,
    wheel_only_when_focused,
)
from portalreview.tasks.common.offsets import TextOffsets
from portalreview.tasks.common.safe_text import plain_tip
from portalreview.tasks.common.screen import TurningSplitter

NO_THEME = "no theme"  # words: on Linux a screen reader names a drop-down by its text


def _numbers(numbers: list[int], most: int = 8) -> str:
    """Sentence numbers for a message: "4", "4 and 12", "1, 4 and 12", past ``most`` counted."""
    shown = [str(n) for n in numbers[:most]]
    if len(numbers) > most:
        return f"{', '.join(shown)} and {len(numbers) - most} more"
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} and {shown[-1]}"


class SentenceTable(QTableWidget):
    """Sentences of one response with a theme drop-down each (and a decision column for the
    reference)."""

    def __init__(
        self, catalogs: Catalogs, columns: list[str], name: str, title: str, sentence: str
    ) -> None:
        """``sentence``: what a row is called in its drop-down's name ("reference sentence":
        both tables said "Theme of sentence 1", and a screen reader could not tell them
        apart)."""
        super().__init__(0, len(columns))
        self.catalogs = catalogs
        self.sentence_word = sentence
        self.setObjectName(name)
        self.setAccessibleName(title)  # what a screen reader says, in words
        self.setHorizontalHeaderLabels(columns)
        self.verticalHeader().setVisible(False)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setTabKeyNavigation(False)  # Tab leaves the table; Up/Down choose a sentence
        self.setWordWrap(True)
        self.setTextElideMode(Qt.TextElideMode.ElideNone)
        header = self.horizontalHeader()
        for i in range(len(columns)):
            header.setSectionResizeMode(i, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(len(columns) - 1, QHeaderView.ResizeMode.Fixed)
        header.resizeSection(len(columns) - 1, 190)
        self.theme_boxes: dict[int, QComboBox] = {}
        self.sentence_ids: list[int] = []
        header.sectionResized.connect(lambda *_: self.resizeRowsToContents())

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self.resizeRowsToContents()  # wrapped sentences are read whole, never elided

    def minimumSizeHint(self) -> QSize:
        """Wide enough for every column with the sentences' column at least as wide as its
        header (said whole) and about a dozen characters, so a splitter never squeezes it."""
        hint = super().minimumSizeHint()
        header = self.horizontalHeader()
        margin = 2 * self.style().pixelMetric(QStyle.PixelMetric.PM_HeaderMargin) + 4
        title = header.fontMetrics().horizontalAdvance(self.horizontalHeaderItem(1).text())
        sentences = max(title + margin, self.fontMetrics().averageCharWidth() * 12)
        others = sum(header.sectionSize(i) for i in range(self.columnCount()) if i != 1)
        bar = self.verticalScrollBar().sizeHint().width()
        width = others + sentences + bar + 2 * self.frameWidth()
        return QSize(max(hint.width(), width), hint.height())

    def fill(self, sentences: tuple[SentenceView, ...], on_theme) -> None:
        self.setRowCount(len(sentences))
        self.theme_boxes = {}
        self.sentence_ids = [s.id for s in sentences]
        theme_column = self.columnCount() - 1
        for row, sentence in enumerate(sentences):
            self.setItem(row, 0, QTableWidgetItem(str(row + 1)))
            self.setItem(row, 1, QTableWidgetItem(sentence.text))
            box = QComboBox()
            box.setSizeAdjustPolicy(
                QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
            )
            box.setMinimumContentsLength(10)
            box.addItem(NO_THEME, None)
            for number, theme in enumerate(self.catalogs.themes, start=1):
                box.addItem(f"{number} {theme.name}", theme.id)
                tip = plain_tip(theme.definition)
                box.setItemData(box.count() - 1, tip, Qt.ItemDataRole.ToolTipRole)
            box.setAccessibleName(f"Theme of {self.sentence_word} {row + 1}")
            wheel_only_when_focused(box)  # scrolling the list turned the themes it passed
            box.currentIndexChanged.connect(lambda _i, b=box: self._describe(b))
            box.currentIndexChanged.connect(
                lambda _i, sid=sentence.id, b=box: on_theme(sid, b.currentData())
            )
            self.theme_boxes[sentence.id] = box
            holder = QWidget()  # keeps the drop-down its natural height in a tall row
            holder_layout = QVBoxLayout(holder)
            holder_layout.setContentsMargins(2, 2, 2, 2)
            # On Linux (AT-SPI) Qt names a drop-down by its current text: the sentence it is
            # for comes from a label (a "labelled by" relation; not shown, the row says it) and
            # from the description, which also says the theme chosen.
            label = QLabel(box.accessibleName(), holder)
            label.setBuddy(box)
            label.hide()
            self._describe(box)
            holder_layout.addWidget(box, 0, Qt.AlignmentFlag.AlignVCenter)
            self.setCellWidget(row, theme_column, holder)
            keep_in_view_when_focused(self, row, theme_column, box)
        self.resizeRowsToContents()
        self.updateGeometry()  # the columns' widths changed: so did the minimum width

    def show_themes(self, themes: dict[int, str | None]) -> None:
        for sentence_id, box in self.theme_boxes.items():
            box.blockSignals(True)
            box.setCurrentIndex(max(0, box.findData(themes.get(sentence_id))))
            box.blockSignals(False)
            self._describe(box)

    def _describe(self, box: QComboBox) -> None:
        """The drop-down's description: "Theme of reference sentence N: <theme, or none>"."""
        names = {theme.id: theme.name for theme in self.catalogs.themes}
        chosen = names.get(box.currentData(), "none")
        box.setAccessibleDescription(f"{box.accessibleName()}: {chosen}")


class MatchEditor(Editor):
    kind = "match"
    title = "Match content"

    def __init__(self, catalogs: Catalogs, parent: QWidget | None = None) -> None:
        super().__init__(catalogs, parent)
        self.reference: ResponseView | None = None
        self.draft: ResponseView | None = None
        # spans are stored as Python offsets into the draft; the view counts UTF-16 units
        self.offsets = TextOffsets("")
        self.state: dict[str, Any] = {"decisions": {}, "themes": {}}
        self.current: int | None = None

        self.case_panel = CasePanel()
        self.ref_table = SentenceTable(
            catalogs,
            ["#", "Sentence", "Match", "Theme"],  # the title above says "reference"
            "referenceSentences",
            "Sentences of the reference response (the clinician's)",
            "reference sentence",
        )
        self.ref_table.currentCellChanged.connect(self._on_current_row)
        self.draft_view = QTextEdit(readOnly=True)
        self.draft_view.setObjectName("draftText")
        self.draft_view.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextSelectableByKeyboard
            | Qt.TextInteractionFlag.TextSelectableByMouse
        )
        keep_selection_keys(self.draft_view)
        self.draft_view.setAccessibleName("Draft text: select the part that matches")
        self.draft_view.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextSelectableByMouse
            | Qt.TextInteractionFlag.TextSelectableByKeyboard
        )
        self.draft_table = SentenceTable(
            catalogs,
            ["#", "Draft sentence", "Theme"],
            "draftSentences",
            "Sentences of the draft",
            "draft sentence",
        )
        self.current_label = QLabel()
        self.current_label.setWordWrap(True)
        self.current_label.setObjectName("currentSentence")
        self.scores = LiveFigure()
        self.scores.setObjectName("runningScores")
        self.scores.setWordWrap(True)  # a long line of figures: wrapped, not a wide editor
        self.match_button = QPushButton("&Match selection (M)")
        self.match_button.clicked.connect(self.match_selection)
        self.no_match_button = QPushButton("NO MATCH (X)")
        self.no_match_button.clicked.connect(self.mark_no_match)
        clear_button = QPushButton("Clear (Del)")
        clear_button.clicked.connect(self.clear_current)
        self.clear_button = clear_button
        self._build_layout(clear_button)
        self._shortcuts()

    def _build_layout(self, clear_button: QPushButton) -> None:
        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        title = QLabel("<b>Reference response</b> (the clinician's), by sentence")
        title.setWordWrap(True)
        left_layout.addWidget(title)
        left_layout.addWidget(self.ref_table, 1)
        right = QWidget()
        right_layout = QVBoxLayout(right)
        right_layout.setContentsMargins(0, 0, 0, 0)
        right_layout.addWidget(self.current_label)
        legend = QLabel(
            "Select the draft text that says the same thing. Green, underlined: matched "
            "(darker, with a line above too: this sentence's match). Red wavy underline: not "
            "matched so far, i.e. what would be deleted."
        )
        legend.setWordWrap(True)
        right_layout.addWidget(legend)
        right_layout.addWidget(self.draft_view, 3)
        buttons = QHBoxLayout()
        for button in (self.match_button, self.no_match_button, clear_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        right_layout.addLayout(buttons)
        right_layout.addWidget(QLabel("<b>Draft sentences</b>: theme labels"))
        right_layout.addWidget(self.draft_table, 2)
        # the reference above the draft where the page is too narrow for them side by side
        # (beside the work queue on a 1024-pixel screen), not a page scrolled sideways
        work = TurningSplitter(left, right, (52, 54), stacked_shares=(1, 2))
        work.setObjectName("matchWork")
        self.work = work
        outer = QSplitter(Qt.Orientation.Horizontal)
        outer.addWidget(self.case_panel)
        outer.addWidget(work)
        outer.setStretchFactor(0, 1)
        outer.setStretchFactor(1, 4)
        outer.setSizes([260, 1060])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(outer, 1)
        layout.addWidget(self.scores)

    def _shortcuts(self) -> None:
        """M/Enter, X, Delete and S act wherever the focus is in the editor, except in a theme
        drop-down (where letters pick a theme)."""
        self._keys = {
            Qt.Key.Key_M: self.match_selection,
            Qt.Key.Key_Return: self.match_selection,
            Qt.Key.Key_Enter: self.match_selection,
            Qt.Key.Key_X: self.mark_no_match,
            Qt.Key.Key_Delete: self.clear_current,
            Qt.Key.Key_S: self.select_sentence_at_cursor,
        }
        self.route_keys_from(self.draft_view, self.ref_table, self.draft_table)

    def handle_key(self, event, watched=None) -> bool:
        return self._theme_key(watched, event) or self._handle_key(event)

    def _theme_key(self, watched, event) -> bool:
        """In a sentence list, number key n labels the current sentence with the n-th theme
        (0 removes the label)."""
        if not isinstance(watched, SentenceTable) or event.modifiers() not in (
            Qt.KeyboardModifier.NoModifier,
            Qt.KeyboardModifier.KeypadModifier,
        ):
            return False
        number = event.key() - Qt.Key.Key_0
        row = watched.currentRow()
        if not 0 <= number <= min(9, len(self.catalogs.themes)) or row < 0:
            return False
        theme = self.catalogs.themes[number - 1].id if number else None
        self.set_theme(watched.sentence_ids[row], theme)
        if row + 1 < watched.rowCount():
            watched.setCurrentCell(row + 1, 1)
        return True

    def _handle_key(self, event) -> bool:
        plain = event.modifiers() in (
            Qt.KeyboardModifier.NoModifier,
            Qt.KeyboardModifier.KeypadModifier,
        )
        action = self._keys.get(event.key()) if plain else None
        if action is None:
            return False
        action()
        return True

    # --- Editor interface -------------------------------------------------------------------

    def show_unit(self, unit: UnitView, answer: AnswerView | None) -> None:
        self.case_panel.show_case(unit.cases[0])
        self.reference, self.draft = unit.responses[0], unit.responses[1]
        payload = answer.payload if answer else {}
        decisions = {
            d["sentence_id"]: [list(s) for s in d["spans"]] for d in payload.get("decisions", [])
        }
        themes = {t["sentence_id"]: t["theme"] for t in payload.get("themes", [])}
        self.state = {"decisions": decisions, "themes": themes}
        self.ref_table.fill(self.reference.sentences, self.set_theme)
        self.draft_table.fill(self.draft.sentences, self.set_theme)
        self.offsets = TextOffsets(self.draft.text)
        self.draft_view.setPlainText(self.draft.text)
        self._set_tab_order()
        undecided = [s.id for s in self.reference.sentences if s.id not in decisions]
        first = (
            undecided[0]
            if undecided
            else (self.reference.sentences[0].id if self.reference.sentences else None)
        )
        self.current = first
        self._refresh()

    def _set_tab_order(self) -> None:
        """Tab follows the page: the reference's sentences and their themes, the draft, its
        buttons, the draft's sentences and their themes. Qt's order was the order the widgets
        were made: the draft first, and every drop-down after both lists."""
        chain = [
            self.ref_table,
            *self.ref_table.theme_boxes.values(),
            self.draft_view,
            self.match_button,
            self.no_match_button,
            self.clear_button,
            self.draft_table,
            *self.draft_table.theme_boxes.values(),
        ]
        for before, after in itertools.pairwise(chain):
            QWidget.setTabOrder(before, after)

    def payload(self) -> dict[str, Any]:
        ref_ids = [s.id for s in self.reference.sentences] if self.reference else []
        decisions = [
            {"sentence_id": sid, "spans": self.state["decisions"][sid]}
            for sid in ref_ids
            if sid in self.state["decisions"]
        ]
        all_ids = ref_ids + ([s.id for s in self.draft.sentences] if self.draft else [])
        themes = [
            {"sentence_id": sid, "theme": self.state["themes"][sid]}
            for sid in all_ids
            if self.state["themes"].get(sid)
        ]
        return {"decisions": decisions, "themes": themes}

    def submit_problem(self) -> str | None:
        """The sentences still without a match decision, or without a theme, by their numbers
        in their lists (the store only counts them: "2 sentence(s) have no theme label yet"
        left the clinician to search two tables for them)."""
        if self.reference is None or self.draft is None:
            return None
        decisions, themes = self.state["decisions"], self.state["themes"]
        ref_ids = [s.id for s in self.reference.sentences]
        undecided = [n for n, sid in enumerate(ref_ids, 1) if sid not in decisions]
        if undecided:
            return f"no match decision yet (M or X) for reference sentence {_numbers(undecided)}"
        lists = (("reference", ref_ids), ("draft", [s.id for s in self.draft.sentences]))
        missing = [
            f"{name} sentence {_numbers(open_)}"
            for name, ids in lists
            if (open_ := [n for n, sid in enumerate(ids, 1) if not themes.get(sid)])
        ]
        if missing:
            return "no theme yet (a number key in its list) for " + " and ".join(missing)
        return None

    def focus_first(self) -> None:
        self.draft_view.setFocus()

    # --- actions ----------------------------------------------------------------------------

    def _change(self, text: str, mutate) -> None:
        before = copy.deepcopy(self.state)
        after = copy.deepcopy(self.state)
        mutate(after)
        self.push(text, self._apply, before, after)

    def _apply(self, state: dict[str, Any]) -> None:
        """Show ``state`` (a change, its undo or its redo), on the reference sentence whose
        decision it changes: an undone match left the view on the next sentence, where the
        next M then landed."""
        old, new = self.state["decisions"], state["decisions"]
        changed = [s.id for s in self.reference.sentences if old.get(s.id) != new.get(s.id)]
        self.state = copy.deepcopy(state)
        if changed:
            self.current = changed[0]
        self._refresh()

    def match_selection(self) -> None:
        cursor = self.draft_view.textCursor()
        start, end = self.offsets.span_from_qt(cursor.selectionStart(), cursor.selectionEnd())
        if self.current is None or end <= start or not self.draft.text[start:end].strip():
            self.current_label.setText(
                self.current_label.text().split("<br>")[0]
                + "<br><i>Select some draft text first (mouse, or Shift+arrows; S selects a "
                "sentence).</i>"
            )
            return
        sid = self.current

        def mutate(s):
            spans = s["decisions"].get(sid) or []
            s["decisions"][sid] = merge_spans([*spans, [start, end]])

        self._change("match", mutate)
        self._advance()

    def mark_no_match(self) -> None:
        if self.current is None:
            return
        sid = self.current
        self._change("NO MATCH", lambda s: s["decisions"].__setitem__(sid, []))
        self._advance()

    def clear_current(self) -> None:
        if self.current is None:
            return
        sid = self.current
        self._change("clear", lambda s: s["decisions"].pop(sid, None))

    def set_theme(self, sentence_id: int, theme: str | None) -> None:
        self._change(
            "theme",
            lambda s: (
                s["themes"].__setitem__(sentence_id, theme)
                if theme
                else s["themes"].pop(sentence_id, None)
            ),
        )

    def select_sentence_at_cursor(self) -> None:
        """Select the draft sentence that holds the text cursor (keyboard users)."""
        if self.draft is None:
            return
        position = self.offsets.from_qt(self.draft_view.textCursor().position())
        for sentence in self.draft.sentences:
            if sentence.start <= position <= sentence.end:
                start, end = self.offsets.span_to_qt(sentence.start, sentence.end)
                cursor = self.draft_view.textCursor()
                cursor.setPosition(start)
                cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
                self.draft_view.setTextCursor(cursor)
                return

    def _advance(self) -> None:
        ids = [s.id for s in self.reference.sentences]
        if self.current not in ids:
            return
        after = ids[ids.index(self.current) + 1 :] + ids[: ids.index(self.current)]
        nxt = next((sid for sid in after if sid not in self.state["decisions"]), None)
        if nxt is not None:
            self.current = nxt
        self._refresh()

    def _on_current_row(self, row: int, *_args) -> None:
        if self.loading:  # the table shrinking under the last unit's row: not a choice
            return
        if 0 <= row < len(self.ref_table.sentence_ids):
            sid = self.ref_table.sentence_ids[row]
            if sid != self.current:
                self.current = sid
                self._refresh()

    # --- display ----------------------------------------------------------------------------

    def _refresh(self) -> None:
        if self.reference is None:
            return
        decisions = self.state["decisions"]
        for row, sentence in enumerate(self.reference.sentences):
            spans = decisions.get(sentence.id)
            text = "—" if spans is None else ("NO MATCH" if not spans else "matched")
            self.ref_table.setItem(row, 2, QTableWidgetItem(text))
        self.ref_table.show_themes(self.state["themes"])
        self.draft_table.show_themes(self.state["themes"])
        if self.current in self.ref_table.sentence_ids:
            row = self.ref_table.sentence_ids.index(self.current)
            self.ref_table.blockSignals(True)
            self.ref_table.setCurrentCell(row, 1)
            self.ref_table.blockSignals(False)
            sentence = self.reference.sentences[row]
            self.current_label.setText(
                f"<b>Sentence {row + 1} of {len(self.reference.sentences)}:</b> "
                f"“{html.escape(sentence.text)}”"
            )
        self._highlight()
        self._show_scores()

    def _highlight(self) -> None:
        matched = colours.mark("matched")
        current = colours.mark("matched_current")
        selections = []
        covered = merge_spans(
            [list(s) for spans in self.state["decisions"].values() for s in spans]
        )
        for start, end in covered:
            selections.append(self._selection(start, end, background=matched))
        for start, end in self.state["decisions"].get(self.current) or []:
            selections.append(self._selection(start, end, background=current, current=True))
        cursor = 0
        for start, end in [*covered, [len(self.draft.text), len(self.draft.text)]]:
            if self.draft.text[cursor:start].strip():
                selections.append(self._selection(cursor, start, deleted=True))
            cursor = end
        self.draft_view.setExtraSelections(selections)

    def _selection(
        self,
        start: int,
        end: int,
        background: QColor | None = None,
        deleted: bool = False,
        current: bool = False,
    ) -> QTextEdit.ExtraSelection:
        selection = QTextEdit.ExtraSelection()
        cursor = QTextCursor(self.draft_view.document())
        cursor.setPosition(self.offsets.to_qt(start))
        cursor.setPosition(self.offsets.to_qt(end), QTextCursor.MoveMode.KeepAnchor)
        selection.cursor = cursor
        fmt = QTextCharFormat()
        if background is not None:  # matched text: tinted and underlined (not colour alone)
            fmt.setBackground(background)
            fmt.setUnderlineStyle(QTextCharFormat.UnderlineStyle.SingleUnderline)
        if current:  # this sentence's match: a line above as well, not only a darker shade
            fmt.setFontOverline(True)
        if deleted:
            fmt.setUnderlineStyle(QTextCharFormat.UnderlineStyle.WaveUnderline)
            fmt.setUnderlineColor(QColor(colours.text("error")))  # 4.5:1 in every scheme
        selection.format = fmt
        return selection

    def _show_scores(self) -> None:
        sentences = self.reference.sentences
        decided = [
            self.state["decisions"][s.id] for s in sentences if s.id in self.state["decisions"]
        ]
        # NaN where the metric's denominator is 0: shown as "—", not as a score of 0.00
        spans = [[tuple(x) for x in d] or None for d in decided]
        content = content_edit_f1(self.draft.text, spans, zero_division=math.nan)
        themes = self.state["themes"]
        ref_themes = [{themes[s.id] for s in sentences if themes.get(s.id)}]
        draft_themes = [{themes[s.id] for s in self.draft.sentences if themes.get(s.id)}]
        theme = theme_edit_f1(ref_themes, draft_themes, other_label="other", zero_division=math.nan)
        self.scores.setText(
            f"Decided {len(decided)} of {len(sentences)} sentences  ·  "
            f"EM {content.em}  EA {content.ea}  ED {content.ed}  ·  "
            f"Content Edit-F1 {_score(content.f1)} (P {_score(content.precision)}, "
            f"R {_score(content.recall)})  ·  Theme Edit-F1 {_score(theme.f1)}"
        )


def _score(value: float) -> str:
    """A live score, or "—" where it is undefined (NaN: nothing to divide by)."""
    return "—" if math.isnan(value) else f"{value:.2f}"
