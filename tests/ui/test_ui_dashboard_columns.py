"""The dashboard's tables size their columns by measuring their values' texts: Qt's
resizeColumnsToContents asked the model for every role of every cell of up to 1,000 rows of
each of some 50 tables, on the window's thread, and on a 10,000-case study the window stood
still after every refresh. The widths stay Qt's own."""

from __future__ import annotations

from PySide6.QtWidgets import QTableView

from portalreview.reports.xlsx_report import INT, NUM, Cell, Table
from portalreview.ui import dashboard
from portalreview.ui.dashboard import FigureTable


def _table(n_rows: int, long_name_at: int | None = None) -> Table:
    rows = [
        [Cell(f"ann_{i % 4}"), Cell(i / 7, ("x", i), NUM), Cell(i, None, INT), Cell(i % 3 == 0)]
        for i in range(n_rows)
    ]
    if long_name_at is not None:
        rows[long_name_at][0] = Cell("an annotator with a much longer name")
    return Table("t", "A table", ["Annotator", "Value", "n", "Kept"], rows)


def test_a_tall_table_asks_the_model_for_no_more_cells_than_a_short_one(qtbot, monkeypatch):
    asked: list[tuple[int, int]] = []

    class CountedModel(dashboard.FigureTableModel):
        def data(self, index, role=dashboard.Qt.ItemDataRole.DisplayRole):
            asked.append((index.row(), index.column()))
            return super().data(index, role)

    monkeypatch.setattr(dashboard, "FigureTableModel", CountedModel)

    def cells_asked(n_rows: int) -> int:
        asked.clear()
        view = FigureTable(_table(n_rows), {})
        qtbot.addWidget(view)
        return len(set(asked))

    assert cells_asked(2000) == cells_asked(20)


def test_the_columns_are_as_wide_as_qt_makes_them(qtbot):
    for table in (_table(300, long_name_at=250), _table(3)):
        view = FigureTable(table, {})
        qtbot.addWidget(view)
        widths = [view.columnWidth(c) for c in range(len(table.headers))]
        QTableView.resizeColumnsToContents(view)  # Qt's own sizing, as before
        qt = [min(max(view.columnWidth(c), 48), 320) for c in range(len(table.headers))]
        assert widths == qt
    long = view.fontMetrics().horizontalAdvance("an annotator with a much longer name")
    assert FigureTable(_table(300, long_name_at=250), {}).columnWidth(0) > long
