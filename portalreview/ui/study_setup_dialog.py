"""Study set-up for the PI in the desktop app (Tools > Study set-up…): the people, unit sets
made from the project's cases with a recipe, the hand-out of a set with an overlap, the
progress per annotator and kind, and the hard urgency pairs given to a second annotator.

The same steps as ``portalreview setup / assign / progress / hard-pairs`` (docs/pi-guide.md),
with the same options: this window only collects them, shows the plan before anything is
saved, and calls :mod:`portalreview.store.study_setup`. Planning runs on a worker thread;
creating a set and handing it out run there too, with a progress bar and Cancel. A cancelled
step saves nothing (the core saves each step in one transaction and checks for a cancel before
it commits).

Keys: Ctrl+1-5 the tabs; Ctrl+P previews the plan of the current tab; Ctrl+Return does the
current tab's action (add, create, assign, give the selected hard pairs); F5 reads the project
again.
"""

from __future__ import annotations

import html
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDialog,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)
from shiboken6 import isValid
from sqlalchemy import func, select

from portalreview.store import study_setup as setup
from portalreview.store.models import Annotator, Case, CaseTag, Unit, UnitSet
from portalreview.store.project import Project, ProjectError
from portalreview.store.service import StoreError
from portalreview.tasks.common import colours
from portalreview.tasks.common.screen import FlowRow, fit_to_screen, scrolled_vertically
from portalreview.ui.tools import bring_forward, only_for_the_pi, tell_study_written
from portalreview.ui.workers import run_in_background, run_with_progress

# What each recipe's response filters pick (``--first`` / ``--second`` of the CLI); "" = the
# recipe takes no responses there (see the recipes in portalreview.store.study_setup).
RECIPE_RESPONSES: dict[str, tuple[str, str]] = {
    "respond": ("", ""),
    "rank": ("Drafts in each rank set", ""),
    "match": ("References", "Drafts"),
    "iap": ("Clinicians' responses", ""),
    "urgency": ("", ""),
    "eppc": ("Responses coded too", ""),
    "empathy": ("Originals", "Edits"),
    "facts": ("Originals", "Edits"),
}
NO_SEED = -1  # the seed box's "keep the order" value
HARD_PAIRS_TAB = "&Hard pairs"
_SEPARATORS = re.compile(r"[,;\s]+")


# --- small pieces both PI windows use ---------------------------------------------------------


class MessageLine(QLabel):
    """One line under a window's tabs saying what just happened, or what is wrong (in red),
    instead of a modal box: the PI reads it and carries on (and tests are not blocked)."""

    def __init__(self, object_name: str) -> None:
        super().__init__()
        self.setObjectName(object_name)
        self.setWordWrap(True)
        self.setTextFormat(Qt.TextFormat.RichText)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

    def done(self, text: str) -> None:
        self.setText(f"<span style='color:{colours.text('ok')}'>✓ {html.escape(text)}</span>")

    def error(self, text: str) -> None:
        error = colours.text("error")
        self.setText(f"<span style='color:{error}'>⚠ {html.escape(text)}</span>")

    def note(self, text: str) -> None:
        self.setText(html.escape(text))

    def plain(self) -> str:
        return plain_text(self.text())


def plain_text(rich: str) -> str:
    """Rich text as a person reads it (line breaks as new lines), for tests and exports."""
    return html.unescape(re.sub(r"<[^>]+>", "", rich.replace("<br>", "\n")))


def number_item(value: int) -> QTableWidgetItem:
    item = QTableWidgetItem(str(value))
    item.setData(Qt.ItemDataRole.UserRole, value)
    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    return item


def fill_table(table: QTableWidget, rows: list[list[Any]]) -> None:
    """Rows of text and numbers (numbers right-aligned), read-only."""
    table.setRowCount(len(rows))
    for r, row in enumerate(rows):
        for c, value in enumerate(row):
            item = number_item(value) if isinstance(value, int) else QTableWidgetItem(str(value))
            item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEditable)
            table.setItem(r, c, item)


def make_table(
    headers: list[str], object_name: str, accessible: str, stretch: int = 0
) -> QTableWidget:
    """A read-only table, one row selected at a time; column ``stretch`` takes the spare
    width (the first, a name, by default: numbers stay next to what they count)."""
    table = QTableWidget(0, len(headers))
    table.setObjectName(object_name)
    table.setAccessibleName(accessible)
    table.setTabKeyNavigation(False)  # Tab leaves the table (else it traps the keyboard)
    table.setHorizontalHeaderLabels(headers)
    table.verticalHeader().setVisible(False)
    table.verticalHeader().setDefaultSectionSize(table.fontMetrics().height() + 8)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    header = table.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    header.setSectionResizeMode(stretch % len(headers), QHeaderView.ResizeMode.Stretch)
    return table


def table_rows(table: QTableWidget) -> list[list[str]]:
    """What a table shows, cell by cell (for tests and exports)."""
    return [
        [table.item(r, c).text() if table.item(r, c) else "" for c in range(table.columnCount())]
        for r in range(table.rowCount())
    ]


def add_shortcut(widget: QWidget, keys: str, slot: Callable[[], Any]) -> QAction:
    action = QAction(widget)
    action.setShortcut(QKeySequence(keys))
    action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
    action.triggered.connect(slot)
    widget.addAction(action)
    return action


def no_default_button(dialog: QDialog) -> None:
    """Enter in a field must not also press a button: these windows have no OK button, and
    a QDialog otherwise presses its first button on Enter (twice adding a person)."""
    for button in dialog.findChildren(QPushButton):
        button.setAutoDefault(False)
        button.setDefault(False)


