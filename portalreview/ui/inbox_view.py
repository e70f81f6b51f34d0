"""The inbox view (Tools > Inbox view, Ctrl+I): an inbox's messages sorted by win rate as judged
so far (seed 002), by the signed-in person, by all annotators, by one of them or by a model.

What it shows is what the signed-in viewer's service returns (blinding lives in the service):
the PI sees each message's reference level, the live NDCG@k and T-NDCG@k (k = 10, 30) and the
misplaced urgent messages - an urgent message (level 1-2) sorted into the bottom half, the
safety-critical error - highlighted; a clinician sees the order their own judgements give and
nothing of the reference. Reading the answers takes a moment on a full inbox, so it runs on a
worker thread (``ui/workers.py``); the window stays usable meanwhile. With "Update when answers
are saved" each urgency save reads the inbox again, the same way; saves made while a read runs
are read in one more read once it is done, never by restarting it.

"Sort by the loaded model" (Ctrl+M) asks the model of Tools > Models… about every pair of the
chosen inbox, in both orders, on the model thread (``ModelHost.submit``), with progress and
Cancel, and shows the model's order with its margin-weighted scores (seed 002) - for the PI with
NDCG / T-NDCG against the reference levels, for a clinician over their own inbox and without
them. The PI may then keep the model's pair answers as a pseudo annotator's
(``llm.suggest.store_inbox_answers``), so that every agreement measure compares it and the
judge list offers it. "Ask with the whole inbox in view" (opt-in) asks the same questions with
every message listed once (``layout="inbox"``, template ``urgency_inbox``): far fewer tokens to
evaluate, but a different question; an inbox too long for the model's context is then asked
pair by pair, and the status line says so.
"""

from __future__ import annotations

import html
import threading
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from PySide6.QtCore import QObject, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QBrush, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)
from shiboken6 import isValid

from portalreview.llm.engine import Engine, GenerationParams
from portalreview.llm.errors import Cancelled, LlmError
from portalreview.llm.suggest import store_inbox_answers
from portalreview.llm.templates import PromptLibrary, PromptTemplate
from portalreview.llm.urgency import LAYOUT_TEMPLATES, InboxScores, InboxTooLongError, score_inbox
from portalreview.store.service import StoreError, StudyService
from portalreview.tasks.common import colours
from portalreview.tasks.common.safe_text import plain_tip
from portalreview.tasks.common.screen import FlowRow, fit_to_screen
from portalreview.tasks.urgency.inbox import (
    CUTOFFS,
    URGENT_LEVELS,
    InboxResult,
    Judge,
    format_rate,
    inbox_patients,
    judges,
    load_inbox,
    model_inbox,
)
from portalreview.ui.session import follow_saves
from portalreview.ui.workers import Worker, run_in_background

AUTO_REFRESH_MS = 1500
MODEL_SORT_KEY = "Ctrl+M"
COLUMNS = (
    "#",
    "Case",
    "Message",
    "Win rate",
    "Won / compared",
    "Model score",
    "Reference level",
    "Safety check",
)
SCORE_COLUMN = COLUMNS.index("Model score")
LEVEL_COLUMN = COLUMNS.index("Reference level")
CHECK_COLUMN = COLUMNS.index("Safety check")


@dataclass(frozen=True)
class Loaded:
    """What one background load returns: the choices for the two boxes and the sorted inbox."""

    inboxes: list[str]
    judges: list[Judge]
    result: InboxResult | None


def load(
    service: StudyService,
    inbox: str | None,
    judge_key: str | None,
    progress=None,
    cancelled=None,
) -> Loaded | None:
    """Worker thread: the inboxes and judges this viewer may use, then the chosen inbox sorted
    by the chosen judge's answers (the first of each when the choice is gone)."""
    names = sorted(service.inboxes())
    options = judges(service)
    if not names or not options:
        return Loaded(names, options, None)
    name = inbox if inbox in names else names[0]
    judge = next((j for j in options if j.key == judge_key), options[0])
    try:
        return Loaded(names, options, load_inbox(service, name, judge, progress, cancelled))
    except InterruptedError:
        return None  # cancelled: a newer refresh (or closing the window) took over


@dataclass(frozen=True)
class ModelSorted:
    """A finished model run, kept so that the PI can store its pair answers."""

    engine: Engine
    template: PromptTemplate
    run: InboxScores
    result: InboxResult
    note: str = ""  # why the run was not asked as chosen (the inbox did not fit the context)


