"""The main window: open a project, sign in, pick a kind of work, move through its queue, and
edit the current unit in that kind's editor (``tasks/<kind>/editor.py``)."""

from __future__ import annotations

import html
import logging
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QByteArray, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import (
    QAction,
    QActionGroup,
    QCloseEvent,
    QColor,
    QDesktopServices,
    QGuiApplication,
    QKeySequence,
    QPalette,
    QUndoGroup,
)
from PySide6.QtWidgets import (
    QApplication,
    QComboBox,
    QDialog,
    QDockWidget,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QMainWindow,
    QMessageBox,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QStackedWidget,
    QTabBar,
    QToolBar,
    QVBoxLayout,
    QWidget,
)
from sqlalchemy.exc import DBAPIError

from portalreview import __version__
from portalreview.applog import log_dir
from portalreview.store.building import create_project_file
from portalreview.store.project import (
    SUFFIX,
    Project,
    ProjectDamagedError,
    ProjectError,
    ProjectLockedError,
    ProjectNotWritableError,
    copy_backup_beside,
)
from portalreview.store.service import AnswerView, StoreError, StudyService, UnitView
from portalreview.tasks.common import colours
from portalreview.tasks.common.editor_base import Editor
from portalreview.tasks.common.screen import FocusFollowingScrollArea, PartsLabel, fit_to_screen
from portalreview.tasks.facts.editor import category_keys
from portalreview.tasks.registry import EDITORS
from portalreview.ui.flag_dialog import REMOVE_FLAG, FlagNoteDialog
from portalreview.ui.queue_panel import QueuePanel
from portalreview.ui.save_problem import SaveProblemBar
from portalreview.ui.session import AnnotationSession, UnsavedChanges
from portalreview.ui.settings import Preferences, clamp_point_size, default_point_size
from portalreview.ui.shortcuts_dialog import ShortcutsDialog
from portalreview.ui.sign_in import SignInDialog
from portalreview.ui.suggestions import ACCEPT_KEY, DISMISS_KEY, SuggestionController
from portalreview.ui.unsaved_gold import remind_of_kept_decisions
from portalreview.ui.unsaved_offer import offer_kept_answers
from portalreview.ui.unsaved_work import UnsavedWork
from portalreview.ui.workers import (
    EXIT_WAIT_MS,
    TERMINATION_WAIT_MS,
    run_with_progress,
    stop_all,
)

if TYPE_CHECKING:
    from portalreview.store.backends import ServerProject

log = logging.getLogger(__name__)
APP_NAME = "PortalReview"
NOTHING_ASSIGNED = "Nothing is assigned to you here."
ASSIGNS = "and assigns them to the clinicians (and to you, to work on them here)."
ZOOM_STEP = 1.0


class WelcomePage(QWidget):
    """Shown when no project is open."""

    def __init__(self, window: MainWindow) -> None:
        super().__init__()
        layout = QVBoxLayout(self)
        layout.addStretch(1)
        title = QLabel(
            f"<h1>{APP_NAME}</h1><p>Annotate patient-portal messages and review drafted "
            "replies. Everything stays on this computer.</p>"
        )
        title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        title.setWordWrap(True)
        layout.addWidget(title)
        row = QHBoxLayout()
        row.addStretch(1)
        self.demo_button = QPushButton("Open the demo study")
        for button, slot in (
            (self.demo_button, self.open_demo),
            (QPushButton("Open a project…"), window.choose_project),
            (QPushButton("New project…"), window.new_project),
        ):
            button.setMinimumWidth(180)
            button.clicked.connect(slot)
            row.addWidget(button)
        row.addStretch(1)
        layout.addLayout(row)
        first_steps = QLabel(
            "New here? The demo study is synthetic: sign in as np_chloe to find work still to "
            "do, or as dr_pi to see the PI's tools. Help > User guide explains the rest."
        )
        first_steps.setAlignment(Qt.AlignmentFlag.AlignCenter)
        first_steps.setWordWrap(True)
        layout.addWidget(first_steps)
        self.recent = QVBoxLayout()
        layout.addLayout(self.recent)
        layout.addStretch(2)
        self.window = window

    def open_demo(self) -> None:
        """Open the demo study, built first where it is not yet (the button waits meanwhile:
        a second click would build it twice)."""
        from portalreview.ui.getting_started import open_demo_study

        self.demo_button.setEnabled(False)
        open_demo_study(self.window, finished=lambda: self.demo_button.setEnabled(True))

    def show_recent(self, paths: list[Path]) -> None:
        while self.recent.count():
            widget = self.recent.takeAt(0).widget()
            if widget:
                widget.deleteLater()
        if not paths:
            return
        self.recent.addWidget(QLabel("<b>Recent projects</b>"), 0, Qt.AlignmentFlag.AlignHCenter)
        for path in paths[:5]:
            button = QPushButton(f"{path.name}   —   {path.parent}")
            button.setFlat(True)
            button.clicked.connect(lambda _=False, p=path: self.window.open_project(p))
            self.recent.addWidget(button, 0, Qt.AlignmentFlag.AlignHCenter)


def _with_ctrl_y(redo_keys: list[QKeySequence]) -> list[QKeySequence]:
    """The platform's Redo keys, and Ctrl+Y where they lack it: a key listed twice on one
    action is an "ambiguous shortcut" to Qt, which then does nothing (Windows' Redo keys hold
    Ctrl+Y already)."""
    ctrl_y = QKeySequence("Ctrl+Y")
    return redo_keys if ctrl_y in redo_keys else [*redo_keys, ctrl_y]