def refresh_main_window(window) -> None:
    """Show the project's new state in the main window after a set-up step or a merge."""
    if window is not None and getattr(window, "service", None) is not None:
        window.study_changed()
        tell_study_written(window)


def project_closed(dialog: QDialog, message: MessageLine) -> bool:
    """True (and said) when the main window no longer has this window's project open: a tool
    window outlives a closed project, and must not write to a file nobody holds."""
    window = dialog.parent()
    if window is None or getattr(window, "project", None) is dialog.project:
        return False
    message.error(
        f"{dialog.project.label} was closed: open this window again from the Tools menu."
    )
    return True


def project_dialog(window, dialog_class: type[QDialog]) -> QDialog:
    """The main window's ``dialog_class`` window for its open project, brought forward: the one
    already made (read again) or, for another project, a new one; ``by`` set to the person
    signed in, whom the audit log names for what the window saves."""
    dialog = window.findChild(dialog_class)
    if dialog is None or dialog.project is not window.project:
        if dialog is not None:
            dialog.deleteLater()
        dialog = dialog_class(
            window.project, window, on_changed=lambda: refresh_main_window(window)
        )
    else:
        dialog.reload()
    dialog.by = window.service.viewer.annotator_id
    bring_forward(dialog)
    return dialog


# --- reading the project for the lists --------------------------------------------------------


@dataclass(frozen=True)
class SetRow:
    id: int
    name: str
    kind: str
    n_units: int


def unit_sets(project: Project) -> list[SetRow]:
    with project.read() as s:
        query = select(Unit.unit_set_id, func.count()).group_by(Unit.unit_set_id)
        sizes = dict(s.execute(query).all())
        return [
            SetRow(row.id, row.name, row.kind, sizes.get(row.id, 0))
            for row in s.scalars(select(UnitSet).order_by(UnitSet.id))
        ]


def people(project: Project) -> list[Annotator]:
    """The people (not models) of the project, in the order they were added."""
    with project.read() as s:
        return list(
            s.scalars(select(Annotator).where(Annotator.is_model.is_(False)).order_by(Annotator.id))
        )


def inboxes(project: Project) -> list[str]:
    with project.read() as s:
        query = select(CaseTag.value).where(CaseTag.key == "inbox").distinct()
        return list(s.scalars(query.order_by(CaseTag.value)))


def case_names(project: Project) -> dict[int, str]:
    with project.read() as s:
        return dict(s.execute(select(Case.id, Case.external_id)).all())


@dataclass(frozen=True)
class Tallies:
    """The Progress and Hard pairs tabs' rows, read together off the GUI thread."""

    progress: list[setup.ProgressRow]
    hard: list[setup.HardPair]


def read_tallies(project: Project) -> Tallies:
    """Worker thread: every assignment and answer is counted (0.4 s at 10,000 cases)."""
    return Tallies(setup.study_progress(project), setup.hard_pairs(project))


def split_words(text: str) -> list[str]:
    return [w for w in _SEPARATORS.split(text.strip()) if w]


def cases_in_plan(plan: setup.UnitPlan, names: dict[int, str]) -> list[list[Any]]:
    """(case, units it is in) for every case the plan uses, in the cases' order."""
    count: Counter[int] = Counter()
    for unit in plan.units:
        count[unit.case_id] += 1
        if unit.case_b_id is not None:
            count[unit.case_b_id] += 1
    return [[names.get(case_id, str(case_id)), n] for case_id, n in sorted(count.items())]


# --- the window -------------------------------------------------------------------------------


