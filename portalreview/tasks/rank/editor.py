"""Rank: order the candidate responses of a case, ties allowed, and mark each one correct or
incorrect with the reasons C1-C3 (seed 001, MedAlign Section 3).

The candidates are shown blinded ("Response A", "B"...) in the order the store recorded for
this annotator (shuffled per annotator and case). Two ways to rank:

* keyboard: Up/Down (or the mouse) picks the current response; a number key gives it that
  rank, the same number twice is a tie; 0 or Backspace clears it; Y / N mark it correct or
  incorrect; Alt+1..3 toggle the reasons C1..C3; PageUp/PageDown scroll the current response
  (a long one is taller than its pane), Home/End go to its start/end. A key that cannot apply
  (rank 5 of 3 responses, a reason of a response not marked incorrect) says why above the
  responses. Tab also reaches each response's Correct and Incorrect buttons (Space marks);
* the editor's accessible name says the current response and its state ("Response B of 3,
  rank 2 of 3, marked correct") and is announced to a screen reader after each key;
* drag and drop in "Your ranking": drop between two entries to place it there, drop onto an
  entry to tie with it.
"""

from __future__ import annotations

import copy
import html
import time
from typing import Any

from PySide6.QtCore import QEvent, QObject, QPoint, Qt
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QCheckBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QRadioButton,
    QScrollArea,
    QScrollBar,
    QSizePolicy,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from portalreview.domain.catalogs import Catalogs
from portalreview.store.service import AnswerView, ResponseView, UnitView
from portalreview.tasks.common import colours
from portalreview.tasks.common.case_panel import CasePanel
from portalreview.tasks.common.editor_base import CommentBox, Editor, clear_layout
from portalreview.tasks.common.safe_text import plain_tip

_NUMBER_KEYS = {getattr(Qt.Key, f"Key_{i}"): i for i in range(10)}
_SCROLL_KEYS = (Qt.Key.Key_PageUp, Qt.Key.Key_PageDown, Qt.Key.Key_Home, Qt.Key.Key_End)
_TWO_DIGITS_S = 1.0  # two digits typed within this many seconds make one rank (10 and on)
HELP = (
    "Up/Down choose a response · 1-9 give it a rank (same number = tie; 10 and on: two digits "
    "at once) · 0 clears · "
    "Y correct · N incorrect · Alt+1-3 reasons · PageUp/PageDown scroll the response, "
    "Home/End its start/end"
)


def state_text(rank: int | None, correct: bool | None, criteria: list[str], n: int) -> str:
    """What a response's state says in words ("rank 2 of 3, marked incorrect: C1")."""
    parts = [f"rank {rank} of {n}" if rank is not None else "not ranked"]
    if correct is True:
        parts.append("marked correct")
    elif correct is False:
        reasons = ", ".join(criteria) if criteria else "no reason given"
        parts.append(f"marked incorrect: {reasons}")
    else:
        parts.append("not marked correct or incorrect")
    return ", ".join(parts)


def ranks_from_groups(groups: list[list[int]]) -> dict[int, int]:
    """Competition ranks ("1, 1, 3") from ordered groups of tied responses."""
    ranks, position = {}, 1
    for group in groups:
        for response_id in group:
            ranks[response_id] = position
        position += len(group)
    return ranks


def groups_from_ranks(order: list[int], ranks: dict[int, int | None]) -> list[list[int]]:
    """Ranked responses grouped by rank, best first; ties keep the display order."""
    by_rank: dict[int, list[int]] = {}
    for response_id in order:
        rank = ranks.get(response_id)
        if rank is not None:
            by_rank.setdefault(rank, []).append(response_id)
    return [by_rank[r] for r in sorted(by_rank)]


