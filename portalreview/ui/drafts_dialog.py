"""Tools > Generate drafts… (PI): drafts to rank written by the loaded model, in the background.

The PI chooses the cases (those of a unit set, or those a case-tag filter selects, or every
case), a drafting template (0-shot or thematic, from the project's prompt library) and the
generation parameters; Run hands ``llm.suggest.run_drafts`` to the model thread
(``ModelHost.submit``), which writes one draft per case and stores it as a model-authored
response with its provenance. The dialog shows the progress (cases done of all, new, already
drafted, refused), the case being drafted and its text as the tokens arrive. Cancel stops
within one token and keeps every draft already stored; Run again resumes (cases that have this
model's draft from this template are skipped), as ``portalreview suggest --kind drafts`` does.

Drafts are responses, not units: like the command line, a run adds no draft to an existing
rank unit. The rank recipe of the study set-up then makes rank units from every case's model
drafts (the dialog says how when the run ends).
"""

from __future__ import annotations

import html
import threading
from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QApplication,
    QButtonGroup,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QRadioButton,
    QSpinBox,
    QVBoxLayout,
)
from shiboken6 import isValid

from portalreview.llm import suggest as sg
from portalreview.llm.engine import GenerationParams
from portalreview.llm.errors import LlmError, ModelProcessDied, ModelServerError
from portalreview.llm.templates import PromptTemplate
from portalreview.store.service import StoreError
from portalreview.tasks.common.screen import FlowRow, fit_to_screen
from portalreview.ui.tools import tell_study_written

RUN_KEY = "Ctrl+Return"
DEFAULT_MAX_TOKENS = 1024  # as `portalreview suggest`
EXCERPT_CHARS = 140
PROGRESS_FORMAT = "%v of %m cases"


@dataclass(frozen=True)
class DraftStep:
    """One case finished by the run (sent from the model thread to the dialog)."""

    case_id: int
    status: str  # "stored", "skipped" or "failed"
    done: int
    total: int
    stored: int
    skipped: int
    failed: int


@dataclass
class _Run:
    """One drafting run, shared by the dialog and the model thread: closing the project
    cancels it and waits for it to end (:meth:`DraftsDialog.project_closing`)."""

    cancel: threading.Event = field(default_factory=threading.Event)
    begun: threading.Event = field(default_factory=threading.Event)
    ended: threading.Event = field(default_factory=threading.Event)
    report: sg.BatchReport | None = None  # set on the model thread when the run returns
    closing: bool = False  # cancelled because the project is closing


#: How long closing the project waits for a drafting run to stop (it stops within one token).
CLOSE_WAIT_S = 10.0


class _Relay(QObject):
    """Carries the model thread's news to the GUI thread (queued connections)."""

    started = Signal(int, str, str)  # case id, external id, message
    piece = Signal(int, str)  # case id, text
    step = Signal(object)  # DraftStep


