"""The PI's agreement dashboard on the demo study, driven as the PI would: every figure shown
equals the JSON report's at its key (the report built separately, from the file); a saved
answer updates the figures; a filter shows the filtered report; cancel keeps what was shown;
the exported workbook holds exactly the figures shown; the plots show the tables' numbers; a
clinician has no dashboard."""

from __future__ import annotations

import json
import math
import os
import shutil
import sqlite3
import threading
from pathlib import Path

import pytest
from openpyxl import load_workbook
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog, QMessageBox
from ui_support import open_window, show_kind, wait_saved

from portalreview.analysis.filters import filter_frames
from portalreview.demo import build_demo
from portalreview.reports.json_report import build_report
from portalreview.reports.live_report import StoredReport
from portalreview.reports.xlsx_report import path_text, resolve, workbook_model
from portalreview.store.frames import read_frames
from portalreview.store.project import Project
from portalreview.store.service import StudyService
from portalreview.ui import dashboard as dashboard_module
from portalreview.ui import workers
from portalreview.ui.charts import ChartView, HeatMapView
from portalreview.ui.dashboard import (
    PATH_ROLE,
    QUICK_RESAMPLES,
    VALUE_ROLE,
    Dashboard,
    FigureTable,
)
from portalreview.ui.tools import TOOLS
from tests.reports.test_live_report import _flag_one_answer

PI = "dr_pi"
COMPUTE_MS = 60_000


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    return build_demo(tmp_path_factory.mktemp("dashboard") / "demo.prproj")


@pytest.fixture
def demo(built, tmp_path) -> Path:
    """A fresh copy of the demo study for one test (tests change it)."""
    return Path(shutil.copy(built, tmp_path / built.name))


def open_dashboard(qtbot, window) -> Dashboard:
    """Ctrl+D in the main window, as the PI presses it; wait for the first figures."""
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=5000)
    qtbot.keyClick(window, Qt.Key.Key_D, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: window.findChild(Dashboard) is not None, timeout=5000)
    dashboard = window.findChild(Dashboard)
    wait_computed(qtbot, dashboard)
    return dashboard


def wait_computed(qtbot, dashboard: Dashboard) -> None:
    qtbot.waitUntil(
        lambda: dashboard.computed is not None and not dashboard.loading, timeout=COMPUTE_MS
    )


def expected_report(path: Path, **choice) -> dict:
    """The JSON report of the file, read on a connection of its own (as the CLI does); with
    a filter, its figures on the answers kept and ``study`` the whole project's."""
    with Project.open(path, read_only=True) as project:
        whole = build_report(project, seed=0, n_resamples=QUICK_RESAMPLES)
        if not choice:
            return whole
        frames = filter_frames(read_frames(project), **choice)
        report = build_report(project, seed=0, n_resamples=QUICK_RESAMPLES, frames=frames)
        return {**report, "study": whole["study"]}


def shown_figures(dashboard: Dashboard) -> list[tuple[str, str, int, int, object, tuple]]:
    """Every figure cell on screen: (sheet, table key, row, column, value, JSON path)."""
    out = []
    for sheet, table, view in dashboard.views:
        model = view.model()
        for row in range(model.rowCount()):
            for column in range(model.columnCount()):
                index = model.index(row, column)
                path = model.data(index, PATH_ROLE)
                if path is not None:
                    out.append((sheet, table.key, row, column, model.data(index, VALUE_ROLE), path))
    return out


def assert_figures_are(dashboard: Dashboard, report: dict) -> int:
    figures = shown_figures(dashboard)
    for sheet, key, row, column, value, path in figures:
        assert value == resolve(report, path), (sheet, key, row, column, path_text(path))
    return len(figures)


def submitted_answers(path: Path) -> int:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT count(*) FROM answers WHERE status = 'submitted'").fetchone()[0]
    finally:
        conn.close()