class ResponseCard(QFrame):
    """One candidate: its blinded label, its text, its rank and its correctness."""

    def __init__(self, response: ResponseView, catalogs: Catalogs, editor: RankEditor) -> None:
        super().__init__()
        self.response_id = response.id
        self.label = response.label
        self.setObjectName("responseCard")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setFocusPolicy(Qt.FocusPolicy.ClickFocus)
        self.setAccessibleName(self.label)
        # Every line wraps to the pane's width (a row wider than the pane was cut off at the
        # right: the text mid-word, the Incorrect button): the title on a line of its own, the
        # two buttons on the next, each reason's name beside its box.
        layout = QVBoxLayout(self)
        self.title = QLabel()
        self.title.setWordWrap(True)
        layout.addWidget(self.title)
        top = QHBoxLayout()
        self.correct = QRadioButton("Correct (Y)")
        self.incorrect = QRadioButton("Incorrect (N)")
        for button, value in ((self.correct, True), (self.incorrect, False)):
            # Neither auto-exclusive nor in a button group ("not judged yet" is allowed, and
            # the editor keeps the pair exclusive): in either, Qt takes the unchecked button
            # out of the Tab chain, and Incorrect was never reached by Tab.
            button.setAutoExclusive(False)
            button.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
            button.setAccessibleName(f"{self.label}: {'correct' if value else 'incorrect'}")
            button.clicked.connect(lambda _=False, v=value: editor.set_correct(self.response_id, v))
            button.installEventFilter(editor)  # focus on it makes this card the current one
            top.addWidget(button)
        top.addStretch(1)
        layout.addLayout(top)
        body = QLabel(response.text)
        body.setObjectName("responseText")
        # Shown as stored: a draft starting "your <b>troponin</b>" was taken for rich text,
        # "<325 mg>" vanished, a comment was hidden and the line breaks were lost.
        body.setTextFormat(Qt.TextFormat.PlainText)
        body.setWordWrap(True)
        body.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        body.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.body = body
        body.installEventFilter(self)  # a click on the text chooses the card too
        layout.addWidget(body)
        # The reasons appear once the response is marked incorrect (seed 001: C1-C3).
        self.reasons = QWidget()
        reasons = QVBoxLayout(self.reasons)
        reasons.setContentsMargins(12, 0, 0, 0)
        reasons.setSpacing(2)
        why = QLabel("Why incorrect? (tick all that apply)")
        why.setWordWrap(True)  # in large text on a laptop it made the card wider than its pane
        reasons.addWidget(why)
        self.criteria: dict[str, QCheckBox] = {}
        for i, criterion in enumerate(catalogs.criteria, start=1):
            box = QCheckBox(criterion.id)
            box.setToolTip(plain_tip(criterion.definition))
            box.setAccessibleName(f"{self.label}: reason {criterion.id} {criterion.name}")
            box.setAccessibleDescription(criterion.definition)
            box.clicked.connect(
                lambda _=False, c=criterion.id: editor.toggle_criterion(self.response_id, c)
            )
            box.installEventFilter(editor)
            name = _ClickLabel(f"{criterion.name}   (Alt+{i})", box)
            name.setToolTip(plain_tip(criterion.definition))
            row = QHBoxLayout()
            row.addWidget(box, 0, Qt.AlignmentFlag.AlignTop)
            row.addWidget(name, 1)
            self.criteria[criterion.id] = box
            reasons.addLayout(row)
        layout.addWidget(self.reasons)

    def mousePressEvent(self, event) -> None:
        self._chosen_by_mouse()
        super().mousePressEvent(event)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.MouseButtonPress:  # on the text (it takes the click)
            self._chosen_by_mouse()
        return False

    def _chosen_by_mouse(self) -> None:
        """The card clicked is the current one, and the editor keeps the keys: a click on a
        draft's text left another draft current, so the next key (a rank, Y, N) went to that
        one; after a click on the card the scroll area took Up and Down."""
        editor = self.parent_editor()
        editor.set_current(self.response_id)
        editor.setFocus(Qt.FocusReason.MouseFocusReason)

    def parent_editor(self) -> RankEditor:
        widget = self.parentWidget()
        while not isinstance(widget, RankEditor):
            widget = widget.parentWidget()
        return widget

    def show_state(
        self, rank: int | None, correct: bool | None, criteria: list[str], current: bool, n: int
    ) -> None:
        rank_text = f"rank {rank} of {n}" if rank is not None else "not ranked"
        marker = "▶ " if current else ""
        self.title.setText(f"<b>{marker}{self.label}</b> — {rank_text}")
        self.setAccessibleDescription(state_text(rank, correct, criteria, n))
        self.correct.setChecked(correct is True)
        self.incorrect.setChecked(correct is False)
        for criterion_id, box in self.criteria.items():
            box.setChecked(criterion_id in criteria)
        self.reasons.setVisible(correct is False)
        self.setProperty("current", current)
        self.setLineWidth(3 if current else 1)
        self.setFrameShadow(QFrame.Shadow.Plain if current else QFrame.Shadow.Raised)


