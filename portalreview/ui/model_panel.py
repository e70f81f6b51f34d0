"""The local model of the desktop app: choosing a ``.gguf`` file (Tools > Models…), loading it
once off the GUI thread, the one thread all model work runs on, and closing it at quit.

``ModelHost`` owns the engine. The model runs in a process of its own
(:class:`~portalreview.llm.engines.process.ProcessEngine`): a crash inside llama.cpp, or the
system ending that process when memory runs out, stops only the model. The host then shows
what happened, keeps everything (answers are saved as they are made) and offers to load the
same file again. One engine serves one call at a time, so every piece of model work (loading,
suggestions) goes through :meth:`ModelHost.submit`, whose pool has a single thread: calls queue
instead of colliding (``EngineBusyError``). A file that cannot be used gives a message naming
it, and the app goes on without suggestions.

The panel also counts the project's suggestions that may be offered and those the quality
gates refused (``portalreview.llm.gates``), and lists the refused ones with their reason for
the PI (clinicians never see them).
"""

from __future__ import annotations

import html
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QEvent, QObject, Qt, QThreadPool, QTimer, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QProgressDialog,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from portalreview.llm.engines import load_engine
from portalreview.llm.engines.server import ServerEngine
from portalreview.llm.errors import Cancelled, LlmError, ModelProcessDied
from portalreview.llm.model_file import scan_models, small_model_path
from portalreview.llm.model_server import ServerSetting, configured_setting, looks_like_address
from portalreview.store.service import MAX_OWN_EXAMPLES, StoreError
from portalreview.store.templates import refused_suggestions, suggestion_counts
from portalreview.tasks.common.safe_text import plain_tip
from portalreview.tasks.common.screen import FocusFollowingScrollArea, fit_to_screen
from portalreview.ui.workers import Worker

if TYPE_CHECKING:
    from portalreview.llm.engines import AnyEngine

MODEL_KEY = "llm/model_path"
FOLDER_KEY = "llm/models_folder"
AUTOLOAD_KEY = "llm/load_at_start"