def cell_of(dashboard: Dashboard, key: str, label: str, column: int):
    """The value shown in table ``key``, in the row whose first cell is ``label``."""
    view = next(v for _, t, v in dashboard.views if t.key == key)
    model = view.model()
    for row in range(model.rowCount()):
        if model.data(model.index(row, 0), VALUE_ROLE) == label:
            return model.data(model.index(row, column), VALUE_ROLE)
    raise AssertionError(f"no row {label!r} in {key}")


def tick(button, value) -> None:
    """Tick one choice in a filter button's menu, as a click on it does."""
    for action in button.menu_.actions():
        if action.data() is not None and button._items[action.data()][1] == value:
            action.trigger()
            return
    raise AssertionError(f"{button.what} offers no {value!r}")


# --- what is shown ---------------------------------------------------------------------------


def test_every_figure_shown_is_the_reports(qtbot, demo, prefs):
    window = open_window(qtbot, prefs, demo, PI)
    tool = next(t for t in TOOLS if t.target.endswith("dashboard:open_tool"))
    action = next(a for a in window.tools_menu.actions() if a.text() == tool.title)
    assert action.isEnabled() and action.shortcut().toString() == "Ctrl+D"
    dashboard = open_dashboard(qtbot, window)

    report = expected_report(demo)
    checked = assert_figures_are(dashboard, report)
    assert checked > 1500
    # every table of the workbook's Summary and kind sheets is on screen, in its tab
    sheets = workbook_model(report)
    assert [dashboard.tabs.tabText(i) for i in range(dashboard.tabs.count())] == [
        *(s.name for s in sheets),
        "Models",  # beside them: each model pseudo-annotator (ui/model_quality.py)
    ]
    assert [(s, t.key) for s, t, _ in dashboard.views] == [
        (s.name, t.key) for s in sheets for t in s.tables if t.rows
    ]
    # the text shown is the value, rounded as the workbook's format says
    for _, table, view in dashboard.views:
        model = view.model()
        for row, cells in enumerate(table.rows):
            for column, cell in enumerate(cells):
                text = model.data(model.index(row, column))
                if isinstance(cell.value, float) and cell.fmt == "0.000":
                    assert abs(float(text) - cell.value) <= 0.0005 + 1e-12  # half the last digit
                    assert len(text.split(".")[1]) == 3
    # each headline figure tells its n and interval
    headline = next(v for _, t, v in dashboard.views if t.key == "summary_figures")
    value = headline.model().index(0, 3)
    path = headline.model().data(value, PATH_ROLE)
    figure = resolve(report, path[:-1])
    tip = headline.model().data(value, Qt.ItemDataRole.ToolTipRole)
    assert f"n = {figure['n_units']} units" in tip and path_text(path) in tip
    assert f"{figure['ci'][0]:.3f} to {figure['ci'][1]:.3f}" in tip
    # how many answers, and that the intervals are a quick look
    info = dashboard.info.text()
    assert f"<b>{submitted_answers(demo):,}</b> submitted answers" in info
    assert f"{QUICK_RESAMPLES} bootstrap resamples" in info and "quick look" in info


def test_a_clinician_has_no_dashboard_and_signing_out_clears_it(qtbot, demo, prefs, monkeypatch):
    told = []
    monkeypatch.setattr(QMessageBox, "information", staticmethod(lambda *a, **k: told.append(a[2])))
    window = open_window(qtbot, prefs, demo, "nurse_ava")
    tool = next(t for t in TOOLS if t.target.endswith("dashboard:open_tool"))
    action = next(a for a in window.tools_menu.actions() if a.text() == tool.title)
    assert not action.isEnabled()
    assert dashboard_module.open_tool(window) is None
    assert "principal investigator" in told[0]
    assert window.findChild(Dashboard) is None
    window.close_project()

    window.open_project(demo, annotator=PI)
    qtbot.waitUntil(lambda: window.session is not None, timeout=20000)
    dashboard = open_dashboard(qtbot, window)
    assert dashboard.views
    window.close_project()  # signing out
    assert dashboard.computed is None and not dashboard.views and dashboard.tabs.count() == 0
    assert "Signed out" in dashboard.info.text()
    assert not dashboard.export_button.isEnabled()


