"""Model suggestions in the editors: pre-filled, visibly marked, never an answer by themselves.

When a unit with no answer yet is shown, :class:`SuggestionController` shows the newest
suggestion stored for it (for instance from an overnight ``portalreview suggest`` run) or,
when a model is loaded, asks the model for one on the model thread (moving to another unit
cancels it), stores it with its provenance through the system service (``suggest.store``) and
pre-fills the editor through :meth:`Editor.show_suggestion`. A banner says whose suggestion it
is. Nothing is saved until the person accepts it (Ctrl+Shift+A) or edits it; the saved answer
records the suggestion and whether it was accepted, edited or ignored (dismissed with
Ctrl+Shift+D, then answered) — see :class:`~portalreview.ui.session.AnnotationSession`.

A suggestion the quality gates refuse (``portalreview.llm.gates``: empty, an echo of the
prompt, the same text in every box, spans over the whole draft, a text loop) is stored with the
reason for the PI and never shown; the banner says only that the model's answer was not usable,
and the model is not asked again for that unit.
"""

from __future__ import annotations

import html
import threading
from dataclasses import dataclass, replace

from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QSizePolicy

from portalreview.llm import gates, own_examples
from portalreview.llm import suggest as sg
from portalreview.llm.engine import GenerationParams
from portalreview.llm.errors import (
    AnswerError,
    Cancelled,
    EngineClosedError,
    LlmError,
    ModelFileChanged,
)
from portalreview.llm.grammars import GrammarLimits
from portalreview.llm.templates import PromptLibrary
from portalreview.store.service import AnswerView, StoreError
from portalreview.store.templates import (
    latest_suggestion,
    refused_reasons,
    suggestion_payload,
    suggestions_by,
)
from portalreview.tasks.common import colours
from portalreview.tasks.common.editor_base import Editor
from portalreview.tasks.common.safe_text import plain_tip
from portalreview.tasks.common.screen import fit_to_screen
from portalreview.ui.model_panel import ModelHost

ACCEPT_KEY = "Ctrl+Shift+A"
DISMISS_KEY = "Ctrl+Shift+D"
DISMISSED = "Suggestion dismissed; your answer will record that it was ignored."


def _template_id(templates: dict) -> str:
    return "+".join(t.key for t in templates.values())


# What a clinician is told of a refused suggestion, by the gates' category of fault: the kind
# of fault, never the model's words.
REFUSED_IN_WORDS = {
    gates.EMPTY: "its answer was empty",
    gates.ECHO: "it repeated the form's own words",
    gates.SAME: "it gave the same text in several places",
    gates.WHOLE: "it marked whole texts, not the parts that fit",
    gates.LOOP: "its text went round in a loop",
    gates.NO_FACTS: "it listed no facts for a reply that has some",
    gates.UNUSABLE: "its answer could not be told from a guess",
}