class ModelHost(QObject):
    """The window's one model and the one thread that uses it."""

    #: Emitted when a model was loaded or closed (the engine, or None).
    engine_changed = Signal(object)
    #: Emitted when the model process stopped by itself (the message shown).
    model_stopped = Signal(str)
    #: Emitted before another model is loaded or connected: the one model thread would run
    #: the load after the work queued on it (a suggestion waiting on a hung server), so that
    #: work is to stop first.
    model_changing = Signal()
    _died = Signal(object)  # from the engine's watcher thread to the GUI thread

    def __init__(self, parent: QWidget, settings) -> None:
        super().__init__(parent)
        self.parent_widget = parent
        self.qs = settings  # QSettings
        self.engine: AnyEngine | None = None
        self.loading = False
        #: Extra keyword arguments for ``Engine.load`` (tests: ``gpu=False, hash_cache=False``).
        self.load_options: dict[str, Any] = {}
        #: Run the model in a process of its own (False: in this one, as before).
        self.isolated = True
        #: The box that says the model process stopped and offers to load it again.
        self.stopped_box: QMessageBox | None = None
        self.pool = QThreadPool(self)
        self.pool.setMaxThreadCount(1)
        self._running: set[Worker] = set()
        self.last_error: str | None = None
        self._died.connect(self._engine_died, Qt.ConnectionType.QueuedConnection)
        self._load_cancel = threading.Event()  # set: the load under way stops at once

    # --- remembered choices -----------------------------------------------------------------

    def remembered_model(self) -> Path | None:
        value = self.qs.value(MODEL_KEY)
        return Path(str(value)) if value and not looks_like_address(str(value)) else None

    def remembered_server(self) -> str | None:
        """The model server's address, when it was the last model used."""
        value = self.qs.value(MODEL_KEY)
        return str(value) if value and looks_like_address(str(value)) else None

    def models_folder(self) -> Path | None:
        value = self.qs.value(FOLDER_KEY)
        return Path(str(value)) if value else None

    def set_models_folder(self, folder: Path) -> None:
        self.qs.setValue(FOLDER_KEY, str(folder))

    def load_at_start(self) -> bool:
        return str(self.qs.value(AUTOLOAD_KEY, "false")).lower() == "true"

    def set_load_at_start(self, on: bool) -> None:
        self.qs.setValue(AUTOLOAD_KEY, "true" if on else "false")

    # --- the model thread -------------------------------------------------------------------

    def submit(
        self,
        fn: Callable[..., Any],
        *args: Any,
        on_done: Callable[[Any], None] | None = None,
        on_error: Callable[[str, Exception], None] | None = None,
        **kwargs: Any,
    ) -> Worker:
        """Run ``fn`` on the model thread; results come back on the GUI thread."""
        worker = Worker(fn, *args, **kwargs)
        self._running.add(worker)

        def finish(result: Any) -> None:
            self._running.discard(worker)
            if on_done:
                on_done(result)

        def fail(message: str, exc: Exception) -> None:
            self._running.discard(worker)
            if on_error:
                on_error(message, exc)
            if isinstance(exc, ModelProcessDied):
                self.check_engine()

        queued = Qt.ConnectionType.QueuedConnection
        worker.signals.finished.connect(finish, queued)
        worker.signals.failed.connect(fail, queued)
        self.pool.start(worker)
        return worker

    # --- loading and closing ----------------------------------------------------------------

    def load(self, path: Path, *, show_progress: bool = True) -> Worker | None:
        """Load ``path`` in the background (replacing the current model when it succeeds).
        A progress dialog with Cancel appears if loading takes more than a moment; Cancel ends
        the model process at once (an in-process load cannot stop half-way: there the model
        is discarded as soon as it is loaded)."""
        if self.loading:
            return None
        self.model_changing.emit()
        self.loading = True
        self.last_error = None
        path = Path(path)
        options = dict(self.load_options)
        isolated = self.isolated
        cancel = self._load_cancel = threading.Event()

        def work(cancelled) -> AnyEngine | None:
            try:
                engine = load_engine(path, isolated=isolated, cancel=cancel, **options)
            except Cancelled:
                return None
            if cancelled():
                engine.close()
                return None
            try:  # hashed here, once, so storing a suggestion never waits for it
                _ = engine.sha256
            except LlmError:  # the file changed while it was loaded or hashed
                engine.close()
                raise
            if cancelled():
                engine.close()
                return None
            return engine

        dialog = None
        if show_progress:
            dialog = QProgressDialog(
                f"Loading the model {path.name}…", "Cancel", 0, 0, self.parent_widget
            )
            dialog.setWindowTitle("PortalReview")
            dialog.setWindowModality(Qt.WindowModality.WindowModal)
            dialog.setMinimumDuration(400)
            dialog.setAutoClose(False)
            dialog.setAutoReset(False)

        def close_dialog() -> None:
            if dialog is not None:
                dialog.close()
                dialog.deleteLater()

        def done(engine: AnyEngine | None) -> None:
            close_dialog()
            self.loading = False
            if engine is None:
                self._status("Loading the model was cancelled; no model is in use.")
                return
            self._adopt(engine, str(path))

        def failed(message: str, exc: Exception) -> None:
            close_dialog()
            self.loading = False
            self._cannot_use(f"The model file {path}", message, exc)

        worker = self.submit(work, on_done=done, on_error=failed)
        if dialog is not None:
            dialog.canceled.connect(worker.cancel)
            dialog.canceled.connect(cancel.set)
            QTimer.singleShot(0, lambda: dialog.setValue(0))
        return worker

    def connect_server(self, setting: ServerSetting) -> Worker | None:
        """Use the study's model server (a llama.cpp server IT runs) instead of a local file:
        connect in the background; a server that does not answer gives a message and the app
        goes on without suggestions."""
        if self.loading:
            return None
        self.model_changing.emit()
        self.loading = True
        self.last_error = None

        def work(cancelled) -> AnyEngine | None:
            engine = ServerEngine.connect(setting)
            if cancelled():
                engine.close()
                return None
            return engine

        def done(engine: AnyEngine | None) -> None:
            self.loading = False
            if engine is not None:
                self._adopt(engine, setting.url)

        def failed(message: str, exc: Exception) -> None:
            self.loading = False
            self._cannot_use(f"The model server {setting.address}", message, exc)

        return self.submit(work, on_done=done, on_error=failed)

    def _adopt(self, engine: AnyEngine, remembered: str) -> None:
        """Use ``engine`` from now on (closing the one before) and remember where it is."""
        old, self.engine = self.engine, engine
        if old is not None:
            old.close()
        self.qs.setValue(MODEL_KEY, remembered)
        self._close_stopped_box()
        if hasattr(engine, "on_died"):
            engine.on_died(lambda _error, engine=engine: self._died.emit(engine))
        self.engine_changed.emit(engine)

    def missing_at_start(self, path: Path) -> None:
        """Say that the model chosen to load at start is not where it was (a file moved or
        deleted would otherwise leave the app without suggestions and without a word)."""
        self.last_error = (
            f"The model chosen to load when PortalReview starts is not there any more:\n\n"
            f"{path}\n\nIt was moved or deleted. Choose it again in Tools > Models…. "
            "PortalReview carries on without model suggestions."
        )
        QMessageBox.warning(self.parent_widget, "PortalReview", self.last_error)

    def _cannot_use(self, what: str, message: str, exc: Exception) -> None:
        reason = str(exc) if isinstance(exc, LlmError) else f"{type(exc).__name__}: {message}"
        self.last_error = (
            f"{what} cannot be used:\n\n{reason}\n\nPortalReview carries on without model "
            "suggestions."
        )
        QMessageBox.warning(self.parent_widget, "PortalReview", self.last_error)

    # --- a model process that stopped -------------------------------------------------------

    def check_engine(self) -> None:
        """If the current model's process stopped, say so and offer to load it again (once
        per model; called when a call failed with ModelProcessDied, and by the engine's
        watcher when the process stops while idle)."""
        engine = self.engine
        died = getattr(engine, "died", None)
        if engine is None or died is None:
            return
        self.engine = None
        engine.close()  # reaps the process; nothing to free here
        message = str(died)
        self.last_error = message
        self.engine_changed.emit(None)
        self._status("The model process stopped; your answers are saved.")
        self._offer_reload(engine.info.path, message)
        self.model_stopped.emit(message)

    def _engine_died(self, engine: object) -> None:
        if engine is self.engine:
            self.check_engine()

    def _offer_reload(self, path: Path, message: str) -> None:
        self._close_stopped_box()
        box = QMessageBox(
            QMessageBox.Icon.Warning, "PortalReview", message, parent=self.parent_widget
        )
        box.setObjectName("modelStoppedBox")
        box.setWindowModality(Qt.WindowModality.NonModal)
        again = box.addButton("&Load the model again", QMessageBox.ButtonRole.AcceptRole)
        again.setObjectName("reloadModel")
        box.addButton("Not now", QMessageBox.ButtonRole.RejectRole)
        again.clicked.connect(lambda: self.load(path))
        box.finished.connect(lambda _result: self._forget_box(box))
        self.stopped_box = box
        box.show()

    def _forget_box(self, box: QMessageBox) -> None:
        if self.stopped_box is box:
            self.stopped_box = None
        box.deleteLater()

    def _close_stopped_box(self) -> None:
        if self.stopped_box is not None:
            self.stopped_box.close()

    def unload(self) -> None:
        engine, self.engine = self.engine, None
        if engine is not None:
            engine.close()
            self.engine_changed.emit(None)

    def shutdown(self, timeout_ms: int = 60000) -> None:
        """Stop model work at its next token, free the model, and wait for the model thread
        (called when the window closes; never left to garbage collection)."""
        for worker in list(self._running):
            worker.cancel()
        self._load_cancel.set()  # a model process still loading is ended, not waited for
        engine, self.engine = self.engine, None
        if engine is not None:
            engine.close()
        self.pool.waitForDone(timeout_ms)

    def _status(self, text: str) -> None:
        window = self.parent_widget
        if hasattr(window, "statusBar"):
            window.statusBar().showMessage(text, 8000)