def test_a_saved_answer_updates_the_figures(qtbot, demo, prefs):
    with Project.open(demo) as project:
        svc = StudyService(project)
        pi = next(a.id for a in svc.annotators() if a.name == PI)
        ava = next(a.id for a in svc.annotators() if a.name == "nurse_ava")
        unit = svc.queue("urgency", annotator_id=ava)[0].unit_id
        svc.assign(unit, pi)  # the PI answers one urgency pair too
    window = open_window(qtbot, prefs, demo, PI)
    dashboard = open_dashboard(qtbot, window)
    before = cell_of(dashboard, "summary_kinds", "urgency", 2)
    people_before = cell_of(dashboard, "summary_annotators", PI, 2)

    show_kind(window, "urgency")
    editor = window.editors["urgency"]
    editor.setFocus()
    qtbot.keyClick(editor, Qt.Key.Key_1)  # the left patient needs care first
    wait_saved(qtbot, window)
    window.act_submit.trigger()
    # the dashboard computes again by itself once the answer is saved
    qtbot.waitUntil(
        lambda: (
            not dashboard.loading
            and cell_of(dashboard, "summary_kinds", "urgency", 2) == before + 1
        ),
        timeout=COMPUTE_MS,
    )
    assert cell_of(dashboard, "summary_annotators", PI, 2) == people_before + 1
    assert assert_figures_are(dashboard, expected_report(demo)) > 1500
    # Only the urgency analysis was computed again: the other kinds' answers did not change.
    assert dashboard.computed.recomputed == ("urgency",)
    assert "computed again for the changed answers: urgency" in dashboard.info.text()


def test_a_dashboard_opened_again_shows_the_kept_figures_at_once(qtbot, demo, prefs, monkeypatch):
    """The figures computed before (kept in the project, reports/report_cache.py) are shown
    as soon as the dashboard opens, said to be kept and what is out of date; the computation
    that follows replaces them, computing only the analyses whose answers changed."""
    window = open_window(qtbot, prefs, demo, PI)
    kept = open_dashboard(qtbot, window).computed.report

    def rows_kept() -> int:
        with sqlite3.connect(demo) as conn:
            return conn.execute("SELECT count(*) FROM report_cache").fetchone()[0]

    qtbot.waitUntil(lambda: rows_kept() == 8, timeout=COMPUTE_MS)  # written once shown
    window.close_project()
    with Project.open(demo) as project:  # a rank answer saved since, elsewhere
        _flag_one_answer(project, "rank")
    release = threading.Event()
    compute = dashboard_module.compute

    def held_compute(*args, **kwargs):  # the computation waits until the test has looked
        release.wait(COMPUTE_MS / 1000)
        return compute(*args, **kwargs)

    monkeypatch.setattr(dashboard_module, "compute", held_compute)
    window.open_project(demo, annotator=PI)
    qtbot.waitUntil(lambda: window.session is not None, timeout=20000)
    dashboard = window.findChild(Dashboard)
    dashboard.refresh()
    assert dashboard.loading and dashboard.computed is None
    # read in the background, shown while the computation has not come back
    qtbot.waitUntil(lambda: "Kept figures" in dashboard.info.text(), timeout=COMPUTE_MS)
    assert dashboard.loading and dashboard.computed is None
    assert assert_figures_are(dashboard, kept) > 1500
    info = dashboard.info.text()
    assert "Kept figures" in info and "out of date until the new figures come: rank" in info
    assert not dashboard.export_button.isEnabled()
    release.set()
    wait_computed(qtbot, dashboard)
    assert assert_figures_are(dashboard, expected_report(demo)) > 1500
    # kept figures read late (after the computation came back) are not shown over them
    late = StoredReport(kept, ("study", "rank"), "2026-01-01T00:00:00+00:00")
    dashboard._stored_ready(dashboard._generation, late)
    assert "Kept figures" not in dashboard.info.text()
    assert assert_figures_are(dashboard, expected_report(demo)) > 1500
    # rank computed again, the rest taken from the project (the window's own refresh on
    # signing in may have computed rank first: then nothing is left to compute)
    assert "rank" not in dashboard.computed.from_cache
    assert dashboard.computed.recomputed in (("rank",), ())