class SuggestionBanner(QFrame):
    """The strip at the top of an editor that marks a suggestion."""

    def __init__(self, controller: SuggestionController) -> None:
        super().__init__()
        self.setObjectName("suggestionBanner")
        self.setAccessibleName("Model suggestion")
        self.state = "hidden"
        # palette colours, not a style sheet: a style sheet would stop the editor's reading
        # size from reaching the banner's text
        self.setAutoFillBackground(True)
        self.setFrameShape(QFrame.Shape.Box)
        self.setFrameShadow(QFrame.Shadow.Plain)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(10, 4, 4, 4)
        self.icon = QLabel("✦")
        self.icon.setObjectName("suggestionIcon")
        self.text = QLabel()
        self.text.setObjectName("suggestionText")
        # one line, clipped when the window is narrow (the tooltip has it all): a wrapped label
        # would ask the editor's layout for the height of many lines
        self.text.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        layout.addWidget(self.icon)
        layout.addWidget(self.text, 1)
        self.accept_button = QPushButton("Accept")
        self.accept_button.setObjectName("acceptSuggestion")
        self.accept_button.setToolTip(f"Make the suggestion your answer ({ACCEPT_KEY})")
        self.accept_button.clicked.connect(controller.accept)
        self.dismiss_button = QPushButton("Dismiss")
        self.dismiss_button.setObjectName("dismissSuggestion")
        self.dismiss_button.setToolTip(
            f"Set the suggestion aside and answer from an empty form ({DISMISS_KEY})"
        )
        self.dismiss_button.clicked.connect(controller.dismiss)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setObjectName("stopSuggestion")
        self.stop_button.setToolTip("Stop computing this suggestion")
        self.stop_button.clicked.connect(controller.stop_by_person)
        self.again_button = QPushButton("Ask again")
        self.again_button.setObjectName("askAgain")
        self.again_button.setToolTip("Ask the model for a suggestion for this unit after all")
        self.again_button.clicked.connect(controller.ask_again)
        self.prompt_button = QPushButton("Prompt…")
        self.prompt_button.setObjectName("suggestionPrompt")
        self.prompt_button.setToolTip("The exact prompts the model read for this suggestion (PI)")
        self.prompt_button.clicked.connect(controller.show_prompt)
        self.controller = controller
        buttons = (
            self.accept_button,
            self.dismiss_button,
            self.stop_button,
            self.again_button,
            self.prompt_button,
        )
        for button in buttons:
            layout.addWidget(button)
        self.setVisible(False)

    def show_state(self, state: str, text: str, tip: str = "", rich: bool = False) -> None:
        """Show ``text``: HTML with ``rich``, else as written (it may hold a model's file name
        or words); ``tip``, plain text, is its tooltip (``text`` where none is given)."""
        self.state = state
        if state == "hidden":
            self.setVisible(False)
            return
        # per scheme: ui/colours.py (a suggestion stopped by the person is a note)
        background, border, color = colours.banner("note" if state == "stopped" else state)
        palette = self.palette()
        role = QPalette.ColorRole
        palette.setColor(role.Window, QColor(background))
        palette.setColor(role.WindowText, QColor(border))
        self.setPalette(palette)
        for label in (self.icon, self.text):
            own = label.palette()
            own.setColor(role.WindowText, QColor(color))
            label.setPalette(own)
        self.text.setTextFormat(Qt.TextFormat.RichText if rich else Qt.TextFormat.PlainText)
        self.text.setText(text)
        self.text.setToolTip(plain_tip(tip or text))
        self.accept_button.setVisible(state == "offered")
        # an accepted suggestion left as it is can still be taken back (a slip of the key)
        self.dismiss_button.setVisible(state in ("offered", "accepted"))
        self.stop_button.setVisible(state == "working")
        self.again_button.setVisible(state == "stopped")
        self.prompt_button.setVisible(
            state in ("offered", "accepted", "edited") and self.controller.reads_prompts()
        )
        self.setVisible(True)


@dataclass
class _Job:
    unit_id: int
    cancel: threading.Event
    model_file: str