class DraftsDialog(QDialog):
    """The drafting run's settings, progress and streamed text."""

    #: Emitted on the GUI thread when a case is finished: (case id, "stored"/"skipped"/"failed").
    case_finished = Signal(int, str)
    #: Emitted when a run ends (its BatchReport), or None when it failed.
    run_finished = Signal(object)

    def __init__(self, window) -> None:
        super().__init__(window)
        self.window_ = window
        self.host = window.suggestions.host
        self.setObjectName("draftsDialog")
        self.setWindowTitle("Generate drafts")
        fit_to_screen(self, 820, 720)
        self.running = False
        self.report: sg.BatchReport | None = None
        self._cancel: threading.Event | None = None
        self._run: _Run | None = None
        self._service = window.service  # the session the choices are of (followed)
        self._closed_note = ""  # what a project closed during a run left, said until the next
        self._case_id: int | None = None
        self._case_name = ""
        self._templates: list[PromptTemplate] = []
        self._set_cases: dict[str, int] = {}  # unit set name -> its cases
        self._relay = _Relay(self)
        queued = Qt.ConnectionType.QueuedConnection
        self._relay.started.connect(self._case_started, queued)
        self._relay.piece.connect(self._piece, queued)
        self._relay.step.connect(self._step, queued)

        layout = QVBoxLayout(self)
        layout.addLayout(self._model_row())
        layout.addWidget(self._cases_box())
        layout.addWidget(self._generation_box())
        layout.addLayout(self._progress_rows())
        self.stream_view = QPlainTextEdit()
        self.stream_view.setObjectName("draftStream")
        self.stream_view.setReadOnly(True)
        self.stream_view.setAccessibleName("The draft being written")
        self.stream_view.setPlaceholderText("The draft appears here as the model writes it.")
        layout.addWidget(self.stream_view, 1)
        self.status = QLabel()
        self.status.setObjectName("draftsStatus")
        self.status.setWordWrap(True)
        self.status.setTextFormat(Qt.TextFormat.RichText)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.status)
        layout.addWidget(self._buttons())
        # a bound method, not a lambda: Qt disconnects it when the window is deleted
        self.host.engine_changed.connect(self._engine_changed)
        window.windowTitleChanged.connect(self._window_changed)
        self.fill_choices()
        self._show_model()

    # --- building ---------------------------------------------------------------------------

    def _model_row(self) -> QHBoxLayout:
        row = QHBoxLayout()
        self.model_label = QLabel()
        self.model_label.setObjectName("draftsModel")
        self.model_label.setTextFormat(Qt.TextFormat.RichText)
        self.model_label.setWordWrap(True)
        row.addWidget(self.model_label, 1)
        self.models_button = QPushButton("&Models…")
        self.models_button.setToolTip("Choose and load a local model (Tools > Models…)")
        self.models_button.clicked.connect(self.open_models)
        row.addWidget(self.models_button)
        return row

    def _cases_box(self) -> QGroupBox:
        box = QGroupBox("Cases to draft for")
        grid = QGridLayout(box)
        self.by_set = QRadioButton("Cases of the &unit set")
        self.by_tags = QRadioButton("Cases &tagged")
        group = QButtonGroup(box)
        for button in (self.by_set, self.by_tags):
            group.addButton(button)
        self.set_box = QComboBox()
        self.set_box.setObjectName("draftUnitSet")
        self.set_box.setAccessibleName("Unit set whose cases get drafts")
        self.tags_edit = QLineEdit()
        self.tags_edit.setObjectName("draftTags")
        self.tags_edit.setPlaceholderText("KEY=VALUE, KEY=VALUE… (empty: every case)")
        self.tags_edit.setAccessibleName("Case tags, all required")
        self.set_box.activated.connect(lambda _i: self.by_set.setChecked(True))
        self.set_box.currentIndexChanged.connect(lambda _i: self._show_planned())
        self.by_set.toggled.connect(lambda _on: self._show_planned())
        self.tags_edit.textEdited.connect(lambda _t: self.by_tags.setChecked(True))
        grid.addWidget(self.by_set, 0, 0)
        grid.addWidget(self.set_box, 0, 1)
        grid.addWidget(self.by_tags, 1, 0)
        grid.addWidget(self.tags_edit, 1, 1)
        grid.setColumnStretch(1, 1)
        return box

    def _generation_box(self) -> QGroupBox:
        box = QGroupBox("Drafting")
        form = QFormLayout(box)
        self.template_box = QComboBox()
        self.template_box.setObjectName("draftTemplate")
        form.addRow("&Template:", self.template_box)
        self.max_tokens = QSpinBox()
        self.max_tokens.setRange(1, 32768)
        self.max_tokens.setValue(DEFAULT_MAX_TOKENS)
        self.max_tokens.setToolTip("The most tokens one draft may have")

        self.temperature = QDoubleSpinBox()
        self.temperature.setRange(0.0, 2.0)
        self.temperature.setSingleStep(0.1)
        self.temperature.setDecimals(2)
        self.temperature.setToolTip("0 = greedy: the same model gives the same draft again")

        self.seed = QSpinBox()
        self.seed.setRange(0, 2**31 - 1)
        self.seed.setToolTip("The sampling seed (used when the temperature is above 0)")
        # the three numbers on one line where they fit (three rows left a large font's window
        # taller than a small screen)
        numbers = FlowRow()
        for text, spin in (
            ("Max &tokens:", self.max_tokens),
            ("Tem&perature:", self.temperature),
            ("&Seed:", self.seed),
        ):
            spin.setMinimumWidth(110)
            spin.setMaximumWidth(160)
            label = QLabel(text)
            label.setBuddy(spin)
            numbers.add(label, spin)
        form.addRow(numbers)
        return box

    def _progress_rows(self) -> QVBoxLayout:
        rows = QVBoxLayout()
        line = QHBoxLayout()
        self.progress = QProgressBar()
        self.progress.setObjectName("draftsProgress")
        self.progress.setFormat(PROGRESS_FORMAT)
        self.progress.setValue(0)
        line.addWidget(self.progress, 1)
        self.counts = QLabel()
        self.counts.setObjectName("draftsCounts")
        line.addWidget(self.counts)
        rows.addLayout(line)
        self.current = QLabel()
        self.current.setObjectName("draftsCurrent")
        self.current.setTextFormat(Qt.TextFormat.RichText)  # the case's words are escaped
        self.current.setWordWrap(True)
        rows.addWidget(self.current)
        return rows

    def _buttons(self) -> QDialogButtonBox:
        buttons = QDialogButtonBox()
        self.run_button = buttons.addButton("&Run", QDialogButtonBox.ButtonRole.ActionRole)
        self.run_button.setObjectName("runDrafts")
        self.run_button.setToolTip(
            f"Write a draft for every case that has none from this model and template ({RUN_KEY})"
        )
        self.run_button.clicked.connect(self.run)
        QShortcut(QKeySequence(RUN_KEY), self, self.run)
        self.cancel_button = buttons.addButton("&Cancel", QDialogButtonBox.ButtonRole.ActionRole)
        self.cancel_button.setObjectName("cancelDrafts")
        self.cancel_button.setToolTip("Stop at the next token; the drafts stored so far are kept")
        self.cancel_button.clicked.connect(self.cancel)
        self.cancel_button.setEnabled(False)
        close = buttons.addButton(QDialogButtonBox.StandardButton.Close)
        close.clicked.connect(self.reject)
        return buttons

    def fill_choices(self) -> None:
        """The unit sets and drafting templates of the project (read again at each opening)."""
        service = self._service = self.window_.service
        self.set_box.clear()
        self.template_box.clear()
        self._set_cases = {}
        self._templates = []
        if service is None:
            self._say(self._closed_note or "No project is open: open one to generate drafts.")
            self.run_button.setEnabled(False)
            return
        if not service.viewer.sees_all:
            self._say("Only the PI can generate drafts.")
            self.run_button.setEnabled(False)
            return
        sets = sg.unit_sets(service)
        self._set_cases = sg.unit_set_cases(service)
        for name, kind, count in sets:
            self.set_box.addItem(f"{name}  ({kind}, {count} units)", name)
        rank = next((i for i, (_n, kind, _c) in enumerate(sets) if kind == "rank"), 0)
        self.set_box.setCurrentIndex(rank)
        (self.by_set if sets else self.by_tags).setChecked(True)
        self.by_set.setEnabled(bool(sets))
        try:
            self._templates = sg.drafting_templates(service)
        except LlmError as exc:
            self._templates = []
            self._say(f"The drafting templates cannot be used: {_escape(str(exc))}")
        for template in self._templates:
            self.template_box.addItem(f"{template.spec.title} — {template.key}", template.key)
        self._show_planned()

    def _show_planned(self) -> None:
        """Before a run, the bar counts the cases of the unit set chosen (a run may find some
        already drafted); cases chosen by tag are counted when the run starts."""
        if self.running:
            return
        if self.by_set.isChecked() and self.set_box.currentIndex() >= 0:
            self.progress.setFormat(PROGRESS_FORMAT)
            self.progress.setRange(0, max(self._set_cases.get(self.set_box.currentData(), 0), 1))
            if not self._set_cases.get(self.set_box.currentData()):
                self.progress.setFormat("The unit set has no case")
        else:
            self.progress.setRange(0, 1)
            self.progress.setFormat("The cases tagged are counted when the run starts")
        self.progress.setValue(0)

    # --- the model --------------------------------------------------------------------------

    def _engine(self):
        engine = self.host.engine
        return None if engine is None or engine.closed else engine

    def _engine_changed(self, _engine: object) -> None:
        self._show_model()

    def _show_model(self) -> None:
        engine = self._engine()
        if engine is None:
            self.model_label.setText(
                "<b>No model is loaded.</b> Choose one with Models… (Tools > Models…); the "
                "drafts are written by it."
            )
        else:
            self.model_label.setText(
                f"<b>Model:</b> {_escape(engine.info.file_name)} — "
                f"{_escape(engine.info.describe())}"
            )
        self.run_button.setEnabled(
            not self.running
            and bool(self._templates)
            and self._is_pi()
            and self._engine() is not None
        )

    def _is_pi(self) -> bool:
        service = self.window_.service
        return service is not None and service.viewer.sees_all

    def open_models(self) -> None:
        from portalreview.ui.model_panel import open_tool

        open_tool(self.window_)

    # --- running ----------------------------------------------------------------------------

    def params(self) -> GenerationParams:
        return GenerationParams(
            max_tokens=self.max_tokens.value(),
            temperature=round(self.temperature.value(), 2),
            seed=self.seed.value(),
        )

    def tags(self) -> list[str]:
        return [t.strip() for t in self.tags_edit.text().split(",") if t.strip()]

    def run(self) -> None:
        """Start (or resume) the drafting run on the model thread."""
        if self.running or not self._is_pi():
            return
        engine = self._engine()
        if engine is None:
            self._say(
                "No model is loaded: choose one with <b>Models…</b>, then Run again. Nothing "
                "was generated."
            )
            return
        if not self._templates:
            self._say("There is no drafting template to use.")
            return
        service = self.window_.service
        template = self._templates[self.template_box.currentIndex()]
        unit_set = self.set_box.currentData() if self.by_set.isChecked() else None
        tags = [] if unit_set is not None else self.tags()
        params = self.params()
        run = self._run = _Run()
        cancel = self._cancel = run.cancel
        relay = self._relay

        def work() -> sg.BatchReport | None:
            run.begun.set()
            try:
                if cancel.is_set() and run.closing:  # closed before the model thread was free
                    return None
                cases = sg.cases_for_drafts(service, unit_set=unit_set, tags=tags)
                run.report = sg.run_drafts(
                    service,
                    engine,
                    cases,
                    template,
                    params=params,
                    cancel=cancel,
                    progress=lambda report, case_id: relay.step.emit(_step_of(report, case_id)),
                    on_start=lambda case: relay.started.emit(
                        case.id, case.external_id, case.message
                    ),
                    on_piece=lambda case, text: relay.piece.emit(case.id, text),
                )
                return run.report
            finally:
                run.ended.set()

        self._set_running(True)
        self.report = None
        self._case_id = None
        self.progress.setFormat(PROGRESS_FORMAT)
        self.progress.setRange(0, 0)
        self.counts.clear()
        self.current.setText("Choosing the cases…")
        self.stream_view.clear()
        self._closed_note = ""
        self._say(f"Drafting with {_escape(engine.info.file_name)} and {_escape(template.key)}…")
        self.host.submit(
            work,
            on_done=lambda report: self._done(report, run),
            on_error=lambda message, exc: self._failed(message, exc, run),
        )

    def project_closing(self, wait_s: float = CLOSE_WAIT_S) -> None:
        """The main window is closing the project (to open another, to sign in again, or to
        quit): stop the run and wait for it to end, so that nothing more is stored in the
        project once it is closed, and say so. A run that does not stop in time (it never
        blocks that long) is left behind: the closed project refuses what it would store."""
        run = self._run
        if run is None or not self.running:
            return
        run.closing = True
        run.cancel.set()
        # not begun yet: it sees the cancel as it begins and stores nothing (the events make
        # this order safe: begun is set before cancel is read)
        ended = not run.begun.is_set() or run.ended.is_set()
        if not ended:
            QApplication.setOverrideCursor(Qt.CursorShape.WaitCursor)
            try:
                ended = run.ended.wait(wait_s)
            finally:
                QApplication.restoreOverrideCursor()
        self._run = None  # its results, arriving later, are not this window's any more
        self._cancel = None
        self._set_running(False)
        project = getattr(self.window_, "project", None)
        label = project.label if project is not None else "The project"
        stored = len(run.report.stored) if ended and run.report is not None else None
        if stored is None:
            kept = "The drafts stored before are kept."
        elif stored == 0:
            kept = "No draft was stored before."
        elif stored == 1:
            kept = "The 1 draft stored before is kept."
        else:
            kept = f"The {stored} drafts stored before are kept."
        self._closed_note = (
            f"<b>The run stopped:</b> {_escape(label)} was closed while drafting, and nothing "
            f"more is stored in it. {kept} Open it again and Run to continue where it stopped."
        )
        self.current.clear()
        self._say(self._closed_note)
        self.run_finished.emit(run.report if ended else None)

    def _window_changed(self, _title: str = "") -> None:
        """Follow the main window: another project or person signed in (or none), choices
        read again; the note of a run stopped by closing the project stays until the next
        run."""
        if self.window_.service is self._service or self.running:
            return
        self.report = None
        self.progress.setValue(0)
        self.counts.clear()
        self.current.clear()
        self.stream_view.clear()
        self.fill_choices()
        self._show_model()
        if self._closed_note and self._is_pi():
            self._say(self._closed_note)

    def cancel(self) -> None:
        """Stop at the next token; every draft already stored is kept."""
        if self._cancel is not None and self.running:
            self._cancel.set()
            self._say("Stopping at the next token…")

    def _set_running(self, on: bool) -> None:
        self.running = on
        self.cancel_button.setEnabled(on)
        for widget in (self.set_box, self.tags_edit, self.template_box, self.by_set, self.by_tags):
            widget.setEnabled(not on)
        for widget in (self.max_tokens, self.temperature, self.seed):
            widget.setEnabled(not on)
        self.by_set.setEnabled(not on and self.set_box.count() > 0)
        self._show_model()

    def _case_started(self, case_id: int, external_id: str, message: str) -> None:
        if not self.running:  # news of a run stopped by closing the project
            return
        self._case_id, self._case_name = case_id, external_id
        text = " ".join(message.split())
        if len(text) > EXCERPT_CHARS:
            text = text[: EXCERPT_CHARS - 1] + "…"
        self.current.setText(f"Drafting for case <b>{_escape(external_id)}</b>: “{_escape(text)}”")
        self.stream_view.clear()

    def _piece(self, case_id: int, text: str) -> None:
        if case_id != self._case_id or not self.running:
            return
        if self.stream_view.document().isEmpty():
            # the blank lines a model often writes first are not stored (the draft is
            # stripped): the view starts where the stored draft does
            text = text.lstrip()
            if not text:
                return
        cursor = self.stream_view.textCursor()
        cursor.movePosition(cursor.MoveOperation.End)
        cursor.insertText(text)
        self.stream_view.ensureCursorVisible()

    def _step(self, step: DraftStep) -> None:
        if not self.running:
            return
        self.progress.setRange(0, max(step.total, 1))
        self.progress.setValue(step.done)
        self.counts.setText(
            f"{step.stored} new, {step.skipped} already drafted, {step.failed} refused"
        )
        self.case_finished.emit(step.case_id, step.status)

    def _done(self, report: sg.BatchReport | None, run: _Run | None = None) -> None:
        if not isValid(self) or run is not self._run or report is None:
            return  # the window was deleted, or the project closed (project_closing said so)
        self._set_running(False)
        self.report = report
        self._cancel = None
        self.progress.setRange(0, max(report.total, 1))
        self.progress.setValue(report.done)
        self.counts.setText(
            f"{len(report.stored)} new, {len(report.skipped)} already drafted, "
            f"{len(report.failed)} refused"
        )
        self._say(self._summary(report))
        self._say_where_it_ended(report)
        self.run_finished.emit(report)

    def _say_where_it_ended(self, report: sg.BatchReport) -> None:
        if self._case_id is None:
            self.current.setText("No case needed a draft." if report.total else "No case.")
            return
        name = f"<b>{_escape(self._case_name)}</b>"
        finished = not (report.cancelled or report.stopped)
        refused = report.failed.get(self._case_id)
        if finished and refused is not None:
            self.current.setText(
                f"Finished. The last draft, for case {name} (below), was not stored: "
                f"{_escape(refused)}"
            )
        elif finished:
            self.current.setText(f"Finished. The last draft written, for case {name}, is below.")
        elif self._case_id in report.stored:
            self.current.setText(f"Stopped after case {name}; its draft (below) is stored.")
        else:
            self.current.setText(
                f"Stopped while drafting case {name}: its unfinished draft (below) was not stored."
            )

    def _failed(self, message: str, exc: Exception, run: _Run | None = None) -> None:
        if not isValid(self) or run is not self._run:
            return
        self._set_running(False)
        self._cancel = None
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.current.clear()
        if isinstance(exc, (ModelProcessDied, ModelServerError)):  # stored drafts are kept
            self._say(
                f"<b>The run stopped.</b> {_escape(message)} The drafts already stored are "
                "kept; Run again after loading the model continues where it stopped."
            )
            self.run_finished.emit(None)
            return
        known = isinstance(exc, (StoreError, LlmError, ValueError))
        reason = message if known else f"{type(exc).__name__}: {message}"
        self._say(f"<b>Nothing was generated:</b> {_escape(reason)}")
        self.run_finished.emit(None)

    def _summary(self, report: sg.BatchReport) -> str:
        head = (
            f"{len(report.stored)} drafts stored, {len(report.skipped)} already there, "
            f"{len(report.failed)} refused, in {report.seconds:.0f} s."
        )
        if report.stopped:  # the model went away
            return (
                f"<b>The run stopped.</b> {_escape(report.stopped)} {head} The drafts stored "
                "are kept; Run again once the model is back continues where it stopped."
            )
        if report.cancelled:
            return (
                f"<b>Stopped.</b> {head} The drafts stored are kept; Run again to continue "
                "where it stopped."
            )
        failed = "".join(
            f"<br>Case {_escape(report.case_names.get(case_id, str(case_id)))}: {_escape(reason)}"
            for case_id, reason in list(report.failed.items())[:5]
        )
        project = getattr(self.window_, "project", None)
        path = f'"{project.location}"' if project is not None else "STUDY.prproj"
        return (
            f"<b>Done.</b> {head}{failed}<br>The drafts are responses of their cases (author "
            "kind model). To rank them, make a rank unit set from the cases' model drafts: "
            "the study set-up's <i>rank</i> recipe, or "
            f"<code>portalreview setup {_escape(path)} rank</code> (add <code>--tag KEY=VALUE"
            "</code> for some cases only). Rank units made before keep the drafts they have."
        )

    def _say(self, html: str) -> None:
        self.status.setText(html)

    def reject(self) -> None:
        """Close: a running run is cancelled first (its stored drafts are kept)."""
        self.cancel()
        super().reject()


def _step_of(report: sg.BatchReport, case_id: int) -> DraftStep:
    if report.stored and report.stored[-1] == case_id:
        status = "stored"
    elif report.skipped and report.skipped[-1] == case_id:
        status = "skipped"
    else:
        status = "failed"
    return DraftStep(
        case_id,
        status,
        report.done,
        report.total,
        len(report.stored),
        len(report.skipped),
        len(report.failed),
    )


def _escape(text: str) -> str:
    """Text shown in a rich-text label, as written (quotes stay quotes)."""
    return html.escape(text, quote=False)


def open_tool(window: Any) -> DraftsDialog:
    """Tools > Generate drafts… (PI): show (or bring forward) the dialog."""
    dialog = window.findChild(DraftsDialog)
    if dialog is None:
        dialog = DraftsDialog(window)
        # new drafts are new responses: the dashboard's study counts follow
        dialog.run_finished.connect(
            lambda report: report is not None and report.stored and tell_study_written(window)
        )
    elif not dialog.running:
        dialog.fill_choices()
        dialog._show_model()
    dialog.show()
    dialog.raise_()
    dialog.activateWindow()
    return dialog