def only_ava(qtbot, dashboard) -> None:
    """Tick nurse_ava alone in the annotator filter and wait for the filtered figures."""
    whole = dashboard.computed
    tick(dashboard.annotator_button, "nurse_ava")
    qtbot.waitUntil(
        lambda: dashboard.computed is not whole and not dashboard.loading, timeout=COMPUTE_MS
    )


def test_kept_figures_of_a_filter_say_so(qtbot, demo, prefs, monkeypatch):
    """Reopened with a filter ticked, the kept figures (the filter's) say they are filtered,
    as the live ones do."""
    window = open_window(qtbot, prefs, demo, PI)
    dashboard = open_dashboard(qtbot, window)
    only_ava(qtbot, dashboard)

    def kept_rows() -> int:
        with sqlite3.connect(demo) as conn:
            return conn.execute("SELECT count(*) FROM report_cache").fetchone()[0]

    qtbot.waitUntil(lambda: kept_rows() >= 16, timeout=COMPUTE_MS)  # the filter's kept too
    window.close_project()
    release = threading.Event()
    compute = dashboard_module.compute

    def held_compute(*args, **kwargs):
        release.wait(COMPUTE_MS / 1000)
        return compute(*args, **kwargs)

    monkeypatch.setattr(dashboard_module, "compute", held_compute)
    window.open_project(demo, annotator=PI)
    qtbot.waitUntil(lambda: window.session is not None, timeout=20000)
    dashboard.refresh()
    qtbot.waitUntil(lambda: "Kept figures" in dashboard.info.text(), timeout=COMPUTE_MS)
    info = dashboard.info.text()
    release.set()
    assert "filtered" in info and "nurse_ava" in info
    wait_computed(qtbot, dashboard)
    dashboard.clear_filters()
    window.close()


def test_ctrl_tab_changes_tabs_from_anywhere_in_the_window(qtbot, demo, prefs):
    window = open_window(qtbot, prefs, demo, PI)
    dashboard = open_dashboard(qtbot, window)
    dashboard.activateWindow()
    qtbot.waitUntil(dashboard.isActiveWindow, timeout=5000)
    dashboard.export_button.setFocus()  # a button above the tabs, where it opens
    qtbot.keyClick(dashboard.export_button, Qt.Key.Key_Tab, Qt.KeyboardModifier.ControlModifier)
    assert dashboard.tabs.currentIndex() == 1
    qtbot.keyClick(
        dashboard.export_button,
        Qt.Key.Key_Backtab,
        Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier,
    )
    assert dashboard.tabs.currentIndex() == 0
    inside = dashboard.tabs.currentWidget()
    inside.setFocus()  # from inside a page too, one tab a press (not two)
    qtbot.keyClick(inside, Qt.Key.Key_Tab, Qt.KeyboardModifier.ControlModifier)
    assert dashboard.tabs.currentIndex() == 1
    window.close()


def _built_tables(dashboard: Dashboard) -> list[int | None]:
    """How many figure tables each tab's page holds now (None: its page not built)."""
    pages = [dashboard.tabs.widget(i) for i in range(dashboard.tabs.count())]
    return [
        None if page.widget() is None else len(page.widget().findChildren(FigureTable))
        for page in pages
    ]


