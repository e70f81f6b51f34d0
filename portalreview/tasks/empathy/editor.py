"""Empathy pairs: which of two responses to a patient's message is more empathetic, or are they
equally so (seed 004, the three-way comparison).

The two responses are shown as "Response 1" and "Response 2" in the order the store fixed for
this annotator (``presentation.swap``: the sides are randomised per person); who wrote which is
never shown to a clinician. The answer names the chosen *response*, never a side.

Keys: 1 = response 1 is more empathetic, 2 = response 2, 3 = both equally (the catalog's
``empathy_choices``, in order); PageUp/PageDown scroll both responses a page (a long one, or a
large text size, overflows its pane), Home/End take both to their start/end. Every change goes
through the undo history. The editor's accessible name says the choice made so far, and a
screen reader is told when it changes.
"""

from __future__ import annotations

import copy
from typing import Any

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QFrame,
    QGridLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from portalreview.domain.catalogs import Catalogs
from portalreview.store.service import AnswerView, ResponseView, UnitView
from portalreview.tasks.common.case_panel import CasePanel
from portalreview.tasks.common.editor_base import CommentBox, Editor
from portalreview.tasks.urgency.editor import paint_choice_frame

_KEYS = {Qt.Key.Key_1: 0, Qt.Key.Key_2: 1, Qt.Key.Key_3: 2}
_SCROLL_KEYS = (Qt.Key.Key_PageUp, Qt.Key.Key_PageDown, Qt.Key.Key_Home, Qt.Key.Key_End)
HELP = (
    "<b>Which response is more empathetic?</b> &nbsp; <b>1</b> response 1 · <b>2</b> response "
    "2 · <b>3</b> both equally · <b>PageUp</b>/<b>PageDown</b> scroll the responses, "
    "<b>Home</b>/<b>End</b> their start/end · <b>Ctrl+Enter</b> submit and go on"
)


class ResponseCard(QFrame):
    """One response: its screen label and its text (scrolls when long)."""

    def __init__(self, number: int) -> None:
        super().__init__()
        self.number = number
        self.setObjectName("empathyCard")
        self.chosen = False
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 6, 8, 6)
        self.title = QLabel()
        self.title.setTextFormat(Qt.TextFormat.RichText)
        # "= equally empathetic" made a title wider than a laptop's half page
        self.title.setWordWrap(True)
        layout.addWidget(self.title)
        self.text = QLabel()
        self.text.setObjectName(f"response{number}")
        self.text.setTextFormat(Qt.TextFormat.PlainText)
        self.text.setWordWrap(True)
        self.text.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.text.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)
        self.area = QScrollArea()
        self.area.setWidgetResizable(True)
        self.area.setFrameShape(QFrame.Shape.NoFrame)
        self.area.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        inner = QWidget()
        inner_layout = QVBoxLayout(inner)
        inner_layout.setContentsMargins(0, 0, 0, 0)
        inner_layout.addWidget(self.text)
        inner_layout.addStretch(1)
        self.area.setWidget(inner)
        layout.addWidget(self.area, 1)
        self.response_id: int | None = None
        self.label = f"Response {number}"

    def show_response(self, response: ResponseView) -> None:
        self.response_id = response.id
        self.label = response.label
        self.text.setText(response.text)
        self.area.verticalScrollBar().setValue(0)

    def scroll(self, key: int) -> None:
        """PageUp/PageDown: a page (less two lines, to keep the thread); Home/End: the start
        or the end of the response."""
        bar = self.area.verticalScrollBar()
        step = max(1, bar.pageStep() - 2 * self.text.fontMetrics().lineSpacing())
        bar.setValue(
            {
                Qt.Key.Key_PageUp: bar.value() - step,
                Qt.Key.Key_PageDown: bar.value() + step,
                Qt.Key.Key_Home: bar.minimum(),
                Qt.Key.Key_End: bar.maximum(),
            }[key]
        )

    def show_state(self, chosen: bool, equal: bool) -> None:
        colour = self.palette().highlight().color().name()
        mark = ""
        if chosen:
            mark = f"  <span style='color:{colour}'>✔ more empathetic</span>"
        elif equal:
            mark = f"  <span style='color:{colour}'>= equally empathetic</span>"
        self.title.setText(f"<b>{self.label}</b>   (key {self.number}){mark}")
        if self.chosen != (chosen or equal):
            self.chosen = chosen or equal
            self.update()

    def paintEvent(self, event) -> None:
        super().paintEvent(event)
        paint_choice_frame(self, self.chosen)