def _rows_high(view: QListWidget, rows: int) -> int:
    """The height of a list that shows ``rows`` rows."""
    return rows * view.fontMetrics().lineSpacing() + 2 * view.frameWidth() + 4


def _scrolling(body: QWidget) -> FocusFollowingScrollArea:
    """The dialog's explanations and lists, scrolling where the screen is too small for them
    (at 11 pt on 1280 x 800 they were cut off and overlapped, and the model list was one
    row high)."""
    area = FocusFollowingScrollArea()
    area.setObjectName("modelDialogBody")
    area.setWidgetResizable(True)
    area.setFrameShape(QFrame.Shape.NoFrame)
    area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    area.setWidget(body)
    return area


class ModelDialog(QDialog):
    """Tools > Models…: the model in use, the models folder's files, another file."""

    def __init__(self, host: ModelHost, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.host = host
        self.setWindowTitle("Models")
        self.setObjectName("modelDialog")
        body = QWidget()
        layout = QVBoxLayout(body)
        layout.setContentsMargins(0, 0, 0, 0)
        self.current = QLabel()
        self.current.setWordWrap(True)
        self.current.setObjectName("currentModel")
        self.current.setTextFormat(Qt.TextFormat.RichText)  # the model's names are escaped
        layout.addWidget(self.current)
        folder_row = QHBoxLayout()
        self.folder_label = QLabel()
        self.folder_label.setWordWrap(True)
        folder_row.addWidget(self.folder_label, 1)
        folder_button = QPushButton("Models &folder…")
        folder_button.clicked.connect(self.choose_folder)
        folder_row.addWidget(folder_button)
        layout.addLayout(folder_row)
        self.list = QListWidget()
        self.list.setObjectName("modelList")
        self.list.setAccessibleName("Model files in the models folder")
        self.list.itemDoubleClicked.connect(lambda _item: self.load_selected())
        layout.addWidget(self.list, 1)
        self.list.setMinimumHeight(_rows_high(self.list, 4))
        server_row = QHBoxLayout()
        self.server_label = QLabel()
        self.server_label.setWordWrap(True)
        self.server_label.setObjectName("serverLabel")
        self.server_label.setTextFormat(Qt.TextFormat.PlainText)  # an address the study names
        server_row.addWidget(self.server_label, 1)
        self.server_button = QPushButton("Use the model &server")
        self.server_button.setObjectName("useServer")
        self.server_button.setAccessibleDescription(
            "Suggestions come from the study's shared model server instead of this computer"
        )
        self.server_button.clicked.connect(self.use_server)
        server_row.addWidget(self.server_button)
        self.name_server_button = QPushButton("&Name a server…")
        self.name_server_button.setObjectName("nameServer")
        self.name_server_button.setAccessibleDescription(
            "PI: the address of the study's model server and its model file's SHA-256"
        )
        self.name_server_button.clicked.connect(self.name_server)
        server_row.addWidget(self.name_server_button)
        layout.addLayout(server_row)
        examples_row = QHBoxLayout()
        self.examples_label = QLabel()
        self.examples_label.setWordWrap(True)
        self.examples_label.setObjectName("ownExamplesLabel")
        examples_row.addWidget(self.examples_label, 1)
        self.examples_spin = QSpinBox()
        self.examples_spin.setObjectName("ownExamples")
        self.examples_spin.setRange(0, MAX_OWN_EXAMPLES)
        self.examples_spin.setSpecialValueText("off")
        self.examples_spin.setAccessibleName("Own replies shown to the model")
        self.examples_spin.setAccessibleDescription(
            "PI: how many of a clinician's own most similar earlier replies a respond "
            "suggestion for them shows the model (0: off)"
        )
        self.examples_spin.editingFinished.connect(self.set_own_examples)
        self.examples_spin.installEventFilter(self)  # Enter there saves, and loads no model
        examples_row.addWidget(self.examples_spin)
        layout.addLayout(examples_row)
        note = QLabel(
            "Models run on this computer (on the GPU when there is one), or on the study's "
            "model server when the PI or IT named one. Suggestions "
            "appear pre-filled and marked in the editors; nothing becomes your answer until "
            "you accept or edit it."
        )
        note.setWordWrap(True)
        layout.addWidget(note)
        self.gate_summary = QLabel()
        self.gate_summary.setWordWrap(True)
        self.gate_summary.setObjectName("gateSummary")
        self.gate_summary.setTextFormat(Qt.TextFormat.RichText)
        layout.addWidget(self.gate_summary)
        self.refused_list = QListWidget()
        self.refused_list.setObjectName("refusedList")
        self.refused_list.setAccessibleName("Suggestions refused by the quality gates")
        layout.addWidget(self.refused_list, 1)
        self.refused_list.setMinimumHeight(_rows_high(self.refused_list, 3))
        self.autoload = QCheckBox("Load the chosen model when PortalReview starts")
        self.autoload.setChecked(host.load_at_start())
        self.autoload.toggled.connect(host.set_load_at_start)
        layout.addWidget(self.autoload)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.load_button = buttons.addButton("&Load", QDialogButtonBox.ButtonRole.ActionRole)
        self.load_button.clicked.connect(self.load_selected)
        # Alt+I: Alt+F is the models folder's, Alt+L Load's
        file_button = buttons.addButton("Choose a f&ile…", QDialogButtonBox.ButtonRole.ActionRole)
        file_button.clicked.connect(self.choose_file)
        self.unload_button = buttons.addButton("&Unload", QDialogButtonBox.ButtonRole.ActionRole)
        self.unload_button.clicked.connect(self.unload)
        buttons.rejected.connect(self.reject)
        self.body = _scrolling(body)
        outer = QVBoxLayout(self)
        outer.addWidget(self.body, 1)
        outer.addWidget(buttons)
        # a bound method, not a lambda: Qt disconnects it when the window is deleted (closed)
        host.engine_changed.connect(self._engine_changed)
        # Enter loads the model chosen in the list (not the first button: the folder chooser)
        for button in self.findChildren(QPushButton):
            button.setAutoDefault(False)
        self.load_button.setDefault(True)
        self.refresh()
        self.refresh_gates()
        self.refresh_own_examples()
        width = self.fontMetrics().averageCharWidth() * 96
        fit_to_screen(self, width, self._height_for(width))

    def _height_for(self, width: int) -> int:
        """The window's height that shows all of its text, and its lists at their usual
        height, at ``width`` (a wrapped label's size hint assumes a narrower width)."""
        outer = self.layout()
        margins = outer.contentsMargins()
        # (less a scroll bar's width: at the very height the text needs, the scroll area
        # may show one anyway, and the text wraps to more lines beside it)
        scroll_bar = self.body.verticalScrollBar().sizeHint().width()
        inner = width - margins.left() - margins.right() - scroll_bar
        buttons = outer.itemAt(1).widget().sizeHint().height()
        column = self.body.widget().layout()
        column.activate()
        body = column.totalHeightForWidth(inner)
        return margins.top() + body + outer.spacing() + buttons + margins.bottom()

    def eventFilter(self, watched, event) -> bool:
        if (
            watched is self.examples_spin
            and event.type() == QEvent.Type.KeyPress
            and event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
        ):
            self.examples_spin.interpretText()
            self.set_own_examples()
            return True
        return super().eventFilter(watched, event)

    def refresh_own_examples(self) -> None:
        """The study's own-examples setting; the PI changes it here (llm/own_examples.py)."""
        service = getattr(self.parent(), "service", None)
        try:
            count = service.own_examples() if service is not None else 0
        except (StoreError, PermissionError):
            count = 0
        self.examples_spin.blockSignals(True)
        self.examples_spin.setValue(count)
        self.examples_spin.blockSignals(False)
        self.examples_spin.setVisible(self._is_pi())
        said = (
            f"a clinician's respond suggestions show the model their {count} most similar "
            "earlier replies (made for them alone)"
            if count
            else "respond suggestions show the model no one's own replies"
        )
        self.examples_label.setText(
            f"Own replies as examples: {said}."
            + (
                " Before you turn it on, measure whether it helps: the command "
                "portalreview evaluate-model STUDY --model FILE --own-examples N compares "
                "drafts made with and without them (docs/llm.md)."
                if self._is_pi()
                else ""
            )
        )

    def set_own_examples(self) -> None:
        service = getattr(self.parent(), "service", None)
        if service is None or not self._is_pi():
            return
        try:
            service.set_own_examples(self.examples_spin.value())
        except (StoreError, PermissionError) as exc:
            QMessageBox.warning(self, "PortalReview", f"The setting was not saved: {exc}")
        self.refresh_own_examples()

    def refresh_gates(self) -> None:
        """The counts of offered and refused suggestions; the refused ones, for the PI."""
        window = self.parent()
        admin = getattr(window, "admin", None)
        service = getattr(window, "service", None)
        self.refused_list.clear()
        self.refused_list.hide()
        if admin is None:
            self.gate_summary.setText("Quality gates: no project is open.")
            return
        try:
            offered, refused = suggestion_counts(admin)
            rows = refused_suggestions(admin)
        except (StoreError, PermissionError) as exc:
            self.gate_summary.setText(f"Quality gates: {html.escape(str(exc))}")
            return
        pi = service is not None and service.viewer.sees_all
        self.gate_summary.setText(
            f"<b>Quality gates:</b> {offered} stored suggestion(s) can be offered; {refused} "
            "refused as unusable (empty, echoing the prompt, the same text in every box, "
            "spans over the whole draft, text loops), kept for the PI and never shown"
            + (" — listed below." if pi and refused else ".")
        )
        if not pi or not rows:
            return
        for row in rows:
            item = QListWidgetItem(
                f"unit {row.unit_id} ({row.unit_set}, {row.kind}) — {row.model_file}: {row.reason}"
            )
            item.setToolTip(plain_tip(f"{row.template_id}, {row.created_at}\n{row.reason}"))
            self.refused_list.addItem(item)
        self.refused_list.show()

    def server_setting(self) -> tuple[ServerSetting | None, str]:
        """The model server this project would use (its own setting, else the machine's),
        and what is wrong with the settings when they cannot be read ("" when nothing)."""
        service = getattr(self.parent(), "service", None)
        try:
            return configured_setting(service.project if service is not None else None), ""
        except LlmError as exc:
            return None, str(exc)

    def refresh_server(self) -> None:
        self.name_server_button.setVisible(self._is_pi())
        setting, problem = self.server_setting()
        self.server_button.setEnabled(setting is not None and not self.host.loading)
        if problem:
            text = f"Model server: {problem}"
        elif setting is not None:
            where = "this study" if setting.origin == "project" else "this computer's settings"
            text = (
                f"Model server: {setting.address} (named in {where}). Suggestions then come "
                "from there; nothing else on the network is contacted."
            )
        else:
            text = (
                "No model server is named: models run on this computer only (the PI names one "
                "with 'portalreview model-server'; see docs/deployment.md)."
            )
        self.server_label.setText(text)

    def _is_pi(self) -> bool:
        service = getattr(self.parent(), "service", None)
        return service is not None and service.viewer.sees_all

    def name_server(self) -> None:
        """PI: name the study's model server (stored in the project and audited)."""
        admin = getattr(self.parent(), "admin", None)
        if admin is None or not self._is_pi():
            return
        current, _problem = self.server_setting()
        form = ServerForm(current if current and current.origin == "project" else None, self)
        if form.exec() != QDialog.DialogCode.Accepted:
            return
        try:
            admin.set_model_server(None if form.setting is None else form.setting.to_json())
        except (StoreError, PermissionError) as exc:
            QMessageBox.warning(self, "PortalReview", f"The model server was not saved: {exc}")
            return
        self.refresh_server()

    def use_server(self) -> None:
        setting, _problem = self.server_setting()
        if setting is not None:
            self.host.connect_server(setting)

    def _engine_changed(self, _engine: object) -> None:
        self.refresh()

    def refresh(self) -> None:
        self.refresh_server()
        engine = self.host.engine
        self.current.setText(
            f"<b>In use:</b> {html.escape(engine.info.file_name)} — "
            f"{html.escape(engine.info.describe())}"
            if engine is not None
            else "<b>No model loaded</b>: the editors show only suggestions already stored in "
            "the project."
        )
        self.unload_button.setEnabled(engine is not None)
        folder = self.host.models_folder()
        self.folder_label.setText(
            f"Models folder: {folder}" if folder else "No models folder chosen yet."
        )
        self.list.clear()
        remembered = self.host.remembered_model()
        self._add_small_model(folder, remembered)
        if folder is None:
            return
        try:
            entries = scan_models(folder)
        except LlmError as exc:
            self.list.addItem(str(exc))
            return
        for entry in entries:
            size = f"{entry.size_bytes / 1024**3:.1f} GB"
            text = f"{entry.path.name}   ({entry.name or '?'}, {size})"
            if entry.problem:
                text += f"  —  cannot be used: {entry.problem}"
            item = QListWidgetItem(text)
            item.setData(Qt.ItemDataRole.UserRole, str(entry.path))
            if not entry.usable:
                item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEnabled)
            self.list.addItem(item)
            if remembered and entry.path == remembered:
                self.list.setCurrentItem(item)

    def _add_small_model(self, folder: Path | None, remembered: Path | None) -> None:
        """The small model the install step fetched (SmolLM2-135M-Instruct), so that a new
        user of the demo can see real, if weak, suggestions without finding a model first."""
        path = small_model_path()
        if path is None or (folder is not None and path.parent == folder):
            return
        size = path.stat().st_size / 1024**2
        item = QListWidgetItem(
            f"{path.name}   (small model installed with PortalReview, {size:.0f} MB: to try "
            "suggestions; too small for real work)"
        )
        item.setData(Qt.ItemDataRole.UserRole, str(path))
        self.list.addItem(item)
        if remembered is None or remembered == path:
            self.list.setCurrentItem(item)

    def choose_folder(self) -> None:
        start = str(self.host.models_folder() or Path.home())
        folder = QFileDialog.getExistingDirectory(self, "Models folder", start)
        if folder:
            self.host.set_models_folder(Path(folder))
            self.refresh()

    def choose_file(self) -> None:
        remembered = self.host.remembered_model()
        start = str(remembered.parent) if remembered else os.fspath(Path.home())
        path, _ = QFileDialog.getOpenFileName(
            self, "Choose a model", start, "GGUF models (*.gguf);;All files (*)"
        )
        if path:
            self.host.load(Path(path))

    def load_selected(self) -> None:
        item = self.list.currentItem()
        if item is not None and item.flags() & Qt.ItemFlag.ItemIsEnabled:
            self.host.load(Path(item.data(Qt.ItemDataRole.UserRole)))

    def unload(self) -> None:
        self.host.unload()