def test_a_tab_is_built_when_first_shown_and_keeps_its_place(qtbot, demo, prefs):
    """A refresh builds the tab in view only (building all nine held the window up to a
    quarter of a second on a large study); another tab is built when it is shown, and a
    page scrolled down opens where it was, even after refreshes that did not build it."""
    window = open_window(qtbot, prefs, demo, PI)
    dashboard = open_dashboard(qtbot, window)
    built = _built_tables(dashboard)
    assert built[0] > 0 and built[1:] == [None] * (len(built) - 1)

    dashboard.tabs.setCurrentIndex(2)
    qtbot.waitUntil(lambda: _built_tables(dashboard)[2] is not None, timeout=2000)
    assert _built_tables(dashboard)[2] > 0
    page = dashboard.tabs.widget(2)
    name = dashboard.tabs.tabText(2)
    qtbot.waitUntil(lambda: page.verticalScrollBar().maximum() > 200, timeout=5000)
    page.verticalScrollBar().setValue(200)

    dashboard.tabs.setCurrentIndex(0)
    dashboard.show_computed(dashboard.computed)  # as a refresh shows its figures
    dashboard.show_computed(dashboard.computed)  # one more, the page not built in between
    assert _built_tables(dashboard)[2] is None
    dashboard.tabs.setCurrentIndex(2)
    page = dashboard.tabs.widget(2)
    assert dashboard.tabs.tabText(2) == name and _built_tables(dashboard)[2] > 0
    qtbot.waitUntil(lambda: page.verticalScrollBar().value() == 200, timeout=5000)
    # every figure of every tab is still the report's (the views build what is not shown)
    assert assert_figures_are(dashboard, expected_report(demo)) > 1500
    window.close()


def test_a_filter_shows_the_filtered_reports_figures(qtbot, demo, prefs):
    window = open_window(qtbot, prefs, demo, PI)
    dashboard = open_dashboard(qtbot, window)
    whole = dashboard.computed
    tick(dashboard.annotator_button, "nurse_ava")
    tick(dashboard.annotator_button, "dr_ben")
    tick(dashboard.tag_button, ("topic", "new_symptom"))
    assert dashboard.annotator_button.text() == "Annotators: 2 of 3"
    qtbot.waitUntil(
        lambda: dashboard.computed is not whole and not dashboard.loading, timeout=COMPUTE_MS
    )
    choice = {"annotators": ["dr_ben", "nurse_ava"], "tags": {"topic": ["new_symptom"]}}
    filtered = expected_report(demo, **choice)
    assert filtered != expected_report(demo)
    assert assert_figures_are(dashboard, filtered) > 500
    agreement = filtered["urgency"]["agreement"]
    assert 0 < agreement["n_answers"] < expected_report(demo)["urgency"]["agreement"]["n_answers"]
    assert cell_of(dashboard, "urgency_agreement", "people", 3) == agreement["n_answers"]
    assert "filtered" in dashboard.info.text() and "topic=new_symptom" in dashboard.info.text()

    shown = dashboard.computed
    _flag_one_answer(window.project, "match")  # saved while the filter is on
    dashboard.clear_filters()
    qtbot.waitUntil(
        lambda: dashboard.computed is not shown and not dashboard.loading, timeout=COMPUTE_MS
    )
    assert assert_figures_are(dashboard, expected_report(demo)) > 1500


def _one_answer_of_dr_new(path: Path) -> tuple[int, object, int]:
    """dr_new submits the same urgency answer as someone else: (unit, payload, dr_new's id)."""
    with Project.open(path) as project:
        service = StudyService(project)
        answers = read_frames(project).answers
        row = answers[(answers.kind == "urgency") & ~answers.is_gold.astype(bool)].iloc[0]
        someone = next(a for a in service.annotators() if a.name == row.annotator)
        view = service.get_answer(int(row.unit_id), someone.id)
        new = service.add_annotator("dr_new")
        service.assign(view.unit_id, new)
        service.save_answer(view.unit_id, view.payload, status="submitted", annotator_id=new)
    return view.unit_id, view.payload, new


def test_a_tick_whose_last_answer_went_is_left_out_of_the_filter(qtbot, demo, prefs):
    """Filtered to dr_new, whose only answer then goes back to a draft: the refresh leaves
    dr_new out of the filter and says so. It failed ("unknown annotator(s) 'dr_new'") at
    every refresh, the old figures staying on screen and exportable."""
    unit_id, payload, new = _one_answer_of_dr_new(demo)
    window = open_window(qtbot, prefs, demo, PI)
    dashboard = open_dashboard(qtbot, window)
    whole = dashboard.computed
    tick(dashboard.annotator_button, "dr_new")
    qtbot.waitUntil(
        lambda: dashboard.computed is not whole and not dashboard.loading, timeout=COMPUTE_MS
    )
    shown = dashboard.computed
    StudyService(window.project).save_answer(unit_id, payload, status="draft", annotator_id=new)
    dashboard.refresh()
    wait_computed(qtbot, dashboard)
    assert dashboard.computed is not shown and not dashboard.computed.choice.active
    assert "dr_new has no submitted answer any more: left out of the filter" in (
        dashboard.status.text()
    )
    assert dashboard.annotator_button.text() == "Annotators: all"
    assert dashboard.export_button.isEnabled()
    assert assert_figures_are(dashboard, expected_report(demo)) > 1500