class WordyProgressBar(QProgressBar):
    """A progress bar whose words ("Reading answers… 120 of 4950 pairs") are shown whole: it
    asks for their width (with numbers of five digits), whatever its format."""

    def setFormat(self, text: str) -> None:
        super().setFormat(text)
        self.updateGeometry()

    def _text_width(self) -> int:
        longest = self.format().replace("%v", "88888").replace("%m", "88888")
        return self.fontMetrics().horizontalAdvance(longest.replace("%p", "100")) + 24

    def sizeHint(self) -> QSize:
        hint = super().sizeHint()
        return QSize(max(hint.width(), self._text_width()), hint.height())

    def minimumSizeHint(self) -> QSize:
        hint = super().minimumSizeHint()
        return QSize(max(hint.width(), self._text_width()), hint.height())


class _Relay(QObject):
    """Carries the model thread's progress (generation, done, total) to the GUI thread."""

    progress = Signal(int, int, int)


class InboxView(QWidget):
    """A tool window over the main window's signed-in service."""

    def __init__(self, window) -> None:
        super().__init__(window, Qt.WindowType.Window)
        self.window_ = window
        self.setObjectName("inboxView")
        self.setWindowTitle("Inbox view — sorted by win rate")
        fit_to_screen(self, 1100, 720)
        self.service: StudyService | None = None
        self.result: InboxResult | None = None
        self._worker: Worker | None = None
        self._generation = 0
        self._session = None
        self.loading = False
        self._refresh_due = False  # answers were saved while a read ran: read again after it

        self.inbox_box = QComboBox()
        self.inbox_box.setObjectName("inboxChoice")
        self.inbox_box.setAccessibleName("Inbox")
        self.inbox_box.setMinimumContentsLength(14)
        self.judge_box = QComboBox()
        self.judge_box.setObjectName("judgeChoice")
        self.judge_box.setAccessibleName("Whose judgements")
        self.judge_box.setMinimumContentsLength(18)
        for box in (self.inbox_box, self.judge_box):
            box.activated.connect(lambda _i: self.refresh())
        self.refresh_button = QPushButton("Refresh")
        self.refresh_button.setToolTip("Read the answers again (F5)")
        self.refresh_button.clicked.connect(self.refresh)
        QShortcut(QKeySequence(QKeySequence.StandardKey.Refresh), self, self.refresh)
        for close_key in (QKeySequence.StandardKey.Close, QKeySequence(Qt.Key.Key_Escape)):
            QShortcut(QKeySequence(close_key), self, self.close)  # Ctrl+W or Esc closes it
        self.auto = QCheckBox("Update when answers are saved")
        self.auto.setChecked(True)
        self.model_button = QPushButton("Sort by the loaded model")
        self.model_button.setObjectName("sortByModel")
        self.model_button.setToolTip(
            "Ask the model chosen in Tools > Models… about every pair of this inbox, in both "
            f"orders, and sort by its margin-weighted wins ({MODEL_SORT_KEY})"
        )
        self.model_button.clicked.connect(self.sort_by_model)
        QShortcut(QKeySequence(MODEL_SORT_KEY), self, self.sort_by_model)
        self.whole_inbox = QCheckBox("Ask with the whole inbox in view (faster)")
        self.whole_inbox.setObjectName("wholeInboxLayout")
        self.whole_inbox.setToolTip(
            "List every message once and ask each pair as a short question after it: each "
            "token is evaluated about once instead of once per pair. The model then judges "
            "each pair with the whole inbox in view, which is a different question from seed "
            "002's pair shown alone; an inbox longer than the model's context is asked pair "
            "by pair"
        )
        self.keep_button = QPushButton()
        self.keep_button.setObjectName("keepModelAnswers")
        self.keep_button.setToolTip(
            "Store the model's answer to every pair of this inbox that is an urgency unit, as "
            "the answers of a model pseudo annotator: agreement then compares it with the "
            "clinicians, and it can be chosen under 'Judgements of'"
        )
        self.keep_button.clicked.connect(self.keep_as_annotator)
        self.keep_button.setVisible(False)
        self.model_run: ModelSorted | None = None
        self._notice: str | None = None  # shown once the next result is on screen
        self._model_cancel: threading.Event | None = None
        self._relay = _Relay(self)
        self._relay.progress.connect(self._progress, Qt.ConnectionType.QueuedConnection)
        top = FlowRow()  # on more lines where a large font makes one wider than the screen
        top.add(QLabel("Inbox:"), self.inbox_box)
        top.add(QLabel("Judgements of:"), self.judge_box)
        top.add(self.refresh_button)
        top.add(self.auto)
        model_row = FlowRow()  # the model's controls under the others: the window stays narrow
        model_row.add(self.whole_inbox)
        model_row.add(self.model_button)

        self.summary = QLabel()
        self.summary.setObjectName("inboxSummary")
        self.summary.setTextFormat(Qt.TextFormat.RichText)  # the inbox and judge are escaped
        self.summary.setWordWrap(True)
        self.scores = QLabel()
        self.scores.setObjectName("inboxScores")
        self.scores.setTextFormat(Qt.TextFormat.RichText)
        self.scores.setWordWrap(True)
        self.scores.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.legend = QLabel()
        self.legend.setObjectName("inboxLegend")
        self.legend.setTextFormat(Qt.TextFormat.PlainText)
        self.legend.setWordWrap(True)

        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setObjectName("inboxTable")
        self.table.setTabKeyNavigation(False)
        self.table.setAccessibleName("The inbox, most urgent first")
        self.table.setAccessibleDescription(
            "One row per patient message, in the order chosen above, with its wins and level"
        )
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setAlternatingRowColors(True)
        self.table.setWordWrap(False)
        header = self.table.horizontalHeader()
        for column in range(len(COLUMNS)):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(COLUMNS.index("Message"), QHeaderView.ResizeMode.Stretch)

        self.progress = WordyProgressBar()
        self.progress.setTextVisible(True)
        self.progress.setFormat("Reading answers… %v of %m pairs")
        self.progress.setVisible(False)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop reading the answers")
        self.cancel_button.setVisible(False)
        self.cancel_button.clicked.connect(self.cancel)
        self.status = QLabel()
        self.status.setObjectName("inboxStatus")
        self.status.setTextFormat(Qt.TextFormat.PlainText)  # it names the inbox and the model
        self.status.setWordWrap(True)
        bottom = QHBoxLayout()
        bottom.addWidget(self.status, 1)
        bottom.addWidget(self.keep_button)
        bottom.addWidget(self.progress)
        bottom.addWidget(self.cancel_button)

        layout = QVBoxLayout(self)
        layout.addWidget(top)
        layout.addWidget(model_row)
        layout.addWidget(self.summary)
        layout.addWidget(self.scores)
        layout.addWidget(self.legend)
        layout.addWidget(self.table, 1)
        layout.addLayout(bottom)

        self._auto_timer = QTimer(self)
        self._auto_timer.setSingleShot(True)
        self._auto_timer.setInterval(AUTO_REFRESH_MS)
        self._auto_timer.timeout.connect(self._refresh_after_saves)
        # Signing out or in as someone else retitles the main window: what this window shows
        # belongs to the previous viewer, so it is cleared at once.
        window.windowTitleChanged.connect(self._window_changed)
        if hasattr(window, "study_saved_elsewhere"):  # a server study: anyone's saves
            window.study_saved_elsewhere.connect(self._saved_elsewhere)

    # --- loading ----------------------------------------------------------------------------

    def refresh(self) -> None:
        """Read the chosen inbox again, in the background (a newer refresh wins)."""
        service = self.window_.service
        if service is not self.service:  # signed in again, or as someone else
            self.service = service
            self.inbox_box.clear()
            self.judge_box.clear()
        self._follow_session()
        if service is None:
            self._show_nothing("No project is open.")
            return
        self.cancel()
        self._refresh_due = False
        self._generation += 1
        generation = self._generation
        self.loading = True
        self.status.setText("Reading the answers…")
        self.progress.setFormat("Reading answers… %v of %m pairs")
        self.progress.setRange(0, 0)
        self.progress.setVisible(True)
        self.cancel_button.setVisible(True)
        self._worker = run_in_background(
            load,
            service,
            self.inbox_box.currentData(),
            self.judge_box.currentData(),
            on_done=lambda loaded: self._loaded(generation, loaded),
            on_error=lambda message, exc: self._failed(generation, message, exc),
            on_progress=lambda done, total: self._progress(generation, done, total),
        )

    def _window_changed(self, _title: str = "") -> None:
        if self.window_.service is self.service:
            return
        self.cancel()
        self._generation += 1
        self._finish()
        self.service = None
        self.inbox_box.clear()
        self.judge_box.clear()
        self._show_nothing("Signed out. Refresh reads the inbox as the person signed in now.")
        if self.window_.service is not None and self.isVisible():
            self.refresh()

    def _follow_session(self) -> None:
        self._session = follow_saves(self._session, self.window_.session, self._answer_saved)

    def _answer_saved(self, view) -> None:
        # the model's order stays until Refresh is pressed
        showing_model = self.result is not None and self.result.model is not None
        if (
            self.auto.isChecked()
            and self.isVisible()
            and view.kind == "urgency"
            and not showing_model
        ):
            self._auto_timer.start()

    def _refresh_after_saves(self) -> None:
        """Read again for the answers saved: at once, or once the read (or the model's sort)
        running now is done, never cancelling it. Restarting a read at each save could keep
        it from ever finishing while someone answers pairs quickly."""
        if self.loading:
            self._refresh_due = True
        else:
            self.refresh()

    def _refresh_if_due(self) -> None:
        """After a read: the one more that saves made meanwhile asked for, if any (the window
        still shown, and updating on saves still wanted)."""
        due, self._refresh_due = self._refresh_due, False
        if due and self.auto.isChecked() and self.isVisible():
            self.refresh()

    def _saved_elsewhere(self, kind: str) -> None:
        """Someone saved in the server study (LISTEN/NOTIFY): an urgency judgement, or a
        change the listener could not name (it was away), sorts the inbox again."""
        if kind in ("urgency", "study"):
            self._answer_saved(SimpleNamespace(kind="urgency"))

    def _progress(self, generation: int, done: int, total: int) -> None:
        if generation == self._generation:
            self.progress.setRange(0, max(total, 1))
            self.progress.setValue(done)

    def _failed(self, generation: int, message: str, exc: Exception) -> None:
        if generation != self._generation:
            return
        self._finish()
        self.status.setText(f"Could not read the inbox: {message}")
        self._refresh_if_due()

    def cancel(self) -> None:
        """Stop what is running: reading the answers, the model's questions, or storing its
        answers (each stops at its next step; the model within one pair)."""
        if self._worker is not None:
            self._worker.cancel()
        if self._model_cancel is not None:
            self._model_cancel.set()

    def _finish(self) -> None:
        self.loading = False
        self._worker = None
        self._model_cancel = None
        self.progress.setVisible(False)
        self.cancel_button.setVisible(False)
        self.model_button.setEnabled(True)

    def _loaded(self, generation: int, loaded: Loaded | None) -> None:
        if generation != self._generation:
            return  # a newer refresh is on its way
        self._finish()
        if loaded is None:
            self._refresh_due = False  # cancelled, by Cancel or closing the window
            self.status.setText("Cancelled; Refresh reads the inbox again.")
            return
        _fill(self.inbox_box, [(n, n) for n in loaded.inboxes])
        _fill(self.judge_box, [(j.label, j.key) for j in loaded.judges])
        if loaded.result is None:
            self._show_nothing(
                "There is no inbox here yet (cases tagged inbox=NAME with urgency pairs)."
                if not loaded.inboxes
                else "You have no urgency pairs in this study."
            )
            self._refresh_if_due()
            return
        if loaded.result.inbox in loaded.inboxes:
            self.inbox_box.setCurrentIndex(loaded.inboxes.index(loaded.result.inbox))
        self.judge_box.setCurrentIndex(self.judge_box.findData(loaded.result.judge.key))
        self.show_result(loaded.result)
        self._refresh_if_due()

    def _show_nothing(self, text: str) -> None:
        self.result = None
        self.model_run = None
        self.keep_button.setVisible(False)
        self.table.setRowCount(0)
        self.summary.setText(text)
        self.scores.clear()
        self.legend.clear()
        self.legend.setVisible(False)
        self.status.clear()

    # --- display ----------------------------------------------------------------------------

    def show_result(self, result: InboxResult) -> None:
        self.result = result
        if result.model is None:
            self.model_run = None
        self._show_keep_button()
        self.summary.setText(_summary_html(result))
        self.table.setColumnHidden(SCORE_COLUMN, result.model is None)
        self.table.setColumnHidden(LEVEL_COLUMN, not result.reference_visible)
        self.table.setColumnHidden(CHECK_COLUMN, not result.reference_visible)
        if result.reference_visible:
            self.scores.setText(_scores_html(result))
            misplaced = sum(r.misplaced for r in result.rows)
            urgent = ", ".join(str(x) for x in sorted(URGENT_LEVELS))
            self.legend.setText(
                f"⚠ {misplaced} misplaced: an urgent message (reference level {urgent}) sorted "
                "into the bottom half of the messages with a level is highlighted."
                if misplaced
                else f"✓ No urgent message (reference level {urgent}) is sorted into the bottom "
                "half of the messages with a level."
            )
        else:
            self.scores.setText(
                (
                    "The order the model gives"
                    if result.model
                    else "The order your own judgements give"
                )
                + ". Reference levels and NDCG are shown to the PI only."
            )
            self.legend.clear()
        self.legend.setVisible(bool(self.legend.text()))
        self._fill_table(result)
        self.status.setText(self._notice or "Up to date.")
        self._notice = None

    def _fill_table(self, result: InboxResult) -> None:
        catalogs = self.service.catalogs if self.service else None
        names = {lv.level: lv.name for lv in catalogs.urgency_levels} if catalogs else {}
        warn = QBrush(colours.mark("warning_row"))  # the row also says so in words
        self.table.setRowCount(len(result.rows))
        for row, entry in enumerate(result.rows):
            message = " ".join(entry.message.split())
            level = entry.reference_level
            cells = [
                str(entry.position),
                entry.external_id,
                message if len(message) <= 160 else message[:157] + "…",
                format_rate(entry.win_rate),
                f"{entry.wins} / {entry.comparisons}",
                "" if entry.score is None else f"{entry.score:.2f}",
                "" if level is None else f"{level} · {names.get(level, '')}",
                "⚠ urgent, sorted low" if entry.misplaced else "",
            ]
            for column, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setData(Qt.ItemDataRole.UserRole, entry.case_id)
                if column == COLUMNS.index("Message"):
                    item.setToolTip(plain_tip(entry.message))
                if column in (0, 3, 4, SCORE_COLUMN):
                    item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
                if entry.misplaced:
                    item.setBackground(warn)
                self.table.setItem(row, column, item)

    def case_order(self) -> list[int]:
        """The case ids as the table lists them, top first."""
        return [
            self.table.item(row, 0).data(Qt.ItemDataRole.UserRole)
            for row in range(self.table.rowCount())
        ]

    # --- the loaded model ---------------------------------------------------------------------

    def _host(self):
        controller = getattr(self.window_, "suggestions", None)
        return None if controller is None else controller.host

    def sort_by_model(self) -> None:
        """Ask the loaded model about every pair of the chosen inbox (on the model thread) and
        show its order. Nothing is stored."""
        host = self._host()
        engine = host.engine if host is not None else None
        inbox = self.inbox_box.currentData()
        if self.service is None or self.service is not self.window_.service:
            self.status.setText("Refresh first: the inbox shown is not the signed-in person's.")
            return
        if engine is None or engine.closed:
            self.status.setText(
                "No model is loaded: choose one in Tools > Models…, then sort again "
                f"({MODEL_SORT_KEY})."
            )
            return
        if inbox is None:
            self.status.setText("There is no inbox to sort.")
            return
        self.cancel()
        self._generation += 1
        generation = self._generation
        cancel = self._model_cancel = threading.Event()
        service, relay = self.service, self._relay
        reference_visible = service.viewer.sees_all
        layout = "inbox" if self.whole_inbox.isChecked() else "pairs"

        def work() -> ModelSorted:
            cases = service.inboxes().get(inbox, ())
            if len(cases) < 2:
                raise LlmError(f"the inbox {inbox!r} has fewer than two messages to compare")
            library = PromptLibrary(service)

            def scored(how: str) -> tuple[PromptTemplate, InboxScores]:
                template = library.template(LAYOUT_TEMPLATES[how])
                run = score_inbox(
                    engine,
                    template,
                    inbox_patients(cases),
                    layout=how,
                    cancel=cancel,
                    progress=lambda done, total: relay.progress.emit(generation, done, total),
                )
                return template, run

            note = ""
            try:
                template, run = scored(layout)
            except InboxTooLongError as exc:  # refused before any question was asked
                note = (
                    f"The whole inbox takes {exc.needed} tokens and the model's context holds "
                    f"{exc.n_ctx}, so it was asked pair by pair. "
                )
                template, run = scored("pairs")
            result = model_inbox(
                inbox,
                cases,
                run,
                model_file=engine.info.file_name,
                reference_visible=reference_visible,
            )
            return ModelSorted(engine, template, run, result, note)

        self.loading = True
        self.model_button.setEnabled(False)
        self.keep_button.setVisible(False)
        self.status.setText(f"Asking {engine.info.file_name} about every pair of {inbox}…")
        self.progress.setFormat("Asking the model… question %v of %m")
        self.progress.setRange(0, 0)
        self.progress.setVisible(True)
        self.cancel_button.setVisible(True)
        self._worker = host.submit(
            work,
            on_done=lambda done: self._model_done(generation, done),
            on_error=lambda message, exc: self._model_failed(generation, message, exc),
        )

    def _model_done(self, generation: int, done: ModelSorted) -> None:
        if not isValid(self) or generation != self._generation:
            return
        self._finish()
        self._refresh_due = False  # the model's order stays until Refresh
        self.model_run = done
        self.show_result(done.result)
        run = done.run
        whole = done.template.kind == LAYOUT_TEMPLATES["inbox"]
        how = "with the whole inbox in view" if whole else "pair by pair"
        self.status.setText(
            f"{done.note}Sorted by {done.result.model.model_file}, {how}: "
            f"{done.result.model.n_questions} questions in {run.seconds:.1f} s "
            f"({run.evaluated_tokens} of {run.prompt_tokens} prompt tokens evaluated; the rest "
            "reused). Refresh (F5) shows the judgements again."
        )

    def _model_failed(self, generation: int, message: str, exc: Exception) -> None:
        if not isValid(self) or generation != self._generation:
            return
        self._finish()
        if isinstance(exc, Cancelled):
            self.status.setText(
                "Cancelled: the model's order was not finished; nothing was stored."
            )
        else:
            self.status.setText(f"The model could not sort the inbox: {message}")
        self._refresh_if_due()  # the judgements' order is still shown

    def _show_keep_button(self) -> None:
        # storing needs no model call (the file's name and hash are known), so the offer
        # stays even if the model has been unloaded meanwhile
        offer = (
            self.model_run is not None and self.service is not None and self.service.viewer.sees_all
        )
        if offer:
            self.keep_button.setText(f"Keep as annotator “{self.model_annotator_name()}”")
        self.keep_button.setVisible(offer)

    def model_annotator_name(self) -> str:
        """The pseudo annotator the model's answers are kept under: the model file's name
        without its extension (the command line's ``--as-annotator`` takes any name)."""
        if self.model_run is None:
            return ""
        return Path(self.model_run.engine.info.file_name).stem

    def keep_as_annotator(self) -> None:
        """PI: store the model's answer to each urgency unit of the inbox as the answers of a
        model pseudo annotator, in the background; then sort the inbox by them."""
        run = self.model_run
        if run is None or self.service is None or not self.service.viewer.sees_all:
            return
        name = self.model_annotator_name()
        service, cancel = self.service, threading.Event()
        self._model_cancel = cancel
        self._generation += 1
        generation = self._generation
        params = GenerationParams()

        def work(progress):
            return store_inbox_answers(
                service,
                run.engine,
                run.template,
                run.run,
                name,
                params=params,
                cancel=cancel,
                progress=lambda report, _unit: progress(report.done, report.total),
            )

        self.loading = True
        self.keep_button.setVisible(False)
        self.model_button.setEnabled(False)
        self.status.setText(f"Storing the model's answers as {name}'s…")
        self.progress.setFormat("Storing answers… %v of %m pairs")
        self.progress.setRange(0, 0)
        self.progress.setVisible(True)
        self.cancel_button.setVisible(True)
        self._worker = run_in_background(
            work,
            on_done=lambda report: self._kept(generation, name, report),
            on_error=lambda message, exc: self._keep_failed(generation, message, exc),
            on_progress=lambda done, total: self._progress(generation, done, total),
        )

    def _kept(self, generation: int, name: str, report) -> None:
        if not isValid(self) or generation != self._generation:
            return
        self._finish()
        told = (
            f"Stored {len(report.stored)} answers as {name} ({len(report.skipped)} were there "
            "already)."
        )
        if report.cancelled:  # the model's order stays on screen; Keep again stores the rest
            self._show_keep_button()
            self.status.setText(f"Stopped. {told} Keep again to store the rest.")
            return
        self.model_run = None
        annotator = next(
            (a for a in self.service.annotators() if a.name == name and a.is_model), None
        )
        if annotator is not None:
            key = f"annotator:{annotator.id}"
            self.judge_box.addItem(f"Model: {name}", key)
            self.judge_box.setCurrentIndex(self.judge_box.findData(key))
        self._notice = told
        self.refresh()

    def _keep_failed(self, generation: int, message: str, exc: Exception) -> None:
        if not isValid(self) or generation != self._generation:
            return
        self._finish()
        self._show_keep_button()
        reason = (
            message
            if isinstance(exc, (StoreError, LlmError))
            else f"{type(exc).__name__}: {message}"
        )
        self.status.setText(f"The model's answers were not stored: {reason}")

    def closeEvent(self, event) -> None:
        self.cancel()
        self._refresh_due = False
        self._generation += 1
        self._auto_timer.stop()
        super().closeEvent(event)


