"""Window sizes that fit the screen: a tool window asks for a comfortable size, and gets at most
the screen's available area (a 1024 x 600 laptop, or 1366 x 768 at 125% scaling, leaves about
1093 x 614 logical pixels), so that no window opens with its buttons off the screen."""

from __future__ import annotations

from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QWidget

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
