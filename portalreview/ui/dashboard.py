"""The PI's live agreement dashboard (Tools > Agreement dashboard, Ctrl+D): every measure of the
agreement report, as tables and plots, refreshed as answers are saved.

What it shows is the Excel report's own model (``reports/xlsx_report.workbook_model``) of the
JSON report (``reports/json_report.build_report``): one tab per sheet (Summary and one per
kind), each table with its title, its note (how the figure was computed) and its n columns,
and the table's chart or heat map drawn by ``ui/charts.py``. So a figure on screen is, by
construction, the one the workbook and the JSON report give for the same answers, seed and
number of resamples; hovering a figure shows its JSON key, interval and n. The ids the report
holds (themes, EPPC codes, error categories, kinds) are shown by the names the main window
gives them (:class:`DisplayNames`), the id in the tooltip; the exports keep the ids.

The figures can be narrowed to some annotators, draft sources and case tags
(``analysis/filters.py``); the bootstrap can be made quicker with fewer resamples (said on
screen). Export writes the workbook or the JSON report of exactly what is shown, with the
filter recorded in it. Computing runs on a worker thread (``ui/workers.py``) with a progress
bar and Cancel; the window stays usable meanwhile.

A refresh keeps the frames and figures of the last one (``reports/live_report.LiveReport``):
it re-reads only the answers saved since, and recomputes only the analyses they feed.

Keys: F5 refresh (what changed), Shift+F5 read and compute everything again, Ctrl+E export the
workbook, Ctrl+Shift+E export the JSON report, Esc cancel, Ctrl+Tab / Ctrl+Shift+Tab next /
previous tab, Ctrl+W close.
"""

from __future__ import annotations

import html
import json
import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QPersistentModelIndex,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import QColor, QKeySequence, QPalette, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMenu,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QTableView,
    QTabWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from portalreview.analysis import KINDS
from portalreview.analysis.filters import FilterChoices, FrameFilter, filter_choices
from portalreview.domain.catalogs import Catalogs
from portalreview.reports.json_report import read_project_catalogs
from portalreview.reports.live_report import LiveReport, StoredReport, stored_report
from portalreview.reports.xlsx_report import (
    Cell,
    Sheet,
    Table,
    path_text,
    resolve,
    workbook_model,
    write_workbook,
    writing_steps,
)
from portalreview.store.errors import ProjectClosed, StoreError
from portalreview.store.frames import StudyFrames
from portalreview.store.output_files import write_through_temporary
from portalreview.store.project import OutputIsProject, Project, refuse_project_output
from portalreview.store.study_setup import Cancelled, Steps
from portalreview.tasks.common.safe_text import plain_tip
from portalreview.tasks.common.screen import FlowRow, SideBySide, fit_to_screen
from portalreview.tasks.registry import EDITORS
from portalreview.ui.charts import (
    ChartView,
    HeatMapView,
    heat_colour,
    heat_data,
    is_distance_header,
    plot_data,
)
from portalreview.ui.session import follow_saves
from portalreview.ui.tools import bring_forward, only_for_the_pi
from portalreview.ui.workers import Worker, run_in_background, run_with_progress

log = logging.getLogger(__name__)

AUTO_REFRESH_MS = 1500  # after the last saved answer: a burst of saves computes once
SETTINGS_DELAY_MS = 300  # after the last change of a filter or setting
QUICK_RESAMPLES = 200  # the dashboard's default: a quick look
REPORT_RESAMPLES = 1000  # the report's default (portalreview report --resamples)
MAX_TABLE_ROWS = 60  # taller tables scroll inside their own frame
SIZED_ROWS = 1000  # a column is as wide as its header and its widest value in the first rows
SIDE_BY_SIDE_WIDTH = 420  # a table narrower than this has its plot beside it
STEPS = (
    "Reading the answers saved since the last refresh…",
    "Computing the figures their answers changed…",
    "Laying out the tables…",
)
VALUE_ROLE = Qt.ItemDataRole.UserRole  # a cell's value as the report holds it
PATH_ROLE = Qt.ItemDataRole.UserRole + 1  # a figure's JSON path (tuple), None for a label


# --- the names shown for the report's ids ---------------------------------------------------


@dataclass(frozen=True)
class DisplayNames:
    """The names the main window gives the ids the report holds, by the header of the column
    they are in: themes, EPPC codes and error categories as the project's catalogs name them
    (the editors show those), kinds as the main window's tabs do. The report, the workbook
    and the CSV files keep the ids; the dashboard shows the names, the id in the tooltip."""

    by_header: dict[str, dict[str, str]] = field(default_factory=dict)

    def name(self, header: str, value: object) -> str | None:
        """The name of ``value`` in a column headed ``header``; None where it names none."""
        names = self.by_header.get(header)
        return names.get(value) if names is not None and isinstance(value, str) else None


def display_names(catalogs: Catalogs | None) -> DisplayNames:
    """The names of the kinds, and of ``catalogs``' themes, codes and error categories."""
    by_header = {"Kind": {kind: title for kind, (title, _factory) in EDITORS.items()}}
    if catalogs is not None:
        by_header["Theme"] = {theme.id: theme.name for theme in catalogs.themes}
        by_header["Code"] = {code.id: code.name for code in catalogs.eppc_codes}
        by_header["Category"] = {c.id: c.name for c in catalogs.error_categories}
    return DisplayNames(by_header)


# --- computing (no widgets: runs on a worker thread) ------------------------------------------


@dataclass(frozen=True)
class Computed:
    """One computation of the dashboard: the report, and what it was computed on."""

    report: dict[str, Any]
    frames: StudyFrames  # the answers the figures rest on (filtered)
    sheets: list[Sheet]  # the workbook's Summary and kind sheets of ``report``
    choices: FilterChoices  # what the whole study offers to filter on
    choice: FrameFilter
    n_answers: int  # answers the figures rest on
    n_answers_all: int  # answers in the whole study
    computed_at: str  # local time, HH:MM:SS
    recomputed: tuple[str, ...] = ()  # the analyses computed afresh (the others were kept)
    seconds: float = 0.0  # reading and computing
    models: Sheet | None = None  # the Models tab: each model beside the clinicians
    from_cache: tuple[str, ...] = ()  # the analyses taken from the results the project keeps
    left_out: tuple[str, ...] = ()  # ticks no longer offered, left out of ``choice``, in words
    names: DisplayNames = field(default_factory=DisplayNames)  # of the ids in the tables