def test_a_failed_refresh_turns_export_off(qtbot, demo, prefs, monkeypatch):
    """The figures shown are no longer those of now: export is off until they are."""
    window = open_window(qtbot, prefs, demo, PI)
    dashboard = open_dashboard(qtbot, window)
    assert dashboard.export_button.isEnabled()
    compute = dashboard_module.compute

    def failing(*_args, **_kwargs):
        raise ValueError("the study cannot be read")

    monkeypatch.setattr(dashboard_module, "compute", failing)
    dashboard.refresh()
    qtbot.waitUntil(lambda: not dashboard.loading, timeout=COMPUTE_MS)
    assert "Could not compute the figures: the study cannot be read" in dashboard.status.text()
    assert not dashboard.export_button.isEnabled() and not dashboard.json_button.isEnabled()
    monkeypatch.setattr(dashboard_module, "compute", compute)
    shown = dashboard.computed
    dashboard.refresh()
    qtbot.waitUntil(
        lambda: dashboard.computed is not shown and not dashboard.loading, timeout=COMPUTE_MS
    )
    assert dashboard.export_button.isEnabled() and dashboard.json_button.isEnabled()


def test_cancel_keeps_the_figures_shown(qtbot, demo, prefs):
    window = open_window(qtbot, prefs, demo, PI)
    dashboard = open_dashboard(qtbot, window)
    shown, views = dashboard.computed, list(dashboard.views)
    # Shift+F5: everything read and computed again (F5 with no answer saved is done at once).
    qtbot.keyClick(dashboard, Qt.Key.Key_F5, Qt.KeyboardModifier.ShiftModifier)
    assert dashboard.loading and dashboard.cancel_button.isVisible()
    qtbot.mouseClick(dashboard.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not dashboard.loading, timeout=COMPUTE_MS)
    assert "Cancelled" in dashboard.status.text()
    assert dashboard.computed is shown and dashboard.views == views
    assert not dashboard.progress.isVisible()


# --- export ----------------------------------------------------------------------------------


def _table_starts(ws, sheet) -> dict[str, int]:
    """Each table's title -> the row of its first data row in the worksheet."""
    titles = {t.title: t for t in sheet.tables}
    found = {}
    for row_no, cell in enumerate(ws["A"], start=1):
        if cell.value in titles and cell.value not in found:
            table = titles[cell.value]
            header = row_no + (2 if table.note else 1)
            assert [c.value for c in ws[header]][: len(table.headers)] == table.headers
            found[cell.value] = header + 1
    return found


def _same(got, want) -> bool:
    """Equal, floats to the 16 significant digits an .xlsx file keeps."""
    if isinstance(want, float) and isinstance(got, int | float):
        return math.isclose(got, want, rel_tol=1e-15, abs_tol=0)
    return got == want