class MainWindow(QMainWindow):
    #: A server study's listener heard a change saved by anyone (its kind, or "study"); emitted
    #: from the listener's thread, delivered on the GUI thread.
    study_saved_elsewhere = Signal(str)
    #: A tool window wrote to the study (a merge, a conflict resolved, a gold answer, set-up,
    #: units assigned): what follows only the session's saves (the dashboard) listens here too.
    study_written = Signal()

    def __init__(self, preferences: Preferences | None = None) -> None:
        super().__init__()
        self.prefs = preferences or Preferences()
        self.project: Project | None = None
        # a project is being opened (in the background, then signing in): another open asked
        # for meanwhile (the second click of a double click) is ignored
        self._opening = False
        self._listener = None  # a server study's Listener (postgres_listen) while it is open
        self.study_saved_elsewhere.connect(self._heard_from_study)
        self.admin: StudyService | None = None
        self.service: StudyService | None = None
        self.session: AnnotationSession | None = None
        self.annotator_name: str | None = None
        self.annotator_id: int | None = None
        self.work_of: int | None = None  # whose queue is shown (a PI may look at others')
        self.kinds: list[str] = []
        self.kind: str | None = None
        self.editors: dict[str, Editor] = {}
        self.undo_group = QUndoGroup(self)
        self.point_size = self.font().pointSizeF()
        self.open_timings: dict[str, float] = {}
        self.read_only_because = ""  # shown beside the person's name when read-only
        # why the program is ending with no one to ask (``termination``): closing keeps what
        # it cannot save on this computer instead of asking; None: a person is closing it
        self.ending_unattended: str | None = None

        self.setWindowTitle(APP_NAME)
        fit_to_screen(self, 1400, 880)
        self.welcome = WelcomePage(self)
        self.empty = QLabel(NOTHING_ASSIGNED)
        self.empty.setObjectName("nothingAssigned")
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.setWordWrap(True)
        self.empty.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.empty.setMargin(24)
        self.stack = QStackedWidget()
        self.stack.addWidget(self.welcome)
        self.stack.addWidget(self.empty)
        self.save_problem = SaveProblemBar()
        self.save_problem.keep_mine.connect(self._keep_mine)
        self.save_problem.take_theirs.connect(self._take_theirs)
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.save_problem)
        layout.addWidget(self.stack, 1)
        self.setCentralWidget(central)

        self.queue = QueuePanel()
        self.queue.unit_chosen.connect(self.show_unit)
        self.queue_dock = QDockWidget("Work queue", self)
        self.queue_dock.setObjectName("queueDock")
        self.queue_dock.setWidget(self.queue)
        self.queue_dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetMovable)
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, self.queue_dock)

        self._build_actions()
        self._build_menus()
        self._build_toolbar()
        self._build_status_bar()
        self.suggestions = SuggestionController(self)  # model suggestions (Tools > Models…)
        self._restore_geometry()
        self._set_project_actions(False)
        self.welcome.show_recent(self.prefs.recent_projects())

    # === building the window =================================================================

    def _action(self, text: str, slot, shortcut=None, tip: str = "") -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            keys = shortcut if isinstance(shortcut, list) else [shortcut]
            action.setShortcuts([QKeySequence(k) for k in keys])
        action.setToolTip(tip or text.replace("&", ""))
        action.setStatusTip(tip)
        action.triggered.connect(slot)
        self.addAction(action)
        return action

    def _build_actions(self) -> None:
        std = QKeySequence.StandardKey
        self.act_new = self._action("&New project…", self.new_project, std.New)
        self.act_open = self._action("&Open project…", self.choose_project, std.Open)
        self.act_open_server = self._action(
            "Open &server study…", self.choose_server_study, QKeySequence("Ctrl+Shift+O")
        )
        self.act_close = self._action("&Close project", self.close_project, std.Close)
        self.act_quit = self._action("&Quit", self.close, std.Quit)
        self.act_undo = self.undo_group.createUndoAction(self, "&Undo")
        self.act_undo.setShortcuts(QKeySequence.keyBindings(std.Undo))
        self.act_redo = self.undo_group.createRedoAction(self, "&Redo")
        self.act_redo.setShortcuts(_with_ctrl_y(QKeySequence.keyBindings(std.Redo)))
        self.act_next = self._action(
            "&Next unit", lambda: self.step(1), ["Ctrl+Right", "Alt+Right"], "Next unit"
        )
        self.act_prev = self._action(
            "&Previous unit", lambda: self.step(-1), ["Ctrl+Left", "Alt+Left"], "Previous unit"
        )
        self.act_next_todo = self._action(
            "Next unit &to do",
            self.next_todo,
            ["Ctrl+Shift+Right", "Alt+Shift+Right"],  # a text box keeps Ctrl+Shift+Right
            "Next unit not done yet",
        )
        self.act_jump = self._action("&Jump to unit…", self.jump, "Ctrl+G")
        self.act_reload = self._action(
            "Re&load work list",
            self.reload_work,
            "F5",
            "Read your units again: those the PI assigned since you signed in",
        )
        self.act_submit = self._action(
            "&Submit and go on",
            self.submit,
            ["Ctrl+Return", "Ctrl+Enter"],
            "Mark this unit done (it stays editable) and go to the next one",
        )
        self.act_save = self._action("Save &now", self.save_now, std.Save)
        self.act_flag = self._action(
            "&Flag for the PI…",
            self.toggle_flag,
            "Ctrl+Shift+F",
            "Flag this unit with a note for the principal investigator",
        )
        self.act_accept = self._action(
            "&Accept the suggestion",
            lambda: self.suggestions.accept(),
            ACCEPT_KEY,
            "Accept the model's suggestion shown in the editor (saved as your answer)",
        )
        self.act_dismiss = self._action(
            "&Dismiss the suggestion",
            lambda: self.suggestions.dismiss(),
            DISMISS_KEY,
            "Set the model's suggestion aside and answer from an empty form",
        )
        self.act_zoom_in = self._action(
            "Zoom &in", lambda: self.zoom(ZOOM_STEP), [std.ZoomIn, "Ctrl+="]
        )
        self.act_zoom_out = self._action("Zoom &out", lambda: self.zoom(-ZOOM_STEP), std.ZoomOut)
        self.act_zoom_reset = self._action("&Reset text size", self.zoom_reset, "Ctrl+0")
        self.act_queue = self._action(
            "Work &queue",
            self.show_queue_dock,
            tip="Show or hide the list of units (hidden, the editor has more room)",
        )
        self.act_queue.setCheckable(True)
        self.act_queue.setChecked(self.prefs.queue_shown())
        self.act_switch_user = self._action("Sign in as someone &else…", self.switch_user)
        self.act_shortcuts = self._action("&Keyboard shortcuts", self.show_shortcuts, "F1")
        self.act_about = self._action("&About PortalReview", self.show_about)
        self.act_guide = self._action(
            "&User guide",
            self.show_user_guide,
            tip="Read the user guide (README.md and docs/, shipped with PortalReview)",
        )
        self.act_log_folder = self._action(
            "Open &log folder",
            self.open_log_folder,
            tip="Show the folder of PortalReview's log file (for support: no patient text in it)",
        )

    def _build_menus(self) -> None:
        bar = self.menuBar()
        file_menu = bar.addMenu("&File")
        file_menu.addActions([self.act_new, self.act_open, self.act_open_server])
        self.recent_menu = file_menu.addMenu("Open &recent")
        self.recent_menu.aboutToShow.connect(self._fill_recent_menu)
        file_menu.addActions([self.act_close, self.act_switch_user])
        file_menu.addSeparator()
        file_menu.addAction(self.act_quit)
        edit_menu = bar.addMenu("&Edit")
        edit_menu.addActions([self.act_undo, self.act_redo])
        go_menu = bar.addMenu("&Go")
        go_menu.addActions([self.act_next, self.act_prev, self.act_next_todo, self.act_jump])
        self.kind_menu = go_menu.addMenu("&Kind of work")
        go_menu.addAction(self.act_reload)
        unit_menu = bar.addMenu("&Unit")
        unit_menu.addActions([self.act_submit, self.act_save, self.act_flag])
        unit_menu.addSeparator()
        unit_menu.addActions([self.act_accept, self.act_dismiss])
        view_menu = bar.addMenu("&View")
        view_menu.addActions([self.act_zoom_in, self.act_zoom_out, self.act_zoom_reset])
        view_menu.addAction(self.act_queue)
        scheme_menu = view_menu.addMenu("&Appearance")
        group = QActionGroup(self)
        for key, name in (
            ("system", "Follow the system"),
            ("light", "Light"),
            ("dark", "Dark"),
            ("high_contrast", "High contrast"),
        ):
            action = scheme_menu.addAction(name)
            action.setCheckable(True)
            action.setChecked(self.prefs.color_scheme() == key)
            action.triggered.connect(lambda _=False, k=key: self.set_color_scheme(k))
            group.addAction(action)
        self.tools_menu = bar.addMenu("&Tools")
        self.tools_menu.aboutToShow.connect(self._fill_tools_menu)
        help_menu = bar.addMenu("&Help")
        help_menu.addActions(
            [self.act_guide, self.act_shortcuts, self.act_log_folder, self.act_about]
        )

    def _build_toolbar(self) -> None:
        bar = QToolBar("Navigation")
        bar.setObjectName("navigationBar")
        bar.setMovable(False)
        bar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.kind_tabs = QTabBar()
        self.kind_tabs.setObjectName("kindTabs")
        self.kind_tabs.setExpanding(False)
        self.kind_tabs.setDrawBase(False)
        self.kind_tabs.currentChanged.connect(self._on_kind_tab)
        bar.addWidget(self.kind_tabs)
        self.addToolBar(Qt.ToolBarArea.TopToolBarArea, bar)
        self.addToolBarBreak()  # the kinds get a row of their own: seven tabs need the width
        bar = QToolBar("Unit")
        bar.setObjectName("unitBar")
        bar.setMovable(False)
        bar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.work_of_box = QComboBox()
        self.work_of_box.setAccessibleName("Show the work of")
        self.work_of_box.setToolTip("Principal investigator: look at another annotator's work")
        self.work_of_box.currentIndexChanged.connect(self._on_work_of)
        self.work_of_action = bar.addWidget(self.work_of_box)
        spacer = QWidget()
        spacer.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        bar.addWidget(spacer)
        bar.addActions([self.act_prev, self.act_next, self.act_flag, self.act_submit])
        self.addToolBar(Qt.ToolBarArea.TopToolBarArea, bar)

    def _build_status_bar(self) -> None:
        # what fits of them, never cut in a part's middle (PartsLabel): at 18 pt on 1024 px
        # the unit line read "Unit 13 of 2" for "of 22"
        self.person_label = PartsLabel(rich=True)
        self.unit_label = PartsLabel()
        self.save_label = QLabel()
        self.save_label.setObjectName("saveState")
        bar = self.statusBar()
        bar.addWidget(self.person_label)
        bar.addWidget(self.unit_label, 1)
        bar.addPermanentWidget(self.save_label)

    def _set_project_actions(self, open_: bool) -> None:
        for action in (
            self.act_close,
            self.act_switch_user,
            self.act_next,
            self.act_prev,
            self.act_next_todo,
            self.act_jump,
            self.act_reload,
            self.act_submit,
            self.act_save,
            self.act_flag,
            self.act_queue,
        ):
            action.setEnabled(open_)
        self.queue_dock.setVisible(open_ and self.act_queue.isChecked())
        self.work_of_action.setVisible(False)

    def _fill_tools_menu(self) -> None:
        from portalreview.ui.tools import TOOLS

        self.tools_menu.clear()
        role = self.service.viewer.role if self.service else None
        for tool in TOOLS:
            action = self.tools_menu.addAction(tool.title)
            if tool.shortcut:
                action.setShortcut(QKeySequence(tool.shortcut))
            action.setEnabled(role in tool.roles)
            # hidden from whom it is not for (the PI's tools from a clinician); before anyone
            # signs in, every tool is listed, greyed out
            action.setVisible(role is None or role in tool.roles)
            action.triggered.connect(lambda _=False, t=tool: t.load()(self))
        if self.tools_menu.isEmpty():
            self.tools_menu.addAction("(none yet)").setEnabled(False)

    def _fill_recent_menu(self) -> None:
        self.recent_menu.clear()
        for path in self.prefs.recent_projects():
            action = self.recent_menu.addAction(str(path))
            action.triggered.connect(lambda _=False, p=path: self.open_project(p))
        if self.recent_menu.isEmpty():
            self.recent_menu.addAction("(none)").setEnabled(False)

    def _restore_geometry(self) -> None:
        state = self.prefs.qs.value("window/geometry")
        if isinstance(state, QByteArray):
            self.restoreGeometry(state)

    # === projects ===========================================================================

    def choose_project(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Open a project", "", f"PortalReview projects (*{SUFFIX});;All files (*)"
        )
        if path:
            self.open_project(Path(path))

    def _heard_from_study(self, kind: str) -> None:
        """The server study's listener is back after the server was away ("study"): save what
        could not be saved meanwhile."""
        if kind == "study" and self.session is not None and self.session.pending:
            self.session.save()

    def choose_server_study(self, address: str | None = None) -> None:
        """File > Open server study…: a study on the team's PostgreSQL server (``address``:
        the one given on the command line, else the last one opened)."""
        from portalreview.ui.server_dialog import ServerStudyDialog

        last = address or str(self.prefs.qs.value("server/last_address", "") or "")
        dialog = ServerStudyDialog(last, self)
        if dialog.exec() != QDialog.DialogCode.Accepted:
            return
        self.prefs.qs.setValue("server/last_address", dialog.address())
        self.open_server_study(dialog.address(), dialog.password())

    def open_server_study(self, address: str, password: str | None = None) -> None:
        """Open the server study at ``address`` off the GUI thread, then sign in: as the
        annotator the database account works as, or (IT's own account) as the person chosen.
        The password stays in memory only while the study is open."""
        from portalreview.store.backends.postgres import redact
        from portalreview.ui.server_dialog import open_failure_words

        if self._opening:
            return  # one is being opened: it goes on
        if self.project is not None and not self.close_project():
            return
        self.read_only_because = "opened read-only"

        def opened(found: tuple[ServerProject, str | None]) -> None:
            try:
                self._project_opened(*found)
            finally:
                self._opening = False

        def failed(message: str, exc: Exception) -> None:
            self._opening = False
            words = open_failure_words(exc, address) or message
            QMessageBox.critical(self, APP_NAME, f"Could not open {redact(address)}:\n{words}")

        self._opening = True
        run_with_progress(
            self,
            f"Opening {redact(address)}…",
            _open_server_study,
            address,
            password=password,
            on_done=opened,
            on_error=failed,
            cancellable=False,
        )

    def new_project(self) -> None:
        path, _ = QFileDialog.getSaveFileName(
            self, "New project", "", f"PortalReview projects (*{SUFFIX})"
        )
        if not path:
            return
        target = Path(path) if Path(path).suffix else Path(path).with_suffix(SUFFIX)
        name, ok = QInputDialog.getText(self, "New project", "Your name (you will be its PI):")
        if not ok or not name.strip():
            return
        try:  # made whole, its PI included, or not at all (store/building.py)
            create_project_file(
                target, fill=lambda p: StudyService(p).add_annotator(name.strip(), role="pi")
            )
            project = Project.open(target, automatic_backup=False)  # nothing to back up yet
        except (ProjectError, ValueError, OSError) as exc:
            QMessageBox.critical(self, APP_NAME, f"Could not create {target.name}:\n{exc}")
            return
        self._project_opened(project, annotator=name.strip())

    def open_project(
        self,
        path: Path,
        annotator: str | None = None,
        read_only: bool = False,
        read_only_because: str = "opened read-only",
    ) -> None:
        """Open ``path`` off the GUI thread, then sign in (as ``annotator`` if given). Asked
        again while a project is being opened (a double click on a recent project), nothing
        more is done: two opens at once would find the file locked by this very program."""
        if self._opening:
            return
        if self.project is not None and not self.close_project():
            return
        started = time.perf_counter()
        self.read_only_because = read_only_because

        def opened(project: Project) -> None:
            self.open_timings["open"] = time.perf_counter() - started
            try:
                self._project_opened(project, annotator)
            finally:
                self._opening = False  # signed in (or not): opening again is opening anew
            self.open_timings["usable"] = time.perf_counter() - started
            if project.backup_problem and self.project is project:
                QMessageBox.warning(self, APP_NAME, project.backup_problem)

        def failed(message: str, exc: Exception) -> None:
            self._opening = False
            if isinstance(exc, ProjectLockedError | ProjectNotWritableError):
                answer = QMessageBox.question(
                    self, APP_NAME, f"{message}\n\nOpen it read-only to look at it?"
                )
                if answer == QMessageBox.StandardButton.Yes:
                    if isinstance(exc, ProjectLockedError):
                        because = (
                            "it is open for writing elsewhere in this PortalReview"
                            if exc.holder.here
                            else "another person has this project open"
                        )
                    else:
                        because = "you cannot write to this project file or its folder"
                    self.open_project(path, annotator, read_only=True, read_only_because=because)
                return
            if isinstance(exc, ProjectDamagedError) and exc.latest_backup is not None:
                self._offer_latest_backup(Path(path), message, exc.latest_backup, annotator)
                return
            QMessageBox.critical(self, APP_NAME, f"Could not open {Path(path).name}:\n{message}")
            if not Path(path).exists():
                self.prefs.remove_recent(Path(path))
                self.welcome.show_recent(self.prefs.recent_projects())

        self._opening = True
        run_with_progress(
            self,
            f"Opening {Path(path).name}…",
            Project.open,
            Path(path),
            read_only=read_only,
            on_done=opened,
            on_error=failed,
            cancellable=False,
        )

    def _offer_latest_backup(
        self, path: Path, message: str, backup: Path, annotator: str | None
    ) -> None:
        """A damaged project: offer to open a copy of its newest backup, made beside it under
        a new name. The damaged file stays as it is: it may hold work the backup lacks."""
        box = QMessageBox(
            QMessageBox.Icon.Critical,
            APP_NAME,
            f"Could not open {path.name}:\n{message}",
            QMessageBox.StandardButton.Close,
            self,
        )
        box.setInformativeText(
            f"PortalReview can copy the backup {backup.name} (the newest one that is whole) "
            f"next to {path.name} under a new name and open the copy. {path.name} itself is "
            "left as it is; work saved after the backup was made is not in the copy."
        )
        restore = box.addButton(
            "Open the latest backup (as a copy)", QMessageBox.ButtonRole.AcceptRole
        )
        other = box.addButton("Choose another backup…", QMessageBox.ButtonRole.ActionRole)
        box.setDefaultButton(restore)
        box.exec()
        if box.clickedButton() is other:  # an older one (each is checked before it is copied)
            chosen, _ = QFileDialog.getOpenFileName(
                self, "Open a copy of which backup?", str(backup.parent), f"Backups (*{SUFFIX})"
            )
            if not chosen:
                return
            backup = Path(chosen)
        elif box.clickedButton() is not restore:
            return

        def copied(copy: Path) -> None:
            self.open_project(copy, annotator)
            self.statusBar().showMessage(
                f"{copy.name} is a copy of the backup {backup.name}; "
                f"{path.name} is kept as it was."
            )

        run_with_progress(
            self,
            f"Copying {backup.name}…",
            copy_backup_beside,
            backup,
            path,
            on_done=copied,
            on_error=lambda text, _exc: QMessageBox.critical(
                self, APP_NAME, f"Could not copy {backup.name}:\n{text}"
            ),
            cancellable=False,
        )

    def _project_opened(self, project: Project, annotator: str | None = None) -> None:
        # the project open before is closed, never dropped: its lock would stay held
        another = self.project is not None and self.project is not project
        if another and not self.close_project():
            project.close()  # the person stays in the one open
            return
        self.project = project
        self.admin = StudyService(project)
        if project.path is not None:
            self.prefs.add_recent(project.path)
        # A server study says when anyone saves (the PI's dashboard follows); a file does not.
        self._listener = project.listen(self.study_saved_elsewhere.emit)
        try:
            people = [a for a in self.admin.annotators() if not a.is_model]
            if not people:
                QMessageBox.warning(self, APP_NAME, "This project has no annotators yet.")
                self.close_project()
                return
            if annotator is None:
                annotator = self._ask_who(people)
            if annotator is None:
                self.close_project()
                return
            self.sign_in(annotator)
        except StoreError as exc:  # (a server gone, or frozen, as she signs in)
            self._sign_in_failed(project, str(exc))
        except DBAPIError as exc:  # a read refused: never a window left empty, nothing said
            from portalreview.ui.server_dialog import sign_in_refused_words

            role = project.url.username if project.path is None else None  # (a server's)
            self._sign_in_failed(project, sign_in_refused_words(exc, role, annotator))

    def _sign_in_failed(self, project: Project, words: str) -> None:
        """Close the project half signed in to, and say why."""
        log.warning("signing in to %s failed: %s", project.label, words)
        self.close_project()
        QMessageBox.critical(self, APP_NAME, f"Could not sign in to {project.label}:\n{words}")

    def _ask_who(self, people: list) -> str | None:
        key = self._project_key()
        dialog = SignInDialog(
            self.project.meta("name"), people, self.prefs.last_annotator(key), self
        )
        if dialog.exec() != QDialog.DialogCode.Accepted:
            return None
        return dialog.chosen()

    def _project_key(self) -> str:
        if self.project is None:
            return ""
        where = self.project.location if self.project.path is None else self.project.path.resolve()
        return str(where).replace("/", "|")

    def close_project(self) -> bool:
        """Save everything and close the project; False if the person chose to stay."""
        if not self._no_tool_at_work():
            return False
        tools = self._tools_holding_work()
        for tool in tools:  # asked first: staying (Cancel) must leave everything as it was
            if not tool.may_close(ask=self.ending_unattended is None):
                return False
        if self.session is not None:
            # asked before the session is closed: staying (Cancel) must leave it as it was,
            # its unit open and still saving
            self.session.leave()
            if self.session.pending and not self._may_close_unsaved():
                return False
            self.session.close()
        self.suggestions.stop()
        self._stop_background_writers()
        if self._listener is not None:
            self._listener.stop()
            self._listener = None
        if self.project is not None:
            self.project.close()  # refuses what background work would still read or save
        for tool in tools:  # they showed the project just closed
            tool.close()
            tool.deleteLater()
        for tool in self._windows_made_for(self.project):  # a new one when opened again
            tool.close()
        self.project = self.admin = self.service = self.session = None
        self.kind = None
        self.kinds = []
        for editor in self.editors.values():
            self.undo_group.removeStack(editor.undo_stack)
            page = self._page_of(editor)
            self.stack.removeWidget(page)
            page.deleteLater()
        self.editors = {}
        while self.kind_tabs.count():
            self.kind_tabs.removeTab(0)
        self.kind_menu.clear()
        self.queue.set_items([])
        self.stack.setCurrentWidget(self.welcome)
        self.welcome.show_recent(self.prefs.recent_projects())
        self._set_project_actions(False)
        self.setWindowTitle(APP_NAME)
        self.person_label.clear()
        self.unit_label.clear()
        self.save_problem.hide()
        self.unit_label.setToolTip("")
        self.save_label.clear()
        return True

    def _stop_background_writers(self) -> None:
        """Before the project closes, stop the tool windows' background work that saves into
        it and wait for it to end (a drafting run: ``project_closing()``, which also says so
        in its window). Saves not stopped here (the figures the dashboard keeps) are waited
        for, then refused, by the closed project itself."""
        for tool in self._tool_windows_with("project_closing"):
            tool.project_closing()

    def _no_tool_at_work(self) -> bool:
        """False (and said) while a tool window made for the open project is still writing
        to it (Offline copies merging or writing a copy, Study set-up making or assigning
        units): closing the project under it cut the work off, and the window that would
        have shown its outcome went with the project. A read (a preview) is just dropped. A
        program ending unattended cannot wait: it goes on."""
        windows = self._windows_made_for(self.project)
        at_work = [w for w in windows if getattr(w, "writing", False)]
        if not at_work or self.ending_unattended is not None:
            return True
        names = ", ".join(w.windowTitle().split(" — ")[0] for w in at_work)
        QMessageBox.information(
            self,
            APP_NAME,
            f"{names} is still at work on this study. Let it finish (or cancel it there), "
            "then close the study.",
        )
        at_work[0].raise_()
        at_work[0].activateWindow()
        return False

    def _windows_made_for(self, project: Project | None) -> list[QWidget]:
        """The tool windows made for ``project`` (Study set-up, Offline copies hold the one
        they were opened on; the dashboard and the inbox view follow the open project)."""
        children = self.findChildren(QWidget, options=Qt.FindChildOption.FindDirectChildrenOnly)
        return [
            w
            for w in children
            if w.isWindow() and project is not None and getattr(w, "project", None) is project
        ]

    def _tools_holding_work(self) -> list[QWidget]:
        """The tool windows that can hold work not saved yet (the PI's adjudication window: a
        decision not saved as gold); each has ``dirty`` and ``may_close(ask)``, which asks Save /
        Discard / Cancel and says whether the project may close (``ask`` False: the program
        is ending unattended, so it saves or keeps the work on this computer, asking nothing)."""
        return self._tool_windows_with("may_close")

    def _tool_windows_with(self, method: str) -> list[QWidget]:
        """The tool windows (this window's direct children shown as windows) that have
        ``method``: what close_project asks of them is a method they choose to have."""
        children = self.findChildren(QWidget, options=Qt.FindChildOption.FindDirectChildrenOnly)
        return [w for w in children if w.isWindow() and callable(getattr(w, method, None))]

    def _may_close_unsaved(self) -> bool:
        """Whether to close over the open unit's change that could not be saved: the person
        is asked; a program ending unattended keeps it on this computer and closes."""
        if self.ending_unattended is None:
            return self._confirm_unsaved()
        self._keep_unsaved_change()
        return True

    def _keep_unsaved_change(self) -> None:
        session = self.session
        if session is None or not session.pending:
            return
        why = f"the program was ended ({self.ending_unattended}) before it was saved"
        if not session.keep_pending(why):
            log.error("ending: the unsaved change could not be kept on this computer either")

    def _confirm_unsaved(self) -> bool:
        session = self.session
        why = (
            "This unit was saved from another computer since you opened it here, and what is "
            "on screen here is not saved (see above the editor)."
            if session is not None and session.conflict is not None
            else "Your last change could not be saved (see above the editor)."
        )
        if session is not None and session.kept_unit is not None:  # offered next time
            answer = QMessageBox.warning(
                self,
                APP_NAME,
                f"{why} It is kept on this computer and offered back the next time you open "
                "this study. Close anyway?",
                QMessageBox.StandardButton.Close | QMessageBox.StandardButton.Cancel,
            )
            return answer == QMessageBox.StandardButton.Close
        answer = QMessageBox.warning(
            self,
            APP_NAME,
            f"{why} Close anyway and lose it?",
            QMessageBox.StandardButton.Discard | QMessageBox.StandardButton.Cancel,
        )
        return answer == QMessageBox.StandardButton.Discard

    # === signing in =========================================================================

    def sign_in(self, name: str) -> None:
        self.service = self.admin.as_viewer(name)
        self.annotator_id = self.service.viewer.annotator_id
        # the stored name: the store finds " np_chloe", or a name typed in another Unicode form
        who = next(a for a in self.admin.annotators() if a.id == self.annotator_id)
        name = self.annotator_name = who.name
        self.work_of = self.annotator_id
        self.prefs.set_last_annotator(self._project_key(), name)
        read_only = self.project.read_only
        self.session = AnnotationSession(self.service, read_only=read_only)
        self.session.read_only_why = self.read_only_because if read_only else ""
        if not read_only:
            self.session.unsaved = UnsavedWork(self._study_identity(), name)
        self.session.saved.connect(self._on_saved)
        self.session.save_failed.connect(self._on_save_failed)
        self.session.notice.connect(lambda text: self.statusBar().showMessage(text, 8000))
        self.session.pending_changed.connect(self._on_pending)
        role = self.service.viewer.role
        title = f"{self.project.meta('name')} — {who.display_name or name}"
        self.setWindowTitle(f"{title}{' (read-only)' if read_only else ''} — {APP_NAME}")
        role_name = "PI" if role == "pi" else "clinician"
        self.person_label.set_parts(
            [f"Signed in as <b>{html.escape(who.display_name or name)}</b> ({role_name})"]
            + ([f"<b>read-only</b>: {html.escape(self.read_only_because)}"] if read_only else [])
            + (
                [f"on the study server <b>{html.escape(self.project.server_name)}</b>"]
                if self.project.path is None
                else []
            )
        )
        self._fill_work_of(role)
        self._set_project_actions(True)
        self.work_of_action.setVisible(role == "pi")
        self.point_size = self.prefs.point_size(name)
        self._build_kinds()
        self._fill_tools_menu()  # the tools' shortcuts work before the menu is first opened
        offer_kept_answers(self)  # answers saves could not store, kept on this computer
        remind_of_kept_decisions(self)  # and the PI's gold decisions

    def _study_identity(self) -> str:
        """The study's id, and an offline copy's own id beside it: what a clinician typed in
        her offline copy is put back there, not in the study it was copied from."""
        study = self.project.meta("project_id") or self._project_key()
        copy = self.project.meta("copy_id")
        return f"{study} copy {copy}" if copy else study

    def switch_user(self) -> None:
        if self.project is None:
            return
        if self.project.path is None:  # a server study: who you are is your database account
            QMessageBox.information(
                self,
                APP_NAME,
                "On a server study you are the person your database account works as. To work "
                "as someone else, close the study and open it with their account.",
            )
            return
        # asked first, of the study open now: Cancel leaves it open, its unit as it was
        try:
            people = [a for a in self.admin.annotators() if not a.is_model]
        except StoreError as exc:  # the project file not readable (ReadFailed)
            self._not_read("the study's people", exc)
            return
        chosen = self._ask_who(people)
        if chosen is None or chosen == self.annotator_name:
            return
        self.open_project(self.project.path, annotator=chosen)  # saves the work first

    def study_changed(self) -> None:
        """Show the project's new state after a tool window changed the study (people added,
        units created or handed out, copies merged): the "work of" list, keeping the person
        shown, and the kinds' tabs, progress and queue."""
        if self.service is None:
            return
        showing = self.work_of
        self._fill_work_of(self.service.viewer.role)
        box = self.work_of_box
        box.blockSignals(True)
        box.setCurrentIndex(max(0, box.findData(showing)))
        box.blockSignals(False)
        self._build_kinds()

    def _fill_work_of(self, role: str) -> None:
        self.work_of_box.blockSignals(True)
        self.work_of_box.clear()
        if role == "pi":
            for person in self.admin.annotators():
                label = (
                    "My own work"
                    if person.id == self.annotator_id
                    else (f"Work of {person.display_name or person.name}")
                )
                self.work_of_box.addItem(label, person.id)
            self.work_of_box.setCurrentIndex(self.work_of_box.findData(self.annotator_id))
        self.work_of_box.blockSignals(False)

    def _on_work_of(self, _index: int) -> None:
        person = self.work_of_box.currentData()
        if person is None or self.session is None:
            return
        self.session.leave()
        self.work_of = person
        self.session.read_only = self.project.read_only or person != self.annotator_id
        self.session.read_only_why = (
            self.read_only_because
            if self.project.read_only
            else f"the work of {self.work_of_box.currentText().removeprefix('Work of ')}"
            if person != self.annotator_id
            else ""
        )
        self._build_kinds()

    def _build_kinds(self, counts: dict | None = None) -> None:
        """One tab per kind that has units for the person shown, with its progress; the kind
        shown before (else the first) opened at its next unit to do."""
        self._fill_kind_tabs(counts)
        if not self.kinds:
            self.empty.setText(self._nothing_assigned_words())
            self.stack.setCurrentWidget(self.empty)
            self.queue.set_items([])
            return
        previous = self.kind if self.kind in self.kinds else self.kinds[0]
        self.kind = None
        self.kind_tabs.setCurrentIndex(self.kinds.index(previous))
        self.switch_kind(previous)

    def _nothing_assigned_words(self) -> str:
        """The page shown without units: to the PI of a project without cases (one just made
        by File > New project…), how to add them, which the app itself cannot do."""
        from portalreview.store.study_setup import has_cases, import_command

        if self.service is None or self.service.viewer.role != "pi":
            return NOTHING_ASSIGNED
        try:
            empty_project = not has_cases(self.project)
        except StoreError:  # not read: the plain words
            return NOTHING_ASSIGNED
        if not empty_project:
            return f"{NOTHING_ASSIGNED}\n\nTools > Study set-up… makes units of the cases {ASSIGNS}"
        return (
            "This project has no cases yet.\n\nAdd them from a CSV, XLSX or JSONL file on the "
            f"command line:\n{import_command(self.project)}\n(the columns each file needs "
            f"are in docs/formats.md).\n\nThen Tools > Study set-up… makes units of them {ASSIGNS}"
        )

    def reload_work(self) -> None:
        """Go > Reload work list (F5): the units assigned since signing in (a server study's
        PI assigns while clinicians work, and no one is told), in their kinds' tabs, new
        kinds too; the unit on screen stays open. A read that fails changes nothing shown."""
        if self.service is None:
            return
        shown = self.kind
        try:
            counts = self.service.progress_by_kind(annotator_id=self.work_of)
            listed = self._read_queue(shown) if _has_units(counts, shown) else None
        except (StoreError, DBAPIError) as exc:  # the file or the server not readable
            self._work_list_not_read(exc)
            return
        if listed is None:  # none of the shown kind left: open another
            self.kind = None
            self._build_kinds(counts)
            return
        self._fill_kind_tabs(counts)
        self.kind_tabs.blockSignals(True)
        self.kind_tabs.setCurrentIndex(self.kinds.index(shown))
        self.kind_tabs.blockSignals(False)
        self._show_queue(*listed)
        if self.session is not None and self.session.unit is not None:
            self._show_unit_status()  # "Unit 1 of 2" said the total before
        self.statusBar().showMessage("Work list read again.", 4000)

    def _work_list_not_read(self, exc: StoreError | DBAPIError) -> None:
        words = str(exc)
        if isinstance(exc, DBAPIError):  # a server's refusal of a read it allowed at sign-in
            from portalreview.ui.server_dialog import refused_read_words

            role = self.project.url.username if self.project.path is None else None
            words = refused_read_words(exc, role)
        log.warning("the work list not read again: %s", words)
        QMessageBox.warning(
            self,
            APP_NAME,
            f"Could not read the work list again:\n{words}\n\n"
            "The list and the unit on screen are as they were.",
        )

    def _fill_kind_tabs(self, counts: dict | None = None) -> None:
        """The tabs and the Go > Kind of work menu: a kind with units for the person shown
        (``counts``: their progress by kind, read here when not given)."""
        if counts is None:
            try:
                counts = self.service.progress_by_kind(annotator_id=self.work_of)
            except StoreError as exc:  # the project file not readable (ReadFailed)
                counts = {}
                self._not_read("the kinds of work", exc)
        self.kind_tabs.blockSignals(True)
        while self.kind_tabs.count():
            self.kind_tabs.removeTab(0)
        self.kind_menu.clear()
        self.kinds = []
        for number, (kind, (title, _factory)) in enumerate(EDITORS.items(), start=1):
            if not _has_units(counts, kind):
                continue
            progress = counts[kind]
            self.kinds.append(kind)
            self.kind_tabs.addTab(f"{title}  ({progress.done}/{progress.total})")
            action = self.kind_menu.addAction(title)
            action.setShortcut(QKeySequence(f"Ctrl+{number}"))
            index = len(self.kinds) - 1
            action.triggered.connect(lambda _=False, i=index: self.kind_tabs.setCurrentIndex(i))
        self.kind_tabs.blockSignals(False)

    def _on_kind_tab(self, index: int) -> None:
        if 0 <= index < len(self.kinds):
            self.switch_kind(self.kinds[index])

    # === kinds and units ====================================================================

    def editor_for(self, kind: str) -> Editor:
        if kind not in self.editors:
            editor = EDITORS[kind][1](self.admin.catalogs)
            editor.setObjectName(f"{kind}Editor")
            self.editors[kind] = editor
            self.stack.addWidget(_scrolling(editor, f"{kind}Page"))
            self.undo_group.addStack(editor.undo_stack)
            editor.said.connect(lambda text: self.statusBar().showMessage(text, 8000))
        editor = self.editors[kind]
        editor.set_text_zoom(self.point_size)
        return editor

    def _page_of(self, editor: Editor) -> QWidget:
        """The scroll area an editor sits in (its page of the stack)."""
        widget = editor.parentWidget()
        while widget is not None and not isinstance(widget, QScrollArea):
            widget = widget.parentWidget()
        return widget if widget is not None else editor

    def switch_kind(self, kind: str) -> None:
        if kind == self.kind:
            return
        if self.session is not None:
            self.session.leave()
        self._show_kind_page(kind)
        if not self.queue.next_todo() and not self.queue.select_row(0):
            self.stack.setCurrentWidget(self.empty)

    def _show_kind_page(self, kind: str) -> None:
        """The kind's tab, editor page and list (no unit opened)."""
        self.kind = kind
        editor = self.editor_for(kind)
        self.undo_group.setActiveStack(editor.undo_stack)
        self.stack.setCurrentWidget(self._page_of(editor))
        self.queue_dock.setWindowTitle(f"Work queue — {EDITORS[kind][0]}")
        if kind in self.kinds and self.kind_tabs.currentIndex() != self.kinds.index(kind):
            self.kind_tabs.blockSignals(True)
            self.kind_tabs.setCurrentIndex(self.kinds.index(kind))
            self.kind_tabs.blockSignals(False)
        self._load_queue(kind)

    def _load_queue(self, kind: str) -> None:
        """The person's units of ``kind``, with the number to do."""
        try:
            listed = self._read_queue(kind)
        except StoreError as exc:  # the project file not readable (ReadFailed)
            self.queue.set_items([])
            self._not_read("the list of units", exc)
            return
        self._show_queue(*listed)

    def _read_queue(self, kind: str) -> tuple[list, int]:
        """The person's units of ``kind`` and the number to do (an adaptive inbox counts the
        judgements asked of them, not the pairs listed so far)."""
        total = self.service.progress(kind, annotator_id=self.work_of).total
        return self.service.queue(kind, annotator_id=self.work_of), total

    def _show_queue(self, items: list, total: int) -> None:
        self.queue.set_items(items, total)
        self._refresh_tab_progress()  # units assigned or taken away since the tab was made

    def _not_read(self, what: str, exc: StoreError) -> None:
        log.warning("%s not read: %s", what, exc)
        QMessageBox.warning(self, APP_NAME, f"Could not read {what}:\n{exc}")

    def show_unit(self, unit_id: int) -> None:
        """Open a unit of the current kind (saving the one being left first)."""
        editor = self.editors[self.kind]
        others = self.work_of if self.work_of != self.annotator_id else None
        try:
            self.session.open_unit(editor, unit_id, annotator_id=others)
        except (ProjectError, StoreError, ValueError, PermissionError) as exc:
            # StoreError: the pending change not saved, or the project file not readable
            # (ReadFailed: its drive gone, damaged, locked by another program)
            self._unit_not_shown(editor, exc)
            return
        editor.setEnabled(True)
        self.save_problem.hide()  # (a unit with changes not saved cannot be left)
        self.suggestions.unit_shown(editor)
        if self.session.read_only and others is not None:
            self.save_label.setText("Looking at another annotator's work (read-only)")
        else:
            self.save_label.setText(self._saved_text(self.session.answer))
        self._show_unit_status()
        editor.focus_first()

    def _unit_not_shown(self, editor: Editor, exc: Exception) -> None:
        """The unit chosen could not be opened: keep the list and the editor in step, then say
        why. The list goes back to the unit still on screen, which keeps what was typed in it;
        when this editor shows no unit of the session (another kind's is open), nothing is
        highlighted and the editor takes no typing, which no save would keep."""
        pending = self.session.unit
        if isinstance(exc, UnsavedChanges) and pending is not None:
            if self.session.editor is not editor:  # another kind's tab: back to the unit's
                self._show_kind_page(pending.kind)
            self.queue.select_unit(pending.unit_id, emit=False)
            message = str(exc)  # it says the unit stays on screen
        else:
            message = f"Could not show this unit:\n{exc}\n\n{self._keep_shown(editor, pending)}"
        log.warning("unit not shown: %s", exc)
        QMessageBox.warning(self, APP_NAME, message)

    def _keep_shown(self, editor: Editor, pending: UnitView | None) -> str:
        """The list back on the unit this editor shows, or on nothing (and the editor closed
        to typing) when it shows none of the session's; what the person is told of it."""
        shown = pending if self.session.editor is editor else None
        if shown is None or not self.queue.select_unit(shown.unit_id, emit=False):
            self.queue.select_none()
        if shown is None:
            editor.setEnabled(False)
            self.unit_label.set_parts(["No unit is shown."], tooltip="")
            return "No unit is shown: choose one in the list to try again."
        number = self.queue.numbers.get(shown.unit_id)
        return f"Unit {number} stays on screen." if number else "The unit shown stays."

    def _show_unit_status(self) -> None:
        unit = self.session.unit
        number = self.queue.numbers.get(unit.unit_id, 0)
        total = self.queue.total
        case = unit.cases[0].external_id if unit.cases else ""
        answer = self.session.answer
        state = (
            "not started"
            if answer is None
            else ("done" if answer.status == "submitted" else "draft")
        )
        flag = ["⚑ flagged"] if self.session.flagged else []  # (a flag not saved yet too)
        # the state first (what a clinician looks for), then where the unit is; a long set
        # name or case id is cut with "…" (whole in the tooltip), not the state pushed out
        where = f"Unit {number} of {total}"
        shown = [_elided(unit.unit_set, SET_NAME_CHARS), f"case {_elided(case, CASE_ID_CHARS)}"]
        whole = [unit.unit_set, f"case {case}"]
        self.unit_label.set_parts(
            [state, *flag, where, *shown],
            tooltip=PartsLabel.SEPARATOR.join([state, *flag, where, *whole]),
            kept=len([state, *flag, where]),
        )
        flagged = self.session.flagged
        self.act_flag.setText("The &flag for the PI…" if flagged else "&Flag for the PI…")

    def go_to_unit(self, kind: str, unit_id: int) -> bool:
        """Show unit ``unit_id`` of ``kind`` (its tab, and the list unfiltered if it hides
        it); whether it is the unit open now."""
        if kind != self.kind:
            self.switch_kind(kind)
        shown = self.session.unit is not None and self.session.unit.unit_id == unit_id
        if not shown and not self.queue.select_unit(unit_id):  # hidden by the list's filter
            self.queue.filter.setCurrentIndex(0)
            self.queue.select_unit(unit_id)
        return self.session.unit is not None and self.session.unit.unit_id == unit_id

    def step(self, delta: int) -> None:
        if self.kind and not self.queue.step(delta):
            self.statusBar().showMessage(
                "This is the last unit in the list." if delta > 0 else "This is the first unit.",
                4000,
            )

    def next_todo(self) -> None:
        if self.kind and not self.queue.next_todo():
            self.statusBar().showMessage("Everything in this list is done.", 5000)

    def jump(self) -> None:
        total = len(self.queue.all_items)
        if not total:
            return
        number, ok = QInputDialog.getInt(
            self, "Jump to unit", f"Unit number (1-{total}):", 1, 1, total
        )
        if ok:
            self.queue.jump_to_number(number)

    # === saving =============================================================================

    def save_now(self) -> None:
        if self.session is not None and self.session.unit is not None:
            self.session.editor.finish_editing()  # what is typed, entered as Enter would
            self.session.save()

    def submit(self) -> None:
        if self.session is None or self.session.unit is None:
            return
        if self.session.read_only:
            self.statusBar().showMessage(self.session.read_only_notice(), 8000)
            return
        view = self.session.submit()
        if view is not None and view.status == "submitted":
            self.statusBar().showMessage("Submitted.", 3000)
            QTimer.singleShot(0, self._advance_after_submit)

    def _advance_after_submit(self) -> None:
        if not self.queue.next_todo():
            self.statusBar().showMessage("Submitted. Everything in this list is done.", 6000)

    def toggle_flag(self) -> None:
        if self.session is None or self.session.unit is None or self.session.read_only:
            return
        flagged = self.session.flagged
        dialog = FlagNoteDialog(self, self.session.flag_note if flagged else None)
        answer = dialog.exec()
        if answer == REMOVE_FLAG:
            self.session.set_flag(False, "")
        elif answer == QDialog.DialogCode.Accepted:
            self.session.set_flag(True, dialog.note())
        self._show_unit_status()  # the flag as it stands, saved or not yet

    def _on_saved(self, view: AnswerView) -> None:
        self.save_problem.hide()
        self.queue.update_unit(view.unit_id, view.status, view.flagged)
        if view.status == "submitted" and self.queue.is_adaptive(view.unit_id):
            self._load_queue(self.kind)  # the next pair was chosen from this answer
        self.suggestions.saved(view)
        self.save_label.setText(self._saved_text(view))
        self._show_unit_status()
        self._refresh_tab_progress()

    @staticmethod
    def _saved_text(view: AnswerView | None) -> str:
        """When the answer on screen was saved, as stored (the clock's time now said, on a
        unit reopened after a crash, that the last typing was saved just then)."""
        if view is None:
            return "Nothing entered yet"
        try:
            when = datetime.fromisoformat(view.updated_at).astimezone()
        except (TypeError, ValueError):
            stamp = ""
        else:
            today = when.date() == datetime.now().astimezone().date()
            stamp = " " + when.strftime("%H:%M:%S" if today else "%Y-%m-%d %H:%M")
        return f"✓ Saved{stamp}" + (" · submitted" if view.status == "submitted" else "")

    def _on_save_failed(self, message: str) -> None:
        """"⚠ Not saved", and why above the editor, whole and until a save succeeds (the
        status bar cut a long reason off at its width, and dropped it after a while)."""
        self.save_label.setText("⚠ Not saved")
        session = self.session
        kept = session is not None and session.kept_unit is not None
        choice = session is not None and session.conflict is not None
        self.save_problem.show_problem(message, kept, choice)

    def _keep_mine(self) -> None:
        if self.session is not None:
            self.session.keep_mine()

    def _take_theirs(self) -> None:
        if self.session is not None:
            self.session.take_theirs()
            self.statusBar().showMessage("The answer saved there is on screen now.", 8000)

    def _on_pending(self, pending: bool) -> None:
        if pending:
            self.save_label.setText("Saving…")

    def _refresh_tab_progress(self) -> None:
        if self.kind not in self.kinds:
            return
        done, total = self.queue.done, self.queue.total
        index = self.kinds.index(self.kind)
        self.kind_tabs.setTabText(index, f"{EDITORS[self.kind][0]}  ({done}/{total})")

    # === view ===============================================================================

    def zoom(self, delta: float) -> None:
        self._set_point_size(self.point_size + delta)

    def zoom_reset(self) -> None:
        self._set_point_size(default_point_size())

    def _set_point_size(self, size: float) -> None:
        self.point_size = clamp_point_size(size)
        for editor in self.editors.values():
            editor.set_text_zoom(self.point_size)
        if self.annotator_name:
            self.prefs.set_point_size(self.annotator_name, self.point_size)
        self.statusBar().showMessage(f"Text size {self.point_size:g} pt", 2000)

    def show_queue_dock(self, shown: bool) -> None:
        """View > Work queue: show or hide the queue (remembered for the next start)."""
        self.prefs.set_queue_shown(shown)
        self.queue_dock.setVisible(shown and self.project is not None)

    def set_color_scheme(self, scheme: str) -> None:
        self.prefs.set_color_scheme(scheme)
        apply_color_scheme(scheme)

    def shortcut_list(self) -> list[tuple[str, str]]:
        """(what, keys) of every action with a shortcut, in name order; not the tools the
        person's role does not open (a clinician was shown the PI's Ctrl+J and Ctrl+D)."""
        not_for_this_role = {a for a in self.tools_menu.actions() if not a.isEnabled()}
        rows = set()
        for action in self.findChildren(QAction):
            keys = ", ".join(
                k.toString(QKeySequence.SequenceFormat.NativeText) for k in action.shortcuts()
            )
            if keys and action.text() and action not in not_for_this_role:
                rows.add((action.text().replace("&", ""), keys))
        return sorted(rows)

    def show_shortcuts(self) -> None:
        """F1: the current editor's keys, then every shortcut of the window, in a dialog that
        fits the screen and scrolls (window-modal: Escape or OK closes it)."""
        rows = "".join(
            f"<tr><td>{what}</td><td><b>{keys}</b></td></tr>" for what, keys in self.shortcut_list()
        )
        editor = self.editors.get(self.kind or "")
        editor_help = editor_keys(editor) if editor is not None else ""
        dialog = ShortcutsDialog(f"{editor_help}<table cellspacing=6>{rows}</table>", self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.open()

    def show_user_guide(self) -> None:
        from portalreview.ui.getting_started import open_user_guide

        open_user_guide(self)

    def open_log_folder(self) -> None:
        """Show the log folder in the system's file manager (docs/deployment.md)."""
        folder = log_dir()
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            QMessageBox.warning(self, APP_NAME, f"The log folder {folder} cannot be made: {exc}")
            return
        if not QDesktopServices.openUrl(QUrl.fromLocalFile(str(folder))):
            QMessageBox.information(self, APP_NAME, f"PortalReview's log is in\n{folder}")

    def show_about(self) -> None:
        QMessageBox.about(
            self,
            f"About {APP_NAME}",
            f"<b>{APP_NAME} {__version__}</b><p>Offline annotation of patient-portal messages "
            "and review of drafted replies. Nothing leaves this computer.</p>",
        )

    # === closing ============================================================================

    def close_unattended(self, why: str) -> bool:
        """Close the window with no one at the screen (the system ending the program, ``why``:
        "SIGTERM"): as a person's close, but asking nothing: what cannot be saved is kept on
        this computer, never dropped. False if the window stayed open all the same."""
        self.ending_unattended = why
        return self.close()

    def closeEvent(self, event: QCloseEvent) -> None:
        if not self._close_project_for_good():
            event.ignore()
            return
        self.prefs.qs.setValue("window/geometry", self.saveGeometry())
        self.prefs.sync()
        self.suggestions.shutdown()  # the model is freed here, never left to the GC
        # the tool windows' reads, stopped (the project is closed, everything saved) and
        # waited for: one still running as Python shuts down printed errors on stderr. Ending
        # unattended, briefly: the system kills the program soon after asking it to end
        stop_all(EXIT_WAIT_MS if self.ending_unattended is None else TERMINATION_WAIT_MS)
        event.accept()

    def _close_project_for_good(self) -> bool:
        """:meth:`close_project` for closing the window: an error in it is logged, never let
        out, and the window then closes only if nothing typed is unsaved or the person says
        to lose it (ending unattended: once what is unsaved is kept on this computer)."""
        try:
            return self.close_project()
        except Exception:
            log.exception("closing the project failed")
            if self.ending_unattended is not None:  # no one to ask: keep what can be, and go
                self._keep_unsaved_change()
                return True
            unsaved = self.session is not None and self.session.pending
            unsaved = unsaved or any(tool.dirty for tool in self._tools_holding_work())
            return not unsaved or self._confirm_unsaved()


EDITOR_KEYS = {
    "rank": "<p><b>Ranking</b>: Up/Down choose a response, 1-9 rank it (same number = tie; "
    "with ten responses or more, two digits typed at once give 10 and on), "
    "0 clears, Y correct, N incorrect, Alt+1-3 reasons C1-C3; PageUp/PageDown scroll the "
    "response, Home/End go to its start/end; Tab also reaches each response's Correct and "
    "Incorrect buttons (Space marks).</p>",
    "match": "<p><b>Matching</b>: select draft text (S selects the sentence at the cursor), "
    "M or Enter match it, X NO MATCH, Delete clears; in a sentence list, 1-9 give the "
    "selected sentence a theme (0 removes it).</p>",
    "respond": "<p><b>Responses</b>: Tab moves to the next box.</p>",
    "urgency": "<p><b>Urgency</b>: Left or 1 = the left patient needs care first, Right or 2 = "
    "the right one; A marks a hard pair; L or R then 1-6 sets that patient's level, 0 clears.</p>",
    "empathy": "<p><b>Empathy</b>: 1 = response 1 more empathetic, 2 = response 2, 3 = equal; "
    "PageUp/PageDown scroll both responses, Home/End go to their start/end.</p>",
    "eppc": "<p><b>EPPC coding</b>: 1-9 choose a code, Alt+1-9 its subcode; select text in the "
    "sentence and press E or Enter for evidence; Delete removes a span; W shows the whole "
    "message.</p>",
    "facts": "<p><b>Facts</b>: F lists the selected text as a fact; in a list, Y kept/supported, "
    "N not, 0 not judged{category_keys}, F2 edit, Delete remove; X (or the box) says "
    "neither response holds a medical fact.</p>",
}


def editor_keys(editor: Editor) -> str:
    """F1's words on the keys of ``editor``. Check facts has a key for each of the study's
    error categories, up to nine (a codebook can be extended past the six of seed 004)."""
    count = len(editor.catalogs.error_categories)
    return EDITOR_KEYS.get(editor.kind, "").replace("{category_keys}", category_keys(count))


def apply_color_scheme(scheme: str) -> None:
    """Follow the platform's light/dark and high-contrast settings, or force a scheme. Where
    the platform ignores a forced scheme, a palette of our own is set (with the Fusion style,
    which honours it); high contrast is always ours (``ui/colours.py``)."""
    app = QApplication.instance()
    hints = QGuiApplication.styleHints()
    if scheme == "system" and _platform_wants_high_contrast():
        scheme = "high_contrast"
    high_contrast_now = isinstance(app.style(), colours.HighContrastStyle)
    if scheme != "high_contrast" and high_contrast_now:  # back to the style it replaced
        app.setStyle(str(app.property("portalreview_style") or "Fusion"))
    if scheme == "high_contrast":
        if not high_contrast_now:
            app.setProperty("portalreview_style", _style_name(app.style()))
        hints.setColorScheme(Qt.ColorScheme.Dark)
        app.setStyle(colours.HighContrastStyle())
        app.setPalette(colours.high_contrast_palette())
        colours.set_scheme("high_contrast")
        return
    if scheme == "system":
        hints.unsetColorScheme()
        _outline_fusion(app)
        app.setPalette(colours.readable_placeholder(app.style().standardPalette()))
        colours.set_scheme("dark" if app.palette().base().color().lightness() < 128 else "light")
        return
    wanted = Qt.ColorScheme.Dark if scheme == "dark" else Qt.ColorScheme.Light
    hints.setColorScheme(wanted)
    dark_now = app.palette().window().color().lightness() < 128
    if dark_now != (scheme == "dark"):
        app.setStyle("Fusion")
    _outline_fusion(app)
    if scheme == "dark":
        app.setPalette(dark_palette() if dark_now is False else app.palette())
    else:
        app.setPalette(colours.light_palette(app.style().standardPalette()))
    colours.set_scheme(scheme)


def _style_name(style) -> str:
    """The style's name, Fusion's for our own Fusion-based styles."""
    return "Fusion" if isinstance(style, colours.OutlinedStyle) else style.name()


def _outline_fusion(app: QApplication) -> None:
    """Fusion (the style on Linux, and wherever our palettes are forced) with readable
    outlines on check boxes, radio buttons and fields (``colours.OutlinedStyle``). Set before
    the palette: setting a style puts the platform's palette back."""
    style = app.style()
    if not isinstance(style, colours.OutlinedStyle) and style.name().lower() == "fusion":
        app.setStyle(colours.OutlinedStyle())


def _platform_wants_high_contrast() -> bool:
    """The operating system's high-contrast setting (Qt 6.10 and later report it)."""
    hints = QGuiApplication.styleHints()
    accessibility = getattr(hints, "accessibility", None)
    if accessibility is None:
        return False
    return accessibility().contrastPreference() == Qt.ContrastPreference.HighContrast


def dark_palette() -> QPalette:
    """A dark palette with readable contrast (text at least 7:1 on its background)."""
    role, palette = QPalette.ColorRole, QPalette()
    colors = {
        role.Window: "#202124",
        role.WindowText: "#e8eaed",
        role.Base: "#17181a",
        role.AlternateBase: "#26282b",
        role.Text: "#e8eaed",
        role.Button: "#2b2d30",
        role.ButtonText: "#e8eaed",
        role.ToolTipBase: "#2b2d30",
        role.ToolTipText: "#e8eaed",
        role.PlaceholderText: colours.PLACEHOLDER["dark"],
        role.Highlight: "#3d6fb6",
        role.HighlightedText: "#ffffff",
        role.Link: "#8ab4f8",
        role.BrightText: "#ffffff",
    }
    for color_role, color in colors.items():
        palette.setColor(color_role, QColor(color))
    disabled = QPalette.ColorGroup.Disabled
    for color_role in (role.Text, role.WindowText, role.ButtonText):
        palette.setColor(disabled, color_role, QColor("#7b7f85"))
    return palette


#: The longest unit set name and case id the status line shows whole (longer: cut with "…").
SET_NAME_CHARS = 40
CASE_ID_CHARS = 24


def _elided(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _scrolling(editor: QWidget, name: str) -> QScrollArea:
    """An editor in a scroll area: on a small screen (1024 x 600, or a laptop at 150%) the
    window can be smaller than the editor's columns need, and the editor scrolls instead of
    pushing the window's right side, with Submit, off the screen."""
    page = FocusFollowingScrollArea()
    page.setObjectName(name)
    page.setWidgetResizable(True)
    page.setFrameShape(QFrame.Shape.NoFrame)
    page.setWidget(editor)
    return page


def _open_server_study(
    address: str, password: str | None = None
) -> tuple[ServerProject, str | None]:
    """Worker thread: the server study at ``address``, open, and the annotator its database
    account works as (read here, off the window's thread; None: IT's own account)."""
    from portalreview.store.backends import ServerProject  # (psycopg: loaded when needed)

    project = ServerProject.open(address, password=password)
    try:
        return project, project.member()
    except BaseException:
        project.close()
        raise


def _has_units(counts: dict, kind: str | None) -> bool:
    """Whether the progress by kind ``counts`` gives ``kind`` any unit."""
    progress = counts.get(kind)
    return progress is not None and progress.total > 0
