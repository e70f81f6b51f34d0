"""Window sizes that fit the screen: a tool window asks for a comfortable size, and gets at most
the screen's available area (a 1024 x 600 laptop, or 1366 x 768 at 125% scaling, leaves about
1093 x 614 logical pixels), so that no window opens with its buttons off the screen; two
widgets that let a page fit a laptop's screen (:class:`SideBySide`, :class:`WrappingColumn`),
a splitter that turns the same way (:class:`TurningSplitter`), a row of controls that wraps
like words (:class:`FlowRow`), a scroll area that keeps the control with the keyboard focus
in view, a ring that shows a scroll area has the focus (:class:`FocusRing`), and a one-line
label that shows what fits of its text (:class:`PartsLabel`)."""

from __future__ import annotations

import html
from collections.abc import Callable

from PySide6.QtCore import QEvent, QPoint, QRect, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication, QPainter, QPalette, QPen, QTextDocument
from PySide6.QtWidgets import (
    QApplication,
    QBoxLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLayout,
    QLayoutItem,
    QScrollArea,
    QSplitter,
    QStyle,
    QWidget,
)
from shiboken6 import isValid

from portalreview.tasks.common.safe_text import plain_tip

#: What is left around a window for its frame and the taskbar.
MARGIN = 16


def fit_to_screen(widget: QWidget, width: int, height: int) -> None:
    """Resize ``widget`` to ``width`` x ``height``, or to the screen's available area where
    that is smaller (never below the widget's minimum size)."""
    screen = widget.screen() or QGuiApplication.primaryScreen()
    if screen is None:
        widget.resize(width, height)
        return
    area = screen.availableGeometry()
    minimum = widget.minimumSizeHint().expandedTo(widget.minimumSize())
    widget.resize(
        max(minimum.width(), min(width, area.width() - MARGIN)),
        max(minimum.height(), min(height, area.height() - MARGIN)),
    )


class SideBySide(QWidget):
    """Two parts, side by side when the widget is wide enough for both, else one above the
    other. Its minimum width is the wider part's, so on a laptop's screen (1366 x 768, or
    1920 x 1080 at 150%) the parts stack instead of making the window wider than the screen
    or the page scroll sideways."""

    #: True: side by side; False: one above the other.
    arranged = Signal(bool)

    def __init__(
        self,
        first: QWidget,
        second: QWidget,
        widths: Callable[[], tuple[int, int]] | None = None,
    ) -> None:
        """``widths``: the two parts' minimum widths side by side, for a part that arranges
        itself otherwise when stacked (its minimum width then is not the one to go by, and
        the two arrangements would take turns for good)."""
        super().__init__()
        self.parts = (first, second)
        self._widths = widths or (lambda: tuple(c.minimumSizeHint().width() for c in self.parts))
        self.box = QBoxLayout(QBoxLayout.Direction.LeftToRight, self)
        self.box.setContentsMargins(0, 0, 0, 0)
        self.box.addWidget(first, 1)
        self.box.addWidget(second, 1)

    def side_by_side(self) -> bool:
        return self.box.direction() == QBoxLayout.Direction.LeftToRight

    def _wide(self) -> int:
        """The width both parts need side by side."""
        first, second = self._widths()
        return first + second + max(self.box.spacing(), 0)

    def _arrange(self, width: int) -> None:
        wanted = (
            QBoxLayout.Direction.LeftToRight
            if width >= self._wide()
            else QBoxLayout.Direction.TopToBottom
        )
        if self.box.direction() != wanted:
            self.box.setDirection(wanted)
            self.arranged.emit(self.side_by_side())
            self.updateGeometry()

    def minimumSizeHint(self) -> QSize:
        hint = super().minimumSizeHint()
        narrow = max(c.minimumSizeHint().width() for c in self.parts)
        return QSize(narrow, hint.height())

    def resizeEvent(self, event) -> None:
        self._arrange(event.size().width())
        super().resizeEvent(event)

    def event(self, event: QEvent) -> bool:
        # A part's minimum width changed (EPPC's subcodes are the current code's own, and
        # one code's are longer), the widget's width did not: arrange again, or the longer
        # subcodes were cut at the right-hand edge.
        if event.type() == QEvent.Type.LayoutRequest:
            self._arrange(self.width())
        return super().event(event)


