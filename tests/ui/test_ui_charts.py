"""The dashboard's plots: the data each one takes from a table of the workbook model (worked by
hand here), the colour scale, the axis ticks, and what the widgets paint where."""

from __future__ import annotations

import math

import pytest
from PySide6.QtCore import QPoint
from PySide6.QtGui import QColor, QFontMetricsF

from portalreview.reports.xlsx_report import Cell, Chart, Table
from portalreview.ui.charts import (
    HEAT_HIGH,
    HEAT_LOW,
    HEAT_MID,
    SERIES_COLOURS,
    ChartView,
    HeatMapView,
    heat_colour,
    heat_data,
    nice_ticks,
    plot_data,
    value_range,
)


def _row(*values) -> list[Cell]:
    return [Cell(v) for v in values]


def _bars_with_distances() -> Table:
    """Two sources, each a value with its interval, then the workbook's error-bar columns
    (distances from the value), as ``_error_columns`` makes them."""
    return Table(
        "t",
        "Win rate per source",
        ["Source", "WR", "WR low", "WR high", "n", "error bar -", "error bar +"],
        [
            _row("a", 0.6, 0.5, 0.8, 10, 0.1, 0.2),  # 0.6 - 0.1 = 0.5, 0.6 + 0.2 = 0.8
            _row("b", 0.25, None, None, 3, None, None),  # no interval
        ],
        chart=Chart("bar", "Win rate", 0, [1], y_title="win rate", errors=[(5, 6)], y_min=0),
    )


def test_bar_data_from_error_bar_distances():
    data = plot_data(_bars_with_distances())
    assert data.kind == "bar" and data.title == "Win rate" and data.y_title == "win rate"
    assert data.categories == ["a", "b"]
    (series,) = data.series
    assert series.name == "WR" and series.values == [0.6, 0.25]
    assert series.lows == [pytest.approx(0.5), None]
    assert series.highs == [pytest.approx(0.8), None]


def test_bar_data_from_interval_columns_and_chart_rows():
    """``errors`` naming the interval's own columns (their ends, not distances); only the
    first ``chart_rows`` rows are drawn; text in a number column is no value."""
    table = Table(
        "t",
        "Shares",
        ["Theme", "Share", "Share low", "Share high"],
        [_row("x", 0.4, 0.3, 0.55), _row("y", "n/a", None, None), _row("z", 0.9, 0.8, 1.0)],
        chart=Chart("bar", "Shares", 0, [1], errors=[(2, 3)]),
        chart_rows=2,
    )
    data = plot_data(table)
    assert data.categories == ["x", "y"]
    assert data.series[0].values == [0.4, None]
    assert data.series[0].lows == [0.3, None] and data.series[0].highs == [0.55, None]


def test_line_data_has_one_series_per_column_and_no_chart_means_none():
    table = Table(
        "t",
        "Kappa per batch",
        ["Batch", "a vs b", "a vs c"],
        [_row("b1", 0.5, None), _row("b2", 0.7, 0.6)],
        chart=Chart("line", "Kappa", 0, [1, 2], x_title="batch"),
    )
    data = plot_data(table)
    assert [s.name for s in data.series] == ["a vs b", "a vs c"]
    assert [s.values for s in data.series] == [[0.5, 0.7], [None, 0.6]]
    assert data.series[0].lows is None and data.x_title == "batch"
    assert plot_data(Table("t", "no chart", ["a"], [_row(1)])) is None
    assert plot_data(Table("t", "empty", ["a"], [], chart=Chart("bar", "x", 0, [0]))) is None


def test_heat_data_is_the_coloured_block():
    table = Table(
        "t",
        "Win rates",
        ["Source \\ opponent", "a", "b"],
        [_row("a", None, 0.7), _row("b", 0.3, None)],
        heat=(1, 2),
    )
    data = heat_data(table)
    assert data.rows == ["a", "b"] and data.columns == ["a", "b"]
    assert data.values == [[None, 0.7], [0.3, None]]
    assert data.scale == (0.0, 0.5, 1.0)
    one_column = Table("t", "x", ["Theme", "alpha"], [_row("t", 0.2)], heat=(1, 1))
    assert heat_data(one_column) is None  # coloured in the table itself