def _whom(judge: Judge) -> str:
    """Who judged, as HTML."""
    return html.escape({"me": "you", "all": "all annotators"}.get(judge.key, judge.label))


def _summary_html(result: InboxResult) -> str:
    n = len(result.rows)
    inbox = html.escape(result.inbox)
    if result.model is not None:
        return (
            f"<b>{n} messages</b> in {inbox}, sorted by <b>{_whom(result.judge)}</b>: "
            f"margin-weighted wins over all {result.n_pairs} pairs, each asked in both orders "
            f"({result.model.n_questions} questions; seed 002). Won / compared counts the pairs "
            "in which the model put the message first. Nothing is stored; Refresh (F5) shows "
            "the judgements again."
        )
    compared = sum(r.comparisons > 0 for r in result.rows)
    if result.adaptive:
        return (
            f"<b>{n} messages</b> in {inbox}, an adaptive inbox sorted by Bradley-Terry "
            f"strength as judged by <b>{_whom(result.judge)}</b>: {result.n_judgements} "
            f"judgements over {result.n_pairs} pairs chosen from the answers so far, "
            f"{compared} of {n} messages compared. Win rates are shown but not comparable "
            "here (a message met by close rivals wins about half its pairs)."
        )
    return (
        f"<b>{n} messages</b> in {inbox}, sorted by win rate as judged by "
        f"<b>{_whom(result.judge)}</b>: {result.n_judgements} judgements over "
        f"{result.n_pairs} pairs, {compared} of {n} messages compared so far. Choices not "
        "yet submitted count; equal win rates keep the case order; messages never compared "
        "go last."
    )


