"""Plots the dashboard draws with QPainter: bar charts with interval error bars, line charts
and heat maps (PySide6-Essentials has no QtCharts, and the app needs only these three).

Each plot shows one table of the report's workbook model (``reports/xlsx_report.py``): the
table's :class:`~portalreview.reports.xlsx_report.Chart` says which columns are the categories,
the series and their intervals, and ``Table.heat`` which block is a heat map, exactly as the
Excel workbook draws them. :func:`plot_data` and :func:`heat_data` turn a table into plain data
(no widgets; the tests check them against the table's cells), the widgets only paint it.
Hovering a bar, point or cell shows its exact value.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFontMetricsF, QHelpEvent, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from portalreview.reports.xlsx_report import Table
from portalreview.tasks.common.safe_text import plain_tip

#: Colours of the series (Okabe-Ito: told apart with the common colour-vision deficiencies).
SERIES_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442")
#: The heat map's scale, as the workbook's conditional format: red, yellow, green.
HEAT_LOW, HEAT_MID, HEAT_HIGH = "#F8696B", "#FFEB84", "#63BE7B"
#: Columns the workbook adds for Excel's error bars (distances to the interval's ends).
DISTANCE_ENDINGS = ("err -", "err +", "error bar -", "error bar +")
SLANTED_MOST = 150  # pixels of a slanted category label; a longer one is cut with "…"
#: The name shown for a label's value in a column (by the column's header), None for the value
#: itself: the dashboard's names of the report's ids (a theme's, a kind's).
Namer = Callable[[str, object], str | None]


def is_distance_header(name: str) -> bool:
    """True for the workbook's error-bar columns ("err -", "Recall err +"...): distances from
    a value to its interval's ends, which Excel's error bars need and a reader does not."""
    return name.endswith(DISTANCE_ENDINGS)


# --- the data a plot shows (no widgets) ------------------------------------------------------


@dataclass(frozen=True)
class Series:
    name: str
    values: list[float | None]
    lows: list[float | None] | None = None  # the interval of each value, when drawn
    highs: list[float | None] | None = None


@dataclass(frozen=True)
class PlotData:
    kind: str  # "bar" or "line"
    title: str
    categories: list[str]
    series: list[Series]
    y_title: str = ""
    x_title: str = ""
    y_min: float | None = None
    y_max: float | None = None
    stacked: bool = False  # bars stacked to 100%


@dataclass(frozen=True)
class HeatData:
    title: str
    rows: list[str]
    columns: list[str]
    values: list[list[float | None]]
    scale: tuple[float, float, float]  # the values coloured red, yellow and green


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _label(value: object, header: str = "", name: Namer | None = None) -> str:
    named = name(header, value) if name is not None else None
    if named is not None:
        return named
    return "" if value is None else str(value)


def _interval(table: Table, row: list, value: float | None, columns: tuple[int, int]):
    """The (low, high) ends of a value's interval from the chart's ``errors`` columns: the
    interval's ends themselves, or (the workbook's error-bar columns) distances from the
    value."""
    low, high = (_number(row[c].value) for c in columns)
    if any(is_distance_header(table.headers[c]) for c in columns):
        if value is None:
            return None, None
        return (None if low is None else value - low), (None if high is None else value + high)
    return low, high


def plot_data(table: Table, name: Namer | None = None) -> PlotData | None:
    """The bar or line chart of ``table`` (None when it has none, or no rows); its categories
    named by ``name`` where it names them."""
    spec = table.chart
    if spec is None or not table.rows:
        return None
    rows = table.rows[: table.chart_rows] if table.chart_rows else table.rows
    series = []
    for k, column in enumerate(spec.series):
        values = [_number(row[column].value) for row in rows]
        errors = spec.errors[k] if k < len(spec.errors) else None
        lows = highs = None
        if errors is not None:
            ends = [_interval(table, row, v, errors) for row, v in zip(rows, values, strict=True)]
            lows, highs = [e[0] for e in ends], [e[1] for e in ends]
        series.append(Series(table.headers[column], values, lows, highs))
    return PlotData(
        spec.kind,
        spec.title,
        [_label(row[spec.categories].value, table.headers[spec.categories], name) for row in rows],
        series,
        spec.y_title,
        spec.x_title,
        spec.y_min,
        spec.y_max,
        spec.stacked,
    )


def heat_data(table: Table, name: Namer | None = None) -> HeatData | None:
    """The heat map of ``table``'s coloured block, rows labelled by the first column (named by
    ``name`` where it names them; None when the table has no block of two columns or more: a
    single column is coloured in the table itself)."""
    if table.heat is None or not table.rows:
        return None
    first, last = table.heat
    if last <= first:
        return None
    return HeatData(
        table.title,
        [_label(row[0].value, table.headers[0], name) for row in table.rows],
        table.headers[first : last + 1],
        [[_number(c.value) for c in row[first : last + 1]] for row in table.rows],
        table.heat_range,
    )


def heat_colour(value: float | None, scale: tuple[float, float, float]) -> QColor | None:
    """The colour of ``value`` on the three-colour scale (clamped to its ends); None for no
    value."""
    if value is None:
        return None
    low, mid, high = scale
    if value <= mid:
        a, b, t = QColor(HEAT_LOW), QColor(HEAT_MID), _fraction(value, low, mid)
    else:
        a, b, t = QColor(HEAT_MID), QColor(HEAT_HIGH), _fraction(value, mid, high)
    return QColor(
        round(a.red() + (b.red() - a.red()) * t),
        round(a.green() + (b.green() - a.green()) * t),
        round(a.blue() + (b.blue() - a.blue()) * t),
    )


def _fraction(value: float, start: float, end: float) -> float:
    if end <= start:
        return 1.0
    return min(max((value - start) / (end - start), 0.0), 1.0)


def nice_ticks(low: float, high: float, most: int = 6) -> list[float]:
    """Round tick values covering [low, high] (steps of 1, 2 or 5 times a power of ten)."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return [low]
    raw = (high - low) / max(most - 1, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    start = math.floor(low / step + 1e-9) * step
    ticks, value = [], start
    while value <= high + step * 1e-9:
        ticks.append(round(value, 12))
        value += step
    return ticks


def value_range(data: PlotData) -> tuple[float, float]:
    """The y axis: the chart's own bounds, widened to show every value and interval end."""
    if data.stacked:
        return 0.0, 1.0
    seen = [
        v
        for s in data.series
        for part in (s.values, s.lows or [], s.highs or [])
        for v in part
        if v is not None
    ]
    low = min([*seen, data.y_min if data.y_min is not None else math.inf, 0.0])
    high = max([*seen, data.y_max if data.y_max is not None else -math.inf])
    if not math.isfinite(high) or high <= low:
        high = low + 1.0
    return low, high


def _fmt(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


# --- widgets ---------------------------------------------------------------------------------


class _Plot(QWidget):
    """What the plots share: palette-aware colours, a title, hover tooltips."""

    MARGIN = 8

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMinimumSize(360, 240)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self._hits: list[tuple[QRectF, str]] = []  # hover areas, filled while painting

    def sizeHint(self) -> QSize:
        return QSize(640, 300)

    def _ink(self) -> QColor:
        return self.palette().windowText().color()

    def _faint(self) -> QColor:
        colour = QColor(self._ink())
        colour.setAlphaF(0.18)
        return colour

    def _paper(self) -> QColor:
        return self.palette().base().color()

    def event(self, event) -> bool:
        if event.type() == event.Type.ToolTip and isinstance(event, QHelpEvent):
            pos = QPointF(event.pos())
            text = next((t for rect, t in reversed(self._hits) if rect.contains(pos)), "")
            if text:
                QToolTip.showText(event.globalPos(), plain_tip(text), self)
            else:
                QToolTip.hideText()
                event.ignore()
            return True
        return super().event(event)

    def _title(self, painter: QPainter, title: str) -> float:
        """Draw the title at the top; the height it took."""
        font = painter.font()
        font.setBold(True)
        painter.setFont(font)
        metrics = QFontMetricsF(font)
        painter.setPen(self._ink())
        box = QRectF(self.MARGIN, self.MARGIN, self.width() - 2 * self.MARGIN, metrics.height())
        painter.drawText(
            box,
            Qt.AlignmentFlag.AlignCenter,
            metrics.elidedText(title, Qt.TextElideMode.ElideRight, box.width()),
        )
        font.setBold(False)
        painter.setFont(font)
        return metrics.height() + self.MARGIN + 4


class ChartView(_Plot):
    """A bar chart (with interval error bars, or stacked to 100%) or a line chart."""

    def __init__(self, data: PlotData | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.data: PlotData | None = None
        self.setObjectName("chartView")
        self.set_data(data)

    def set_data(self, data: PlotData | None) -> None:
        self.data = data
        title = data.title if data else ""
        self.setAccessibleName(f"Chart: {title}")
        self.setAccessibleDescription("A drawing of the table above it: the same figures")
        self.setToolTip("")
        self.update()

    def paintEvent(self, _event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.fillRect(self.rect(), self._paper())
        self._hits = []
        data = self.data
        if data is None or not data.categories:
            painter.setPen(self._ink())
            painter.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, "(nothing to plot yet)")
            return
        top = self._title(painter, data.title)
        top += self._legend(painter, data, top)
        plot = self._plot_area(painter, data, top)
        low, high = value_range(data)
        ticks = nice_ticks(low, high)
        low, high = min(low, ticks[0]), max(high, ticks[-1])

        def y_of(value: float) -> float:
            return plot.bottom() - (value - low) / (high - low) * plot.height()

        self._axes(painter, data, plot, ticks, y_of)
        if data.kind == "line":
            self._lines(painter, data, plot, y_of)
        elif data.stacked:
            self._stacked(painter, data, plot, y_of)
        else:
            self._bars(painter, data, plot, y_of, low)
        painter.end()

    # layout

    def _legend(self, painter: QPainter, data: PlotData, top: float) -> float:
        if len(data.series) < 2:
            return 0.0
        metrics = QFontMetricsF(painter.font())
        x = self.MARGIN + 4.0
        for k, series in enumerate(data.series):
            box = QRectF(x, top + 3, 10, 10)
            painter.fillRect(box, QColor(SERIES_COLOURS[k % len(SERIES_COLOURS)]))
            painter.setPen(self._ink())
            painter.drawText(QPointF(x + 14, top + 3 + metrics.ascent() - 1), series.name)
            x += 14 + metrics.horizontalAdvance(series.name) + 16
        return metrics.height() + 6

    def _label_slant(self, data: PlotData, metrics: QFontMetricsF, width: float) -> bool:
        slot = width / max(len(data.categories), 1)
        shown = self._shown_labels(data)
        return any(metrics.horizontalAdvance(data.categories[i]) > slot * 0.95 for i in shown)

    def _shown_labels(self, data: PlotData) -> list[int]:
        n = len(data.categories)
        every = 5 if data.kind == "line" and n > 12 else 1
        return [i for i in range(n) if i % every == 0 or (every > 1 and i == n - 1)]

    def _plot_area(self, painter: QPainter, data: PlotData, top: float) -> QRectF:
        metrics = QFontMetricsF(painter.font())
        left = self.MARGIN + metrics.horizontalAdvance("-0.00") + 10
        if data.y_title:
            left += metrics.height() + 2
        width = self.width() - left - self.MARGIN - 6
        bottom_space = metrics.height() + 8
        if self._label_slant(data, metrics, width):
            longest = max(metrics.horizontalAdvance(c) for c in data.categories)
            bottom_space = min(longest, SLANTED_MOST) * 0.5 + metrics.height() + 8
            # the first label runs left from under its bar: the plot moves right to keep it
            # on the widget (a theme's name ran off its left edge)
            n = len(data.categories)
            reach = min(metrics.horizontalAdvance(data.categories[0]), SLANTED_MOST) * 0.87
            overhang = reach - width / n / 2 - (left - self.MARGIN)
            if overhang > 0:
                shift = overhang / (1 - 1 / (2 * n))  # (the bars narrow as the plot does)
                left, width = left + shift, width - shift
        if data.x_title:
            bottom_space += metrics.height() + 2
        height = self.height() - top - bottom_space - self.MARGIN
        return QRectF(left, top + 4, max(width, 10), max(height, 10))

    def _axes(self, painter, data: PlotData, plot: QRectF, ticks, y_of) -> None:
        metrics = QFontMetricsF(painter.font())
        for tick in ticks:
            y = y_of(tick)
            painter.setPen(QPen(self._faint(), 1))
            painter.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y))
            painter.setPen(self._ink())
            text = f"{tick:g}" if abs(tick) >= 1 or tick == 0 else f"{tick:.2f}".rstrip("0")
            box = QRectF(self.MARGIN, y - metrics.height() / 2, plot.left() - self.MARGIN - 5, 20)
            painter.drawText(box, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop, text)
        painter.setPen(QPen(self._ink(), 1))
        painter.drawLine(plot.bottomLeft(), plot.bottomRight())
        painter.drawLine(plot.bottomLeft(), plot.topLeft())
        if data.y_title:
            painter.save()
            painter.translate(self.MARGIN + metrics.ascent(), plot.center().y())
            painter.rotate(-90)
            painter.drawText(
                QRectF(-plot.height() / 2, -metrics.ascent(), plot.height(), metrics.height()),
                Qt.AlignmentFlag.AlignCenter,
                data.y_title,
            )
            painter.restore()
        self._category_labels(painter, data, plot, metrics)

    def _category_labels(self, painter, data: PlotData, plot: QRectF, metrics) -> None:
        n = len(data.categories)
        slot = plot.width() / n
        slant = self._label_slant(data, metrics, plot.width())
        painter.setPen(self._ink())
        for i in self._shown_labels(data):
            text = data.categories[i]
            x = plot.left() + slot * (i + 0.5)
            if slant:
                text = metrics.elidedText(text, Qt.TextElideMode.ElideRight, SLANTED_MOST)
                painter.save()
                painter.translate(x, plot.bottom() + 6)
                painter.rotate(-30)
                width = metrics.horizontalAdvance(text)
                painter.drawText(QPointF(-width, metrics.ascent()), text)
                painter.restore()
            else:
                box = QRectF(x - slot / 2, plot.bottom() + 4, slot, metrics.height())
                painter.drawText(box, Qt.AlignmentFlag.AlignHCenter, text)
        if data.x_title:
            box = QRectF(
                plot.left(),
                self.height() - self.MARGIN - metrics.height(),
                plot.width(),
                metrics.height(),
            )
            painter.drawText(box, Qt.AlignmentFlag.AlignCenter, data.x_title)

    # marks

    def _bars(self, painter, data: PlotData, plot: QRectF, y_of, low: float) -> None:
        n, m = len(data.categories), len(data.series)
        slot = plot.width() / n
        width = min(slot * 0.7 / m, 80)
        base = y_of(max(low, 0.0))
        for k, series in enumerate(data.series):
            colour = QColor(SERIES_COLOURS[k % len(SERIES_COLOURS)])
            for i, value in enumerate(series.values):
                x = plot.left() + slot * i + (slot - width * m) / 2 + width * k
                if value is None:
                    continue
                top = y_of(value)
                bar = QRectF(x, min(top, base), width, abs(base - top))
                painter.fillRect(bar, colour)
                low_i = series.lows[i] if series.lows else None
                high_i = series.highs[i] if series.highs else None
                if low_i is not None and high_i is not None:
                    self._error_bar(painter, x + width / 2, y_of(low_i), y_of(high_i))
                text = f"{data.categories[i]} — {series.name}: {_fmt(value)}"
                if low_i is not None and high_i is not None:
                    text += f"  (95% interval {_fmt(low_i)} to {_fmt(high_i)})"
                self._hits.append((bar.adjusted(-2, -6, 2, 6), text))

    def _error_bar(self, painter, x: float, y_low: float, y_high: float) -> None:
        painter.setPen(QPen(self._ink(), 1.4))
        painter.drawLine(QPointF(x, y_low), QPointF(x, y_high))
        for y in (y_low, y_high):
            painter.drawLine(QPointF(x - 5, y), QPointF(x + 5, y))

    def _stacked(self, painter, data: PlotData, plot: QRectF, y_of) -> None:
        n = len(data.categories)
        slot = plot.width() / n
        width = min(slot * 0.6, 90)
        for i in range(n):
            parts = [s.values[i] or 0.0 for s in data.series]
            total = sum(parts)
            if total <= 0:
                continue
            x = plot.left() + slot * i + (slot - width) / 2
            start = 0.0
            for k, part in enumerate(parts):
                share = part / total
                rect = QRectF(x, y_of(start + share), width, y_of(start) - y_of(start + share))
                painter.fillRect(rect, QColor(SERIES_COLOURS[k % len(SERIES_COLOURS)]))
                name = data.series[k].name
                self._hits.append((rect, f"{data.categories[i]} — {name}: {_fmt(part)}"))
                start += share

    def _lines(self, painter, data: PlotData, plot: QRectF, y_of) -> None:
        n = len(data.categories)
        slot = plot.width() / n
        for k, series in enumerate(data.series):
            colour = QColor(SERIES_COLOURS[k % len(SERIES_COLOURS)])
            painter.setPen(QPen(colour, 2))
            previous = None
            for i, value in enumerate(series.values):
                if value is None:
                    previous = None
                    continue
                point = QPointF(plot.left() + slot * (i + 0.5), y_of(value))
                if previous is not None:
                    painter.drawLine(previous, point)
                previous = point
            painter.setBrush(colour)
            for i, value in enumerate(series.values):
                if value is None:
                    continue
                point = QPointF(plot.left() + slot * (i + 0.5), y_of(value))
                painter.drawEllipse(point, 3, 3)
                text = f"{data.categories[i]} — {series.name}: {_fmt(value)}"
                self._hits.append((QRectF(point.x() - 6, point.y() - 6, 12, 12), text))
            painter.setBrush(Qt.BrushStyle.NoBrush)


class HeatMapView(_Plot):
    """A matrix of values coloured red (low) to yellow to green (high), each cell labelled."""

    CELL_HEIGHT = 30

    def __init__(self, data: HeatData | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.data: HeatData | None = None
        self.setObjectName("heatMapView")
        self.set_data(data)

    def set_data(self, data: HeatData | None) -> None:
        self.data = data
        self.setAccessibleName(f"Heat map: {data.title if data else ''}")
        self.setAccessibleDescription("A drawing of the table above it: the same figures")
        rows = len(data.rows) if data else 1
        self.setFixedHeight(int(self._header_height() + 40 + rows * self.CELL_HEIGHT))
        self.update()

    def _header_height(self) -> float:
        return QFontMetricsF(self.font()).height() * 3 + 8

    def paintEvent(self, _event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.fillRect(self.rect(), self._paper())
        self._hits = []
        data = self.data
        if data is None or not data.rows:
            painter.setPen(self._ink())
            painter.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, "(nothing to plot yet)")
            return
        top = float(self.MARGIN)
        metrics = QFontMetricsF(painter.font())
        label_width = min(max(metrics.horizontalAdvance(r) for r in data.rows) + 12, 220)
        columns = len(data.columns)
        cell_width = min((self.width() - label_width - 2 * self.MARGIN) / columns, 160)
        header = self._header_height()
        left = self.MARGIN + label_width
        painter.setPen(self._ink())
        for j, name in enumerate(data.columns):
            box = QRectF(left + j * cell_width + 2, top, cell_width - 4, header - 4)
            painter.drawText(
                box,
                Qt.AlignmentFlag.AlignHCenter
                | Qt.AlignmentFlag.AlignBottom
                | Qt.TextFlag.TextWordWrap,
                name,
            )
        for i, row_name in enumerate(data.rows):
            y = top + header + i * self.CELL_HEIGHT
            label = metrics.elidedText(row_name, Qt.TextElideMode.ElideRight, label_width - 8)
            painter.setPen(self._ink())
            painter.drawText(
                QRectF(self.MARGIN, y, label_width - 8, self.CELL_HEIGHT),
                Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                label,
            )
            for j, value in enumerate(data.values[i]):
                cell = QRectF(left + j * cell_width, y, cell_width, self.CELL_HEIGHT)
                colour = heat_colour(value, data.scale)
                if colour is None:
                    painter.fillRect(cell.adjusted(1, 1, -1, -1), self._faint())
                    continue
                painter.fillRect(cell.adjusted(1, 1, -1, -1), colour)
                painter.setPen(QColor("#1a1a1a"))  # dark text on the light scale, any theme
                painter.drawText(cell, Qt.AlignmentFlag.AlignCenter, _fmt(value))
                text = f"{row_name} — {data.columns[j]}: {_fmt(value)}"
                self._hits.append((cell, text))
        self._scale_note(painter, data, top + header + len(data.rows) * self.CELL_HEIGHT + 6)
        painter.end()

    def _scale_note(self, painter: QPainter, data: HeatData, y: float) -> None:
        low, mid, high = data.scale
        x = float(self.MARGIN)
        metrics = QFontMetricsF(painter.font())
        for colour, value in ((HEAT_LOW, low), (HEAT_MID, mid), (HEAT_HIGH, high)):
            painter.fillRect(QRectF(x, y + 3, 12, 12), QColor(colour))
            painter.setPen(self._ink())
            text = f"{value:g}"
            painter.drawText(QPointF(x + 16, y + 3 + metrics.ascent() - 1), text)
            x += 16 + metrics.horizontalAdvance(text) + 14
        painter.drawText(QPointF(x, y + 3 + metrics.ascent() - 1), "(grey: not defined yet)")


__all__ = [
    "ChartView",
    "HeatData",
    "HeatMapView",
    "PlotData",
    "Series",
    "heat_colour",
    "heat_data",
    "nice_ticks",
    "plot_data",
    "value_range",
]
