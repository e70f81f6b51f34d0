"""Adjudication (PI only): for one kind of work, the units whose annotators gave different
answers, those answers side by side, and the PI's decision saved as the unit's *gold* answer
with a note (seed 003: two independent passes, then consensus; issue 6).

The PI either takes one annotator's answer as it is, or loads it (or the current gold) into
that kind's own editor, changes it, and saves the result as gold. Gold answers are stored
apart from the annotators' answers (``answers.is_gold``), which stay as they were: every
agreement figure is computed from the annotators' answers only, so adjudicating changes none
of them (only the figures *against* gold, e.g. EPPC's "vs gold", use the decisions).

Keys in the window: Alt+Down / Alt+Up next / previous unit; Ctrl+1-9 load answer n into the
editor; Ctrl+S save the editor's answer as gold; Ctrl+Z / Ctrl+Shift+Z undo / redo in the
editor; Esc closes the window. Leaving a decision not saved as gold (another unit or kind, Esc,
the window's close button, closing the project or the app) asks first: Save, Discard, Cancel.
"""

from __future__ import annotations

import html
import itertools
import json
import logging
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QFrame,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QSplitter,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)
from shiboken6 import isValid

from portalreview.store.answer_summary import quote, summary_lines
from portalreview.store.gc_pause import paused_gc
from portalreview.store.kinds.base import PayloadError
from portalreview.store.models import KINDS
from portalreview.store.service import (
    AnswerView,
    StoreError,
    StudyService,
    UnitBrief,
    UnitView,
    not_saved_message,
)
from portalreview.tasks.common import colours
from portalreview.tasks.common.editor_base import Editor, clear_layout, keep_out_control_characters
from portalreview.tasks.common.screen import FlowRow, SideBySide, fit_to_screen
from portalreview.tasks.registry import EDITORS
from portalreview.ui.tools import bring_forward, only_for_the_pi, tell_study_written
from portalreview.ui.unsaved_gold import gold_work, keep_decision, offer_next, read_kept_decisions
from portalreview.ui.unsaved_work import UnsavedAnswer, UnsavedWork
from portalreview.ui.workers import Worker, run_in_background

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------
# Finding disagreements (no widgets)
# --------------------------------------------------------------------------------------------


@dataclass
class UnitAnswers:
    """One unit's annotators' answers (not gold, not models) and its gold answer."""

    unit_id: int
    answers: list[AnswerView]
    gold: AnswerView | None

    @cached_property  # asked of every unit on each listing: 80,000 JSON dumps at 10,000 units
    def differs(self) -> bool:
        """At least two answers, and not all the same (the same :func:`canonical` form)."""
        if len(self.answers) < 2:
            return False
        first = self.answers[0].payload
        return not all(same_canonical(first, a.payload) for a in self.answers[1:])

    @property
    def adjudicated(self) -> bool:
        """A submitted gold answer: a draft one (a decision not complete yet) is not used by
        the report, so the unit still waits for its decision."""
        return self.gold is not None and self.gold.status == "submitted"

    @property
    def mark(self) -> str:
        """The unit's mark in the list: ✓ adjudicated, ✎ gold kept as a draft, • neither."""
        if self.adjudicated:
            return "✓"
        return "•" if self.gold is None else "✎"


def canonical(payload: dict[str, Any]) -> str:
    """An answer as compared: JSON with the keys sorted (key order ignored, list order not)."""
    return json.dumps(payload, sort_keys=True, ensure_ascii=False)