class _ClickLabel(QLabel):
    """A reason's name beside its check box: it wraps (a check box's own text never does),
    and a click on it ticks the box as a click on a check box's text would."""

    def __init__(self, text: str, box: QCheckBox) -> None:
        super().__init__(text)
        self.box = box
        self.setTextFormat(Qt.TextFormat.PlainText)  # a criterion's name, as written
        self.setWordWrap(True)
        self.setBuddy(box)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)

    def mousePressEvent(self, event) -> None:
        self.box.click()
        event.accept()


class RankingList(QListWidget):
    """ "Your ranking": ranked responses best first, reorderable by drag and drop."""

    def __init__(self, editor: RankEditor) -> None:
        super().__init__()
        self.editor = editor
        self.setObjectName("rankingList")
        self.setDragDropMode(QAbstractItemView.DragDropMode.InternalMove)
        self.setDefaultDropAction(Qt.DropAction.MoveAction)
        self.setDropIndicatorShown(True)
        # A narrow pane (a small screen) wraps an entry rather than cutting it off.
        self.setWordWrap(True)
        self.setResizeMode(QListWidget.ResizeMode.Adjust)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setAccessibleName("Your ranking: drag to reorder, drop onto an entry to tie")

    def dropEvent(self, event) -> None:
        moved = self.currentItem()
        target = self.itemAt(event.position().toPoint())
        if moved is None:
            event.ignore()
            return
        indicator = self.dropIndicatorPosition()
        target_id = None if target is None else target.data(Qt.ItemDataRole.UserRole)
        where = {
            QAbstractItemView.DropIndicatorPosition.OnItem: "onto",
            QAbstractItemView.DropIndicatorPosition.AboveItem: "above",
            QAbstractItemView.DropIndicatorPosition.BelowItem: "below",
        }.get(indicator, "end")
        event.setDropAction(Qt.DropAction.IgnoreAction)
        event.accept()
        self.editor.move_in_ranking(moved.data(Qt.ItemDataRole.UserRole), target_id, where)