class _Stopped(Exception):
    """The worker was cancelled between two steps."""


def compute(
    live: LiveReport,
    project: Project,
    choice: FrameFilter,
    seed: int,
    n_resamples: int,
    progress: Callable[[int, int], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> Computed | None:
    """Bring ``live`` up to date (re-read what changed, recompute the analyses it touches) and
    lay the report out as the workbook's sheets; None when cancelled (checked between the
    steps and between the report's analyses)."""

    def step(done: int) -> None:
        if cancelled is not None and cancelled():
            raise _Stopped
        if progress is not None:
            progress(done, len(STEPS))

    try:
        step(0)
        result = live.refresh(
            project,
            seed=seed,
            n_resamples=n_resamples,
            choice=choice,
            before_each=lambda _kind: step(1),  # a cancel stops between two analyses
            keep=False,  # written to the project once shown (Dashboard._keep)
            drop_unoffered=True,  # a tick whose last answer went: left out, not an error
        )
        step(2)
        sheets = workbook_model(result.report)
        catalogs = read_project_catalogs(project)
        models = models_tab(project, result.filtered, seed, n_resamples, catalogs)
        step(3)
    except _Stopped:
        return None
    return Computed(
        result.report,
        result.filtered,
        sheets,
        filter_choices(result.frames),
        result.choice,
        len(result.filtered.answers),
        len(result.frames.answers),
        time.strftime("%H:%M:%S"),
        result.recomputed,
        result.timings.get("total", 0.0),
        models,
        result.from_cache,
        tuple(choice.left_out_of(result.choice)),
        display_names(catalogs),
    )


def models_tab(
    project: Project,
    frames: StudyFrames,
    seed: int,
    n_resamples: int,
    catalogs: Catalogs | None = None,
) -> Sheet:
    """The Models tab: each model pseudo-annotator of ``frames`` beside the clinicians
    (``catalogs``: the project's, read if not given)."""
    from portalreview.analysis.model_eval import evaluate, read_suggestions
    from portalreview.ui.model_quality import model_sheet

    if catalogs is None:
        catalogs = read_project_catalogs(project)
    evaluation = evaluate(
        frames,
        seed=seed,
        n_resamples=n_resamples,
        catalogs=catalogs,
        suggestions=read_suggestions(project),
    )
    return model_sheet(evaluation)


def report_for_export(computed: Computed) -> dict[str, Any]:
    """The report as exported: the one shown, with the filter in ``settings.filters`` when
    the figures rest on a subset of the answers."""
    if not computed.choice.active:
        return computed.report
    settings = {**computed.report["settings"], "filters": computed.choice.as_json()}
    return {**computed.report, "settings": settings}


def export_workbook(
    project: Project,
    out: str | os.PathLike,
    computed: Computed,
    progress: Callable[[int, int], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> Path:
    """Write the workbook of ``computed`` (its report, its filtered answers on the Raw sheets,
    the project's provenance, the filter noted on Summary and Provenance). A cancel raises
    :class:`Cancelled` and leaves no file."""
    from portalreview.store.models import utc_now

    out = Path(out)
    if not out.suffix:
        out = out.with_suffix(".xlsx")
    refuse_project_output(project, out)
    steps = Steps(1, progress, cancelled)  # its total once the sheets tell it
    steps.start()
    sheets = workbook_model(computed.report, computed.frames, project, generated_at=utc_now())
    _note_filter(sheets, computed.choice)
    steps.check()
    steps.total = writing_steps(sheets)  # the model is quick: its raw rows are made as written
    write_workbook(sheets, out, steps)
    steps.finish()
    return out


def _note_filter(sheets: list[Sheet], choice: FrameFilter) -> None:
    """Say on the Summary and Provenance sheets which answers the figures rest on."""
    if not choice.active:
        return
    words = f"Only some answers counted: {choice.describe()}."
    sheets[0].note = f"{sheets[0].note} {words}".strip()
    for sheet in sheets:
        for table in sheet.tables:
            if table.key == "provenance":
                table.rows.append([Cell("Answers filtered (dashboard)"), Cell(choice.describe())])


def export_json(out: str | os.PathLike, computed: Computed) -> Path:
    """Write the JSON report of ``computed`` (through a temporary file: no half file)."""
    out = Path(out)
    if not out.suffix:
        out = out.with_suffix(".json")
    text = json.dumps(report_for_export(computed), indent=2, ensure_ascii=False, allow_nan=False)
    write_through_temporary(out, lambda temporary: temporary.write_text(text + "\n", "utf-8"))
    logging.getLogger(__name__).info("report written: %s (json, from the dashboard)", out)
    return out


# --- showing a table --------------------------------------------------------------------------


def format_cell(value: Any, fmt: str | None) -> str:
    """A cell's text as the workbook's number format shows it ("0.000" = three decimals)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            return ""
        if fmt:
            decimals = len(fmt.partition(".")[2])
            return f"{value:.{decimals}f}"
        return str(value) if isinstance(value, int) else f"{value:.6g}"
    return str(value)


def describe_figure(report: dict[str, Any], path: tuple | None) -> str:
    """A figure cell's tooltip: its JSON key and, for a headline figure, its interval and n."""
    if path is None:
        return ""
    lines = [f"JSON key: {path_text(path)}"]
    figure = None
    if path[-1] == "value":
        figure = resolve(report, path[:-1])
    elif len(path) >= 2 and path[-2] == "ci":
        figure = resolve(report, path[:-2])
    if isinstance(figure, dict) and "n_units" in figure:
        ci = figure.get("ci")
        if ci and None not in ci:
            lines.append(
                f"95% interval {ci[0]:.3f} to {ci[1]:.3f} "
                f"({figure.get('n_resamples', 0)} bootstrap resamples over units)"
            )
        else:
            lines.append("No interval (no resamples, or too few units)")
        lines.append(f"n = {figure['n_units']} units")
    return "\n".join(lines)


class FigureTableModel(QAbstractTableModel):
    """A read-only table of the workbook model; each figure cell keeps its value and JSON
    path (``VALUE_ROLE``, ``PATH_ROLE``). An id the report holds (a theme's, a kind's) is
    shown by its name in ``names``, the id in its tooltip."""

    def __init__(
        self,
        table: Table,
        report: dict[str, Any],
        parent=None,
        names: DisplayNames | None = None,
    ) -> None:
        super().__init__(parent)
        self.table = table
        self.report = report
        self.names = names if names is not None else DisplayNames()
        self._heat = set(range(table.heat[0], table.heat[1] + 1)) if table.heat else set()

    def rowCount(self, parent: QModelIndex | QPersistentModelIndex | None = None) -> int:
        return 0 if parent is not None and parent.isValid() else len(self.table.rows)

    def columnCount(self, parent: QModelIndex | QPersistentModelIndex | None = None) -> int:
        return 0 if parent is not None and parent.isValid() else len(self.table.headers)

    def headerData(self, section: int, orientation, role=Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return self.table.headers[section]
        return None

    def cell(self, row: int, column: int) -> Cell:
        line = self.table.rows[row]
        return line[column] if column < len(line) else Cell(None)

    def name(self, row: int, column: int) -> str | None:
        """The name shown for the cell's id; None where it holds no id named."""
        return self.names.name(self.table.headers[column], self.cell(row, column).value)

    def text(self, row: int, column: int) -> str:
        """The cell's text as shown: an id's name, else the value as the workbook shows it."""
        cell = self.cell(row, column)
        name = self.name(row, column)
        return name if name is not None else format_cell(cell.value, cell.fmt)

    def tooltip(self, row: int, column: int) -> str:
        """A named id's id; a figure's JSON key and, for a headline figure, interval and n."""
        cell = self.cell(row, column)
        lines = [f"{cell.value} (its id in the report)"] if self.name(row, column) else []
        figure = describe_figure(self.report, cell.path)
        return "\n".join([*lines, figure] if figure else lines)

    def data(self, index: QModelIndex | QPersistentModelIndex, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        cell = self.cell(index.row(), index.column())
        if role == Qt.ItemDataRole.DisplayRole:
            return self.text(index.row(), index.column())
        if role == VALUE_ROLE:
            return cell.value
        if role == PATH_ROLE:
            return cell.path
        if role == Qt.ItemDataRole.ToolTipRole:
            return plain_tip(self.tooltip(index.row(), index.column())) or None
        if role == Qt.ItemDataRole.TextAlignmentRole:
            number = isinstance(cell.value, int | float) and not isinstance(cell.value, bool)
            horizontal = Qt.AlignmentFlag.AlignRight if number else Qt.AlignmentFlag.AlignLeft
            return int(horizontal | Qt.AlignmentFlag.AlignVCenter)
        if index.column() in self._heat and isinstance(cell.value, int | float):
            colour = heat_colour(float(cell.value), self.table.heat_range)
            if role == Qt.ItemDataRole.BackgroundRole:
                return colour
            if role == Qt.ItemDataRole.ForegroundRole:
                return QColor("#1a1a1a")
        return None


class FigureTable(QTableView):
    """A read-only view of one table, as wide as its columns and as tall as its rows (up to
    ``MAX_TABLE_ROWS``; taller ones scroll): the page scrolls, not every table."""

    def __init__(
        self, table: Table, report: dict[str, Any], names: DisplayNames | None = None
    ) -> None:
        super().__init__()
        self.table = table
        self.setObjectName(f"table_{table.key}")
        self.setModel(FigureTableModel(table, report, self, names))
        self.setAccessibleName(table.title)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setTabKeyNavigation(False)  # Tab goes on to the next table; arrows move in it
        self.setAlternatingRowColors(True)
        self.setWordWrap(False)
        self.verticalHeader().setVisible(False)
        self.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 8)
        header = self.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setDefaultAlignment(Qt.AlignmentFlag.AlignCenter)
        for column, name in enumerate(table.headers):
            self.setColumnHidden(column, is_distance_header(name))  # Excel's error-bar plumbing
        self._size_columns()
        self.setMaximumWidth(self.content_width())
        self._fit_height()

    def _size_columns(self) -> None:
        """Each column as wide as its header and its widest value among the first
        ``SIZED_ROWS`` rows, 48 to 320 pixels. Qt's resizeColumnsToContents asked the model for
        every role of every cell of up to 1,000 rows, on the window's thread, for each of some
        50 tables: after a big study's refresh the window stood still. Here the values' texts
        are measured, and Qt sizes only the widest of each column (its margins: the style's)."""
        model, metrics = self.model(), self.fontMetrics()
        header = self.horizontalHeader()
        first_rows = range(min(len(self.table.rows), SIZED_ROWS))
        for column in range(len(self.table.headers)):

            def shown_width(row: int, column: int = column) -> int:
                return metrics.horizontalAdvance(model.text(row, column))

            width = header.sectionSizeHint(column)
            if first_rows:
                widest = model.index(max(first_rows, key=shown_width), column)
                width = max(width, self.sizeHintForIndex(widest).width() + int(self.showGrid()))
            self.setColumnWidth(column, min(max(width, 48), 320))

    def content_width(self) -> int:
        """The width that shows every column without a horizontal scroll bar."""
        shown = [c for c in range(len(self.table.headers)) if not self.isColumnHidden(c)]
        columns = sum(self.columnWidth(c) for c in shown)
        scrollbar = (
            self.verticalScrollBar().sizeHint().width()
            if len(self.table.rows) > MAX_TABLE_ROWS
            else 0
        )
        return columns + 2 * self.frameWidth() + scrollbar + 2

    def _fit_height(self) -> None:
        rows = max(1, min(len(self.table.rows), MAX_TABLE_ROWS))
        height = self.horizontalHeader().sizeHint().height()
        height += rows * self.verticalHeader().defaultSectionSize() + 2 * self.frameWidth()
        if self.width() < self.content_width():  # narrower than its columns: a scroll bar
            height += self.horizontalScrollBar().sizeHint().height()
        self.setFixedHeight(height)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._fit_height()


# --- the filter buttons ---------------------------------------------------------------------


class _StayOpenMenu(QMenu):
    """A menu of checkboxes that stays open while several are ticked."""

    def mouseReleaseEvent(self, event) -> None:
        action = self.activeAction()
        if action is not None and action.isEnabled() and action.isCheckable():
            action.trigger()
            return
        super().mouseReleaseEvent(event)


class ChoiceButton(QToolButton):
    """A button with a menu of checkable choices: none ticked = all."""

    changed = Signal()

    def __init__(self, what: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.what = what
        self.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.setAccessibleName(what)
        self.menu_ = _StayOpenMenu(self)
        self.setMenu(self.menu_)
        self._items: list[tuple[str, Any]] = []
        self._chosen: list[Any] = []
        self._rebuild([])

    def set_choices(self, groups: list[tuple[str, list[tuple[str, Any]]]]) -> None:
        """Offer these (label, value) choices, under group headings ("" = none); ticks on
        choices that are still offered stay."""
        offered = [value for _, items in groups for _, value in items]
        self._chosen = [value for value in self._chosen if value in offered]
        self._rebuild(groups)

    def _rebuild(self, groups: list[tuple[str, list[tuple[str, Any]]]]) -> None:
        self.menu_.clear()
        everyone = self.menu_.addAction("All")
        everyone.setCheckable(True)
        everyone.setChecked(not self._chosen)
        everyone.triggered.connect(lambda _=False: self.set_chosen([]))
        self._items = []
        for heading, items in groups:
            if heading:
                self.menu_.addSection(heading)
            for label, value in items:
                action = self.menu_.addAction(label)
                action.setCheckable(True)
                action.setChecked(value in self._chosen)
                action.setData(len(self._items))
                action.toggled.connect(lambda on, v=value: self._toggle(v, on))
                self._items.append((label, value))
        self.setEnabled(bool(self._items))
        self._retitle()

    def _toggle(self, value: Any, on: bool) -> None:
        chosen = [v for v in self._chosen if v != value] + ([value] if on else [])
        order = [v for _, v in self._items]
        self._set(sorted(chosen, key=order.index))

    def chosen(self) -> list[Any]:
        return list(self._chosen)

    def set_chosen(self, values: list[Any]) -> None:
        """Tick exactly ``values`` (those offered)."""
        offered = [v for _, v in self._items]
        self._set([v for v in offered if v in values])

    def _set(self, values: list[Any]) -> None:
        if values == self._chosen:
            self._sync_ticks()
            return
        self._chosen = values
        self._sync_ticks()
        self._retitle()
        self.changed.emit()

    def _sync_ticks(self) -> None:
        for action in self.menu_.actions():
            if not action.isCheckable():
                continue
            index = action.data()
            ticked = not self._chosen if index is None else self._items[index][1] in self._chosen
            action.blockSignals(True)
            action.setChecked(ticked)
            action.blockSignals(False)

    def _retitle(self) -> None:
        labels = [label for label, value in self._items if value in self._chosen]
        if not labels:
            text = f"{self.what}: all"
        elif len(labels) == 1:
            text = f"{self.what}: {labels[0]}"
        else:
            text = f"{self.what}: {len(labels)} of {len(self._items)}"
        self.setText(text)
        # room for the text and the menu arrow, which some styles draw over the text
        self.setMinimumWidth(int(self.fontMetrics().horizontalAdvance(text)) + 36)
        self.setToolTip(plain_tip(", ".join(labels) if labels else f"Every {self.what.lower()}"))


# --- the window -------------------------------------------------------------------------------


class Dashboard(QWidget):
    """A tool window over the main window's project, for the PI."""

    finished = Signal()  # a computation ended: shown, cancelled or failed

    def __init__(self, window) -> None:
        super().__init__(window, Qt.WindowType.Window)
        self.window_ = window
        self.setObjectName("dashboard")
        self.setWindowTitle("Agreement dashboard")
        fit_to_screen(self, 1200, 820)
        self.service = None
        self.computed: Computed | None = None
        self.loading = False
        # Each tab's page is built when first shown (building all nine took 140-270 ms of
        # the window's thread after every refresh); what a page holds, by page, once built.
        self._unbuilt: dict[QScrollArea, tuple[Sheet, dict[str, Any], DisplayNames]] = {}
        self._page_views: dict[QScrollArea, list[tuple[str, Table, FigureTable]]] = {}
        self._page_plots: dict[QScrollArea, list[tuple[str, Table, QWidget]]] = {}
        self._models_page: QScrollArea | None = None
        self._filling = False
        self.live = LiveReport()  # the frames and figures kept between refreshes
        self._worker: Worker | None = None
        self.export_worker: Worker | None = None
        self._generation = 0
        self._again = False  # answers were saved while computing: compute once more
        self._session = None
        self._scroll: dict[str, int] = {}

        layout = QVBoxLayout(self)
        layout.addWidget(self._filter_row())
        layout.addWidget(self._settings_row())
        self.info = QLabel()
        self.info.setObjectName("dashboardInfo")
        self.info.setWordWrap(True)
        self.info.setTextFormat(Qt.TextFormat.RichText)
        layout.addWidget(self.info)
        self.tabs = QTabWidget()
        self.tabs.setObjectName("dashboardTabs")
        self.tabs.setDocumentMode(True)
        self.tabs.currentChanged.connect(self._build_shown)
        layout.addWidget(self.tabs, 1)
        layout.addLayout(self._status_row())
        self._timers()
        self._shortcuts()
        window.windowTitleChanged.connect(self._window_changed)
        if hasattr(window, "study_saved_elsewhere"):  # a server study: anyone's saves
            window.study_saved_elsewhere.connect(self._saved_elsewhere)
        if hasattr(window, "study_written"):  # merges, gold answers, set-up: not the session's
            window.study_written.connect(self._study_written)

    # --- building --------------------------------------------------------------------------

    def _filter_row(self) -> FlowRow:
        self.annotator_button = ChoiceButton("Annotators")
        self.annotator_button.setObjectName("annotatorFilter")
        self.source_button = ChoiceButton("Draft sources")
        self.source_button.setObjectName("sourceFilter")
        self.tag_button = ChoiceButton("Case tags")
        self.tag_button.setObjectName("tagFilter")
        self.clear_button = QPushButton("Show all answers")
        self.clear_button.setToolTip("Remove every filter")
        self.clear_button.clicked.connect(self.clear_filters)
        row = FlowRow()  # on two lines where a large font makes one wider than the screen
        row.add(QLabel("<b>Answers of</b>"), self.annotator_button)
        for button in (self.annotator_button, self.source_button, self.tag_button):
            button.changed.connect(self._settings_changed)
        for widget in (self.source_button, self.tag_button, self.clear_button):
            row.add(widget)
        return row

    def _settings_row(self) -> SideBySide:
        self.resamples = QSpinBox()
        self.resamples.setObjectName("resamples")
        self.resamples.setRange(0, 100_000)
        self.resamples.setSingleStep(100)
        self.resamples.setValue(QUICK_RESAMPLES)
        self.resamples.setAccessibleName("Bootstrap resamples")
        self.resamples.setToolTip("Resamples of the 95% intervals (0: no intervals)")
        self.seed = QSpinBox()
        self.seed.setObjectName("seed")
        self.seed.setRange(0, 2_147_483_647)
        self.seed.setAccessibleName("Bootstrap seed")
        for box in (self.resamples, self.seed):
            box.valueChanged.connect(self._settings_changed)
        self.refresh_button = QPushButton("Refresh")
        self.refresh_button.setToolTip(
            "Bring the figures up to date with the answers saved now (F5); Shift+F5 reads "
            "the whole project again and computes every figure"
        )
        self.refresh_button.clicked.connect(self.refresh)
        self.auto = QCheckBox("Update when answers are saved")
        self.auto.setChecked(True)
        self.export_button = QPushButton("Export workbook…")
        self.export_button.setToolTip("Write these figures as an Excel workbook (Ctrl+E)")
        self.export_button.clicked.connect(self.export_workbook)
        self.json_button = QPushButton("Export JSON…")
        self.json_button.setToolTip("Write these figures as the JSON report (Ctrl+Shift+E)")
        self.json_button.clicked.connect(self.export_json)
        settings = FlowRow()
        settings.add(QLabel("Bootstrap resamples:"), self.resamples)
        settings.add(QLabel("seed:"), self.seed)
        settings.add(self.refresh_button)
        settings.add(self.auto)
        exports = QWidget()
        export_row = QHBoxLayout(exports)
        export_row.setContentsMargins(0, 0, 0, 0)
        export_row.addStretch(1)
        export_row.addWidget(self.export_button)
        export_row.addWidget(self.json_button)
        # the exports on a row of their own where the screen is narrow (1366 x 768 at 150%
        # leaves 911 px: in one row Export JSON… lay past the screen's edge)
        side = SideBySide(
            settings,
            exports,
            widths=lambda: (settings.sizeHint().width(), exports.minimumSizeHint().width()),
        )
        side.box.setStretch(1, 0)  # the settings on one line where they fit
        return side

    def _status_row(self) -> QHBoxLayout:
        self.status = QLabel()
        self.status.setObjectName("dashboardStatus")
        self.status.setTextFormat(Qt.TextFormat.PlainText)  # it names annotators, unit sets
        self.status.setWordWrap(True)  # "Up to date…" with its filters ran past a small screen
        self.progress = QProgressBar()
        self.progress.setRange(0, len(STEPS))
        self.progress.setTextVisible(True)
        self.progress.setMinimumWidth(160)
        self.progress.setVisible(False)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop computing (Esc)")
        self.cancel_button.setVisible(False)
        self.cancel_button.clicked.connect(self.cancel)
        row = QHBoxLayout()
        row.addWidget(self.status, 1)
        row.addWidget(self.progress)
        row.addWidget(self.cancel_button)
        return row

    def _timers(self) -> None:
        self._auto_timer = QTimer(self)
        self._auto_timer.setSingleShot(True)
        self._auto_timer.setInterval(AUTO_REFRESH_MS)
        self._auto_timer.timeout.connect(self._auto_refresh)
        self._settings_timer = QTimer(self)
        self._settings_timer.setSingleShot(True)
        self._settings_timer.setInterval(SETTINGS_DELAY_MS)
        self._settings_timer.timeout.connect(self.refresh)

    def _shortcuts(self) -> None:
        keys = QKeySequence.StandardKey
        QShortcut(QKeySequence(keys.Refresh), self, self.refresh)
        QShortcut(QKeySequence("Shift+F5"), self, self.refresh_everything)
        QShortcut(QKeySequence("Ctrl+E"), self, self.export_workbook)
        QShortcut(QKeySequence("Ctrl+Shift+E"), self, self.export_json)
        QShortcut(QKeySequence(Qt.Key.Key_Escape), self, self.cancel)
        QShortcut(QKeySequence("Ctrl+W"), self, self.close)
        # window-wide: the tab bar alone takes them only from a widget inside its pages
        QShortcut(QKeySequence("Ctrl+Tab"), self, lambda: self._next_tab(1))
        QShortcut(QKeySequence("Ctrl+Shift+Tab"), self, lambda: self._next_tab(-1))
        self._set_export_enabled(False)

    def _next_tab(self, step: int) -> None:
        self.tabs.setCurrentIndex((self.tabs.currentIndex() + step) % self.tabs.count())

    # --- the filter and settings ---------------------------------------------------------

    def choice(self) -> FrameFilter:
        return FrameFilter.of(
            self.annotator_button.chosen(),
            self.source_button.chosen(),
            self.tag_button.chosen(),
        )

    def clear_filters(self) -> None:
        for button in (self.annotator_button, self.source_button, self.tag_button):
            button.set_chosen([])

    def _settings_changed(self) -> None:
        self._settings_timer.start()

    def _offer_choices(self, choices: FilterChoices) -> None:
        for button in (self.annotator_button, self.source_button, self.tag_button):
            button.blockSignals(True)
        self.annotator_button.set_choices([("", [(n, n) for n in choices.annotators])])
        self.source_button.set_choices([("", [(s, s) for s in choices.sources])])
        self.tag_button.set_choices(
            [(key, [(f"{key}={v}", (key, v)) for v in vs]) for key, vs in choices.tags.items()]
        )
        for button in (self.annotator_button, self.source_button, self.tag_button):
            button.blockSignals(False)

    # --- computing ---------------------------------------------------------------------------

    def refresh(self) -> None:
        """Compute the figures again in the background (a newer refresh wins)."""
        self._auto_timer.stop()
        self._settings_timer.stop()
        self._again = False
        service = self.window_.service
        if service is not self.service:
            self.service = service
        self._follow_session()
        if service is None or self.window_.project is None:
            self._show_nothing("No project is open.")
            return
        if service.viewer.role != "pi":
            self._show_nothing("The agreement dashboard is for the principal investigator.")
            return
        if self._worker is not None:
            self._worker.cancel()
        self._generation += 1
        generation = self._generation
        self.loading = True
        if self.computed is None:  # nothing on screen yet: the kept figures meanwhile
            self._show_stored(generation)
        self._show_step(0, len(STEPS))
        self.progress.setVisible(True)
        self.cancel_button.setVisible(True)
        self._worker = run_in_background(
            compute,
            self.live,
            self.window_.project,
            self.choice(),
            self.seed.value(),
            self.resamples.value(),
            on_done=lambda computed: self._computed(generation, computed),
            on_error=lambda message, exc: self._failed(generation, message),
            on_progress=lambda done, total: self._progress(generation, done, total),
        )

    def _show_stored(self, generation: int) -> None:
        """Read in the background the figures the project keeps for these settings
        (``stored_report``) and show them, unless the computation under way came first."""
        run_in_background(
            stored_report,
            self.window_.project,
            seed=self.seed.value(),
            n_resamples=self.resamples.value(),
            choice=self.choice(),
            on_done=lambda stored: self._stored_ready(generation, stored),
            on_error=lambda _message, exc: log.warning("kept figures not shown: %s", exc),
        )

    def _stored_ready(self, generation: int, stored: StoredReport | None) -> None:
        """Show the kept figures until the figures of now replace them. Export stays off: it
        writes the figures computed now."""
        showing_now = self.computed is not None or not self.loading
        if stored is None or generation != self._generation or showing_now:
            return
        people = stored.report["study"]["annotators"]
        n_answers = sum(person["n_answers"] for person in people)
        view = Computed(
            stored.report,
            None,
            workbook_model(stored.report),
            FilterChoices([], [], {}),
            self.choice(),
            n_answers,
            n_answers,
            _local_time(stored.computed_at),
            names=self._editors_names(),
        )
        self._fill_tabs(view)
        self.info.setText(self._stored_html(view, stored.stale))
        self.status.setText("Bringing the kept figures up to date…")

    def _editors_names(self) -> DisplayNames:
        """The names as the main window's editors show them (the kept figures come before
        the computation has read the catalogs); the kinds' alone if they cannot be read."""
        admin = self.window_.admin
        try:
            return display_names(admin.catalogs if admin is not None else None)
        except StoreError as exc:  # (a read refused: the ids are shown meanwhile)
            log.warning("the catalogs' names not read: %s", exc)
            return display_names(None)

    def _stored_html(self, view: Computed, stale: tuple[str, ...]) -> str:
        if stale:
            changed = ", ".join(part for part in stale if part in KINDS) or "the study's counts"
            since = f"Answers were saved since; out of date until the new figures come: {changed}."
        else:
            since = "No answer was saved since."
        answers = f"{view.n_answers:,} submitted answers"
        if view.choice.active:  # the kept figures are the filter's, as the live ones are
            answers += f"; <b>filtered</b>: {_html(view.choice.describe())}"
        return (
            f"<b>Kept figures</b>, computed at <b>{view.computed_at}</b> on "
            f"{answers}. {_html(since)} "
            "<span style='color:gray'>(the figures of now are being computed)</span>"
        )

    def refresh_everything(self) -> None:
        """Forget what was kept: read the whole project and compute every figure again."""
        if self._worker is not None:
            self._worker.cancel()
        self.live = LiveReport()  # a cancelled computation may still hold the old one
        self.refresh()

    def cancel(self) -> None:
        if self._worker is not None:
            self._worker.cancel()

    def _progress(self, generation: int, done: int, total: int) -> None:
        if generation == self._generation:
            self._show_step(done, total)

    def _show_step(self, done: int, total: int) -> None:
        """The step's words in the status line, which has the room (in the bar they were cut
        at its width), and the bar's own "step n of m"."""
        self.status.setText(STEPS[done] if done < len(STEPS) else "Showing…")
        self.progress.setRange(0, total)
        self.progress.setValue(done)
        self.progress.setFormat(f"Step {min(done + 1, total)} of {total}")

    def _failed(self, generation: int, message: str) -> None:
        if generation != self._generation:
            return
        self._finish()
        self._set_export_enabled(False)  # until figures of now are shown
        self.status.setText(
            f"Could not compute the figures: {message}. The figures shown are older ones: "
            "export is off until the figures of now are shown."
        )
        self.finished.emit()

    def _finish(self) -> None:
        self.loading = False
        self._worker = None
        self.progress.setVisible(False)
        self.cancel_button.setVisible(False)

    def _computed(self, generation: int, computed: Computed | None) -> None:
        if generation != self._generation:
            return  # a newer refresh is on its way
        self._finish()
        if computed is None:
            self.status.setText(
                "Cancelled: the figures shown are the previous ones; Refresh (F5) computes "
                "them again."
            )
        else:
            self._offer_choices(computed.choices)  # drops the ticks no longer offered
            self.show_computed(computed)
            self._say_left_out(computed.left_out)
            self._keep()
        self.finished.emit()
        if self._again:
            self._again = False
            self._auto_timer.start()

    def _say_left_out(self, left_out: tuple[str, ...]) -> None:
        """Say which ticks the study no longer offers, left out of the figures' filter."""
        if left_out:
            words = "; ".join(left_out)  # names keep their case: no capital first
            self.status.setText(f"{words}: left out of the filter. {self.status.text()}")

    def _keep(self) -> None:
        """Write the figures just computed to the project, in the background, for the next
        time the dashboard opens (reports/report_cache.py; a failure is only logged)."""
        project = self.window_.project
        if project is not None and not project.read_only:
            run_in_background(
                self.live.keep_pending,
                project,
                on_error=_not_kept,
            )

    def _show_nothing(self, text: str) -> None:
        self._finish()
        self.computed = None
        self._clear_tabs()
        self.info.setText(text)
        self.status.clear()
        self._set_export_enabled(False)

    def _set_export_enabled(self, enabled: bool) -> None:
        self.export_button.setEnabled(enabled)
        self.json_button.setEnabled(enabled)

    # --- following the main window --------------------------------------------------------

    def _window_changed(self, _title: str = "") -> None:
        if self.window_.service is self.service:
            return
        self.cancel()
        self._generation += 1
        self.service = None
        self._show_nothing("Signed out: the figures of the previous session are cleared.")
        if self.window_.service is not None and self.isVisible():
            self.refresh()

    def _follow_session(self) -> None:
        self._session = follow_saves(self._session, self.window_.session, self._answer_saved)

    def _answer_saved(self, _view) -> None:
        if self.auto.isChecked() and self.isVisible():
            self._auto_timer.start()

    def _saved_elsewhere(self, _kind: str) -> None:
        """Someone saved in the server study (LISTEN/NOTIFY): as for a save made here."""
        self._answer_saved(None)

    def _study_written(self) -> None:
        """A tool window (offline copies, adjudication, set-up) wrote to the study: as for a
        save made in the main window."""
        self._answer_saved(None)

    def _auto_refresh(self) -> None:
        """Compute again for newly saved answers; while a computation runs, once it ends (a
        stream of saves on a large study would otherwise cancel every computation)."""
        if self.loading:
            self._again = True
        else:
            self.refresh()

    # --- display ------------------------------------------------------------------------------

    def show_computed(self, computed: Computed) -> None:
        """Show ``computed``: its settings and counts on top, one tab per sheet."""
        self.computed = computed
        self.info.setText(self._info_html(computed))
        self._fill_tabs(computed)
        self._set_export_enabled(True)
        self.status.setText(
            "Up to date. Hover a figure for its JSON key, interval and n; Export writes "
            "exactly these figures."
        )

    def _info_html(self, computed: Computed) -> str:
        settings = computed.report["settings"]
        n = settings["n_resamples"]
        if n == 0:
            bootstrap = "no intervals (0 resamples)"
        else:
            bootstrap = f"95% intervals from {n} bootstrap resamples, seed {settings['seed']}"
        if n < REPORT_RESAMPLES:
            bootstrap += (
                f" — <i>a quick look: the report's default is {REPORT_RESAMPLES} resamples, "
                "so its intervals can differ a little</i>"
            )
        answers = f"<b>{computed.n_answers:,}</b> submitted answers"
        if computed.choice.active:
            answers += (
                f" of {computed.n_answers_all:,}; <b>filtered</b>: "
                f"{_html(computed.choice.describe())}"
            )
        return (
            f"Computed at <b>{computed.computed_at}</b> on {answers}. {bootstrap}. "
            f"{_recomputed_text(computed)}"
        )

    @property
    def views(self) -> list[tuple[str, Table, FigureTable]]:
        """Every figure table of the report's tabs, in tab order (building any not shown
        yet): (sheet name, table, view)."""
        return self._views_of(models=False)

    @property
    def model_views(self) -> list[tuple[str, Table, FigureTable]]:
        """The Models tab's figure tables (built if not shown yet)."""
        return self._views_of(models=True)

    def _views_of(self, models: bool) -> list[tuple[str, Table, FigureTable]]:
        pages = [p for p in self._built_pages() if (p is self._models_page) == models]
        return [view for page in pages for view in self._page_views[page]]

    @property
    def plots(self) -> list[tuple[str, Table, QWidget]]:
        """Every chart and heat map of the tabs, in tab order (building any not shown yet)."""
        return [p for page in self._built_pages() for p in self._page_plots[page]]

    def _built_pages(self) -> list[QScrollArea]:
        pages = [self.tabs.widget(i) for i in range(self.tabs.count())]
        for page in pages:
            self._build(page)
        return [page for page in pages if page in self._page_views]

    def _clear_tabs(self) -> None:
        self._unbuilt.clear()
        self._page_views.clear()
        self._page_plots.clear()
        self._models_page = None
        while self.tabs.count():
            page = self.tabs.widget(0)
            self.tabs.removeTab(0)
            page.deleteLater()

    def _fill_tabs(self, computed: Computed) -> None:
        """One tab per sheet (and the Models tab), each page built when first shown."""
        current = self.tabs.tabText(self.tabs.currentIndex()) if self.tabs.count() else ""
        for i in range(self.tabs.count()):
            page = self.tabs.widget(i)
            if page in self._page_views:  # one never shown keeps the position kept before
                self._scroll[self.tabs.tabText(i)] = page.verticalScrollBar().value()
        self.tabs.setUpdatesEnabled(False)
        self._filling = True
        self._clear_tabs()
        pages = [(sheet, computed.report) for sheet in computed.sheets]
        if computed.models is not None:  # not a sheet of the workbook: its own views
            pages.append((computed.models, {}))
        for sheet, report in pages:
            page = _empty_page(sheet.name)
            self._unbuilt[page] = (sheet, report, computed.names)
            self.tabs.addTab(page, sheet.name)
            self.tabs.setTabToolTip(self.tabs.count() - 1, sheet.title)
            if sheet is computed.models:
                self._models_page = page
        names = [self.tabs.tabText(i) for i in range(self.tabs.count())]
        if current in names:
            self.tabs.setCurrentIndex(names.index(current))
        self._filling = False
        self._build_shown(self.tabs.currentIndex())
        self.tabs.setUpdatesEnabled(True)

    def _build_shown(self, index: int) -> None:
        if not self._filling and index >= 0:
            self._build(self.tabs.widget(index))

    def _build(self, page: QScrollArea) -> None:
        """Build ``page``'s tables and plots if not yet done; put back its scroll position."""
        unbuilt = self._unbuilt.pop(page, None)
        if unbuilt is None:
            return
        sheet, report, names = unbuilt
        views: list[tuple[str, Table, FigureTable]] = []
        plots: list[tuple[str, Table, QWidget]] = []
        page.setWidget(self._page_body(sheet, report, names, views, plots))
        self._page_views[page], self._page_plots[page] = views, plots
        if sheet.name in self._scroll:
            value = self._scroll[sheet.name]
            QTimer.singleShot(0, lambda: page.verticalScrollBar().setValue(value))

    @staticmethod
    def _page_body(
        sheet: Sheet, report: dict[str, Any], names: DisplayNames, views: list, plots: list
    ) -> QWidget:
        """A sheet's title, notes, tables and plots (the ids in them shown by ``names``); its
        views and plots added to the lists."""
        body = QWidget()
        column = QVBoxLayout(body)
        column.setSpacing(4)
        title = QLabel(f"<h2>{_html(sheet.title)}</h2>")
        column.addWidget(title)
        if sheet.note:
            column.addWidget(_note(sheet.note))
        for table in sheet.tables:
            column.addSpacing(10)
            heading = QLabel(f"<b>{_html(table.title)}</b>")
            heading.setWordWrap(True)
            column.addWidget(heading)
            if table.note:
                column.addWidget(_note(table.note))
            if not table.rows:
                column.addWidget(_note("(nothing to show yet)"))
                continue
            view = FigureTable(table, report, names)
            views.append((sheet.name, table, view))
            table_plots = _plots(table, names)
            plots += [(sheet.name, table, plot) for plot in table_plots]
            if table_plots and view.content_width() < SIDE_BY_SIDE_WIDTH:
                row = QHBoxLayout()  # a narrow table (the NDCG curve): its plot beside it
                view.setFixedWidth(view.content_width())
                row.addWidget(view, 0, Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
                for plot in table_plots:
                    row.addWidget(plot, 0, Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
                row.addStretch(1)
                column.addLayout(row)
                continue
            column.addWidget(view)
            for plot in table_plots:
                column.addWidget(plot)
        column.addStretch(1)
        return body

    # --- export ------------------------------------------------------------------------------

    def _default_name(self, suffix: str) -> str:
        project = self.window_.project
        if project is None:
            return f"agreement-report{suffix}"
        return str(project.folder / f"{project.stem}-agreement{suffix}")

    def export_workbook(self) -> None:
        """Ask where, then write the workbook of the figures shown (Ctrl+E)."""
        if not self._can_export():
            return
        path, _ = QFileDialog.getSaveFileName(
            self, "Export the workbook", self._default_name(".xlsx"), "Excel workbook (*.xlsx)"
        )
        if path:
            self.write_workbook_to(Path(path))

    def write_workbook_to(self, path: Path) -> Worker | None:
        """Write the workbook of the figures shown to ``path`` in the background, with a
        progress dialog and Cancel."""
        if not self._can_export() or self._refused_target(path):
            return None
        self.status.setText(f"Writing {path.name}…")
        self.export_worker = run_with_progress(
            self,
            f"Writing {path.name}…",
            export_workbook,
            self.window_.project,
            path,
            self.computed,
            on_done=lambda out: self._exported(out),
            on_error=lambda message, exc: self._export_failed(path, message, exc),
        )
        return self.export_worker

    def export_json(self) -> None:
        """Ask where, then write the JSON report of the figures shown (Ctrl+Shift+E)."""
        if not self._can_export():
            return
        path, _ = QFileDialog.getSaveFileName(
            self, "Export the JSON report", self._default_name(".json"), "JSON report (*.json)"
        )
        if path:
            self.write_json_to(Path(path))

    def write_json_to(self, path: Path) -> Worker | None:
        if not self._can_export() or self._refused_target(path):
            return None
        self.export_worker = run_with_progress(
            self,
            f"Writing {path.name}…",
            export_json,
            path,
            self.computed,
            on_done=lambda out: self._exported(out),
            on_error=lambda message, exc: self._export_failed(path, message, exc),
            cancellable=False,
        )
        return self.export_worker

    def _refused_target(self, path: Path) -> bool:
        """Whether ``path`` is the project's own file (refused, with a message)."""
        try:
            refuse_project_output(self.window_.project, path)
        except OutputIsProject as exc:
            QMessageBox.warning(self, "Export", str(exc))
            return True
        return False

    def _can_export(self) -> bool:
        if self.computed is None or self.window_.project is None:
            QMessageBox.information(
                self, "Export", "There are no figures to export yet: wait for them (F5)."
            )
            return False
        if self.export_worker is not None:
            QMessageBox.information(self, "Export", "An export is already being written.")
            return False
        return True

    def _exported(self, out: Path) -> None:
        self.export_worker = None
        self.status.setText(f"Written: {out}")

    def _export_failed(self, path: Path, message: str, exc: Exception) -> None:
        self.export_worker = None
        if isinstance(exc, Cancelled):
            self.status.setText(f"Export cancelled: {path.name} was not written.")
            return
        self.status.setText(f"Could not write {path.name}.")
        QMessageBox.warning(self, "Export", f"Could not write {path}:\n{message}")

    def closeEvent(self, event) -> None:
        self.cancel()
        self._generation += 1
        self._auto_timer.stop()
        self._settings_timer.stop()
        super().closeEvent(event)


def _empty_page(name: str) -> QScrollArea:
    """A tab's scrolling page, its body added when the tab is first shown."""
    scroll = QScrollArea()
    scroll.setObjectName(f"page_{name}")
    scroll.setWidgetResizable(True)
    scroll.setFrameShape(QFrame.Shape.NoFrame)
    return scroll


def _plots(table: Table, names: DisplayNames) -> list[QWidget]:
    """The chart and the heat map of a table, as the workbook draws them (its ids named)."""
    plots: list[QWidget] = []
    data = plot_data(table, names.name)
    if data is not None:
        chart = ChartView(data)
        chart.setFixedHeight(320 if data.kind == "bar" else 300)
        chart.setMaximumWidth(max(720, 90 * len(data.categories)))
        plots.append(chart)
    heat = heat_data(table, names.name)
    if heat is not None:
        view = HeatMapView(heat)
        view.setMaximumWidth(240 + 150 * len(heat.columns))
        plots.append(view)
    return plots


def _recomputed_text(computed: Computed) -> str:
    """Which figures this refresh computed afresh (the others' answers had not changed)."""
    done = computed.recomputed
    if len(done) == len(KINDS):
        what = "every figure computed"
    elif computed.from_cache and not done:
        what = "every figure as the project kept it: no answer changed since"
    elif computed.from_cache:
        what = (
            f"computed again for the answers saved since the project kept them: "
            f"{', '.join(done)}"
        )
    elif not done:
        what = "no answer changed: nothing computed again"
    else:
        what = f"computed again for the changed answers: {', '.join(done)}"
    return f"<span style='color:gray'>({what} in {computed.seconds:.1f} s)</span>"


def _local_time(utc_iso: str) -> str:
    """A stored UTC time as the local date and time, to the minute."""
    try:
        when = datetime.fromisoformat(utc_iso)
    except ValueError:
        return utc_iso
    return when.astimezone().strftime("%Y-%m-%d %H:%M")


def _note(text: str) -> QLabel:
    label = QLabel(text)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setWordWrap(True)
    label.setForegroundRole(QPalette.ColorRole.PlaceholderText)
    font = label.font()
    font.setItalic(True)
    label.setFont(font)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


def _html(text: str) -> str:
    return html.escape(text)


def _not_kept(_message: str, exc: Exception) -> None:
    """The figures could not be kept (only logged, as applog words an error: they are
    computed again next time); a project closed meanwhile refused them, as it should."""
    if isinstance(exc, ProjectClosed):
        log.info("figures not kept: %s", exc)
    else:
        log.warning("figures not kept: %s", exc)


def open_tool(window) -> Dashboard | None:
    """Tools > Agreement dashboard (PI only): show (or bring forward) the window and compute."""
    if not only_for_the_pi(window, "the agreement dashboard"):
        return None
    dashboard = window.findChild(Dashboard)
    if dashboard is None:
        dashboard = Dashboard(window)
    bring_forward(dashboard)
    dashboard.refresh()
    return dashboard
