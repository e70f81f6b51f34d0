"""Urgency pairs: which of two patients needs care first (seed 002, PMR-Bench), no ties.

The two cases are shown side by side, each with its message and chart, in the order the store
fixed for this annotator (``presentation.swap``: the sides are randomised per person, so
position bias can be measured). The answer names the chosen *case*, never a side.

Keys (the editor has the focus; the comment box keeps its own typing):

* Left or 1: the left patient needs care first; Right or 2: the right patient;
* A: toggle "hard pair: ask a second annotator" (the PI sees the submitted pair listed and may
  give it to a second annotator: Tools > Study set-up > Hard pairs);
* L or R, then 1-6: the optional urgency level of the left / right patient (0 clears it,
  Esc cancels); the scale's definitions are on screen.

Every change goes through the undo history (Edit > Undo).
"""

from __future__ import annotations

import copy
import html
from typing import Any

from PySide6.QtCore import QObject, QRectF, QSize, Qt
from PySide6.QtGui import QKeyEvent, QPainter, QPen
from PySide6.QtWidgets import (
    QButtonGroup,
    QCheckBox,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QSplitter,
    QStyle,
    QStyleOptionButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from portalreview.domain.catalogs import Catalogs
from portalreview.store.service import AnswerView, CaseView, UnitView
from portalreview.tasks.common.case_panel import CasePanel, CollapsibleSection
from portalreview.tasks.common.editor_base import CommentBox, Editor
from portalreview.tasks.common.safe_text import plain_tip
from portalreview.tasks.common.screen import SideBySide

SIDES = ("left", "right")
_DIGITS = {getattr(Qt.Key, f"Key_{i}"): i for i in range(10)}
_CHOICE_KEYS = {Qt.Key.Key_Left: 0, Qt.Key.Key_1: 0, Qt.Key.Key_Right: 1, Qt.Key.Key_2: 1}
_LEVEL_KEYS = {Qt.Key.Key_L: 0, Qt.Key.Key_R: 1}
HELP = (
    "<b>Which patient needs care first?</b> No ties. &nbsp; <b>←</b>/<b>1</b> left · "
    "<b>→</b>/<b>2</b> right · <b>A</b> hard pair · <b>L</b>/<b>R</b> then <b>1-6</b>: that "
    "patient's level (0 clears) · <b>Ctrl+Enter</b> submit and go on"
)
# What the hard-pair box does (seed 002 App. A.5.1): a request to the PI, who sees the
# submitted pair in Study set-up > Hard pairs and may hand it to a second annotator.
ASK_SECOND_TIP = (
    "Mark this pair as hard to decide. Once you submit it, the PI sees it in the list of hard "
    "pairs and can give the same pair to a second annotator, whose answer is compared with "
    "yours in the agreement figures."
)


def paint_choice_frame(widget: QWidget, chosen: bool) -> None:
    """A thin frame around a choice, a thick one in the highlight colour when it is chosen
    (painted, not a style sheet: a style sheet would stop the text size from following the
    editor's zoom)."""
    painter = QPainter(widget)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    palette = widget.palette()
    width = 3 if chosen else 1
    colour = palette.highlight().color() if chosen else palette.mid().color()
    painter.setPen(QPen(colour, width))
    half = width / 2
    painter.drawRoundedRect(QRectF(widget.rect()).adjusted(half, half, -half, -half), 4, 4)
    painter.end()


class LevelCaption(QLabel):
    """The caption of the level buttons: "Level (optional):", or "Level:" where the side is too
    narrow for the whole caption beside them (at 18 pt in a 1024 px wide window the two sides
    did not fit, and the right one went off screen). :meth:`fit` chooses."""

    WHOLE, SHORT = "Level (optional):", "Level:"

    def __init__(self) -> None:
        super().__init__(self.WHOLE)

    def minimumSizeHint(self) -> QSize:
        short = self.fontMetrics().horizontalAdvance(self.SHORT) + 2 * self.margin()
        return QSize(short, super().minimumSizeHint().height())

    def fit(self, room: int, beside: int) -> None:
        """The whole caption where it and what is ``beside`` it fit ``room``."""
        whole = self.fontMetrics().horizontalAdvance(self.WHOLE) + 2 * self.margin()
        self.setText(self.WHOLE if whole + beside <= room else self.SHORT)


class ShorteningButton(QPushButton):
    """A push button that says ``short`` where ``full`` does not fit its width (at 18 pt,
    "The right patient needs care first (→ or 2)" pushed the right patient off a 1024 px
    wide window). A screen reader hears ``full``."""

    def __init__(self, full: str, short: str) -> None:
        super().__init__(full)
        self._full, self._short = full, short
        self.setAccessibleName(full)
        # narrower than ``full`` down to ``short`` (a push button's own policy keeps its hint)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)

    def _size_for(self, text: str) -> QSize:
        option = QStyleOptionButton()
        self.initStyleOption(option)
        option.text = text
        words = self.fontMetrics().size(Qt.TextFlag.TextShowMnemonic, text)
        return self.style().sizeFromContents(QStyle.ContentsType.CT_PushButton, option, words, self)

    def sizeHint(self) -> QSize:
        return self._size_for(self._full)

    def minimumSizeHint(self) -> QSize:
        return self._size_for(self._short)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        fits = event.size().width() >= self.sizeHint().width()
        self.setText(self._full if fits else self._short)


class SidePanel(QFrame):
    """One patient of the pair: the case, its optional level and the "needs care first"
    button."""

    def __init__(self, side: int, catalogs: Catalogs, editor: UrgencyEditor) -> None:
        super().__init__()
        self.side = side
        self.case_id: int | None = None
        self.setObjectName("urgencySide")
        self.chosen = False
        name = SIDES[side]
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.setSpacing(4)
        self.title = QLabel()
        self.title.setObjectName("sideTitle")
        self.title.setTextFormat(Qt.TextFormat.RichText)
        self.title.setWordWrap(True)  # "— press 1-6 for this patient's level" widened the side
        layout.addWidget(self.title)
        self.case_panel = CasePanel()
        self.case_panel.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        layout.addWidget(self.case_panel, 1)

        level_row = QWidget()
        levels = QHBoxLayout(level_row)
        levels.setContentsMargins(0, 0, 0, 0)
        levels.setSpacing(3)
        level_key = "L" if side == 0 else "R"
        self.level_caption = caption = LevelCaption()
        caption.setToolTip(
            f"Optional. Press {level_key} then 1-6 to set it from the keyboard; 0 clears it."
        )
        levels.addWidget(caption)
        self.level_group = QButtonGroup(self)
        self.level_group.setExclusive(False)
        self.level_buttons: dict[int, QToolButton] = {}
        for entry in catalogs.urgency_levels:
            button = QToolButton(text=str(entry.level))
            button.setCheckable(True)
            button.setFocusPolicy(Qt.FocusPolicy.NoFocus)
            button.setToolTip(plain_tip(f"Level {entry.level}: {entry.name}. {entry.definition}"))
            button.setAccessibleName(f"{name} patient: level {entry.level}, {entry.name}")
            button.setMinimumWidth(30)
            button.clicked.connect(
                lambda _=False, lv=entry.level: editor.toggle_level(self.side, lv)
            )
            self.level_group.addButton(button)
            self.level_buttons[entry.level] = button
            levels.addWidget(button)
        levels.addStretch(1)
        self.level_name = QLabel()
        self.level_name.setObjectName("levelName")
        # The level's name beside the buttons where both fit, else under them: on a laptop
        # "no level given" and "4 · Routine visit" were cut to "no le" and "4 ·".
        self.level_line = SideBySide(
            level_row,
            self.level_name,
            lambda: (level_row.sizeHint().width(), self.level_name.sizeHint().width()),
        )
        self.level_line.box.setStretch(0, 0)  # the buttons get their caption's whole words
        self.level_row = level_row
        layout.addWidget(self.level_line)

        arrow, digit = ("←", "1") if side == 0 else ("→", "2")
        self.choose = ShorteningButton(
            f"The {name} patient needs care first   ({arrow} or {digit})",
            f"Needs care first ({arrow} or {digit})",  # under the title "Left patient"
        )
        self.choose.setObjectName(f"choose_{name}")
        self.choose.setCheckable(True)
        self.choose.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.choose.setMinimumHeight(34)
        self.choose.clicked.connect(lambda _=False: editor.choose_side(self.side))
        layout.addWidget(self.choose)
        self.catalogs = catalogs

    def show_case(self, case: CaseView) -> None:
        self.case_id = case.id
        who = ", ".join(x for x in (case.age_band, case.gender) if x)
        self.choose.setAccessibleDescription(
            f"Chooses case {case.external_id}{f' ({who})' if who else ''} as the patient who "
            f"needs care first. Its message begins: {case.message[:120]}"
        )
        self.case_panel.show_case(case)
        self.case_panel.verticalScrollBar().setValue(0)

    def show_state(self, chosen: bool, level: int | None, waiting: bool) -> None:
        name = SIDES[self.side].capitalize()
        colour = self.palette().highlight().color().name()
        mark = f"  <span style='color:{colour}'>✔ needs care first</span>" if chosen else ""
        wait = "  — <i>press 1-6 for this patient's level</i>" if waiting else ""
        self.title.setText(f"<b>{name} patient</b>{mark}{wait}")
        self.choose.setChecked(chosen)
        for value, button in self.level_buttons.items():
            button.setChecked(value == level)
        if level is None:
            self.level_name.setText("<i>no level given</i>")
        else:
            entry = next(x for x in self.catalogs.urgency_levels if x.level == level)
            self.level_name.setText(f"<b>{level}</b> · {html.escape(entry.name)}")
        if self.chosen != chosen:
            self.chosen = chosen
            self.update()

    def paintEvent(self, event) -> None:
        super().paintEvent(event)
        paint_choice_frame(self, self.chosen)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        margins = self.layout().contentsMargins()
        room = self.contentsRect().width() - margins.left() - margins.right()
        buttons = self.level_row.sizeHint().width() - self.level_caption.sizeHint().width()
        self.level_caption.fit(room, buttons)


class UrgencyEditor(Editor):
    kind = "urgency"
    title = "Urgency pairs"

    def __init__(self, catalogs: Catalogs, parent: QWidget | None = None) -> None:
        super().__init__(catalogs, parent)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.state: dict[str, Any] = self._empty_state()
        self.case_ids: list[int] = []
        self._level_side: int | None = None  # waiting for a level digit for this side

        help_text = QLabel(HELP)
        help_text.setObjectName("keyHelp")
        help_text.setWordWrap(True)

        self.sides = [SidePanel(i, catalogs, self) for i in range(2)]
        for panel in self.sides:
            panel.installEventFilter(self)
            panel.case_panel.installEventFilter(self)
        pair = QSplitter(Qt.Orientation.Horizontal)
        pair.setChildrenCollapsible(False)
        for panel in self.sides:
            pair.addWidget(panel)

        self.ask_second = QCheckBox("Hard pair: ask a second annotator   (A)")
        self.ask_second.setObjectName("askSecond")
        self.ask_second.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.ask_second.setToolTip(ASK_SECOND_TIP)
        self.ask_second.clicked.connect(lambda _=False: self.toggle_ask_second())
        self.comment = CommentBox(self.undo_stack)
        self.comment.textEdited.connect(lambda _t: self.emit_changed())
        bottom = QHBoxLayout()
        bottom.addWidget(self.ask_second)
        bottom.addSpacing(12)
        bottom.addWidget(self.comment, 1)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 4)
        layout.setSpacing(6)
        layout.addWidget(help_text)
        layout.addWidget(pair, 1)
        layout.addLayout(bottom)
        self.scale = CollapsibleSection("The urgency scale (1 = most urgent)", _scale(catalogs))
        layout.addWidget(self.scale)

    # --- Editor interface -------------------------------------------------------------------

    @staticmethod
    def _empty_state() -> dict[str, Any]:
        return {"chosen": None, "ask_second": False, "levels": {}}

    def show_unit(self, unit: UnitView, answer: AnswerView | None) -> None:
        self.case_ids = [c.id for c in unit.cases[:2]]
        for panel, case in zip(self.sides, unit.cases[:2], strict=False):
            panel.show_case(case)
        payload = answer.payload if answer else {}
        levels = {int(k): int(v) for k, v in (payload.get("levels") or {}).items()}
        self.state = {
            "chosen": payload.get("more_urgent_case_id"),
            "ask_second": bool(payload.get("ask_second", False)),
            "levels": {c: levels[c] for c in self.case_ids if c in levels},
        }
        self.comment.set_loaded(answer.comment if answer else "")
        self._level_side = None
        self._refresh()

    def payload(self) -> dict[str, Any]:
        return {
            "more_urgent_case_id": self.state["chosen"],
            "ask_second": bool(self.state["ask_second"]),
            "levels": {str(c): lv for c, lv in sorted(self.state["levels"].items())},
        }

    def submit_problem(self) -> str | None:
        """A choice the clinician's own levels contradict (1 = most urgent): the patient
        chosen to need care first has a less urgent level than the other. Both are her
        answers and the report reads both (seed 002: the pair's order, and levels where given);
        kept as a draft until she changes one."""
        chosen, levels = self.state["chosen"], self.state["levels"]
        if chosen not in self.case_ids:
            return None
        side = self.case_ids.index(chosen)
        mine, theirs = levels.get(chosen), levels.get(self.case_ids[1 - side])
        if mine is None or theirs is None or mine <= theirs:
            return None
        return (
            f"the {SIDES[side]} patient, chosen to need care first, has level {mine}, less "
            f"urgent than the other's level {theirs}: change the choice or a level"
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
        self._refresh()  # a click on a checked button must not leave it unchecked

    def _apply(self, state: dict[str, Any]) -> None:
        self.state = copy.deepcopy(state)
        self._refresh()

    def choose_side(self, side: int) -> None:
        """The patient shown on ``side`` (0 left, 1 right) needs care first."""
        if side >= len(self.case_ids):
            return
        case_id = self.case_ids[side]
        self._change(
            f"choose the {SIDES[side]} patient", lambda s: s.__setitem__("chosen", case_id)
        )

    def toggle_ask_second(self) -> None:
        self._change(
            "ask a second annotator", lambda s: s.__setitem__("ask_second", not s["ask_second"])
        )

    def set_level(self, side: int, level: int | None) -> None:
        if side >= len(self.case_ids):
            return
        case_id = self.case_ids[side]

        def mutate(s):
            if level is None:
                s["levels"].pop(case_id, None)
            else:
                s["levels"][case_id] = level

        self._change(f"level of the {SIDES[side]} patient", mutate)

    def toggle_level(self, side: int, level: int) -> None:
        """A click on a level button: set it, or clear it when it is the level already set."""
        current = self.state["levels"].get(self.case_ids[side]) if self.case_ids else None
        self.set_level(side, None if current == level else level)

    # --- keyboard ---------------------------------------------------------------------------

    def handle_key(self, event: QKeyEvent, watched: QObject | None = None) -> bool:
        """Apply an editor key; False when the key is not one of ours."""
        key, mods = event.key(), event.modifiers()
        plain = not mods & (
            Qt.KeyboardModifier.ControlModifier
            | Qt.KeyboardModifier.AltModifier
            | Qt.KeyboardModifier.MetaModifier
        )
        if not plain or not self.case_ids:
            return False
        if self._level_side is not None:
            side, self._level_side = self._level_side, None
            if key in _DIGITS and _DIGITS[key] <= 6:
                self.set_level(side, _DIGITS[key] or None)
                return True
            self._refresh()
            if key == Qt.Key.Key_Escape:
                return True
        if key in _LEVEL_KEYS:
            self._level_side = _LEVEL_KEYS[key]
            self._refresh()
        elif key in _CHOICE_KEYS:
            self.choose_side(_CHOICE_KEYS[key])
        elif key == Qt.Key.Key_A:
            self.toggle_ask_second()
        else:
            return False
        return True

    # --- display ----------------------------------------------------------------------------

    def _refresh(self) -> None:
        chosen = self.state["chosen"]
        for panel in self.sides:
            panel.show_state(
                chosen is not None and chosen == panel.case_id,
                self.state["levels"].get(panel.case_id),
                self._level_side == panel.side,
            )
        self.ask_second.setChecked(bool(self.state["ask_second"]))
        self.announce(self.state_text())
        self.setAccessibleDescription(
            "Left or 1: the left patient needs care first; Right or 2: the right one; A: hard "
            "pair; L or R then 1-6: that patient's level, 0 clears"
        )

    def state_text(self) -> str:
        """The pair's answer so far in words, as the editor's accessible name says it."""
        chosen = self.state["chosen"]
        parts = []
        if chosen is not None and chosen in self.case_ids:
            parts.append(f"the {SIDES[self.case_ids.index(chosen)]} patient needs care first")
        else:
            parts.append("no patient chosen yet")
        for side, case_id in enumerate(self.case_ids):
            level = self.state["levels"].get(case_id)
            if level is not None:
                entry = next(x for x in self.catalogs.urgency_levels if x.level == level)
                parts.append(f"{SIDES[side]} patient level {level}, {entry.name}")
        if self.state["ask_second"]:
            parts.append("hard pair: the PI is asked for a second annotator")
        if self._level_side is not None:
            parts.append(f"press 1-6 for the {SIDES[self._level_side]} patient's level")
        return "Urgency pairs: " + "; ".join(parts)


def _scale(catalogs: Catalogs) -> QWidget:
    """The six levels with their definitions, in two columns."""
    body = QWidget()
    grid = QGridLayout(body)
    grid.setContentsMargins(18, 0, 4, 2)
    grid.setHorizontalSpacing(18)
    grid.setVerticalSpacing(2)
    levels = list(catalogs.urgency_levels)
    rows = (len(levels) + 1) // 2
    for index, entry in enumerate(levels):
        label = QLabel(
            f"<b>{entry.level} · {html.escape(entry.name)}</b>: {html.escape(entry.definition)}"
        )
        label.setWordWrap(True)
        label.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)
        grid.addWidget(label, index % rows, index // rows)
    grid.setColumnStretch(0, 1)
    grid.setColumnStretch(1, 1)
    return body