class TurningSplitter(QSplitter):
    """Two parts with a handle between them (dragged to share the room), side by side when
    the splitter is wide enough for both, else one above the other, as :class:`SideBySide`:
    its minimum width is the wider part's, so a page beside the work queue on a 1024-pixel
    screen stacks them instead of scrolling sideways."""

    #: True: side by side; False: one above the other.
    arranged = Signal(bool)

    def __init__(
        self,
        first: QWidget,
        second: QWidget,
        shares: tuple[int, int],
        stacked_shares: tuple[int, int] | None = None,
    ) -> None:
        """``shares``: the parts' sizes in proportion side by side, ``stacked_shares`` one
        above the other (the same by default)."""
        super().__init__(Qt.Orientation.Horizontal)
        self.parts = (first, second)
        self.shares = shares
        self.stacked_shares = stacked_shares or shares
        self._stacked_at = 0  # the width side by side needed when they last stacked
        self.addWidget(first)
        self.addWidget(second)
        self.setChildrenCollapsible(False)
        for index, share in enumerate(shares):
            self.setStretchFactor(index, share)

    def side_by_side(self) -> bool:
        return self.orientation() == Qt.Orientation.Horizontal

    def _wide(self) -> int:
        """The width both parts need side by side."""
        return sum(p.minimumSizeHint().width() for p in self.parts) + self.handleWidth()

    def _arrange(self, width: int) -> None:
        wide = self._wide()
        if self.side_by_side():
            wanted = Qt.Orientation.Horizontal if width >= wide else Qt.Orientation.Vertical
            if wanted == Qt.Orientation.Vertical:
                self._stacked_at = wide
        else:
            # Back side by side only with room to spare over the width that made them stack:
            # a part's text wraps differently each way, and the page's scroll bar comes and
            # goes with the turn, so at one width they turned back and forth for good.
            spare = self.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent) + 8
            needed = max(wide, self._stacked_at) + spare
            wanted = Qt.Orientation.Horizontal if width >= needed else Qt.Orientation.Vertical
        if self.orientation() != wanted:
            self.setOrientation(wanted)
            side_by_side = self.side_by_side()
            length = width if side_by_side else self.height()
            shares = self.shares if side_by_side else self.stacked_shares
            for index, share in enumerate(shares):
                self.setStretchFactor(index, share)
            self.setSizes([length * share // sum(shares) for share in shares])
            self.arranged.emit(self.side_by_side())
            self.updateGeometry()

    def minimumSizeHint(self) -> QSize:
        hint = super().minimumSizeHint()
        narrow = max(p.minimumSizeHint().width() for p in self.parts)
        return QSize(narrow, hint.height())

    def sizeHint(self) -> QSize:
        hint = super().sizeHint()
        if self.side_by_side():
            return hint
        # stacked, the parts share the height there is: their comfortable heights added up
        # made a page beside the work queue twice the screen's height
        return QSize(hint.width(), self.minimumSizeHint().height())

    def resizeEvent(self, event) -> None:
        self._arrange(event.size().width())
        super().resizeEvent(event)

    def event(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.LayoutRequest:  # a part's minimum width changed
            self._arrange(self.width())
        return super().event(event)


class WrappingColumn(QWidget):
    """A column of widgets whose minimum and preferred heights are what its wrapped text needs
    at the width it has, not at the narrow width a word-wrapped label's size hint assumes (the
    EPPC editor's context lines counted four lines each, and a laptop's page scrolled for text
    that was never there; a fact list's title counted one line, and was squeezed)."""

    def _fitted(self, hint: QSize, height) -> QSize:
        layout = self.layout()
        if layout is None or not layout.hasHeightForWidth() or self.width() <= 0:
            return hint
        return QSize(hint.width(), height(self.width()))

    def minimumSizeHint(self) -> QSize:
        hint = super().minimumSizeHint()
        return self._fitted(hint, lambda w: self.layout().totalMinimumHeightForWidth(w))

    def sizeHint(self) -> QSize:
        hint = super().sizeHint()
        return self._fitted(hint, lambda w: self.layout().totalHeightForWidth(w))

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if event.oldSize().width() != event.size().width():
            self.updateGeometry()


class _FlowLayout(QLayout):
    """Items left to right, wrapped onto the next line where the width runs out."""

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self._items: list[QLayoutItem] = []
        self.setContentsMargins(0, 0, 0, 0)

    def addItem(self, item: QLayoutItem) -> None:
        self._items.append(item)

    def count(self) -> int:
        return len(self._items)

    def itemAt(self, index: int) -> QLayoutItem | None:
        return self._items[index] if 0 <= index < len(self._items) else None

    def takeAt(self, index: int) -> QLayoutItem | None:
        return self._items.pop(index) if 0 <= index < len(self._items) else None

    def expandingDirections(self) -> Qt.Orientation:
        return Qt.Orientation(0)

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        return self._place(QRect(0, 0, width, 0), move=False)

    def setGeometry(self, rect: QRect) -> None:
        super().setGeometry(rect)
        self._place(rect, move=True)

    def _gap(self) -> int:
        return self.spacing() if self.spacing() >= 0 else 6  # (-1: the style gave none)

    def _shown(self) -> list[QLayoutItem]:
        return [item for item in self._items if not item.isEmpty()]

    def sizeHint(self) -> QSize:
        """All on one line."""
        hints = [item.sizeHint() for item in self._shown()]
        gaps = self._gap() * max(len(hints) - 1, 0)
        return QSize(
            sum(h.width() for h in hints) + gaps, max((h.height() for h in hints), default=0)
        )

    def minimumSize(self) -> QSize:
        """The widest item: the others wrap below it."""
        size = QSize()
        for item in self._shown():
            size = size.expandedTo(item.minimumSize()).expandedTo(QSize(item.sizeHint().width(), 0))
        return size

    def _place(self, rect: QRect, move: bool) -> int:
        """Lay the items out in ``rect`` (only measure, unless ``move``); the height taken."""
        x, y, line = rect.x(), rect.y(), 0
        gap = self._gap()
        for item in self._shown():
            hint = item.sizeHint()
            if x > rect.x() and x + hint.width() > rect.x() + rect.width():
                x, y, line = rect.x(), y + line + gap, 0
            if move:
                item.setGeometry(QRect(QPoint(x, y), hint))
            x += hint.width() + gap
            line = max(line, hint.height())
        return y + line - rect.y()


class FlowRow(QWidget):
    """A row of controls that wraps onto more lines where the window is narrow (a large system
    font on a small screen), instead of making the window wider than the screen. Each
    :meth:`add` is kept whole: a label with its box, a button."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.flow = _FlowLayout(self)

    def add(self, *widgets: QWidget) -> None:
        """Add ``widgets`` as one piece, never split between lines."""
        if len(widgets) == 1:
            self.flow.addWidget(widgets[0])
            return
        piece = QWidget()
        row = QHBoxLayout(piece)
        row.setContentsMargins(0, 0, 0, 0)
        for widget in widgets:
            row.addWidget(widget)
        self.flow.addWidget(piece)


def scrolled_vertically(widget: QWidget) -> QScrollArea:
    """``widget`` in a frameless area that scrolls up and down, never sideways: as wide as the
    widget needs, as tall as there is room for (a long form under a large font on a small
    screen), never a Tab stop itself."""
    area = QScrollArea()
    area.setWidgetResizable(True)
    area.setFrameShape(QFrame.Shape.NoFrame)
    area.setFocusPolicy(Qt.FocusPolicy.NoFocus)
    area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    area.setWidget(widget)
    area.viewport().setAutoFillBackground(False)  # the page's own background shows through
    widget.setAutoFillBackground(False)  # (setWidget turned it on)
    bar = area.verticalScrollBar().sizeHint().width()
    area.setMinimumWidth(widget.minimumSizeHint().width() + bar)
    return area


class FocusFollowingScrollArea(QScrollArea):
    """Scrolls to the control that takes the keyboard focus inside it (Tab, a key that moves
    to another pane): on a screen narrower than the editor, a person at the keyboard would
    otherwise type into a pane scrolled out of sight."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # a Tab stop that showed nothing
        app = QApplication.instance()
        if app is not None:
            app.focusChanged.connect(self._focus_changed)

    def _focus_changed(self, _old: QWidget | None, new: QWidget | None) -> None:
        inner = self.widget()
        if new is not None and inner is not None and inner.isAncestorOf(new):
            # once laid out: a unit just shown gets its places after the focus
            QTimer.singleShot(0, self, lambda: self._show(new))

    def _show(self, widget: QWidget) -> None:
        if not (isValid(widget) and widget.hasFocus()):
            return
        self.ensureWidgetVisible(widget, 0, 0)
        # A control larger than the view (the editor itself takes the focus in some kinds; on
        # a zoomed screen it is wider and taller than the page) is shown from its top-left
        # corner: centred, the start of its first lines was cut off.
        corner = widget.mapTo(self.widget(), QPoint(0, 0))
        view = self.viewport().size()
        if widget.width() > view.width():
            self.horizontalScrollBar().setValue(corner.x())
        if widget.height() > view.height():
            self.verticalScrollBar().setValue(corner.y())


class FocusRing(QWidget):
    """A ring in the selection colour around a widget while it has the keyboard focus, drawn
    over it (a scroll area draws no focus frame of its own: a person who tabbed onto the
    patient panel to scroll a long message with the arrow keys could not see where the focus
    was; WCAG 2.4.7). It lets the mouse through. A scroll area raises its scroll bar as it
    lays it out, which hid the ring's right-hand side: the ring is raised again after each
    layout. (It stays the widget's own child: put on a splitter, it became a pane of it.)"""

    WIDTH = 2

    def __init__(self, watched: QWidget) -> None:
        super().__init__(watched)
        self.setObjectName("focusRing")
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.hide()
        watched.installEventFilter(self)

    def eventFilter(self, watched: QWidget, event: QEvent) -> bool:
        kind = event.type()
        if kind == QEvent.Type.FocusIn:
            self.setGeometry(watched.rect())
            self.show()
            self._raise_after_layout()
        elif kind == QEvent.Type.FocusOut:
            self.hide()
        elif kind in (QEvent.Type.Resize, QEvent.Type.LayoutRequest) and self.isVisible():
            self.setGeometry(watched.rect())
            self._raise_after_layout()
        return False

    def _raise_after_layout(self) -> None:
        self.raise_()
        QTimer.singleShot(0, self, self.raise_)

    def paintEvent(self, _event) -> None:
        painter = QPainter(self)
        pen = QPen(self.palette().color(QPalette.ColorRole.Highlight), self.WIDTH)
        pen.setJoinStyle(Qt.PenJoinStyle.MiterJoin)
        painter.setPen(pen)
        inset = self.WIDTH // 2
        painter.drawRect(self.rect().adjusted(inset, inset, -inset, -inset))


class PartsLabel(QLabel):
    """A one-line label whose text is parts joined by "  ·  ". Where it is too narrow for them
    all it shows the first parts that fit and "…", never a part cut in its middle (the status
    line read "Unit 13 of 2" for "of 22" at 18 pt on a 1024 px screen); a first part too long
    alone is cut with "…". The whole text is in the tooltip. Parts are HTML with ``rich``."""

    SEPARATOR = "  ·  "

    def __init__(self, rich: bool = False) -> None:
        super().__init__()
        self._parts: list[str] = []
        self._kept = 0
        self._rich = rich
        self.setTextFormat(Qt.TextFormat.RichText if rich else Qt.TextFormat.PlainText)

    def set_parts(self, parts: list[str], tooltip: str | None = None, kept: int = 0) -> None:
        """Show ``parts`` (as many as fit); ``tooltip``: the whole text where it is not
        the parts themselves; ``kept``: how many first parts the label's minimum width holds
        (the ones a person looks for: another label beside it gives way first)."""
        self._parts = list(parts)
        self._kept = min(kept, len(self._parts))
        whole = self.SEPARATOR.join(self._parts)
        self.setToolTip(plain_tip(tooltip if tooltip is not None else self._plain(whole)))
        self._fit()
        self.updateGeometry()

    def clear(self) -> None:
        self._parts = []
        self._kept = 0
        self.setToolTip("")
        super().clear()

    def whole_text(self) -> str:
        return self.SEPARATOR.join(self._parts)

    def sizeHint(self) -> QSize:
        return QSize(self._width_of(self.whole_text()) + 4, super().sizeHint().height())

    def minimumSizeHint(self) -> QSize:
        kept = self._parts[: self._kept] + (["…"] if self._kept < len(self._parts) else [])
        width = self._width_of(self.SEPARATOR.join(kept)) if self._kept else 0
        least = self.fontMetrics().horizontalAdvance("…") * 4
        return QSize(max(width, least), super().sizeHint().height())

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        room = self.contentsRect().width()
        for count in range(len(self._parts), 0, -1):
            left_out = ["…"] if count < len(self._parts) else []
            shown = self.SEPARATOR.join(self._parts[:count] + left_out)
            if self._width_of(shown) <= room:
                self.setText(shown)
                return
        first = self._plain(self._parts[0]) if self._parts else ""
        cut = self.fontMetrics().elidedText(first, Qt.TextElideMode.ElideRight, room)
        self.setText(html.escape(cut) if self._rich else cut)

    def _plain(self, text: str) -> str:
        if not self._rich:
            return text
        document = QTextDocument()
        document.setHtml(text)
        return document.toPlainText()

    def _width_of(self, text: str) -> int:
        if not self._rich:
            return self.fontMetrics().horizontalAdvance(text)
        document = QTextDocument()
        document.setDefaultFont(self.font())
        document.setDocumentMargin(0)
        document.setHtml(text)
        return int(document.idealWidth()) + 1