class StudySetupDialog(QDialog):
    """The PI's set-up window (one per main window)."""

    def __init__(
        self,
        project: Project,
        parent: QWidget | None = None,
        on_changed: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("studySetupDialog")
        self.setWindowTitle("Study set-up — PortalReview")
        self.project = project
        self.read_only = project.read_only
        self.on_changed = on_changed or (lambda: None)
        self.by: int | None = None  # who the audit log names: the signed-in PI (open_tool)
        self.plan: setup.UnitPlan | None = None
        self.assignment: setup.AssignmentPlan | None = None
        # raised by each change of a tab's options: a preview of older options, arriving
        # after the change, is dropped (it is not the plan of the form as it now stands)
        self._plan_generation = 0
        self._assignment_generation = 0
        self.busy = False
        self.writing = False  # long work that writes to the study (``_run``)
        self.loading = False  # the progress and hard pairs are being read in the background
        self._generation = 0  # a newer read wins; an older one's result is dropped
        self.progress_rows: list[setup.ProgressRow] = []
        self.tabs = QTabWidget()
        self.tabs.addTab(self._people_tab(), "&Annotators")
        self.tabs.addTab(self._sets_tab(), "&Unit sets")
        self.tabs.addTab(self._assign_tab(), "A&ssign")
        self.tabs.addTab(self._progress_tab(), "&Progress")
        self.tabs.addTab(self._hard_pairs_tab(), HARD_PAIRS_TAB)
        self.message = MessageLine("setupMessage")
        layout = QVBoxLayout(self)
        layout.addWidget(self.tabs, 1)
        layout.addWidget(self._loading_row())
        layout.addWidget(self.message)
        self._shortcuts()
        no_default_button(self)
        fit_to_screen(self, 1040, 720)
        self.reload()
        if self.read_only:
            self.message.note(
                f"{project.label} is open read-only (someone else has it open): you can look, "
                "not change."
            )

    # --- building ---------------------------------------------------------------------------

    def _loading_row(self) -> QWidget:
        """Shown while the progress and hard pairs are read; the other tabs work meanwhile."""
        self.loading_row = QWidget()
        self.loading_row.setObjectName("setupLoading")
        self.loading_label = QLabel("Reading the progress and the hard pairs…")
        bar = QProgressBar()
        bar.setRange(0, 0)  # busy: the read gives no steps
        bar.setTextVisible(False)
        bar.setAccessibleName("Reading the progress and the hard pairs")
        row = QHBoxLayout(self.loading_row)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.loading_label)
        row.addWidget(bar, 1)
        self.loading_row.setVisible(False)
        return self.loading_row

    def _people_tab(self) -> QWidget:
        self.people_table = make_table(
            ["Name", "Shown as", "Role"], "annotatorsTable", "The project's annotators"
        )
        self.name_edit = QLineEdit()
        self.name_edit.setObjectName("newAnnotatorName")
        self.name_edit.setPlaceholderText("e.g. np_dana (the name they sign in with)")
        self.name_edit.setAccessibleName("New annotator's name")
        self.name_edit.returnPressed.connect(self.add_person)
        self.role_box = QComboBox()
        self.role_box.setObjectName("newAnnotatorRole")
        self.role_box.setAccessibleName("New annotator's role")
        self.role_box.addItem("Clinician", "clinician")
        self.role_box.addItem("Principal investigator (PI)", "pi")
        self.add_button = QPushButton("A&dd")
        self.add_button.setObjectName("addAnnotator")
        self.add_button.clicked.connect(self.add_person)
        row = QHBoxLayout()
        name_label = QLabel("&Name:")
        name_label.setBuddy(self.name_edit)
        row.addWidget(name_label)
        row.addWidget(self.name_edit, 1)
        row.addWidget(self.role_box)
        row.addWidget(self.add_button)
        page = QWidget()
        layout = QVBoxLayout(page)
        layout.addWidget(self.people_table, 1)
        layout.addWidget(QLabel("<b>Add a person</b> (names are unique; nothing else changes)"))
        layout.addLayout(row)
        return page

    def _sets_tab(self) -> QWidget:
        self.recipe_box = QComboBox()
        self.recipe_box.setObjectName("recipe")
        self.recipe_box.setAccessibleName("Recipe")
        for recipe in setup.RECIPES:
            self.recipe_box.addItem(f"{recipe}  ({setup.RECIPE_KIND[recipe]} units)", recipe)
        self.set_name_edit = self._line("unitSetName", "default: made from the recipe and cases")
        self.description_edit = self._line("unitSetDescription", "default: the recipe's question")
        self.inbox_box = QComboBox()
        self.inbox_box.setObjectName("inbox")
        self.inbox_box.setEditable(True)
        self.inbox_box.setAccessibleName("Inbox (cases tagged inbox=NAME)")
        self.tags_edit = self._line("caseTags", "KEY=VALUE, ... e.g. split=test (all must hold)")
        self.cases_edit = self._line("caseIds", "case ids, e.g. c12, c40 (default: every case)")
        self.first_edit = self._line("firstResponses", "default for the recipe")
        self.second_edit = self._line("secondResponses", "default for the recipe")
        self.first_label, self.second_label = QLabel(), QLabel()
        self.comparisons_spin = self._spin("comparisonsPerMessage", 0, 10_000, "all pairs")
        self.judgements_spin = self._spin("adaptiveJudgements", 0, 1_000_000, "n log2 n")
        self.judgements_spin.setToolTip(
            "Adaptive inbox: the pairs each clinician judges, each chosen from their answers so "
            "far (default: n log2 n for n messages, 148 of the 435 pairs of 30)"
        )
        self.batch_spin = self._spin("batchSize", 0, 1_000_000, "no batches")
        self.batch_spin.setToolTip(
            "Units labelled batch-1, batch-2… in order, this many to a batch, for agreement per "
            "batch; for EPPC coding this many messages, all of a message's sentences in one "
            "batch (kappa per sample of 50 messages, 003 Sec. 3.2.2)"
        )
        self.unit_seed_spin = self._spin("unitSeed", NO_SEED, 1_000_000, "none")
        self.unit_seed_spin.setValue(NO_SEED)
        self.unit_seed_spin.setToolTip(
            "None: the units keep the cases' order (urgency pairs are shuffled with seed 0, so "
            "that one message does not fill the start of every queue)"
        )
        form = QFormLayout()
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
        form.addRow("&Recipe:", self.recipe_box)
        form.addRow("Set &name:", self.set_name_edit)
        form.addRow("Question:", self.description_edit)
        form.addRow("&Inbox (urgency):", self.inbox_box)
        form.addRow("Cases &tagged:", self.tags_edit)
        form.addRow("Only the &cases:", self.cases_edit)
        form.addRow(self.first_label, self.first_edit)
        form.addRow(self.second_label, self.second_edit)
        form.addRow("Comparisons per &message (urgency):", self.comparisons_spin)
        form.addRow("&Judgements per clinician (adaptive):", self.judgements_spin)
        form.addRow("&Batch size:", self.batch_spin)
        form.addRow("Order: shuffle with s&eed:", self.unit_seed_spin)
        help_text = QLabel(
            "Response filters: KEY=VALUE with KEY author_kind, production, source or author; "
            "commas give alternatives, spaces separate keys (all must hold), e.g. "
            "<i>author_kind=model production=zero_shot,thematic_prompt</i>."
        )
        help_text.setWordWrap(True)
        self.preview_button = QPushButton("Preview the plan (Ctrl+P)")
        self.preview_button.setObjectName("previewUnits")
        self.preview_button.clicked.connect(self.preview_units)
        self.create_button = QPushButton("Create the unit set (Ctrl+Enter)")
        self.create_button.setObjectName("createUnitSet")
        self.create_button.clicked.connect(self.create_units)
        buttons = QHBoxLayout()
        buttons.addWidget(self.preview_button)
        buttons.addWidget(self.create_button)
        buttons.addStretch(1)
        self.plan_label = QLabel("Choose a recipe and preview what it makes; nothing is saved.")
        self.plan_label.setObjectName("unitPlan")
        self.plan_label.setWordWrap(True)
        self.plan_label.setTextFormat(Qt.TextFormat.RichText)  # the names are escaped
        self.plan_table = make_table(
            ["Case", "Units it is in"], "unitPlanCases", "The cases of the planned units"
        )
        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        left_layout.addLayout(form)
        left_layout.addWidget(help_text)
        left_layout.addLayout(buttons)
        left_layout.addStretch(1)
        right = QWidget()
        right_layout = QVBoxLayout(right)
        right_layout.setContentsMargins(0, 0, 0, 0)
        right_layout.addWidget(self.plan_label)
        right_layout.addWidget(self.plan_table, 1)
        page = QWidget()
        layout = QHBoxLayout(page)
        layout.addWidget(scrolled_vertically(left), 3)
        layout.addWidget(right, 2)
        for signal in (
            self.recipe_box.currentIndexChanged,
            self.inbox_box.currentTextChanged,
            self.set_name_edit.textChanged,
            self.description_edit.textChanged,
            self.tags_edit.textChanged,
            self.cases_edit.textChanged,
            self.first_edit.textChanged,
            self.second_edit.textChanged,
            self.comparisons_spin.valueChanged,
            self.judgements_spin.valueChanged,
            self.batch_spin.valueChanged,
            self.unit_seed_spin.valueChanged,
        ):
            signal.connect(self._units_changed)
        self._units_changed()
        return page

    def _assign_tab(self) -> QWidget:
        self.assign_set_box = QComboBox()
        self.assign_set_box.setObjectName("assignUnitSet")
        self.assign_set_box.setAccessibleName("Unit set to hand out")
        self.people_list = QListWidget()
        self.people_list.setObjectName("assignPeople")
        self.people_list.setAccessibleName("Annotators who receive units (Space ticks)")
        self.people_list.setMaximumHeight(7 * (self.people_list.fontMetrics().height() + 6))
        self.overlap_spin = self._spin("overlap", 0, 10_000_000, "")
        self.raters_spin = self._spin("ratersPerUnit", 1, 1000, "")
        self.assign_seed_spin = self._spin("assignSeed", 0, 1_000_000_000, "")
        self.shuffle_box = QCheckBox("Each person gets their own (seeded) order of the units")
        self.shuffle_box.setObjectName("shuffleOrder")
        form = QFormLayout()
        # a box under its label where the two do not fit side by side (a large font)
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
        form.addRow("Unit s&et:", self.assign_set_box)
        form.addRow("Annotators (tick with Space):", self.people_list)
        form.addRow("&Overlap (units everyone answers):", self.overlap_spin)
        form.addRow("&Raters per other unit:", self.raters_spin)
        form.addRow("Draw's see&d:", self.assign_seed_spin)
        form.addRow("", self.shuffle_box)
        self.assign_preview_button = QPushButton("Preview the hand-out (Ctrl+P)")
        self.assign_preview_button.setObjectName("previewAssignment")
        self.assign_preview_button.clicked.connect(self.preview_assignment)
        self.assign_button = QPushButton("Assign (Ctrl+Enter)")
        self.assign_button.setObjectName("assignUnits")
        self.assign_button.clicked.connect(self.assign)
        buttons = QHBoxLayout()
        buttons.addWidget(self.assign_preview_button)
        buttons.addWidget(self.assign_button)
        buttons.addStretch(1)
        self.assign_label = QLabel(
            "Only units not assigned yet are handed out. The same set, people and seed give "
            "the same hand-out."
        )
        self.assign_label.setObjectName("assignmentPlan")
        self.assign_label.setWordWrap(True)
        self.assign_label.setTextFormat(Qt.TextFormat.RichText)  # the names are escaped
        self.assign_table = make_table(
            ["Annotator", "Units", "Answered by everyone", "Theirs alone or shared by fewer"],
            "assignmentCounts",
            "Units per annotator in the planned hand-out",
        )
        page = QWidget()
        layout = QVBoxLayout(page)
        layout.addLayout(form)
        layout.addLayout(buttons)
        layout.addWidget(self.assign_label)
        layout.addWidget(self.assign_table, 1)
        for signal in (
            self.assign_set_box.currentIndexChanged,
            self.people_list.itemChanged,
            self.overlap_spin.valueChanged,
            self.raters_spin.valueChanged,
            self.assign_seed_spin.valueChanged,
            self.shuffle_box.toggled,
        ):
            signal.connect(self._assignment_changed)
        return page

    def _progress_tab(self) -> QWidget:
        self.by_kind_box = QCheckBox("Sum the sets of each &kind")
        self.by_kind_box.setObjectName("progressByKind")
        self.by_kind_box.toggled.connect(lambda _on: self.show_progress())
        refresh = QPushButton("Read again (F5)")
        refresh.clicked.connect(self.reload)
        top = QHBoxLayout()
        top.addWidget(self.by_kind_box)
        top.addStretch(1)
        top.addWidget(refresh)
        self.progress_table = make_table(
            ["Unit set", "Kind", "Annotator", "Assigned", "Shared", "Drafts", "Done", "To do"],
            "progressTable",
            "Progress per unit set (or kind) and annotator",
        )
        legend = QLabel(
            "<i>Shared</i>: units someone else answers too (the agreement figures rest on "
            "them). <i>Drafts</i>: saved, not submitted."
        )
        legend.setWordWrap(True)
        page = QWidget()
        layout = QVBoxLayout(page)
        layout.addLayout(top)
        layout.addWidget(self.progress_table, 1)
        layout.addWidget(legend)
        return page

    def _hard_pairs_tab(self) -> QWidget:
        intro = QLabel(
            "Urgency pairs whose only annotator so far ticked <i>Hard pair: ask a second "
            "annotator</i> and submitted (seed 002, App. A.5.1). Give them to a second "
            "annotator: the same pair joins their queue, and both answers count in the "
            "agreement figures."
        )
        intro.setWordWrap(True)
        self.hard_table = make_table(
            ["Unit", "Unit set", "Cases", "Asked by"],
            "hardPairsTable",
            "Urgency pairs waiting for a second annotator (Ctrl+A selects them all)",
            stretch=1,
        )
        self.hard_table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.hard_table.itemSelectionChanged.connect(self._hard_selection_changed)
        select_all = QPushButton("Select all pairs")
        select_all.setObjectName("selectAllHardPairs")
        select_all.clicked.connect(self.hard_table.selectAll)
        self.second_box = QComboBox()
        self.second_box.setObjectName("secondAnnotator")
        self.second_box.setAccessibleName("Second annotator (never the one who asked)")
        self.second_button = QPushButton("Give the selected pairs to them (Ctrl+Enter)")
        self.second_button.setObjectName("assignSecondAnnotator")
        self.second_button.clicked.connect(self.assign_second)
        row = FlowRow()  # on more lines where a large font makes one wider than the screen
        row.add(select_all)
        second_label = QLabel("Second annotato&r:")
        second_label.setBuddy(self.second_box)
        row.add(second_label, self.second_box)
        row.add(self.second_button)
        page = QWidget()
        layout = QVBoxLayout(page)
        layout.addWidget(intro)
        layout.addWidget(self.hard_table, 1)
        layout.addWidget(row)
        return page

    def _line(self, object_name: str, placeholder: str) -> QLineEdit:
        edit = QLineEdit()
        edit.setObjectName(object_name)
        edit.setPlaceholderText(placeholder)
        edit.setClearButtonEnabled(True)
        return edit

    def _spin(self, object_name: str, low: int, high: int, special: str) -> QSpinBox:
        spin = QSpinBox()
        spin.setObjectName(object_name)
        spin.setRange(low, high)
        if special:
            spin.setSpecialValueText(special)
        spin.setAccelerated(True)
        return spin

    def _shortcuts(self) -> None:
        for number in range(1, self.tabs.count() + 1):
            add_shortcut(self, f"Ctrl+{number}", lambda n=number: self.tabs.setCurrentIndex(n - 1))
        add_shortcut(self, "Ctrl+P", self._preview_current)
        add_shortcut(self, "Ctrl+Return", self._act_current)
        add_shortcut(self, "Ctrl+Enter", self._act_current)
        add_shortcut(self, "F5", self.reload)

    def _preview_current(self) -> None:
        {1: self.preview_units, 2: self.preview_assignment}.get(
            self.tabs.currentIndex(), lambda: None
        )()

    def _act_current(self) -> None:
        {0: self.add_person, 1: self.create_units, 2: self.assign, 4: self.assign_second}.get(
            self.tabs.currentIndex(), lambda: None
        )()

    # --- reading ----------------------------------------------------------------------------

    def reload(self) -> None:
        """Read the people, unit sets, inboxes and progress from the project again."""
        if project_closed(self, self.message):
            return
        self.everyone = people(self.project)
        fill_table(
            self.people_table,
            [
                [p.name, p.display_name or "", "PI" if p.role == "pi" else "clinician"]
                for p in self.everyone
            ],
        )
        current_inbox = self.inbox_box.currentText()
        self.inbox_box.blockSignals(True)
        self.inbox_box.clear()
        self.inbox_box.addItems(["", *inboxes(self.project)])
        self.inbox_box.setCurrentText(current_inbox)
        self.inbox_box.blockSignals(False)
        self._fill_assign_lists()
        self._read_tallies()
        self._update_buttons()

    def _read_tallies(self) -> None:
        """Count the progress and find the hard pairs in the background, the window saying
        so; a newer read replaces one under way."""
        self._generation += 1
        generation = self._generation
        self.loading = True
        self.progress_rows = []
        self.show_progress()
        self.show_hard_pairs([])
        self.loading_row.setVisible(True)
        run_in_background(
            read_tallies,
            self.project,
            on_done=lambda tallies: self._tallies_read(generation, tallies),
            on_error=lambda message, _exc: self._tallies_failed(generation, message),
        )

    def _done_reading(self, generation: int) -> bool:
        """False when the result is stale: this window is gone, or a newer read began."""
        if not isValid(self) or generation != self._generation:
            return False
        self.loading = False
        self.loading_row.setVisible(False)
        return True

    def _tallies_read(self, generation: int, tallies: Tallies) -> None:
        if self._done_reading(generation):
            self.progress_rows = tallies.progress
            self.show_progress()
            self.show_hard_pairs(tallies.hard)

    def _tallies_failed(self, generation: int, message: str) -> None:
        if self._done_reading(generation):
            self.message.error(f"The progress and hard pairs were not read: {message}")

    def _fill_assign_lists(self) -> None:
        chosen_set = self.assign_set_box.currentData()
        ticked = set(self.ticked_people())
        self.assign_set_box.blockSignals(True)
        self.assign_set_box.clear()
        for row in unit_sets(self.project):
            self.assign_set_box.addItem(f"{row.name}  ({row.kind}, {row.n_units} units)", row.id)
        index = self.assign_set_box.findData(chosen_set)
        self.assign_set_box.setCurrentIndex(index if index >= 0 else 0)
        self.assign_set_box.blockSignals(False)
        self.people_list.blockSignals(True)
        self.people_list.clear()
        for person in self.everyone:
            role = " (PI)" if person.role == "pi" else ""
            item = QListWidgetItem(f"{person.name}{role}")
            item.setData(Qt.ItemDataRole.UserRole, person.name)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            on = person.name in ticked
            item.setCheckState(Qt.CheckState.Checked if on else Qt.CheckState.Unchecked)
            self.people_list.addItem(item)
        self.people_list.blockSignals(False)
        self._assignment_changed()

    def ticked_people(self) -> list[str]:
        return [
            self.people_list.item(i).data(Qt.ItemDataRole.UserRole)
            for i in range(self.people_list.count())
            if self.people_list.item(i).checkState() == Qt.CheckState.Checked
        ]

    def show_progress(self) -> None:
        """The progress rows read last, per unit set or summed per kind."""
        rows = self.progress_rows
        by_kind = self.by_kind_box.isChecked()
        if by_kind:
            rows = setup.progress_by_kind(rows)
        self.progress_table.setColumnHidden(0, by_kind)
        fill_table(
            self.progress_table,
            [
                [
                    r.unit_set,
                    r.kind,
                    r.annotator,
                    r.assigned,
                    r.shared,
                    r.drafts,
                    r.submitted,
                    r.todo,
                ]
                for r in rows
            ],
        )

    # --- people -----------------------------------------------------------------------------

    def add_person(self) -> None:
        if project_closed(self, self.message):
            return
        name = self.name_edit.text().strip()
        role = self.role_box.currentData()
        if not name:
            self.message.error("Type the new annotator's name first.")
            self.name_edit.setFocus()
            return
        try:
            setup.add_annotators(self.project, [name], role=role, by=self.by)
        except (StoreError, ProjectError) as exc:
            self.message.error(f"{name} was not added: {exc}.")
            return
        self.name_edit.clear()
        self.reload()
        self.message.done(f"Added {name} ({'PI' if role == 'pi' else 'clinician'}).")
        self.on_changed()

    # --- unit sets --------------------------------------------------------------------------

    def _units_changed(self, *_args: Any) -> None:
        """Any change of the recipe's options makes the previewed plan stale."""
        recipe = self.recipe_box.currentData()
        first, second = RECIPE_RESPONSES.get(recipe, ("", ""))
        self.first_label.setText(f"{first or 'Responses'}:")
        self.second_label.setText(f"{second or 'Second responses'}:")
        self.first_edit.setEnabled(bool(first))
        self.second_edit.setEnabled(bool(second))
        urgency = setup.RECIPE_KIND[recipe] == "urgency"
        self.inbox_box.setEnabled(urgency)
        self.comparisons_spin.setEnabled(recipe == "urgency")
        self.judgements_spin.setEnabled(recipe == "adaptive-inbox")
        if self.plan is not None:
            self.plan_label.setText(
                "<i>The options changed: preview again.</i><br>"
                + html.escape(self.plan.summary()).replace("\n", "<br>")
            )
        self.plan = None
        self._plan_generation += 1
        self._update_buttons()

    def _plan_arguments(self) -> dict[str, Any]:
        """The keyword arguments of plan_units from the form; SetupError names a bad field."""
        recipe = self.recipe_box.currentData()
        first, second = RECIPE_RESPONSES.get(recipe, ("", ""))
        seed = self.unit_seed_spin.value()
        urgency = setup.RECIPE_KIND[recipe] == "urgency"
        return {
            "cases": setup.CaseFilter.parse(
                split_words(self.tags_edit.text()), split_words(self.cases_edit.text())
            ),
            "first": self._responses(self.first_edit, bool(first)),
            "second": self._responses(self.second_edit, bool(second)),
            "inbox": self.inbox_box.currentText().strip() if urgency else None,
            "name": self.set_name_edit.text().strip() or None,
            "description": self.description_edit.text().strip() or None,
            "batch_size": self.batch_spin.value(),
            "seed": None if seed == NO_SEED else seed,
            "comparisons_per_message": (
                self.comparisons_spin.value() if recipe == "urgency" else 0
            ),
            "judgements": self.judgements_spin.value() if recipe == "adaptive-inbox" else 0,
        }

    @staticmethod
    def _responses(edit: QLineEdit, used: bool) -> setup.ResponseFilter | None:
        text = edit.text().strip()
        if not used or not text:
            return None
        return setup.ResponseFilter.parse(w for w in re.split(r"[;\s]+", text) if w)

    def preview_units(self) -> None:
        """Plan the unit set (on a worker thread) and show what it would make."""
        if project_closed(self, self.message):
            return
        if self.busy:
            return
        recipe = self.recipe_box.currentData()
        try:
            arguments = self._plan_arguments()
        except StoreError as exc:
            self.message.error(f"Cannot plan: {exc}.")
            return
        self.plan = None  # the set created is the one shown: none while planning
        self._set_busy(True)
        self.plan_label.setText("Planning…")
        generation = self._plan_generation
        run_in_background(
            setup.plan_units,
            self.project,
            recipe,
            on_done=self._while_open(lambda plan: self._show_plan(plan, generation)),
            on_error=self._while_open(
                lambda message, exc: self._plan_failed(message, exc, generation)
            ),
            **arguments,
        )

    def _plan_failed(self, message: str, exc: Exception, generation: int) -> None:
        """A refused plan leaves no plan on show (it left "Planning…", over the last one)."""
        if generation != self._plan_generation:
            self._preview_outdated(self.plan_label, self.plan_table)
            return
        fill_table(self.plan_table, [])
        self.plan_label.setText("Not planned: see the message below.")
        self._failed("Cannot plan", message, exc)

    def _show_plan(self, plan: setup.UnitPlan, generation: int) -> None:
        self._set_busy(False)
        if generation != self._plan_generation:
            self._preview_outdated(self.plan_label, self.plan_table)
            return
        names = {row.name for row in unit_sets(self.project)}
        fill_table(self.plan_table, cases_in_plan(plan, case_names(self.project)))
        text = html.escape(plan.summary()).replace("\n", "<br>")
        options = ", ".join(f"{k}: {v}" for k, v in plan.options.items())
        text += f"<br><i>{html.escape(plan.description)}</i><br>{html.escape(options)}"
        if plan.name in names:
            self.plan = None
            self.plan_label.setText(text)
            self.message.error(
                f"There is already a unit set called {plan.name!r}: type another set name."
            )
        else:
            self.plan = plan
            self.plan_label.setText(text)
            self.message.note(
                f"Plan: {len(plan)} {plan.kind} unit(s) from {self.plan_table.rowCount()} "
                "case(s). Nothing is saved until you create the set."
            )
        self._update_buttons()

    def create_units(self) -> None:
        if project_closed(self, self.message):
            return
        if self.busy or self.read_only:
            return
        plan = self.plan
        if plan is None:
            self.message.error("Preview the plan first (Ctrl+P): the set made is the one shown.")
            return

        def work(progress, cancelled):
            return setup.create_unit_set(
                self.project, plan, progress=progress, cancel=cancelled, by=self.by
            )

        self._run(f"Creating the unit set {plan.name!r}…", work, self._created)

    def _created(self, made: setup.CreatedSet) -> None:
        self._set_busy(False)
        self.plan = None
        self.reload()
        index = self.assign_set_box.findData(made.unit_set_id)
        if index >= 0:
            self.assign_set_box.setCurrentIndex(index)
        self.plan_label.setText(
            f"Created {html.escape(made.name)}: {made.n_units} {made.kind} unit(s)."
        )
        self.message.done(
            f"Created the unit set {made.name!r} ({made.n_units} {made.kind} units). "
            "Hand it out in the Assign tab."
        )
        self.on_changed()

    # --- assignment -------------------------------------------------------------------------

    def _assignment_changed(self, *_args: Any) -> None:
        if self.assignment is not None:
            self.assign_label.setText(
                "<i>The options changed: preview again.</i><br>"
                + html.escape(self.assignment.summary()).replace("\n", "<br>")
            )
        self.assignment = None
        self._assignment_generation += 1
        self._update_buttons()

    def preview_assignment(self) -> None:
        if project_closed(self, self.message):
            return
        if self.busy:
            return
        unit_set = self.assign_set_box.currentData()
        if unit_set is None:
            self.message.error("There is no unit set to hand out yet: create one first.")
            return
        chosen = self.ticked_people()
        if not chosen:
            self.message.error("Tick the annotators who are to receive units (Space ticks).")
            return
        self._set_busy(True)
        generation = self._assignment_generation
        run_in_background(
            setup.plan_assignment,
            self.project,
            unit_set,
            chosen,
            overlap=self.overlap_spin.value(),
            raters_per_unit=self.raters_spin.value(),
            seed=self.assign_seed_spin.value(),
            on_done=self._while_open(lambda plan: self._show_assignment(plan, generation)),
            on_error=self._while_open(
                lambda message, exc: self._assignment_failed(message, exc, generation)
            ),
        )

    def _assignment_failed(self, message: str, exc: Exception, generation: int) -> None:
        if generation != self._assignment_generation:
            self._preview_outdated(self.assign_label, self.assign_table)
            return
        self._failed("Cannot hand out", message, exc)

    def _show_assignment(self, plan: setup.AssignmentPlan, generation: int) -> None:
        self._set_busy(False)
        if generation != self._assignment_generation:
            self._preview_outdated(self.assign_label, self.assign_table)
            return
        self.assignment = plan
        shared = len(plan.shared_units)
        fill_table(
            self.assign_table,
            [[name, n, shared, n - shared] for name, n in plan.counts().items()],
        )
        self.assign_label.setText(html.escape(plan.summary()).replace("\n", "<br>"))
        self.message.note(
            f"Plan: {plan.n_units} unit(s) of {plan.unit_set!r} to hand out, {shared} to everyone. "
            + (f"{plan.kept_in_brief()} " if plan.kept_from else "")
            + "Nothing is saved until you assign."
        )
        self._update_buttons()

    def assign(self) -> None:
        if project_closed(self, self.message):
            return
        if self.busy or self.read_only:
            return
        plan = self.assignment
        if plan is None:
            self.message.error("Preview the hand-out first (Ctrl+P): the one shown is saved.")
            return
        shuffle = self.shuffle_box.isChecked()

        def work(progress, cancelled):
            return setup.assign_units(
                self.project,
                plan,
                shuffle_order=shuffle,
                progress=progress,
                cancel=cancelled,
                by=self.by,
            )

        self._run(f"Handing out {plan.unit_set!r}…", work, self._assigned)

    def _assigned(self, plan: setup.AssignmentPlan) -> None:
        self._set_busy(False)
        self.assignment = None
        self.reload()
        counts = ", ".join(f"{name} {n}" for name, n in plan.counts().items())
        self.message.done(f"Handed out {plan.unit_set!r}: {counts} unit(s).")
        self.assign_label.setText("Assigned. " + html.escape(plan.summary()).replace("\n", "<br>"))
        self.on_changed()

    def _preview_outdated(self, label: QLabel, table: QTableWidget) -> None:
        """A preview came back after its options were changed: show none, and ask again."""
        self._set_busy(False)
        fill_table(table, [])
        label.setText("<i>The options changed during the preview: preview again (Ctrl+P).</i>")
        self.message.note("The options changed during the preview: preview again (Ctrl+P).")

    # --- a second annotator for hard pairs --------------------------------------------------

    def show_hard_pairs(self, hard: list[setup.HardPair]) -> None:
        """List the pairs waiting for a second annotator; the count shows on the tab."""
        self.hard = hard
        fill_table(
            self.hard_table,
            [[p.unit_id, p.unit_set, " / ".join(p.cases), p.asked_by] for p in self.hard],
        )
        count = f" ({len(self.hard)})" if self.hard else ""
        self.tabs.setTabText(self.tabs.count() - 1, HARD_PAIRS_TAB + count)
        self._hard_selection_changed()

    def selected_hard_pairs(self) -> list[setup.HardPair]:
        rows = {index.row() for index in self.hard_table.selectionModel().selectedRows()}
        return [pair for row, pair in enumerate(self.hard) if row in rows]

    def _hard_selection_changed(self) -> None:
        """Offer the people who may take every selected pair: anyone but who asked."""
        askers = {pair.asked_by for pair in self.selected_hard_pairs()}
        chosen = self.second_box.currentData()
        self.second_box.clear()
        for person in self.everyone:
            if person.name not in askers:
                role = " (PI)" if person.role == "pi" else ""
                self.second_box.addItem(f"{person.name}{role}", person.name)
        index = self.second_box.findData(chosen)
        self.second_box.setCurrentIndex(max(index, 0))
        self._update_buttons()

    def assign_second(self) -> None:
        """Give the selected hard pairs to the chosen second annotator (small: no worker)."""
        if project_closed(self, self.message) or self.busy or self.read_only:
            return
        units = [pair.unit_id for pair in self.selected_hard_pairs()]
        name = self.second_box.currentData()
        if not units:
            self.message.error("Select the pairs to give first (Ctrl+A selects them all).")
            return
        if name is None:
            self.message.error("Nobody else can take these pairs: add a person first.")
            return
        try:
            done = setup.assign_second_annotator(self.project, units, name, by=self.by)
        except (StoreError, ProjectError) as exc:
            self.message.error(f"Not given: {exc}.")
            return
        self.reload()
        self.message.done(
            f"{done.summary()}: in their urgency queue, the same pairs, so that both answers "
            "count in the agreement figures."
        )
        self.on_changed()

    # --- long work --------------------------------------------------------------------------

    def _while_open(self, slot: Callable[..., None]) -> Callable[..., None]:
        """``slot``, dropped once this window is deleted: a preview runs without a modal
        progress window, so the project may be closed (and this window replaced by a new one)
        before its result arrives."""

        def call(*args: Any) -> None:
            if isValid(self):
                slot(*args)

        return call

    def _run(self, label: str, work: Callable[..., Any], on_done: Callable[[Any], None]) -> None:
        self._set_busy(True)
        self.writing = True  # the study is not closed under it (MainWindow._no_tool_at_work)
        run_with_progress(
            self,
            label,
            work,
            on_done=on_done,
            on_error=lambda message, exc: self._failed("Not done", message, exc),
        )

    def _failed(self, what: str, message: str, exc: Exception) -> None:
        self._set_busy(False)
        if isinstance(exc, setup.Cancelled):
            self.message.note("Cancelled: nothing was saved.")
        else:
            self.message.error(f"{what}: {message}")
        self._update_buttons()

    def _set_busy(self, busy: bool) -> None:
        self.busy = busy
        if not busy:
            self.writing = False
        self._update_buttons()

    def _update_buttons(self) -> None:
        if not hasattr(self, "hard"):
            return  # still building
        idle, writable = not self.busy, not self.read_only
        self.add_button.setEnabled(idle and writable)
        self.preview_button.setEnabled(idle)
        self.create_button.setEnabled(idle and writable and self.plan is not None)
        self.assign_preview_button.setEnabled(idle)
        self.assign_button.setEnabled(idle and writable and self.assignment is not None)
        self.second_button.setEnabled(idle and writable and bool(self.hard))


def open_tool(window) -> StudySetupDialog | None:
    """Tools > Study set-up… (PI only)."""
    if not only_for_the_pi(window, "Study set-up"):
        return None
    return project_dialog(window, StudySetupDialog)
