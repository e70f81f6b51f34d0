"""The dashboard shows the names the editors show, not the report's ids: themes (Respond and
Match), EPPC codes and error categories as the project's catalogs name them, kinds as the
main window's tabs do, in the tables and on the charts' axes; the id is in the cell's
tooltip, and the value (VALUE_ROLE), the figures' JSON keys and the exports keep the ids."""

from __future__ import annotations

from PySide6.QtCore import Qt
from ui_support import open_window

from portalreview.reports.json_report import read_project_catalogs
from portalreview.store.project import Project
from portalreview.tasks.registry import EDITORS
from portalreview.ui import dashboard as dashboard_module
from portalreview.ui.charts import ChartView
from portalreview.ui.dashboard import VALUE_ROLE, report_for_export

COMPUTE_MS = 60_000


def open_dashboard(qtbot, window):
    board = dashboard_module.open_tool(window)
    qtbot.waitUntil(lambda: board.computed is not None and not board.loading, timeout=COMPUTE_MS)
    return board


def shown_and_ids(board, key: str, column: int) -> list[tuple[str, object, str]]:
    """(text shown, value, tooltip) of each cell of ``column`` in the table ``key``."""
    view = next(v for _, t, v in board.views if t.key == key)
    model = view.model()
    cells = [model.index(row, column) for row in range(model.rowCount())]
    tip = Qt.ItemDataRole.ToolTipRole
    return [(model.data(i), model.data(i, VALUE_ROLE), model.data(i, tip) or "") for i in cells]


def test_the_dashboard_names_themes_codes_categories_and_kinds(qtbot, demo_copy, prefs):
    with Project.open(demo_copy, read_only=True) as project:
        catalogs = read_project_catalogs(project)
    themes = {t.id: t.name for t in catalogs.themes}
    codes = {c.id: c.name for c in catalogs.eppc_codes}
    categories = {c.id: c.name for c in catalogs.error_categories}
    kinds = {kind: title for kind, (title, _factory) in EDITORS.items()}
    window = open_window(qtbot, prefs, demo_copy, "dr_pi")
    board = open_dashboard(qtbot, window)
    named = [
        ("respond_theme_proportions", 0, themes),
        ("respond_theme_agreement", 0, themes),
        ("match_per_theme", 1, themes),
        ("match_per_theme_recall", 1, themes),
        ("eppc_kappa_per_code", 0, codes),
        ("facts_error_categories", 1, {**categories, "(not categorised)": "(not categorised)"}),
        ("summary_figures", 0, kinds),
        ("summary_kinds", 0, kinds),
    ]
    for key, column, names in named:
        cells = shown_and_ids(board, key, column)
        assert cells, key
        for text, value, tip in cells:
            assert text == names[value], (key, value, text)
            if text != value:
                assert value in tip, (key, value, tip)  # the id, for the report and exports
    shares = next(p for _, t, p in board.plots if t.key == "respond_theme_proportions")
    assert isinstance(shares, ChartView)
    proportions = board.computed.report["respond"]["theme_proportions"]
    assert shares.data.categories == [themes[row["theme"]] for row in proportions]
    exported = report_for_export(board.computed)["respond"]["theme_proportions"]
    assert [row["theme"] for row in exported] == [row["theme"] for row in proportions]
    assert all(row["theme"] in themes for row in exported)  # the ids, as before
    window.close()