class RankEditor(Editor):
    kind = "rank"
    title = "Rank drafts"

    def __init__(self, catalogs: Catalogs, parent: QWidget | None = None) -> None:
        super().__init__(catalogs, parent)
        self.case_panel = CasePanel()
        self.order: list[int] = []
        self.state: dict[str, Any] = {"ranks": {}, "correct": {}, "criteria": {}}
        self.current: int | None = None
        self.cards: dict[int, ResponseCard] = {}
        self._last_digit: tuple[int | None, int, float] | None = None  # see _rank_typed
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)

        cards_inner = QWidget()
        self.cards_layout = QVBoxLayout(cards_inner)
        cards_area = QScrollArea()
        cards_area.setWidgetResizable(True)
        # The cards wrap to the pane's width; were a line still wider (a very large text
        # size), a scroll bar shows it rather than hiding it.
        cards_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        cards_area.setWidget(cards_inner)
        cards_area.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.cards_area = cards_area
        help_text = QLabel(HELP)
        help_text.setWordWrap(True)
        help_text.setObjectName("keyHelp")
        self.notice = QLabel()
        self.notice.setObjectName("rankNotice")
        self.notice.setWordWrap(True)
        self.notice.setVisible(False)
        self._notice = ""
        middle = QWidget()
        middle_layout = QVBoxLayout(middle)
        middle_layout.setContentsMargins(0, 0, 0, 0)
        middle_layout.addWidget(help_text)
        middle_layout.addWidget(self.notice)
        middle_layout.addWidget(cards_area, 1)
        self.comment = CommentBox(self.undo_stack)
        self.comment.textEdited.connect(lambda _t: self.emit_changed())
        middle_layout.addWidget(self.comment)

        self.ranking = RankingList(self)
        side = QWidget()
        side_layout = QVBoxLayout(side)
        side_layout.setContentsMargins(0, 0, 0, 0)
        header = QLabel("<b>Your ranking</b> (best first)")
        header.setWordWrap(True)
        side_layout.addWidget(header)
        side_layout.addWidget(self.ranking, 1)
        tip = QLabel("Drag to reorder; drop onto another response to tie with it.")
        tip.setWordWrap(True)
        side_layout.addWidget(tip)
        side.setMinimumWidth(170)

        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(self.case_panel)
        splitter.addWidget(middle)
        splitter.addWidget(side)
        splitter.setChildrenCollapsible(False)
        splitter.setStretchFactor(0, 2)
        splitter.setStretchFactor(1, 5)
        splitter.setStretchFactor(2, 1)
        splitter.setSizes([300, 760, 180])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(splitter)

    # --- Editor interface -------------------------------------------------------------------

    def show_unit(self, unit: UnitView, answer: AnswerView | None) -> None:
        self.case_panel.show_case(unit.cases[0])
        self.order = [r.id for r in unit.responses]
        entries = {
            e["response_id"]: e for e in (answer.payload if answer else {}).get("entries", [])
        }
        self.state = {
            "ranks": {r: entries.get(r, {}).get("rank") for r in self.order},
            "correct": {r: entries.get(r, {}).get("correct") for r in self.order},
            "criteria": {r: list(entries.get(r, {}).get("criteria", [])) for r in self.order},
        }
        self.comment.set_loaded(answer.comment if answer else "")
        clear_layout(self.cards_layout)
        self.cards = {}
        for response in unit.responses:
            card = ResponseCard(response, self.catalogs, self)
            self.cards[response.id] = card
            self.cards_layout.addWidget(card)
        self.cards_layout.addStretch(1)
        self.current = self.order[0] if self.order else None
        self._say("")
        self._refresh()
        self.cards_area.verticalScrollBar().setValue(0)

    def payload(self) -> dict[str, Any]:
        entries = []
        for r in self.order:
            correct = self.state["correct"][r]
            entries.append(
                {
                    "response_id": r,
                    "rank": self.state["ranks"][r],
                    "correct": correct,
                    "criteria": list(self.state["criteria"][r]) if correct is False else [],
                }
            )
        return {"entries": entries}

    def submit_problem(self) -> str | None:
        """What is missing, naming the responses as this clinician sees them (the store's own
        check can only count them: "1 response(s) have no rank yet" left her to search ten
        drafts). A response marked incorrect needs its reason: seed 001 Sec. 5 defines
        "incorrect" as meeting at least one of C1-C3 (without one, the Criteria table would not
        count it)."""
        unranked = [r for r in self.order if not self.state["ranks"].get(r)]
        unjudged = [r for r in self.order if self.state["correct"].get(r) is None]
        missing = [
            f"{', '.join(self.cards[r].label for r in responses)} {what}"
            for responses, what in (
                (unranked, "not ranked yet"),
                (unjudged, "not marked correct or incorrect"),
            )
            if responses
        ]
        if missing:
            return "; ".join(missing)
        if not self.catalogs.criteria:
            return None
        unexplained = [
            self.cards[r].label
            for r in self.order
            if self.state["correct"][r] is False and not self.state["criteria"][r]
        ]
        if not unexplained:
            return None
        first, last = self.catalogs.criteria[0].id, self.catalogs.criteria[-1].id
        return (
            f"{', '.join(unexplained)} marked incorrect with no reason: tick at least one of "
            f"{first}-{last} (Alt+1 to Alt+{len(self.catalogs.criteria)})"
        )

    def comment_text(self) -> str | None:
        return self.comment.stored_text()

    def focus_first(self) -> None:
        self.setFocus()

    # --- changes (all through the undo history) ---------------------------------------------

    def _change(self, text: str, mutate) -> None:
        before = copy.deepcopy(self.state)
        after = copy.deepcopy(self.state)
        mutate(after)
        self.push(text, self._apply, before, after)

    def _apply(self, state: dict[str, Any]) -> None:
        self.state = copy.deepcopy(state)
        self._refresh()

    def set_rank(self, response_id: int, rank: int | None) -> None:
        label = self.cards[response_id].label
        n = len(self.order)
        if rank is not None and not 1 <= rank <= n:
            self._say(
                f"There are {n} responses: ranks go from 1 to {n} (the same number twice is "
                "a tie; 0 clears)."
            )
            self._refresh()
            return
        self._say("")
        self._change(f"rank {label}", lambda s: s["ranks"].__setitem__(response_id, rank))

    def set_correct(self, response_id: int, correct: bool) -> None:
        def mutate(s):
            s["correct"][response_id] = correct
            if correct:
                s["criteria"][response_id] = []

        self.set_current(response_id)
        self._say("")
        self._change("mark correctness", mutate)
        self._refresh()  # a click on the checked button must not leave it unchecked
        if not correct:
            self.show_reasons(response_id)

    def show_reasons(self, response_id: int) -> None:
        """Scroll the reasons shown under a response marked incorrect into view: under a long
        response (at 18 pt in a 1024 x 640 window) they appeared below the pane, out of sight,
        and the clinician did not see what to tick."""
        card = self.cards[response_id]
        # The reasons were hidden: their card, then the pane's contents and its scroll range
        # grow once the layout requests this posted are handled.
        for _layer in ("card", "pane"):
            QApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
        self._bring_into_view(card.reasons)

    def toggle_criterion(self, response_id: int, criterion: str) -> None:
        def mutate(s):
            chosen = s["criteria"][response_id]
            if criterion in chosen:
                chosen.remove(criterion)
            else:
                chosen.append(criterion)
                chosen.sort()

        self.set_current(response_id)
        if self.state["correct"][response_id] is False:
            self._say("")
            self._change(f"reason {criterion}", mutate)
        else:
            label = self.cards[response_id].label
            self._say(
                f"{label} is not marked incorrect: press N first, then Alt+1-"
                f"{len(self.catalogs.criteria)} for the reasons."
            )
        self._refresh()

    def move_in_ranking(self, response_id: int, target_id: int | None, where: str) -> None:
        """Apply a drop in "Your ranking" (``where``: above, below, onto, end)."""
        groups = [
            [r for r in g if r != response_id]
            for g in groups_from_ranks(self.order, self.state["ranks"])
        ]
        groups = [g for g in groups if g]
        index = next((i for i, g in enumerate(groups) if target_id in g), None)
        if index is None and where == "onto" and target_id is not None:
            groups.append([target_id, response_id])  # onto an unranked one: tied, both last
        elif index is None or where == "end":
            groups.append([response_id])
        elif where == "onto":
            groups[index].append(response_id)
        else:
            groups.insert(index if where == "above" else index + 1, [response_id])
        ranks = ranks_from_groups(groups)
        self._change(
            "reorder",
            lambda s: s["ranks"].update({r: ranks.get(r, s["ranks"][r]) for r in self.order}),
        )

    def set_current(self, response_id: int) -> None:
        moved = response_id != self.current
        self.current = response_id
        self._refresh()
        if moved:
            self.show_card_start()

    # --- scrolling --------------------------------------------------------------------------

    def _card_span(self) -> tuple[int, int] | None:
        """The scroll values that show the current card's top and its bottom."""
        card = self.cards.get(self.current)
        if card is None:
            return None
        margin = self.cards_layout.spacing()
        top = max(0, card.y() - margin)
        bottom = card.y() + card.height() + margin - self.cards_area.viewport().height()
        return top, max(top, bottom)

    def show_card_start(self) -> None:
        """Scroll the current card into view: all of it when it fits, else its start (Qt's
        ensureWidgetVisible would centre a tall card, its first lines out of view)."""
        card = self.cards.get(self.current)
        if card is None:
            return
        self.cards_area.widget().layout().activate()
        self._bring_into_view(card)

    def _bring_into_view(self, widget: QWidget) -> None:
        """Scroll the pane to show ``widget`` (a card, or a part of one): all of it when it
        fits, else its start."""
        margin = self.cards_layout.spacing()
        top = max(0, widget.mapTo(self.cards_area.widget(), QPoint(0, 0)).y() - margin)
        shows_bottom = top + widget.height() + 2 * margin - self.cards_area.viewport().height()
        bar = self.cards_area.verticalScrollBar()
        if shows_bottom > top or bar.value() > top:  # taller than the pane, or above it
            bar.setValue(top)
        elif bar.value() < shows_bottom:  # below the pane
            bar.setValue(shows_bottom)

    def scroll_card(self, key: int) -> None:
        """PageUp/PageDown: a page up or down within the current card; Home/End: its start or
        its end."""
        span = self._card_span()
        if span is None:
            return
        top, bottom = span
        bar: QScrollBar = self.cards_area.verticalScrollBar()
        step = max(1, bar.pageStep() - self.fontMetrics().lineSpacing() * 2)
        value = {
            Qt.Key.Key_PageUp: bar.value() - step,
            Qt.Key.Key_PageDown: bar.value() + step,
            Qt.Key.Key_Home: top,
            Qt.Key.Key_End: bottom,
        }[key]
        bar.setValue(min(max(value, top), bottom))

    # --- keyboard ---------------------------------------------------------------------------

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        # A card's button or box that takes the focus (Tab) makes its card the current one,
        # so the keys and the screen reader speak of the card the focus is in.
        card = next((c for c in self.cards.values() if c.isAncestorOf(watched)), None)
        if card is None:
            return super().eventFilter(watched, event)
        if event.type() == QEvent.Type.FocusIn and card.response_id != self.current:
            self.set_current(card.response_id)
        elif event.type() == QEvent.Type.KeyPress and event.key() in (
            Qt.Key.Key_Up,
            Qt.Key.Key_Down,
        ):
            # Up/Down choose the response here too, and the focus follows to the same
            # button of the new one.
            self.handle_key(event, watched)
            new = self.cards[self.current]
            (new.correct if watched is card.correct else new.incorrect).setFocus()
            return True
        elif event.type() == QEvent.Type.KeyPress and event.key() not in (
            Qt.Key.Key_Space,
            Qt.Key.Key_Left,
            Qt.Key.Key_Right,
            Qt.Key.Key_Tab,
            Qt.Key.Key_Backtab,
        ):
            return self.handle_key(event, watched)
        return False

    def handle_key(self, event: QKeyEvent, watched: QObject | None = None) -> bool:
        if self.current is None or not self.order:
            return False
        key, mods = event.key(), event.modifiers()
        alt = bool(mods & Qt.KeyboardModifier.AltModifier)
        # The window's shortcuts are not judgements: Ctrl+Y with nothing to redo marked the
        # draft correct, Ctrl+8 ranked it, Alt+N marked it incorrect. Alt goes with the
        # reasons' digits only.
        if mods & (Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.MetaModifier):
            return False
        if alt and key not in _NUMBER_KEYS:
            return False
        index = self.order.index(self.current)
        if key in (Qt.Key.Key_Down, Qt.Key.Key_Up):
            step = 1 if key == Qt.Key.Key_Down else -1
            self._say("")
            self.set_current(self.order[(index + step) % len(self.order)])
        elif key in _SCROLL_KEYS and not mods & ~Qt.KeyboardModifier.KeypadModifier:
            self.scroll_card(key)
        elif key in _NUMBER_KEYS and alt:
            criteria = [c.id for c in self.catalogs.criteria]
            number = _NUMBER_KEYS[key]
            if 1 <= number <= len(criteria):
                self.toggle_criterion(self.current, criteria[number - 1])
            else:
                self._say(f"The reasons are Alt+1 to Alt+{len(criteria)}.")
                self._refresh()
        elif key in _NUMBER_KEYS:
            number = self._rank_typed(_NUMBER_KEYS[key])
            self.set_rank(self.current, number or None)
        elif key == Qt.Key.Key_Backspace:
            self.set_rank(self.current, None)
        elif key == Qt.Key.Key_Y:
            self.set_correct(self.current, True)
        elif key == Qt.Key.Key_N:
            self.set_correct(self.current, False)
        else:
            return False
        return True

    def _rank_typed(self, digit: int) -> int:
        """The rank a digit gives: with ten drafts or more, a digit typed within
        ``_TWO_DIGITS_S`` of the one before (the same draft) makes a two-digit rank with it, so
        "1" then "0" gives 10 (ranks of ten and on could be given only by dragging)."""
        now = time.monotonic()
        before, self._last_digit = self._last_digit, (self.current, digit, now)
        if len(self.order) < 10 or before is None:
            return digit
        response, first, when = before
        combined = first * 10 + digit
        if response == self.current and now - when <= _TWO_DIGITS_S and combined <= len(self.order):
            self._last_digit = None  # a third digit starts anew
            return combined
        return digit

    # --- display ----------------------------------------------------------------------------

    def _say(self, text: str) -> None:
        """Show why a key did nothing (empty: nothing to say); it stays until the next key
        that does something, and is part of the editor's accessible name meanwhile."""
        self._notice = text
        error = colours.text("error")
        self.notice.setText(f"<span style='color:{error}'>{html.escape(text)}</span>")
        self.notice.setVisible(bool(text))
        if text:
            self.said.emit(text)

    def state_text(self) -> str:
        """The current response and its state, as the editor's accessible name says it."""
        if self.current not in self.cards:
            return "Rank drafts: no responses"
        r = self.current
        n = len(self.order)
        card = self.cards[r]
        where = f"{card.label} of {n}" if n else card.label
        state = state_text(
            self.state["ranks"][r],
            self.state["correct"][r],
            self.state["criteria"][r] if self.state["correct"][r] is False else [],
            n,
        )
        text = f"Rank drafts: {where}, {state}"
        return f"{text}. {self._notice}" if self._notice else text

    def _refresh(self) -> None:
        n = len(self.order)
        for r, card in self.cards.items():
            card.show_state(
                self.state["ranks"][r],
                self.state["correct"][r],
                self.state["criteria"][r],
                r == self.current,
                n,
            )
        self.announce(self.state_text())
        self.setAccessibleDescription(HELP.replace(" · ", "; "))
        self.ranking.clear()
        for group in groups_from_ranks(self.order, self.state["ranks"]):
            tie = len(group) > 1
            for r in group:
                rank = self.state["ranks"][r]
                text = f"{rank}. {self.cards[r].label}" + ("  (tie)" if tie else "")
                item = QListWidgetItem(text)
                item.setData(Qt.ItemDataRole.UserRole, r)
                self.ranking.addItem(item)
        for r in self.order:
            if self.state["ranks"][r] is None:
                item = QListWidgetItem(f"–  {self.cards[r].label} (not ranked)")
                item.setData(Qt.ItemDataRole.UserRole, r)
                item.setForeground(self.palette().placeholderText())
                self.ranking.addItem(item)