class ServerForm(QDialog):
    """The PI's form for the study's model server: its address, the SHA-256 of the model file
    it runs (IT knows it), and optionally the certificate authority of its HTTPS certificate.
    An empty address forgets the setting. ``setting`` holds the checked result."""

    def __init__(self, current: ServerSetting | None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Model server")
        self.setObjectName("serverForm")
        self.setting: ServerSetting | None = current
        form = QFormLayout(self)
        self.url = QLineEdit(current.url if current else "")
        self.url.setObjectName("serverUrl")
        self.url.setPlaceholderText("https://gpu-box.hospital.local:8443")
        self.url.setAccessibleName("Server address")
        self.sha = QLineEdit(current.sha256 if current else "")
        self.sha.setObjectName("serverSha")
        self.sha.setAccessibleName("SHA-256 of the server's model file")
        self.ca = QLineEdit(current.ca_file or "" if current else "")
        self.ca.setObjectName("serverCa")
        self.ca.setAccessibleName("Certificate authority file (optional)")
        form.addRow("&Address:", self.url)
        form.addRow("Model file &SHA-256:", self.sha)
        form.addRow("&Certificate authority (PEM, optional):", self.ca)
        note = QLabel(
            "Leave the address empty to forget the server. PortalReview reaches this "
            "address and no other (docs/deployment.md)."
        )
        note.setWordWrap(True)
        form.addRow(note)
        self.error = QLabel()
        self.error.setObjectName("serverFormError")
        self.error.setWordWrap(True)
        form.addRow(self.error)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self.check_and_accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)

    def check_and_accept(self) -> None:
        if not self.url.text().strip():
            self.setting = None
            self.accept()
            return
        try:
            self.setting = ServerSetting.from_dict(
                {
                    "url": self.url.text(),
                    "sha256": self.sha.text().strip(),
                    "ca_file": self.ca.text().strip() or None,
                },
                "this form",
            )
        except LlmError as exc:
            self.error.setText(str(exc))
            return
        self.accept()


def open_tool(window) -> None:
    """Tools > Models…"""
    dialog = ModelDialog(window.suggestions.host, window)
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    dialog.show()