class SuggestionController(QObject):
    """Connects the model host, the open unit's editor and the annotation session."""

    def __init__(self, window) -> None:
        super().__init__(window)
        self.window = window
        self.host = ModelHost(window, window.prefs.qs)
        self.host.engine_changed.connect(self._on_engine)
        self.host.model_stopped.connect(self._on_model_stopped)
        self.host.model_changing.connect(self.stop)  # the suggestion in progress yields
        self.params = GenerationParams(max_tokens=1024)
        self.limits = GrammarLimits()
        self.job: _Job | None = None
        self.closed = False  # after shutdown, late results are dropped
        self.shown_file: str | None = None  # model file of the suggestion on screen
        self.model_label = QLabel()
        self.model_label.setObjectName("modelState")
        self.model_label.setTextFormat(Qt.TextFormat.PlainText)  # a model file's name
        window.statusBar().addPermanentWidget(self.model_label)
        self._on_engine(None)
        remembered = self.host.remembered_model()
        if self.host.load_at_start() and remembered is not None and remembered.is_file():
            QTimer.singleShot(0, lambda: self.host.load(remembered, show_progress=False))
        elif self.host.load_at_start() and remembered is not None:  # moved or deleted
            QTimer.singleShot(0, lambda: self.host.missing_at_start(remembered))
        elif self.host.load_at_start() and self.host.remembered_server():
            QTimer.singleShot(0, self._reconnect_server)

    def _reconnect_server(self) -> None:
        """At start, the model server used last time, if the study still names it."""
        from portalreview.llm.errors import LlmError
        from portalreview.llm.model_server import configured_setting

        service = getattr(self.window, "service", None)
        try:
            setting = configured_setting(service.project if service is not None else None)
        except LlmError:
            return
        if setting is not None and setting.url == self.host.remembered_server():
            self.host.connect_server(setting)

    # --- the model ----------------------------------------------------------------------------

    def _on_engine(self, engine) -> None:
        if engine is None:
            self.model_label.setText("No model")
            self.model_label.setToolTip("Tools > Models… chooses a local model for suggestions")
            return
        self.model_label.setText(f"Model: {engine.info.file_name}")
        self.model_label.setToolTip(plain_tip(engine.info.describe()))
        self.window.statusBar().showMessage(f"Model loaded: {engine.info.describe()}", 10000)
        session = self.window.session
        editor = self._editor()
        if session is None or editor is None or session.unit is None:
            return
        # the unit is already on screen: never put a suggestion over what the person did
        if not self._started(session, editor) and session.suggestion_state is None:
            self.unit_shown(editor)

    def _on_model_stopped(self, message: str) -> None:
        self.model_label.setText("Model stopped")
        self.model_label.setToolTip(plain_tip(message))

    # --- showing units ------------------------------------------------------------------------

    def _editor(self) -> Editor | None:
        kind = self.window.kind
        return self.window.editors.get(kind) if kind else None

    def banner(self, editor: Editor) -> SuggestionBanner:
        banner = editor.findChild(SuggestionBanner)
        if banner is None:
            banner = SuggestionBanner(self)
            editor.add_banner(banner)
        return banner

    def unit_shown(self, editor: Editor) -> None:
        """Called after the session opened a unit in ``editor``."""
        self.stop()
        self.shown_file = None
        if self.window.statusBar().currentMessage() == DISMISSED:  # the last unit's
            self.window.statusBar().clearMessage()
        self.banner(editor).show_state("hidden", "")
        session = self.window.session
        unit = session.unit if session else None
        if unit is not None and not session.read_only and session.suggestion_state == "edited":
            self._recall(editor, session)
        if unit is None or session.read_only or session.answer is not None:
            return
        if unit.kind not in sg.TEMPLATES_FOR_KIND or not editor.can_suggest(unit):
            return
        # the examples decide the templates, hence which stored suggestions are this one's
        person, examples = self._examples(session, unit)
        try:
            library = PromptLibrary(self.window.admin)
            templates = sg.resolve_templates(library, unit.kind, own_examples=person is not None)
        except LlmError as exc:
            self.window.statusBar().showMessage(f"No suggestion: {exc}", 8000)
            return
        try:  # with own examples, only one made for this person (from their replies)
            stored = latest_suggestion(
                self.window.service, unit.unit_id, _template_id(templates) if person else None
            )
        except (StoreError, PermissionError):
            stored = None
        if stored is not None:
            self._present(editor, stored.id, stored.model_file, stored.payload)
            return
        engine = self.host.engine
        if engine is None or engine.closed:
            return
        try:
            refused = self._refused_before(unit.unit_id, engine, templates, person)
        except ModelFileChanged as exc:  # its answers would not be the recorded file's
            self.banner(editor).show_state("note", f"No suggestion: {exc}")
            return
        if refused is not None:
            self._show_refused(editor, engine.info.file_name, refused)
            return
        cancel = threading.Event()
        ctx = sg.SuggestContext(
            engine, self.window.admin.catalogs, templates, self.params, self.limits, cancel
        )
        if person is not None:
            ctx = replace(ctx, for_annotator=person, own_examples=examples)
        job = self.job = _Job(unit.unit_id, cancel, engine.info.file_name)

        def work():
            if cancel.is_set():
                return None
            try:
                return sg.gated(sg.suggest(ctx, unit), unit, ctx.catalogs)
            except Cancelled:  # moved on, or the window is closing
                return None

        self.banner(editor).show_state(
            "working",
            f"Asking {engine.info.file_name} for a suggestion"
            + (" with your own earlier replies as examples" if person is not None else "")
            + "…",
        )
        self.host.submit(
            work,
            on_done=lambda answer: self._answered(job, engine, answer),
            on_error=lambda message, exc: self._failed(job, message, exc),
        )

    def _recall(self, editor: Editor, session) -> None:
        """Give the session the suggestion behind a reopened edited answer as the editor shows
        it (pre-filled for a moment, then the answer again), so that an answer changed back to
        it is recorded as accepted."""
        try:
            payload = suggestion_payload(self.window.admin, session.suggestion_id)
            editor.show_suggestion(payload)
            shown = editor.payload()
        except (StoreError, PermissionError, KeyError, TypeError, ValueError):
            shown = None  # compared with nothing: the answer stays "edited"
        editor.load(session.unit, session.answer)
        if shown is not None:
            session.recall_suggestion(shown)

    def _personal_for(self, session, unit) -> int | None:
        """The clinician a respond suggestion is made for, from their own earlier replies, when
        the study asks for that (``llm/own_examples.py``); None otherwise."""
        person = session.service.viewer.annotator_id
        if unit.kind != "respond" or person is None or not unit.cases:
            return None
        try:
            return person if self.window.service.own_examples() else None
        except (StoreError, PermissionError):
            return None

    def _examples(self, session, unit) -> tuple[int | None, tuple]:
        """The clinician a suggestion is made for and their most similar earlier replies, or
        (None, ()) for the generic suggestion: own examples off, or no similar reply yet."""
        person = self._personal_for(session, unit)
        if person is None:
            return None, ()
        case = unit.cases[0]
        try:
            examples = own_examples.examples_for(
                self.window.service, person, case.message, case.id
            )
        except (StoreError, PermissionError):
            examples = []
        return (person, tuple(examples)) if examples else (None, ())

    def _refused_before(
        self, unit_id: int, engine, templates: dict, person: int | None = None
    ) -> str | None:
        """Why the quality gates refused this model's suggestion for the unit (same
        templates, made for the same person), or None. Asking again would give the same
        answer (greedy decoding, a fixed seed)."""
        template_id = _template_id(templates)
        try:
            found = suggestions_by(
                self.window.admin, [unit_id], engine.sha256, template_id, for_annotator=person
            )
            reasons = refused_reasons(self.window.admin, list(found.values())) if found else {}
        except (StoreError, PermissionError):
            return None
        return next(iter(reasons.values()), None)

    def _show_refused(self, editor: Editor, model_file: str, reason: str) -> None:
        """The note that the model's suggestion was refused. It says what kind of fault in
        plain words, never the model's own text (which would anchor the clinician); the PI
        reads the gate's whole reason in the tooltip, as in Tools > Models."""
        fault = REFUSED_IN_WORDS.get(gates.category(reason))
        note = (
            f"{model_file} gave no usable suggestion for this unit"
            + (f" ({fault})" if fault else "")
            + ". Please answer it yourself."
        )
        pi = self.window.service is not None and self.window.service.viewer.role == "pi"
        tip = f"{note}\nRefused by the quality gates: {reason}" if pi else note
        self.banner(editor).show_state("note", note, tip)

    def stop(self) -> None:
        """Cancel the suggestion being computed (moving on, closing the project)."""
        if self.job is not None:
            self.job.cancel.set()
            editor = self._editor()
            if editor is not None:
                banner = editor.findChild(SuggestionBanner)
                if banner is not None and banner.state == "working":
                    banner.show_state("hidden", "")
            self.job = None

    def stop_by_person(self) -> None:
        """Stop pressed: cancel the suggestion, and say so with a way to ask again (the
        banner went away as if nothing had been asked)."""
        editor = self._editor()
        working = self.job is not None
        self.stop()
        if editor is not None and working:
            self.banner(editor).show_state(
                "stopped", "Stopped: no suggestion for this unit. Ask again to have one after all."
            )

    def ask_again(self) -> None:
        """Ask again after Stop, as when the unit was opened."""
        editor, session = self._editor(), self.window.session
        if editor is None or session is None or session.unit is None:
            return
        engine = self.host.engine
        if engine is None or engine.closed:  # unloaded, or stopped, since
            self.window.statusBar().showMessage(
                "No model is loaded: choose one in Tools > Models… to ask for a suggestion.", 8000
            )
            return
        if self._started(session, editor):  # never put a suggestion over the person's work
            self.banner(editor).show_state("hidden", "")
            self.window.statusBar().showMessage(
                "No suggestion asked: you have started this unit yourself.", 8000
            )
            return
        self.unit_shown(editor)

    def _current(self, job: _Job) -> bool:
        session = self.window.session
        return (
            not self.closed
            and self.job is job
            and session is not None
            and session.unit is not None
            and session.unit.unit_id == job.unit_id
        )

    def _answered(self, job: _Job, engine, answer: sg.ModelAnswer | None) -> None:
        if answer is None or job.cancel.is_set() or self.closed or self.window.admin is None:
            return
        not_stored = None
        try:
            suggestion_id = sg.store(self.window.admin, engine, answer)
        except (StoreError, LlmError) as exc:
            not_stored = f"The suggestion was not stored: {exc}"
            self.window.statusBar().showMessage(not_stored, 10000)
            suggestion_id = None
        if not self._current(job):
            return
        self.job = None
        editor = self._editor()
        session = self.window.session
        if editor is None:
            return
        if suggestion_id is None:  # never offered: nothing records where it came from
            self.banner(editor).show_state("note" if not_stored else "hidden", not_stored or "")
            return
        if answer.refused is not None:  # stored for the PI, never offered
            self._show_refused(editor, job.model_file, answer.refused)
            return
        if self._started(session, editor):  # meanwhile: their work is never replaced
            self.banner(editor).show_state(
                "note",
                f"{job.model_file} made a suggestion, but you had already started; it is "
                "stored for the PI and not shown.",
            )
            return
        used = len(answer.params.get("own_examples", [])) if answer.for_annotator else 0
        self._present(editor, suggestion_id, job.model_file, answer.payload, used)

    @staticmethod
    def _started(session, editor: Editor) -> bool:
        """Has the person begun answering the unit on screen (saved, typing not yet saved, or
        anything in the editor's undo history)?"""
        return session.answer is not None or session.pending or editor.undo_stack.count() > 0

    def _failed(self, job: _Job, message: str, exc: Exception) -> None:
        current = self._current(job)
        if current:
            self.job = None
        if isinstance(exc, (Cancelled, EngineClosedError)) or not current:
            return
        editor = self._editor()
        if isinstance(exc, AnswerError):
            text = f"No suggestion: the answer of {job.model_file} did not fit ({message})."
        else:
            text = f"No suggestion: {message}"
        if editor is not None:
            self.banner(editor).show_state("note", text)

    def _present(
        self, editor: Editor, suggestion_id: int, model_file: str, payload, examples: int = 0
    ) -> None:
        try:
            editor.show_suggestion(payload)
        except (KeyError, TypeError, ValueError) as exc:  # a payload this editor cannot show
            self.window.statusBar().showMessage(f"The suggestion cannot be shown: {exc}", 8000)
            self.window.session.editor.load(self.window.session.unit, None)
            return
        self.window.session.offer_suggestion(suggestion_id)
        self.shown_file = model_file
        mine = (
            f" {own_examples.describe_count(examples)}" if examples else ""
        )  # (shown to this clinician alone)
        self.banner(editor).show_state(
            "offered",
            f"<b>Suggested by {html.escape(model_file)}</b>{html.escape(mine)} — press "
            f"{ACCEPT_KEY} to accept, or edit it",
            f"Suggested by {model_file}{mine}. Nothing is saved until you accept ({ACCEPT_KEY}) "
            f"or edit it; {DISMISS_KEY} sets it aside.",
            rich=True,
        )

    # --- what the model read (the PI only) ------------------------------------------------------

    def reads_prompts(self) -> bool:
        session = self.window.session
        return session is not None and session.service.viewer.sees_all

    def show_prompt(self) -> None:
        """A read-only window with the exact prompts behind the suggestion on screen."""
        from PySide6.QtWidgets import QDialog, QDialogButtonBox, QPlainTextEdit, QVBoxLayout

        from portalreview.llm.cli import describe_prompts
        from portalreview.store.templates import suggestion_prompts

        session = self.window.session
        if session is None or session.suggestion_id is None or not self.reads_prompts():
            self.window.statusBar().showMessage("There is no suggestion prompt to show.", 4000)
            return
        try:
            found = suggestion_prompts(session.service, session.suggestion_id)
        except StoreError as exc:
            self.window.statusBar().showMessage(f"The prompt cannot be shown: {exc}", 8000)
            return
        dialog = QDialog(self.window)
        dialog.setObjectName("suggestionPromptDialog")
        dialog.setWindowTitle(f"Prompts of suggestion {found.suggestion_id}")
        text = QPlainTextEdit(describe_prompts(found))
        text.setReadOnly(True)
        text.setObjectName("suggestionPromptText")
        close = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        close.rejected.connect(dialog.reject)
        layout = QVBoxLayout(dialog)
        layout.addWidget(text)
        layout.addWidget(close)
        fit_to_screen(dialog, 760, 560)
        self.prompt_dialog = dialog
        dialog.show()

    # --- the person's decision ----------------------------------------------------------------

    def accept(self) -> None:
        session, editor = self.window.session, self._editor()
        acceptable = session is not None and (
            session.suggestion_state == "offered" or session.matches_suggestion()
        )
        if editor is None or not acceptable:
            self.window.statusBar().showMessage("There is no suggestion to accept here.", 4000)
            return
        view = session.accept_suggestion()
        if view is not None:
            self.saved(view)

    def dismiss(self) -> None:
        session, editor = self.window.session, self._editor()
        if session is None or editor is None or not session.can_dismiss_suggestion():
            return
        comment = editor.comment_text() or ""  # the person's own: kept
        editor.load(session.unit, None)
        editor.set_comment_text(comment)
        session.dismiss_suggestion()
        if session.pending:  # a flag or comment of theirs waited for this
            session.save()
        self.banner(editor).show_state("hidden", "")
        self.window.statusBar().showMessage(DISMISSED, 6000)
        editor.focus_first()

    def saved(self, view: AnswerView) -> None:
        """Keep the banner in step with what the saved answer records."""
        editor = self._editor()
        if editor is None or self.shown_file is None or view.suggestion_id is None:
            return
        banner = self.banner(editor)
        if view.suggestion_use == "accepted":
            banner.show_state(
                "accepted",
                f"Accepted the suggestion by {self.shown_file}. Changes you make now are "
                f"recorded as edits; Dismiss ({DISMISS_KEY}) takes it back.",
            )
        elif view.suggestion_use == "edited":
            banner.show_state(
                "edited", f"Your answer, edited from the suggestion by {self.shown_file}."
            )

    def shutdown(self) -> None:
        self.closed = True
        self.stop()
        self.host.shutdown()