def test_the_exported_workbook_holds_the_figures_shown(qtbot, demo, prefs, tmp_path, monkeypatch):
    window = open_window(qtbot, prefs, demo, PI)
    dashboard = open_dashboard(qtbot, window)
    only_ava(qtbot, dashboard)
    out = tmp_path / "shown.xlsx"
    monkeypatch.setattr(
        QFileDialog, "getSaveFileName", staticmethod(lambda *a, **k: (str(out), ""))
    )
    qtbot.mouseClick(dashboard.export_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dashboard.export_worker is None, timeout=COMPUTE_MS)
    assert out.exists() and dashboard.status.text() == f"Written: {out}"

    book = load_workbook(out)
    checked = 0
    by_sheet: dict[str, list] = {}
    for sheet_name, table, view in dashboard.views:
        by_sheet.setdefault(sheet_name, []).append((table, view))
    for sheet in dashboard.computed.sheets:
        starts = _table_starts(book[sheet.name], sheet)
        for table, view in by_sheet.get(sheet.name, []):
            model = view.model()
            for row in range(model.rowCount()):
                for column in range(model.columnCount()):
                    index = model.index(row, column)
                    if model.data(index, PATH_ROLE) is None:
                        continue
                    got = book[sheet.name].cell(starts[table.title] + row, column + 1).value
                    want = model.data(index, VALUE_ROLE)
                    assert _same(got, want), (sheet.name, table.key, row, column, got, want)
                    checked += 1
    assert checked == len(shown_figures(dashboard)) > 500
    # the workbook says which answers it rests on, and its raw answers are those
    assert "annotators nurse_ava" in book["Summary"]["A2"].value
    provenance = {r[0]: r[1] for r in book["Provenance"].iter_rows(values_only=True) if r[0]}
    assert provenance["Answers filtered (dashboard)"] == "annotators nurse_ava"
    raw = book["Raw urgency"]
    header = [c.value for c in raw[2]]
    who = {r[header.index("Annotator")] for r in raw.iter_rows(min_row=3, values_only=True)}
    assert "nurse_ava" in who and who <= {"nurse_ava", PI}
    # while the Summary's counts are the whole project's (docs/report.md), as in the JSON
    summary = [r[0] for r in book["Summary"].iter_rows(values_only=True)]
    assert {"dr_ben", "np_chloe", "nurse_ava", PI} <= set(summary)

    # the JSON report of the same figures, with the filter in its settings
    out_json = tmp_path / "shown.json"
    monkeypatch.setattr(
        QFileDialog, "getSaveFileName", staticmethod(lambda *a, **k: (str(out_json), ""))
    )
    qtbot.mouseClick(dashboard.json_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dashboard.export_worker is None, timeout=COMPUTE_MS)
    written = json.loads(out_json.read_text(encoding="utf-8"))
    filters = written["settings"].pop("filters")
    assert filters == {"annotators": ["nurse_ava"], "sources": [], "tags": {}}
    assert written == expected_report(demo, annotators=["nurse_ava"])


def test_a_cancelled_export_leaves_no_file(qtbot, demo, prefs, tmp_path):
    window = open_window(qtbot, prefs, demo, PI)
    dashboard = open_dashboard(qtbot, window)
    out = tmp_path / "cancelled.xlsx"
    worker = dashboard.write_workbook_to(out)
    worker.cancel()
    qtbot.waitUntil(lambda: dashboard.export_worker is None, timeout=COMPUTE_MS)
    assert dashboard.status.text() == "Export cancelled: cancelled.xlsx was not written."
    assert not out.exists() and not list(tmp_path.glob("*.tmp"))


def test_an_export_over_the_project_file_is_refused(qtbot, demo, prefs, monkeypatch):
    window = open_window(qtbot, prefs, demo, PI)
    dashboard = open_dashboard(qtbot, window)
    warnings = []
    monkeypatch.setattr(QMessageBox, "warning", staticmethod(lambda *a, **k: warnings.append(a[2])))
    # the figures just shown are written to the project in the background (Dashboard._keep)
    qtbot.waitUntil(lambda: not workers._running, timeout=COMPUTE_MS)
    before = demo.read_bytes()
    assert dashboard.write_workbook_to(demo) is None
    assert dashboard.write_json_to(demo) is None
    assert len(warnings) == 2 and "would write over the project file" in warnings[0]
    assert demo.read_bytes() == before and dashboard.export_worker is None