class EmpathyEditor(Editor):
    kind = "empathy"
    title = "Empathy pairs"

    def __init__(self, catalogs: Catalogs, parent: QWidget | None = None) -> None:
        super().__init__(catalogs, parent)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.state: dict[str, Any] = {"chosen": None, "equal": False}
        self.response_ids: list[int] = []

        self.case_panel = CasePanel(title="The patient's message")
        self.case_panel.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.cards = [ResponseCard(1), ResponseCard(2)]
        responses = QSplitter(Qt.Orientation.Horizontal)
        responses.setChildrenCollapsible(False)
        for card in self.cards:
            responses.addWidget(card)

        self.choice_buttons: list[QPushButton] = []
        # Two buttons a row (the third under them): three in one row made the editor wider
        # than a 1024x768 screen's pane, the second response and "Both" cut off at the right.
        choices = QGridLayout()
        for index, choice in enumerate(catalogs.empathy_choices):
            button = QPushButton(f"{choice.name}   ({index + 1})")
            button.setObjectName(f"choice_{choice.id}")
            button.setCheckable(True)
            button.setFocusPolicy(Qt.FocusPolicy.NoFocus)
            button.setMinimumHeight(34)
            button.clicked.connect(lambda _=False, i=index: self.choose(i))
            self.choice_buttons.append(button)
            choices.addWidget(button, index // 2, index % 2)
        self.comment = CommentBox(self.undo_stack)
        self.comment.textEdited.connect(lambda _t: self.emit_changed())

        help_text = QLabel(HELP)
        help_text.setObjectName("keyHelp")
        help_text.setWordWrap(True)
        right = QWidget()
        right_layout = QVBoxLayout(right)
        right_layout.setContentsMargins(0, 0, 0, 0)
        right_layout.addWidget(help_text)
        right_layout.addWidget(responses, 1)
        right_layout.addLayout(choices)
        right_layout.addWidget(self.comment)

        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(self.case_panel)
        splitter.addWidget(right)
        splitter.setStretchFactor(0, 1)
        splitter.setStretchFactor(1, 2)
        splitter.setSizes([420, 840])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 4)
        layout.addWidget(splitter)
        for watched in (self.case_panel, *(c.area for c in self.cards)):
            watched.installEventFilter(self)

    # --- Editor interface -------------------------------------------------------------------

    def show_unit(self, unit: UnitView, answer: AnswerView | None) -> None:
        self.case_panel.show_case(unit.cases[0])
        self.response_ids = [r.id for r in unit.responses[:2]]
        for card, response in zip(self.cards, unit.responses[:2], strict=False):
            card.show_response(response)
        payload = answer.payload if answer else {}
        self.state = {
            "chosen": payload.get("more_empathetic_response_id"),
            "equal": bool(payload.get("equal", False)),
        }
        self.comment.set_loaded(answer.comment if answer else "")
        self._refresh()

    def payload(self) -> dict[str, Any]:
        if self.state["equal"]:
            return {"equal": True}
        if self.state["chosen"] is not None:
            return {"more_empathetic_response_id": self.state["chosen"]}
        return {}

    def comment_text(self) -> str | None:
        return self.comment.stored_text()

    def focus_first(self) -> None:
        self.setFocus()

    # --- changes ----------------------------------------------------------------------------

    def choose(self, index: int) -> None:
        """``index`` into the catalog's choices: 0 response 1, 1 response 2, 2 equally."""
        if len(self.response_ids) < 2:
            return
        if index == 2:
            after = {"chosen": None, "equal": True}
            text = "equally empathetic"
        else:
            after = {"chosen": self.response_ids[index], "equal": False}
            text = f"response {index + 1} more empathetic"
        self.push(text, self._apply, copy.deepcopy(self.state), after)
        self._refresh()  # a click on the checked button must not leave it unchecked

    def _apply(self, state: dict[str, Any]) -> None:
        self.state = copy.deepcopy(state)
        self._refresh()

    # --- keyboard ---------------------------------------------------------------------------

    def handle_key(self, event: QKeyEvent, watched: QObject | None = None) -> bool:
        mods = event.modifiers() & (
            Qt.KeyboardModifier.ControlModifier
            | Qt.KeyboardModifier.AltModifier
            | Qt.KeyboardModifier.MetaModifier
        )
        if event.key() in _SCROLL_KEYS and not mods:
            for card in self.cards:
                card.scroll(event.key())
            return True
        if mods or event.key() not in _KEYS:
            return False
        self.choose(_KEYS[event.key()])
        return True

    # --- display ----------------------------------------------------------------------------

    def _refresh(self) -> None:
        for card in self.cards:
            card.show_state(
                card.response_id is not None and card.response_id == self.state["chosen"],
                self.state["equal"],
            )
        if self.state["equal"]:
            selected = 2
        elif self.state["chosen"] in self.response_ids:
            selected = self.response_ids.index(self.state["chosen"])
        else:
            selected = None
        for index, button in enumerate(self.choice_buttons):
            button.setChecked(index == selected)
        if selected is None:
            said = "no choice yet"
        elif selected == 2:
            said = "both responses equally empathetic"
        else:
            said = f"response {selected + 1} is more empathetic"
        self.announce(f"Empathy pairs: {said}")
        self.setAccessibleDescription(
            "1 response 1 is more empathetic, 2 response 2, 3 both equally; PageUp/PageDown "
            "scroll the responses, Home/End their start/end"
        )