def same_canonical(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """``canonical(a) == canonical(b)``, mostly without writing either: dumping 40,000
    answers took most of a second per kind at 10,000 units."""
    same = _same_json(a, b)
    return canonical(a) == canonical(b) if same is None else same


def _same_json(a: Any, b: Any) -> bool | None:
    """Whether two JSON values dump the same (:func:`canonical`), or None where the types
    leave it open (1 and 1.0, True and 1, a tuple and a list, keys not text: they can dump
    differently while Python calls them equal, or alike while it calls them different). A
    False stands whatever else is left open: dumps of different values differ."""
    kind = type(a)
    if kind is not type(b):
        return None
    if kind is str or kind is int or kind is bool or a is None:
        return a == b
    if kind is float:
        return float.__repr__(a) == float.__repr__(b)  # as json writes it (-0.0, nan)
    if kind is list:
        if len(a) != len(b):
            return False
        return _all_same(zip(a, b, strict=True))
    if kind is dict:
        if not all(type(k) is str for k in a) or not all(type(k) is str for k in b):
            return None
        if a.keys() != b.keys():
            return False
        return _all_same(zip(a.values(), map(b.__getitem__, a), strict=True))
    return None


def _all_same(pairs) -> bool | None:
    """False at the first pair that dumps differently; None if any is left open."""
    result: bool | None = True
    for x, y in pairs:
        same = _same_json(x, y)
        if same is False:
            return False
        if same is None:
            result = None
    return result


def units_of_kind(service: StudyService, kind: str) -> list[int]:
    """Every unit of ``kind`` assigned to anyone, in queue order (PI)."""
    # one query: a queue read per annotator took a third of a second at 10,000 units
    return service.units_in_queues(kind)


def collect(service: StudyService, kind: str, include_drafts: bool = False) -> list[UnitAnswers]:
    """Every unit of ``kind`` with its people's answers (submitted ones; drafts too with
    ``include_drafts``) and its gold answer."""
    models = {a.id for a in service.annotators() if a.is_model}
    out = []
    # read in bulk: one query per unit froze the window for minutes on 10,000 units
    by_unit = service.answers_for_units(units_of_kind(service, kind))
    for unit_id, every in by_unit.items():
        answers = [
            a
            for a in every
            if not a.is_gold
            and a.annotator_id not in models
            and (include_drafts or a.status == "submitted")
        ]
        gold = next((a for a in every if a.is_gold), None)
        out.append(UnitAnswers(unit_id, answers, gold))
    return out


def kinds_to_adjudicate(service: StudyService) -> list[str]:
    """The kinds with units assigned to anyone, in the app's order (PI)."""
    assigned = service.assigned_kinds()
    # an adaptive set's queues may list none of its assigned pairs
    return [
        kind
        for kind in KINDS
        if kind in assigned and (kind != "urgency" or units_of_kind(service, kind))
    ]


@dataclass
class Loaded:
    """What the window shows of one kind, read off the GUI thread (:func:`read_kind`)."""

    kinds: list[str] | None  # None: the kind box is kept as it is
    kind: str | None
    reports: list[UnitAnswers]
    briefs: dict[int, UnitBrief] = field(default_factory=dict)  # of the units that differ


def read_kind(
    service: StudyService, kind: str | None, include_drafts: bool, with_kinds: bool
) -> Loaded:
    """Worker thread: the kinds (``with_kinds``), then ``kind``'s (by default the first
    kind's) answers and the list labels of its units that differ; seconds on 10,000 units."""
    # half the time went on garbage collections walking the growing heap of payloads
    with paused_gc():
        kinds = kinds_to_adjudicate(service) if with_kinds else None
        if kind is None and kinds:
            kind = kinds[0]
        reports = [] if kind is None else collect(service, kind, include_drafts)
        briefs = service.unit_briefs([r.unit_id for r in reports if r.differs])
    return Loaded(kinds, kind, reports, briefs)


def unit_brief(unit: UnitView) -> str:
    """A unit in a few words, for the unit shown."""
    sentence = unit.sentence.text if unit.sentence is not None else None
    return _brief(unit.kind, tuple(c.external_id for c in unit.cases), sentence)


def list_label(brief: UnitBrief) -> str:
    """A unit in a few words, for the list of units (read in bulk, not unit by unit)."""
    where = f"Unit {brief.position + 1} · {brief.unit_set}"
    return f"{where}\n{_brief(brief.kind, brief.case_external_ids, brief.sentence_text)}"


def _brief(kind: str, case_ids: tuple[str, ...], sentence: str | None) -> str:
    if kind == "eppc" and sentence is not None:
        return quote(sentence, 70)
    case = case_ids[0] if case_ids else "?"
    if kind == "urgency" and len(case_ids) > 1:
        return f"cases {case} and {case_ids[1]}"
    return f"case {case}"


# --------------------------------------------------------------------------------------------
# The window
# --------------------------------------------------------------------------------------------


def tab_stops_in(container: QWidget) -> list[QWidget]:
    """``container`` and the widgets in it that Tab stops at, in their present Tab order (a
    widget whose focus goes to another, its focus proxy, is left to that one)."""
    stops = []
    widget = container
    while True:
        inside = widget is container or container.isAncestorOf(widget)
        tabs_here = bool(widget.focusPolicy() & Qt.FocusPolicy.TabFocus)
        if inside and tabs_here and widget.focusProxy() is None:
            stops.append(widget)
        widget = widget.nextInFocusChain()
        if widget is container:
            return stops


class AnswerColumn(QGroupBox):
    """One annotator's (or the gold) answer, with its buttons."""

    def __init__(
        self,
        title: str,
        lines: list[str],
        shared: set[str],
        comment: str,
        number: int | None,
        dialog: AdjudicationDialog,
        answer: AnswerView,
        only_differences: bool = False,
        whose: str = "",
    ) -> None:
        """``whose``: the answer as the buttons' accessible names name it ("Dr. Ben's answer"),
        so that a screen reader tells one column's buttons from another's."""
        super().__init__(title)
        self.answer = answer
        self.setObjectName("answerColumn")
        layout = QVBoxLayout(self)
        body = QTextBrowser()
        body.setObjectName("answerSummary")
        body.setAccessibleName(f"Answer of {title}")
        body.setOpenLinks(False)
        mark = colours.mark("difference").name()
        items = []
        hidden = 0
        for line in lines:
            text = html.escape(line)
            if line in shared and only_differences:
                hidden += 1
                continue
            if line not in shared:  # marked by ≠ as well as by colour
                text = f"<span style='background:{mark}'>≠ {text}</span>"
            items.append(f"<li>{text}</li>")
        note = f"<p><i>Comment: {html.escape(comment)}</i></p>" if comment.strip() else ""
        if hidden:
            plural = "s" if hidden != 1 else ""
            note += f"<p><i>({hidden} line{plural} shared by every answer not shown)</i></p>"
        body.setHtml(f"<ul style='margin-left:-20px'>{''.join(items)}</ul>{note}")
        layout.addWidget(body, 1)
        buttons = QHBoxLayout()
        self.take = QPushButton("Take as gold")
        self.take.setToolTip("Save this answer, as it is, as the gold answer (with the note)")
        self.take.clicked.connect(lambda: dialog.take_as_gold(answer))
        keys = f" (Ctrl+{number})" if number is not None and number <= 9 else ""
        self.load = QPushButton(f"Edit from this{keys}")
        whose = whose or f"{title}'s answer"
        self.take.setAccessibleName(f"Take {whose} as gold")
        self.load.setAccessibleName(f"Edit from {whose}{keys}")
        self.load.setToolTip("Load this answer into the editor below to change it first")
        self.load.clicked.connect(lambda: dialog.load_into_editor(answer))
        buttons.addWidget(self.take)
        buttons.addWidget(self.load)
        buttons.addStretch(1)
        layout.addLayout(buttons)
        self.setMinimumWidth(250)


class AdjudicationDialog(QDialog):
    """The PI's adjudication window (one per main window)."""

    def __init__(
        self,
        service: StudyService,
        parent: QWidget | None = None,
        read_only: bool = False,
        unsaved: UnsavedWork | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("adjudicationDialog")
        self.setWindowTitle("Adjudicate disagreements — PortalReview")
        self.setWindowFlag(Qt.WindowType.WindowMaximizeButtonHint, True)
        self.service = service
        self.catalogs = service.catalogs
        self.read_only = read_only
        self.names = {a.id: a.display_name or a.name for a in service.annotators()}
        self.reports: list[UnitAnswers] = []
        self.shown: list[UnitAnswers] = []  # the units listed, in the list's order
        self.briefs: dict[int, UnitBrief] = {}
        self.loading = False  # a kind's answers are being read in the background
        self._worker: Worker | None = None
        self._generation = 0  # a newer read wins; an older one's result is dropped
        self.report: UnitAnswers | None = None
        self.unit: UnitView | None = None
        self.editors: dict[str, Editor] = {}
        self.editor: Editor | None = None
        self.dirty = False
        self._discarded = False  # the last question about an unsaved decision said Discard
        self.default_note = ""  # what the next decision is noted as unless the PI writes a note
        self.note_written = False  # the note box holds words the PI typed for this decision
        self.columns: list[AnswerColumn] = []
        # decisions a failed save kept on this computer (``unsaved_gold``), offered once read
        self.unsaved = unsaved
        self.kept_to_offer: list[UnsavedAnswer] | None = None
        self.offer_reading = False  # the read under way was started to offer a kept decision
        self._kept_on_screen = False  # the editor's edit is the one kept for its unit
        self.last_failure: str | None = None  # why the last save as gold failed
        self._build()
        self._actions()
        fit_to_screen(self, 1400, 900)
        self._read(None, with_kinds=True)

    # --- building ---------------------------------------------------------------------------

    def _build(self) -> None:
        self.kind_box = QComboBox()
        self.kind_box.setObjectName("adjudicationKind")
        self.kind_box.setAccessibleName("Kind of work to adjudicate")
        # the kinds come after the first read: sized when shown, the box cut "Code sentences"
        self.kind_box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.kind_box.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        self.kind_box.currentIndexChanged.connect(lambda _i: self.reload())
        self.hide_done = QCheckBox("Hide units already adjudicated")
        self.hide_done.toggled.connect(lambda _c: self.loading or self._fill_units())
        self.only_diff = QCheckBox("Only the lines that differ")
        self.only_diff.setChecked(True)
        self.only_diff.setToolTip("Hide the lines every answer shares")
        self.only_diff.toggled.connect(lambda _c: self._redraw_columns())
        self.with_drafts = QCheckBox("Count unfinished (draft) answers")
        self.with_drafts.setToolTip("By default only submitted answers are compared")
        self.with_drafts.toggled.connect(lambda _c: self.reload())
        self.counts = QLabel()
        self.counts.setObjectName("adjudicationCounts")
        kind_part = QWidget()
        kind_row = QHBoxLayout(kind_part)
        kind_row.setContentsMargins(0, 0, 12, 0)
        kind_label = QLabel("&Kind:")
        kind_label.setBuddy(self.kind_box)
        kind_row.addWidget(kind_label)
        kind_row.addWidget(self.kind_box)
        kind_row.addStretch(1)
        options_part = FlowRow()  # on more lines where even a row of their own is too narrow
        for option in (self.hide_done, self.only_diff, self.with_drafts):
            options_part.add(option)
        # the options under the kind where the window is too narrow for one row of them all
        top = SideBySide(
            kind_part,
            options_part,
            widths=lambda: (kind_part.minimumSizeHint().width(), options_part.sizeHint().width()),
        )
        top.box.setStretch(0, 0)

        self.units = QListWidget()
        self.units.setObjectName("disagreements")
        self.units.setAccessibleName("Units where the annotators disagree")
        self.units.setWordWrap(True)
        # laid out a batch at a time: 10,000 wrapped labels at once held the window 0.3 s
        self.units.setLayoutMode(QListWidget.LayoutMode.Batched)
        self.units.currentRowChanged.connect(self._on_unit_row)
        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        units_label = QLabel(
            "<b>Units where answers differ</b> (✓ = gold saved, ✎ = gold kept as a draft, "
            "not complete yet)"
        )
        units_label.setWordWrap(True)
        left_layout.addWidget(units_label)
        left_layout.addWidget(self.units, 1)
        self.counts.setWordWrap(True)
        self.counts.setTextFormat(Qt.TextFormat.PlainText)
        left_layout.addWidget(self.counts)
        self.loading_bar = QProgressBar()
        self.loading_bar.setObjectName("adjudicationLoading")
        self.loading_bar.setRange(0, 0)  # busy: the read gives no steps
        self.loading_bar.setTextVisible(False)
        self.loading_bar.setAccessibleName("Reading the answers")
        self.loading_bar.setVisible(False)
        left_layout.addWidget(self.loading_bar)
        left.setMinimumWidth(240)

        self.unit_header = QLabel()
        self.unit_header.setObjectName("adjudicationUnit")
        self.unit_header.setWordWrap(True)
        self.unit_header.setTextFormat(Qt.TextFormat.RichText)
        answers_inner = QWidget()
        self.answers_layout = QHBoxLayout(answers_inner)
        self.answers_layout.setContentsMargins(0, 0, 0, 0)
        self.answers_area = QScrollArea()
        self.answers_area.setWidgetResizable(True)
        self.answers_area.setFrameShape(QFrame.Shape.NoFrame)
        self.answers_area.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # a Tab stop showing nothing
        self.answers_area.setWidget(answers_inner)
        answers = QWidget()
        answers_layout = QVBoxLayout(answers)
        answers_layout.setContentsMargins(0, 0, 0, 0)
        answers_layout.addWidget(self.unit_header)
        legend = QLabel(
            "The annotators' answers, side by side; lines marked ≠ are not shared by every "
            "answer."
        )
        legend.setWordWrap(True)
        answers_layout.addWidget(legend)
        answers_layout.addWidget(self.answers_area, 1)

        self.gold_box = QGroupBox("Gold answer (the PI's decision)")
        self.gold_box.setObjectName("goldBox")
        gold_layout = QVBoxLayout(self.gold_box)
        self.source_label = QLabel()
        self.source_label.setObjectName("goldSource")
        self.source_label.setTextFormat(Qt.TextFormat.PlainText)  # it names annotators
        self.source_label.setWordWrap(True)
        gold_layout.addWidget(self.source_label)
        # The gold editor scrolls inside its box: the editors' own minimum sizes (the urgency
        # pair is 560 pixels tall) must not make the dialog taller than a small screen.
        holder = QWidget()
        self.editor_holder = QVBoxLayout(holder)
        self.editor_holder.setContentsMargins(0, 0, 0, 0)
        editor_area = QScrollArea()
        editor_area.setObjectName("goldEditorArea")
        editor_area.setWidgetResizable(True)
        editor_area.setFrameShape(QFrame.Shape.NoFrame)
        editor_area.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # a Tab stop showing nothing
        editor_area.setWidget(holder)
        gold_layout.addWidget(editor_area, 1)
        note_row = QHBoxLayout()
        note_label = QLabel("&Note:")
        self.note = QLineEdit()
        keep_out_control_characters(self.note)
        self.note.setObjectName("goldNote")
        self.note.setPlaceholderText("Why this decision (kept with the gold answer)")
        self.note.setAccessibleName("Note on the decision")
        note_label.setBuddy(self.note)
        self.note.textEdited.connect(self._note_written)  # typing, not setText
        self.save_button = QPushButton("Save as gold (Ctrl+S)")
        self.save_button.setObjectName("saveGold")
        self.save_button.clicked.connect(self.save_gold)
        note_row.addWidget(note_label)
        note_row.addWidget(self.note, 1)
        note_row.addWidget(self.save_button)
        gold_layout.addLayout(note_row)
        self.status = QLabel()
        self.status.setObjectName("goldStatus")
        self.status.setWordWrap(True)
        self.status.setTextFormat(Qt.TextFormat.RichText)  # the reasons are escaped
        gold_layout.addWidget(self.status)

        right = QSplitter(Qt.Orientation.Vertical)
        right.addWidget(answers)
        right.addWidget(self.gold_box)
        right.setStretchFactor(0, 2)
        right.setStretchFactor(1, 3)
        right.setSizes([250, 600])
        right.setChildrenCollapsible(False)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(left)
        splitter.addWidget(right)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([280, 1100])
        layout = QVBoxLayout(self)
        layout.addWidget(top)
        layout.addWidget(splitter, 1)

    def _actions(self) -> None:
        def action(keys: list[str], slot) -> QAction:
            act = QAction(self)
            act.setShortcuts([QKeySequence(k) for k in keys])
            act.triggered.connect(slot)
            self.addAction(act)
            return act

        action(["Alt+Down"], lambda: self.step(1))
        action(["Alt+Up"], lambda: self.step(-1))
        action(["Ctrl+S"], self.save_gold)
        self.undo_action = action(["Ctrl+Z"], self._undo)
        self.redo_action = action(["Ctrl+Shift+Z", "Ctrl+Y"], self._redo)
        for n in range(1, 10):
            action([f"Ctrl+{n}"], lambda _=False, i=n - 1: self._load_number(i))

    # --- kinds and units --------------------------------------------------------------------

    def _fill_kinds(self, kinds: list[str], kind: str | None) -> None:
        self.kind_box.blockSignals(True)
        self.kind_box.clear()
        for each in kinds:
            self.kind_box.addItem(EDITORS[each][0] if each in EDITORS else each, each)
        self.kind_box.setCurrentIndex(max(self.kind_box.findData(kind), 0))
        self.kind_box.blockSignals(False)

    @property
    def kind(self) -> str | None:
        return self.kind_box.currentData()

    def set_kind(self, kind: str) -> None:
        index = self.kind_box.findData(kind)
        if index < 0:
            raise ValueError(f"no units of kind {kind!r} in this project")
        self.kind_box.setCurrentIndex(index)

    def reload(self) -> None:
        """Read the current kind's answers again and list its disagreements."""
        if not self._may_leave():
            return
        if not self.offer_reading and self.kept_to_offer:
            self.kept_to_offer = []  # the PI chose another kind: offered when next opened
        self._read(self.kind, with_kinds=False)

    def _read(self, kind: str | None, with_kinds: bool) -> None:
        """Read in the background (seconds on 10,000 units), the window saying so meanwhile;
        a newer read replaces one under way."""
        if self._worker is not None:
            self._worker.cancel()
        self._generation += 1
        generation = self._generation
        self._show_loading()
        self._worker = run_in_background(
            read_kind,
            self.service,
            kind,
            self.with_drafts.isChecked(),
            with_kinds,
            on_done=lambda loaded: self._loaded(generation, loaded),
            on_error=lambda message, _exc: self._read_failed(generation, message),
        )

    def _show_loading(self) -> None:
        self.loading = True
        self.reports, self.shown, self.briefs = [], [], {}
        self.units.clear()
        self.units.setEnabled(False)
        self._show(None)
        self.unit_header.setText("<i>Reading the answers…</i>")
        self.counts.setText("Reading the answers…")
        self.loading_bar.setVisible(True)

    def _done_loading(self, generation: int) -> bool:
        """False when the result is stale: this window is gone, or a newer read began."""
        if not isValid(self) or generation != self._generation:
            return False
        self._worker = None
        self.loading = False
        self.loading_bar.setVisible(False)
        self.units.setEnabled(True)
        return True

    def _loaded(self, generation: int, loaded: Loaded) -> None:
        if not self._done_loading(generation):
            return
        if loaded.kinds is not None:
            self._fill_kinds(loaded.kinds, loaded.kind)
        self.reports, self.briefs = loaded.reports, loaded.briefs
        self._fill_units()
        if self.kept_to_offer is None:
            self.kept_to_offer = read_kept_decisions(self)
        elif not self.offer_reading:
            return  # a read the PI asked for: the offers wait for the window's next opening
        self.offer_reading = False
        offer_next(self)

    def showEvent(self, event) -> None:
        """Opened again (Ctrl+J after Esc): offer what is kept again, once read."""
        super().showEvent(event)
        if not self.loading and self.kept_to_offer is not None:
            self.kept_to_offer = None
            QTimer.singleShot(0, self, self._offer_again)

    def _offer_again(self) -> None:
        if self.kept_to_offer is None and not self.loading and self.isVisible():
            self.kept_to_offer = read_kept_decisions(self)
            offer_next(self)

    def _read_failed(self, generation: int, message: str) -> None:
        if not self._done_loading(generation):
            return
        self.unit_header.setText("<i>The answers could not be read.</i>")
        self.counts.setText(f"Not read: {message}")

    def disagreements(self) -> list[UnitAnswers]:
        shown = [r for r in self.reports if r.differs]
        if self.hide_done.isChecked():
            shown = [r for r in shown if not r.adjudicated]
        return shown

    def _fill_units(self) -> None:
        keep = self.report.unit_id if self.report else None
        self.shown = shown = self.disagreements()
        self._show_counts()
        self.units.blockSignals(True)
        self.units.clear()
        for report in shown:
            item = QListWidgetItem(f"{report.mark} {list_label(self.briefs[report.unit_id])}")
            item.setData(Qt.ItemDataRole.UserRole, report.unit_id)
            item.setToolTip(f"{len(report.answers)} answers")
            self.units.addItem(item)
        ids = [r.unit_id for r in shown]
        row = ids.index(keep) if keep in ids else (0 if ids else -1)
        if row >= 0:
            self.units.setCurrentRow(row)
        self.units.blockSignals(False)
        if row >= 0:
            self._show(shown[row])
        else:
            self._show(None)

    def _show_counts(self) -> None:
        answered = [r for r in self.reports if len(r.answers) >= 2]
        differ = [r for r in self.reports if r.differs]
        done = sum(r.adjudicated for r in differ)
        drafts = sum(r.gold is not None and not r.adjudicated for r in differ)
        text = (
            f"{len(differ)} of {len(answered)} units answered by two or more people differ; "
            f"{done} of them adjudicated"
        )
        if drafts:
            text += f", {drafts} with a gold answer kept as a draft (not complete yet)"
        self.counts.setText(text + ".")

    def step(self, delta: int) -> None:
        row = self.units.currentRow() + delta
        if 0 <= row < self.units.count():
            self.units.setCurrentRow(row)

    def select_unit(self, unit_id: int) -> bool:
        for row in range(self.units.count()):
            if self.units.item(row).data(Qt.ItemDataRole.UserRole) == unit_id:
                self.units.setCurrentRow(row)
                return True
        return False

    def _on_unit_row(self, row: int) -> None:
        shown = self.shown
        if not 0 <= row < len(shown) or (self.report and shown[row].unit_id == self.report.unit_id):
            return
        if not self._may_leave():
            self.units.blockSignals(True)
            self.select_unit(self.report.unit_id)
            self.units.blockSignals(False)
            return
        self._show(shown[row])

    def _may_leave(self) -> bool:
        """Ask before dropping edits in the editor that are not saved as gold."""
        if self.editor is not None and not self.read_only:
            self.editor.finish_editing()  # what is typed without Enter is an edit too
        if not self.dirty or self.read_only:
            return True
        answer = QMessageBox.question(
            self,
            "Adjudication",
            "The answer in the editor is not saved as gold yet. Save it now?",
            QMessageBox.StandardButton.Save
            | QMessageBox.StandardButton.Discard
            | QMessageBox.StandardButton.Cancel,
        )
        if answer == QMessageBox.StandardButton.Save:
            return self.save_gold()
        if answer == QMessageBox.StandardButton.Discard:
            self.dirty = False
            self._discarded = True
            if self.unsaved is not None and self._kept_on_screen:  # not one kept apart
                self.unsaved.forget(self.report.unit_id)
                self._kept_on_screen = False
            return True
        return False

    # --- showing one unit -------------------------------------------------------------------

    def _show(self, report: UnitAnswers | None) -> None:
        self.report = report
        clear_layout(self.answers_layout)
        self.columns = []
        self.status.clear()
        if report is None:
            self.unit = None
            self.unit_header.setText("<i>No disagreements to show for this kind.</i>")
            self._set_editor(None)
            self.source_label.clear()
            return
        self.unit = self.service.read_unit(report.unit_id)
        self.unit_header.setText(self._header(self.unit, report))
        self._show_columns()
        self._set_editor(self.kind)
        start = report.gold
        self._load(start, "The current gold answer" if start else None)
        self._show_note(report.gold.comment if report.gold else "")
        self.default_note = ""
        self._order_tabs()

    def _header(self, unit: UnitView, report: UnitAnswers) -> str:
        n = len(report.answers)
        different = len({canonical(a.payload) for a in report.answers})
        parts = [f"<b>Unit {unit.position + 1}</b> of {html.escape(unit.unit_set)}"]
        if unit.kind == "eppc" and unit.sentence is not None:
            parts.append(f"from the {unit.sender}: <b>{html.escape(unit.sentence.text)}</b>")
        else:
            parts.append(html.escape(unit_brief(unit)))
        parts.append(f"{n} answers, {different} different")
        return " · ".join(parts)

    def _redraw_columns(self) -> None:
        if self.report is not None and self.unit is not None:
            clear_layout(self.answers_layout)
            self.columns = []
            self._show_columns()
            self._order_tabs()

    def _show_columns(self) -> None:
        report, unit = self.report, self.unit
        lines = {
            a.answer_id: summary_lines(unit.kind, a.payload, unit, self.catalogs)
            for a in report.answers
        }
        shared = set.intersection(*(set(v) for v in lines.values())) if lines else set()
        for number, answer in enumerate(report.answers, start=1):
            name = self.names.get(answer.annotator_id, f"annotator {answer.annotator_id}")
            title = f"{number}. {name}" + ("" if answer.status == "submitted" else " (draft)")
            column = AnswerColumn(
                title,
                lines[answer.answer_id],
                shared,
                answer.comment,
                number,
                self,
                answer,
                only_differences=self.only_diff.isChecked(),
                whose=f"{name}'s answer",
            )
            column.take.setEnabled(not self.read_only)
            self.columns.append(column)
            self.answers_layout.addWidget(column, 1)
        if report.gold is not None:
            gold_lines = summary_lines(unit.kind, report.gold.payload, unit, self.catalogs)
            column = AnswerColumn(
                "Current gold",
                gold_lines,
                set(gold_lines),
                report.gold.comment,
                None,
                self,
                report.gold,
                whose="the current gold answer",
            )
            column.setObjectName("goldColumn")
            column.take.setVisible(False)
            self.answers_layout.addWidget(column, 1)

    def _order_tabs(self) -> None:
        """Tab goes as the window reads: the list, the answers side by side, the gold editor,
        the note and Save. Qt's order is the order widgets came in: the answers and the
        editor, made for each unit, came after Save."""
        chain = [self.units]
        for index in range(self.answers_layout.count()):
            column = self.answers_layout.itemAt(index).widget()
            if column is not None:
                chain += tab_stops_in(column)
        if self.editor is not None:
            chain += tab_stops_in(self.editor)
        chain += [self.note, self.save_button]
        for first, second in itertools.pairwise(chain):
            QWidget.setTabOrder(first, second)

    def _set_editor(self, kind: str | None) -> None:
        if self.editor is not None:
            self.editor.setParent(None)
            self.editor.hide()
        self.editor = None
        if kind is None or kind not in EDITORS:
            if kind is not None:
                self.source_label.setText(
                    "This kind has no editor yet: take one of the answers as gold."
                )
            return
        if kind not in self.editors:
            editor = EDITORS[kind][1](self.catalogs)
            editor.setObjectName(f"gold_{kind}Editor")
            editor.changed.connect(self._on_editor_changed)
            own_comment = getattr(editor, "comment", None)
            if isinstance(own_comment, QWidget):
                own_comment.hide()  # the note below is the gold answer's comment
            self.editors[kind] = editor
        self.editor = self.editors[kind]
        self.editor_holder.addWidget(self.editor)
        self.editor.show()
        self.editor.setEnabled(not self.read_only)

    def _load(self, answer: AnswerView | None, source: str | None) -> None:
        if self.editor is None:
            return
        self.editor.load(self.unit, answer)
        self.dirty = False
        self._kept_on_screen = False
        self.source_label.setText(
            f"In the editor: {source}."
            if source
            else "In the editor: an empty answer. "
            "Load an annotator's answer (Edit from this), or build the decision here."
        )

    def _on_editor_changed(self) -> None:
        if self.sender() is self.editor and not self.editor.loading:
            self.dirty = True
            self.status.setText("Changed in the editor, not saved as gold yet (Ctrl+S).")

    def _load_number(self, index: int) -> None:
        if self.report is not None and 0 <= index < len(self.report.answers):
            self.load_into_editor(self.report.answers[index])

    def _undo(self) -> None:
        if self.editor is not None:
            self.editor.undo_stack.undo()

    def _redo(self) -> None:
        if self.editor is not None:
            self.editor.undo_stack.redo()

    # --- decisions --------------------------------------------------------------------------

    def _name_of(self, answer: AnswerView) -> str:
        return self.names.get(answer.annotator_id, f"annotator {answer.annotator_id}")

    def load_into_editor(self, answer: AnswerView) -> None:
        """Put an annotator's answer into the editor, to change it before saving as gold."""
        if self.editor is None or not self._may_leave():
            return
        name = self._name_of(answer)
        self._load(answer, f"{name}'s answer (change it, then save as gold)")
        self.default_note = f"Edited from {name}'s answer"
        self.editor.focus_first()

    def _note_written(self, _text: str) -> None:
        self.note_written = True

    def _show_note(self, note: str) -> None:
        """Show the saved gold answer's note; the next decision gets its own note unless the
        PI writes one (a note left from the last decision would name the wrong answer)."""
        self.note.setText(note)
        self.note_written = False

    def _typed_note(self) -> str:
        return self.note.text().strip() if self.note_written else ""

    def show_kept(self, kept: AnswerView, note: str) -> None:
        """Show a decision kept after a failed save in the editor, with its note, as the
        PI's edit not saved yet."""
        self._load(kept, "your decision kept on this computer after a failed save")
        self.note.setText(note)
        self.note_written = True
        self.dirty = True
        self._kept_on_screen = True

    def take_as_gold(self, answer: AnswerView) -> bool:
        """Save one annotator's answer, as it is, as the gold answer."""
        if self.report is None or self.read_only:
            return False
        name = self._name_of(answer)
        note = self._typed_note() or f"Took {name}'s answer"
        saved = self._save(answer.payload, note, on_screen=False)
        if saved and self.editor is not None:
            self._load(saved, f"the gold answer, taken from {name}")
        return saved is not None

    def save_gold(self) -> bool:
        """Save the editor's answer as the gold answer, with the note."""
        if self.report is None or self.editor is None or self.read_only:
            return False
        note = self._decision_note()
        self.editor.finish_editing()
        saved = self._save(self.editor.payload(), note, self.editor.submit_problem())
        if saved is not None:
            self.dirty = False
        return saved is not None

    def _decision_note(self) -> str:
        return self._typed_note() or self.default_note or "Adjudicated"

    def _save(
        self,
        payload: dict[str, Any],
        note: str,
        problem: str | None = None,
        on_screen: bool = True,
    ) -> AnswerView | None:
        """Save ``payload`` as gold: submitted, or a draft when it is not complete yet (the
        store's check, or the editor's ``problem``, see ``Editor.submit_problem``)."""
        unit_id = self.report.unit_id
        incomplete = problem
        status = "draft" if problem else "submitted"
        try:
            try:
                view = self.service.save_answer(
                    unit_id,
                    payload,
                    status=status,
                    gold=True,
                    comment=note,
                )
            except PayloadError as exc:
                if "cannot submit yet" not in str(exc):
                    raise
                incomplete = str(exc).split(":", 1)[-1].strip()
                view = self.service.save_answer(
                    unit_id, payload, status="draft", gold=True, comment=note
                )
        except (PayloadError, StoreError, PermissionError) as exc:
            self._say_not_saved(payload, note, status, exc, on_screen)
            return None
        if self.unsaved is not None:
            self.unsaved.forget(unit_id)
            self._kept_on_screen = False
        self.report.gold = view
        self._show_note(note)
        stamp = time.strftime("%H:%M:%S")
        text = f"{'✎' if incomplete else '✓'} Gold answer saved {stamp}."
        if incomplete:
            text += (
                f" It is not complete yet ({html.escape(incomplete)}), so it is kept as a draft."
            )
        self.status.setText(text)
        self._refresh_after_save()
        tell_study_written(self.parent())
        return view

    def _say_not_saved(
        self, payload: dict[str, Any], note: str, status: str, exc: Exception, on_screen: bool
    ) -> None:
        """Say why the save failed; a decision that may be saved later (a store's failure,
        not a refused answer) is kept on this computer too, so that a crash before the next
        save does not lose it (``on_screen``: it is the editor's edit, which Discard may
        throw away; a Take as gold is not)."""
        self.last_failure = str(exc)
        kept = isinstance(exc, StoreError) and keep_decision(self, payload, note, status, str(exc))
        text = not_saved_message(exc)
        if kept:
            self._kept_on_screen = on_screen
            text = text.rstrip(".") + ". Kept on this computer until it is saved."
        self.status.setText(
            f"<span style='color:{colours.text('error')}'>{html.escape(text)}</span>"
        )

    def _refresh_after_save(self) -> None:
        """Show the new gold in the list and beside the answers, without reloading all."""
        row = self.units.currentRow()
        item = self.units.item(row) if row >= 0 else None
        if item is not None and self.report is not None:
            item.setText(self.report.mark + item.text()[1:])  # the mark is one character
        self._redraw_columns()
        self._show_counts()

    # --- closing ----------------------------------------------------------------------------

    def reject(self) -> None:
        """Escape, the window's close button (QDialog's closeEvent calls this) and close():
        a decision not saved as gold is asked about first (Save / Discard / Cancel), as on
        leaving the unit; Cancel, or a save that fails, keeps the window open. A discarded
        edit is dropped from the editor, so that reopening shows what is stored."""
        if self._may_go():
            super().reject()

    def may_close(self, ask: bool = True) -> bool:
        """For the main window, before it closes the project or itself: True when nothing
        typed here would be lost. A decision not saved as gold is asked about with this window
        in front (Save / Discard / Cancel); False for Cancel, or a save that failed (the
        window says why). ``ask`` False (the program ending unattended, no one to answer): it
        is saved, or kept on this computer, and True."""
        if self.editor is not None and not self.read_only:
            self.editor.finish_editing()
        if not ask:
            self._save_or_keep()
            return True
        if self.dirty and not self.read_only:
            bring_forward(self)
        return self._may_go()

    def _save_or_keep(self) -> bool:
        """The program ending unattended: save the decision not saved as gold yet, asking
        nothing; one that cannot be saved is kept on this computer (``unsaved_gold``), never
        dropped. True when it is saved or kept, or there is none."""
        if not self.dirty or self.read_only or self.editor is None or self.report is None:
            return True
        if self.save_gold():
            return True
        status = "draft" if self.editor.submit_problem() else "submitted"
        why = self.last_failure or "not saved before the program ended"
        kept = keep_decision(self, self.editor.payload(), self._decision_note(), status, why)
        if not kept:
            log.error("unit %s: gold decision neither saved nor kept", self.report.unit_id)
        self.dirty = False  # nothing left to ask about as the window closes
        return kept

    def _may_go(self) -> bool:
        """:meth:`_may_leave` for the window going away (the unit stays shown): a discarded
        edit is dropped from the editor too, which shows the stored gold again."""
        self._discarded = False
        if not self._may_leave():
            return False
        if self._discarded and self.report is not None:
            self._show(self.report)
        return True


def open_tool(window) -> AdjudicationDialog | None:
    """Tools > Adjudicate disagreements (PI only)."""
    if not only_for_the_pi(window, "adjudication"):
        return None
    service = window.service
    dialog = window.findChild(AdjudicationDialog)
    if dialog is None or dialog.service is not service:
        if dialog is not None:
            dialog.deleteLater()
        read_only = bool(window.project is not None and window.project.read_only)
        dialog = AdjudicationDialog(
            service, window, read_only=read_only, unsaved=gold_work(window)
        )
    bring_forward(dialog)
    return dialog