def test_an_export_open_in_excel_says_to_close_it(qtbot, demo, prefs, tmp_path, monkeypatch):
    """On Windows a workbook or report open in Excel cannot be written over: the message names
    it and says to close it, not "...xlsx.tmp: access is denied"."""
    window = open_window(qtbot, prefs, demo, PI)
    dashboard = open_dashboard(qtbot, window)
    warnings = []
    monkeypatch.setattr(QMessageBox, "warning", staticmethod(lambda *a, **k: warnings.append(a[2])))
    rename = os.replace

    def open_in_excel(source, target) -> None:
        if os.path.exists(target):  # Windows' refusal, naming the temporary file first
            raise PermissionError(13, "Access is denied", str(source), 5, str(target))
        rename(source, target)

    for out, write in ((tmp_path / "shown.xlsx", dashboard.write_workbook_to),
                       (tmp_path / "shown.json", dashboard.write_json_to)):  # fmt: skip
        out.write_text("what Excel shows")
        monkeypatch.setattr(os, "replace", open_in_excel)
        write(out)
        qtbot.waitUntil(lambda: dashboard.export_worker is None, timeout=COMPUTE_MS)
        assert warnings.pop() == (
            f"Could not write {out}:\n{out} cannot be written over (access is denied): it may "
            "be open in another program, such as Excel. Close it there and try again."
        )
        assert dashboard.status.text() == f"Could not write {out.name}."
        assert out.read_text() == "what Excel shows" and not list(tmp_path.glob("*.tmp"))


# --- plots -----------------------------------------------------------------------------------


def test_the_plots_show_the_tables_numbers(qtbot, demo, prefs):
    window = open_window(qtbot, prefs, demo, PI)
    dashboard = open_dashboard(qtbot, window)
    report = expected_report(demo)
    plots = {(t.key, type(p)): p for _, t, p in dashboard.plots}

    # the win-rate heat map: row source against column source, as the report's pairs say
    heat = plots[("rank_win_rates", HeatMapView)].data
    sources = report["rank"]["sources"]
    assert heat.rows == sources and heat.columns == sources
    for pair in report["rank"]["win_rates"]:
        i, j = sources.index(pair["source"]), sources.index(pair["opponent"])
        assert heat.values[i][j] == pair["win_rate"]["value"]
    assert all(heat.values[i][i] is None for i in range(len(sources)))

    # bars with their intervals: average win rate per source, and Edit-F1 per draft source
    bars = plots[("rank_by_source", ChartView)].data
    by_source = report["rank"]["by_source"]
    assert bars.categories == [s["source"] for s in by_source]
    series = bars.series[0]
    for k, source in enumerate(by_source):
        figure = source["average_win_rate"]
        assert series.values[k] == figure["value"]
        assert series.lows[k] == pytest.approx(figure["ci"][0], abs=1e-12)
        assert series.highs[k] == pytest.approx(figure["ci"][1], abs=1e-12)
    shares = plots[("respond_theme_proportions", ChartView)].data.series[0]
    for k, row in enumerate(report["respond"]["theme_proportions"]):
        assert shares.values[k] == row["share"]["value"]
        assert [shares.lows[k], shares.highs[k]] == pytest.approx(row["share"]["ci"], abs=1e-12)
    edit_f1 = plots[("match_by_source", ChartView)].data
    for k, row in enumerate(report["match"]["by_source"]):
        assert edit_f1.series[0].values[k] == row["content"]["f1"]["value"]

    # the NDCG curve: its values at k = 10 and 30 are the report's pooled figures
    curve = plots[("urgency_ndcg_curve_1", ChartView)].data
    assert curve.kind == "line" and curve.categories[:3] == ["1", "2", "3"]
    pooled = report["urgency"]["inboxes"][0]["all"]
    for k in (10, 30):
        assert curve.series[0].values[k - 1] == pytest.approx(pooled[f"ndcg@{k}"]["value"], 1e-12)
        assert curve.series[1].values[k - 1] == pytest.approx(pooled[f"t_ndcg@{k}"]["value"], 1e-12)
    # kappa per batch: one line per pair of annotators
    batches = plots[("eppc_kappa_per_batch", ChartView)].data
    pairs = [f"{k['annotator_a']} vs {k['annotator_b']}" for k in report["eppc"]["kappa"]]
    assert [s.name for s in batches.series] == pairs
    first = report["eppc"]["kappa"][0]["per_batch"][0]
    assert batches.series[0].values[0] == first["kappa"]