def test_heat_colour_scale():
    scale = (0.0, 0.5, 1.0)
    assert heat_colour(0.0, scale) == QColor(HEAT_LOW)
    assert heat_colour(0.5, scale) == QColor(HEAT_MID)
    assert heat_colour(1.0, scale) == QColor(HEAT_HIGH)
    assert heat_colour(-3.0, scale) == QColor(HEAT_LOW)  # clamped
    assert heat_colour(7.0, scale) == QColor(HEAT_HIGH)
    assert heat_colour(None, scale) is None
    # halfway from yellow FFEB84 (255, 235, 132) to green 63BE7B (99, 190, 123):
    # (255 + 99) / 2 = 177, (235 + 190) / 2 = 212.5 -> 212 (round half to even), 127.5 -> 128
    assert heat_colour(0.75, scale).getRgb()[:3] == (177, 212, 128)


def test_ticks_and_value_range():
    assert nice_ticks(0.0, 1.0) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert nice_ticks(-1.0, 1.0) == [-1.0, -0.5, 0.0, 0.5, 1.0]
    assert nice_ticks(0.0, 30.0) == [0, 10, 20, 30]
    data = plot_data(_bars_with_distances())
    assert value_range(data) == (0.0, pytest.approx(0.8))  # y_min 0, the highest interval end
    negative = Table(
        "t",
        "k",
        ["Batch", "kappa"],
        [_row("b1", -0.2), _row("b2", 0.9)],
        chart=Chart("line", "k", 0, [1], y_min=0, y_max=1),
    )
    assert value_range(plot_data(negative)) == (-0.2, 1)  # widened to show -0.2


def test_a_bar_chart_paints_its_bars_and_tells_their_values(qtbot):
    view = ChartView(plot_data(_bars_with_distances()))
    qtbot.addWidget(view)
    view.resize(600, 320)
    image = view.grab().toImage()
    assert len(view._hits) == 2  # one hover area per bar
    (bar_a, text_a), (bar_b, text_b) = view._hits
    assert "a — WR: 0.600" in text_a and "0.500 to 0.800" in text_a
    assert "b — WR: 0.250" in text_b and "interval" not in text_b
    assert bar_a.height() > 2 * bar_b.height()  # 0.6 against 0.25
    # a pixel inside bar b (no error bar over it) has the series' colour
    inside = bar_b.center().toPoint()
    assert image.pixelColor(inside) == QColor(SERIES_COLOURS[0])


def test_a_heat_map_paints_each_value_in_its_colour(qtbot):
    table = Table(
        "t",
        "Win rates",
        ["Source \\ opponent", "a", "b"],
        [_row("a", None, 0.7), _row("b", 0.3, None)],
        heat=(1, 2),
    )
    view = HeatMapView(heat_data(table))
    qtbot.addWidget(view)
    view.resize(500, view.height())
    image = view.grab().toImage()
    texts = [text for _, text in view._hits]
    assert texts == ["a — b: 0.700", "b — a: 0.300"]  # undefined cells are not values
    for rect, value in zip([r for r, _ in view._hits], [0.7, 0.3], strict=True):
        probe = QPoint(int(rect.left()) + 4, int(rect.top()) + 4)  # inside, off the text
        assert image.pixelColor(probe) == heat_colour(value, (0.0, 0.5, 1.0))


def test_the_categories_are_named_where_a_namer_names_them():
    """The dashboard names the report's ids (a theme's) on the axes; a value it does not name
    is shown as it is."""
    names = {"empathy": "Empathetic communication"}

    def name(header: str, value: object) -> str | None:
        return names.get(value) if header == "Source" else None

    assert plot_data(_bars_with_distances(), name).categories == ["a", "b"]
    table = _bars_with_distances()
    table.rows[0][0] = Cell("empathy")
    assert plot_data(table, name).categories == ["Empathetic communication", "b"]
    heat = Table("t", "h", ["Source", "x", "y"], [_row("empathy", 1, 0)], heat=(1, 2))
    assert heat_data(heat, name).rows == ["Empathetic communication"]


def test_a_long_first_label_slanted_under_the_axis_stays_on_the_chart(qtbot):
    """A slanted label runs left from under its bar: a theme's name ran off the chart's left
    edge ("…pathetic communic…")."""
    themes = ["Empathetic communication", "Symptom-related follow-up questions", "Other"] * 3
    table = Table(
        "t",
        "Share",
        ["Theme", "Share"],
        [_row(theme, 0.5) for theme in themes],
        chart=Chart("bar", "Share of responses including each theme", 0, [1]),
    )
    view = ChartView(plot_data(table))
    qtbot.addWidget(view)
    view.resize(720, 320)
    view.grab()
    first_bar = view._hits[0][0]
    metrics = QFontMetricsF(view.font())
    reach = min(metrics.horizontalAdvance(themes[0]), 150) * math.cos(math.radians(30))
    assert first_bar.center().x() - reach >= 0