def _scores_html(result: InboxResult) -> str:
    if not result.scores:
        return "NDCG and T-NDCG appear once messages have been compared."
    parts = []
    for k in CUTOFFS:
        parts.append(
            f"NDCG@{k} <b>{result.scores[f'ndcg@{k}']:.3f}</b> &nbsp; "
            f"T-NDCG@{k} <b>{result.scores[f't_ndcg@{k}']:.3f}</b> "
            f"(a perfect sort: {result.scores[f'best_t_ndcg@{k}']:.3f})"
        )
    unscored = sum(r.reference_level is None for r in result.rows)
    rests_on = (
        f"Over the {result.n_scored} messages with a reference level"
        if result.model is not None or not unscored
        else f"Over the {result.n_scored} messages with a reference level, sorted and counted "
        "by their comparisons with each other only, as in the report; the "
        f"{unscored} without a level are listed last, with their comparisons against every "
        "message, and not scored"
    )
    return (
        " &nbsp;·&nbsp; ".join(parts)
        + f"<br><small>{rests_on}; relevance = 6 − level (seed 002).</small>"
    )


def _fill(box: QComboBox, entries: list[tuple[str, str]]) -> None:
    """Replace a box's entries, keeping the current choice when it is still there."""
    current = box.currentData()
    if [(box.itemText(i), box.itemData(i)) for i in range(box.count())] == entries:
        return
    box.blockSignals(True)
    box.clear()
    for text, data in entries:
        box.addItem(text, data)
    index = box.findData(current)
    box.setCurrentIndex(index if index >= 0 else 0)
    box.blockSignals(False)


def open_tool(window) -> InboxView:
    """Tools > Inbox view: show (or bring forward) the window and read the inbox."""
    view = window.findChild(InboxView)
    if view is None:
        view = InboxView(window)
    view.show()
    view.raise_()
    view.activateWindow()
    view.refresh()
    return view
